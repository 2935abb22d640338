"""Reading JSON that people give, held to what the model can hold.

`read(path, what)` reads a JSON file and `loads(text, where)` parses
text, with one-sentence errors (`InputError`) for every way it can fail:
a path that is missing, a directory, a FIFO or device (never opened: a
FIFO would block), unreadable or too large; text that is not UTF-8 or not
JSON; nesting deeper than `MAX_DEPTH` and integers longer than
`MAX_INT_DIGITS` (refused before they are built: Python's parser would
end in a RecursionError, an OverflowError or a ValueError); and an object
with the same key twice (JSON allows it, the last would silently win).
"""

import json
import os
import pathlib
import re
import stat

import numpy as np

from codesign.core.errors import InputError, printable

MAX_DEPTH = 64  # nested arrays and objects; config.json uses about 6
MAX_INT_DIGITS = 19  # an int64; the largest count (rows) is 1e13
MAX_FILE_BYTES = 256 * 2**20  # a workload of 1e5 tables is about 20 MB


class NotJson(InputError):
  """Text that is not JSON at all (the other errors: JSON that is too
  large, too deep or ambiguous)."""


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _kind(mode: int) -> str:
  if stat.S_ISDIR(mode):
    return 'a directory'
  if stat.S_ISFIFO(mode):
    return 'a FIFO'
  if stat.S_ISSOCK(mode):
    return 'a socket'
  return 'a device'


def read_text(path, what: str) -> str:
  """The text of the JSON file `path`, or one sentence on why not."""
  where = f'{what} file {printable(os.fspath(path))!r}'
  p = pathlib.Path(path)
  try:
    st = p.stat()
  except (FileNotFoundError, NotADirectoryError):
    raise InputError(f'{where} does not exist') from None
  except OSError as e:
    raise InputError(f'{where} cannot be read ({e.strerror or e})') from None
  if not stat.S_ISREG(st.st_mode):
    raise InputError(f'{where} is {_kind(st.st_mode)}, not a JSON file')
  if st.st_size > MAX_FILE_BYTES:
    raise InputError(
      f'{where} holds {st.st_size:,} bytes; input files are limited to '
      f'{MAX_FILE_BYTES:,}'
    )
  try:
    data = p.read_bytes()
  except OSError as e:
    raise InputError(f'{where} cannot be read ({e.strerror or e})') from None
  try:
    return data.decode('utf-8')
  except UnicodeDecodeError as e:
    raise InputError(f'{where} is not valid JSON (not UTF-8: {e})') from None


def depth(text: str) -> int:
  """How deeply arrays and objects nest in JSON text (0: a scalar)."""
  bare = np.frombuffer(_STRING.sub('', text).encode('utf-8'), np.uint8)
  step = (bare == ord('[')) | (bare == ord('{'))
  step = step.astype(np.int64) - ((bare == ord(']')) | (bare == ord('}')))
  return int(np.cumsum(step).max(initial=0))


def loads(text: str, where: str):
  """Parses JSON text; `where` names it in a message ('workload file
  'w.json'', 'override workload.rows')."""
  if (n := depth(text)) > MAX_DEPTH:
    raise InputError(
      f'{where} nests {n} levels deep; JSON inputs are limited to '
      f'{MAX_DEPTH} levels'
    )

  def integer(s: str) -> int:
    if len(s.lstrip('-')) > MAX_INT_DIGITS:
      raise InputError(
        f'{where} holds an integer of {len(s.lstrip("-"))} digits; '
        f'integers are limited to {MAX_INT_DIGITS} digits'
      )
    return int(s)

  def unique(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
      if key in out:
        raise InputError(
          f'{where} has the key {printable(key)!r} twice in one object'
        )
      out[key] = value
    return out

  try:
    return json.loads(text, parse_int=integer, object_pairs_hook=unique)
  except json.JSONDecodeError as e:
    raise NotJson(f'{where} is not valid JSON ({e})') from None
  except (RecursionError, ValueError) as e:
    if isinstance(e, InputError):
      raise
    raise InputError(f'{where} cannot be held ({e})') from None


def read(path, what: str):
  """The parsed JSON file `path` (`what` names it: 'workload', 'config',
  ...)."""
  where = f'{what} file {printable(os.fspath(path))!r}'
  return loads(read_text(path, what), where)
