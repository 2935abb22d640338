"""One run per run directory at a time: a lock file beside it.

`take(final)` locks `.<name>.lock` in the parent of the run directory
`final` with `flock` (released by the kernel when the process ends, even
on kill -9) and writes the holder's process id and command into it, so
that a second run refuses at once naming the first; `release(final)`
removes the file while it is still held (another process that opened it
meanwhile sees it is gone and takes a new one), and `remove_free` removes
a lock file that no process holds.
"""

import fcntl
import os
import pathlib
import sys

from codesign.core.errors import InputError, printable

LOCK_SUFFIX = '.lock'
# The lock files this process holds: final path -> open descriptor.
_LOCKS: dict[pathlib.Path, int] = {}


def lock_path(final: pathlib.Path) -> pathlib.Path:
  return final.parent / f'.{final.name}{LOCK_SUFFIX}'


def remove_free(path: pathlib.Path) -> None:
  """Removes a lock file no process holds."""
  try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
  except OSError:
    return
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    if os.stat(path).st_ino == os.fstat(fd).st_ino:
      os.unlink(path)
  except OSError:
    pass
  finally:
    os.close(fd)


def _holder(fd: int) -> str:
  """Who holds a lock file, as its holder wrote it: 'process PID: CMD'."""
  try:
    text = os.pread(fd, 400, 0).decode('utf-8', 'replace').strip()
  except OSError:
    text = ''
  pid, _, cmd = text.partition(' ')
  if not pid.isdigit():
    return 'a process that is starting'
  return f'process {pid}: {printable(cmd[:120])}' if cmd else f'process {pid}'


def _command() -> str:
  return ' '.join([pathlib.Path(sys.argv[0]).stem, *sys.argv[1:]])


def take(final: pathlib.Path) -> None:
  """Takes the lock of `final` for this process, or refuses at once.

  Raises:
    InputError: another process holds it (the sentence names it), or the
      lock file cannot be written.
  """
  path = lock_path(final)
  while True:
    try:
      fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as e:
      raise InputError(
        f'--workdir {printable(str(final))!r} cannot be written '
        f'({e.strerror or e})'
      ) from None
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _holder(fd)
      os.close(fd)
      raise InputError(
        f'--workdir {printable(str(final))!r} is in use by another run '
        f'({holder}); wait for it to end or choose another directory'
      ) from None
    try:  # its last holder may have removed the file meanwhile
      if os.stat(path).st_ino == os.fstat(fd).st_ino:
        break
    except FileNotFoundError:
      pass
    os.close(fd)
  os.ftruncate(fd, 0)
  os.write(fd, f'{os.getpid()} {_command()}\n'.encode('utf-8', 'replace'))
  _LOCKS[final] = fd


def release(final: pathlib.Path) -> None:
  fd = _LOCKS.pop(final, None)
  if fd is None:
    return
  try:
    os.unlink(lock_path(final))  # while held: no other holder can lose it
  except OSError:
    pass
  os.close(fd)
