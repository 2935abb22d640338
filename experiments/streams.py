"""A script's stdout and stderr: whatever they are (closed, a pipe whose
reader left, a full device), a run is written and ends as it would have.

`guard` is called when the `experiments` package is imported by a
script, before anything opens a file: a standard descriptor that is
closed (`evaluate >&-`) is opened on /dev/null, so that no file the run
writes takes its number (and no library's print lands in it), and
`sys.stdout`/`sys.stderr` become `SafeStream`s, so that `--help | head
-1` and a print after the work cost nothing. Imports nothing heavy.
"""

import os
import sys

from codesign.core.errors import printable


class SafeStream:
  """A text stream that prints names as data: control characters (ESC,
  BEL, CR, ...) escaped, newlines and tabs kept; what the stream cannot
  encode (a lone surrogate) written as a backslash escape; and a stream
  that fails (a closed pipe, a full disk) or is missing (None: it was
  closed when Python started) dropped, so that the run is still written
  and the script ends as it would have."""

  def __init__(self, stream):
    self._stream = stream
    self.failed = stream is None

  def write(self, text: str) -> int:
    text = printable(str(text), keep='\n\t')
    if self.failed:
      return len(text)
    try:
      try:
        self._stream.write(text)
      except UnicodeEncodeError:
        enc = getattr(self._stream, 'encoding', None) or 'utf-8'
        self._stream.write(text.encode(enc, 'backslashreplace').decode(enc))
    except (OSError, ValueError):  # ValueError: the stream is closed
      self._drop()
    return len(text)

  def flush(self) -> None:
    if not self.failed:
      try:
        self._stream.flush()
      except (OSError, ValueError):
        self._drop()

  def _drop(self) -> None:
    """Stops writing to the stream; its descriptor goes to /dev/null, so
    Python's own flush at exit cannot fail on it either."""
    self.failed = True
    try:
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, self._stream.fileno())
      os.close(devnull)
    except (OSError, ValueError, AttributeError):
      pass

  def isatty(self) -> bool:
    return not self.failed and _ask(self._stream, 'isatty', False)

  def fileno(self) -> int:
    if self._stream is None:
      raise OSError('the stream was closed when the process started')
    return self._stream.fileno()

  def __getattr__(self, name):
    if self._stream is None:
      raise AttributeError(name)
    return getattr(self._stream, name)


def _ask(stream, method: str, default):
  try:
    return getattr(stream, method)()
  except (OSError, ValueError, AttributeError):
    return default


def open_closed_descriptors() -> None:
  """Opens /dev/null on each of descriptors 0, 1 and 2 that is closed."""
  for fd in (0, 1, 2):
    try:
      os.fstat(fd)
    except OSError:
      try:
        got = os.open(os.devnull, os.O_RDWR)
      except OSError:
        return
      if got != fd:  # a lower one was free after all: leave it as it was
        os.dup2(got, fd)
        os.close(got)


def install() -> tuple:
  """Replaces sys.stdout and sys.stderr by `SafeStream`s (once); returns
  the old pair, for `restore`."""
  old = sys.stdout, sys.stderr
  if not isinstance(sys.stdout, SafeStream):
    sys.stdout = SafeStream(old[0])
  if not isinstance(sys.stderr, SafeStream):
    sys.stderr = SafeStream(old[1])
  return old


def restore(old: tuple) -> None:
  sys.stdout, sys.stderr = old


def guard() -> None:
  """`open_closed_descriptors`, then `install` for the process's life."""
  open_closed_descriptors()
  install()
