"""JAX's persistent compilation cache, switched on for every script, with
entries that are checked when read.

Most of a run's wall time on a CPU is XLA compiling the cost model and
the search; the persistent cache keeps each compiled executable on disk
(keyed by JAX on the program, the compile options, the backend and the
XLA flags), so a second run of the same question skips those compiles.
A cached executable is the same binary the compiler would produce, so
results do not depend on whether the cache was warm.

The cache only saves time, so nothing in it may change a result, stop a
run or hang it:
- each entry JAX writes is kept with a sha256 of its key and bytes
  (`CheckedCache`, installed as JAX's cache), written atomically (a
  temporary file renamed; on a full disk the temporary file is removed);
  an entry whose digest does not match (a flipped bit, a truncated
  write, an entry of another format) is removed and compiled again, with
  one line on stderr for the run, not a warning on every later run;
- a cache directory that cannot be read or written, or that holds a
  link, a FIFO or another special file, or an entry that cannot be read,
  turns the cache off for the run (one line on stderr); a special file
  is never opened for reading (no hang).
env.json records what happened (`status()`: hits, misses, entries
removed, why the cache is off).

Where: `--compile_cache` (a directory, or `off`), else the environment
variable `CODESIGN_COMPILE_CACHE` (the same two forms), else
`$XDG_CACHE_HOME/codesign/jax` (`~/.cache/codesign/jax`). Its `exported`
folder holds the search's traced programs (`codesign.core.program_cache`).
"""

import hashlib
import os
import pathlib
import stat
import sys
import tempfile
import threading

from codesign.core.errors import InputError, printable

ENV_VAR = 'CODESIGN_COMPILE_CACHE'
OFF = 'off'
# Cache every compile: ours are many small ones (0.05-2 s each), and the
# default 1 s floor would leave most of them out.
MIN_COMPILE_TIME_S = 0.0
EXPORTED = 'exported'  # codesign.core.program_cache.FOLDER
ENTRY_MAGIC = b'codesign xla entry 1\n'
_DIGEST_BYTES = 32

_LOCK = threading.RLock()
_STATUS: dict = {}
_PRINTED: set[str] = set()


def _reset(where=None, entries: int = 0, off: str | None = None) -> None:
  _STATUS.clear()
  _STATUS.update(
    dir=None if where is None else str(where),
    warm=entries > 0,
    entries_before=entries,
    off=off,
    events={},
  )


_reset()


def default_dir() -> pathlib.Path:
  """The per-user cache directory."""
  base = os.environ.get('XDG_CACHE_HOME') or pathlib.Path.home() / '.cache'
  return pathlib.Path(base) / 'codesign' / 'jax'


def resolve(where: str | None = None) -> pathlib.Path | None:
  """The cache directory for `where` (a flag value), the environment or
  the default; None when switched off.

  Raises:
    InputError: a `~user` path of a user that does not exist.
  """
  source = '--compile_cache' if where else ENV_VAR
  choice = where or os.environ.get(ENV_VAR)
  if not choice:
    source, choice = 'the default cache directory', str(default_dir())
  if choice.strip().lower() == OFF:
    return None
  try:
    return pathlib.Path(choice).expanduser()
  except RuntimeError:
    raise InputError(
      f'{source} is {printable(choice)!r}, whose ~user does not exist; give '
      'a directory (~/x, /abs/x or rel/x) or off'
    ) from None


def count(kind: str) -> None:
  """Counts an event of the caches in `status()['events']`."""
  with _LOCK:
    events = _STATUS['events']
    events[kind] = events.get(kind, 0) + 1


def note(kind: str, line: str) -> None:
  """Counts an event (`count`) and prints `line` on stderr the first time
  its kind happens in this process."""
  count(kind)
  with _LOCK:
    first = kind not in _PRINTED
    _PRINTED.add(kind)
  if first:
    _say(f'compile cache: {line}')


def _say(line: str) -> None:
  try:
    print(printable(line), file=sys.stderr, flush=True)
  except (OSError, ValueError, AttributeError):  # no stderr: say nothing
    pass


def turn_off(reason: str) -> None:
  """Turns both caches off for the rest of this process (they only save
  time), with one line on stderr."""
  with _LOCK:
    if _STATUS['off'] is not None:
      return
    _STATUS.update(dir=None, off=reason)
  _say(f'compile cache: {reason}; off for this run')


def active_dir() -> pathlib.Path | None:
  """The cache directory in use, or None (off)."""
  where = _STATUS['dir']
  return None if where is None else pathlib.Path(where)


def _kind(mode: int) -> str | None:
  """What a special file is, in words; None for a regular file."""
  if stat.S_ISREG(mode):
    return None
  for test, word in (
    (stat.S_ISLNK, 'a symbolic link'),
    (stat.S_ISFIFO, 'a FIFO'),
    (stat.S_ISSOCK, 'a socket'),
    (stat.S_ISDIR, 'a directory'),
  ):
    if test(mode):
      return word
  return 'a device'


def _problem(path: pathlib.Path) -> tuple[str | None, int]:
  """(why the directory at `path` cannot serve as the cache or None, how
  many entries it holds). Nothing is opened but directories."""
  try:
    path.mkdir(parents=True, exist_ok=True)
    entries = 0
    for folder in (path, path / EXPORTED):
      if not folder.is_dir() and folder != path:
        continue
      if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
        return f'{folder} cannot be read and written', 0
      for entry in os.scandir(folder):
        try:
          what = _kind(entry.stat(follow_symlinks=False).st_mode)
        except FileNotFoundError:  # removed meanwhile by another run
          continue
        if entry.name == EXPORTED and folder == path and what == 'a directory':
          continue
        if what is not None:
          return f'{entry.path} is {what}, not a cache entry', 0
        if not os.access(entry.path, os.R_OK):
          return f'{entry.path} cannot be read', 0
        entries += not entry.name.startswith('.')
    return None, entries
  except OSError as e:
    return f'{path} cannot be used ({e.strerror or e})', 0


def enable(where: str | None = None) -> dict:
  """Switches the cache on (before any compile) and returns `status()`.

  A directory that cannot be created, read or written, or that holds a
  special file or an unreadable entry, leaves the cache off with one line
  on stderr: it only saves time, so it never stops a run.

  Raises:
    InputError: `where` (or the environment) names no possible path.
  """
  import jax

  path = resolve(where)
  _PRINTED.clear()
  if path is None:
    _reset(off='switched off')
    return status()
  why, entries = _problem(path)
  if why is not None:
    _reset(off=None)
    turn_off(why)
    return status()
  jax.config.update('jax_compilation_cache_dir', str(path))
  jax.config.update(
    'jax_persistent_cache_min_compile_time_secs', MIN_COMPILE_TIME_S
  )
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)
  _install(path)
  _reset(path, entries)
  return status()


def status() -> dict:
  """{'dir': the directory or None (off), 'warm': it held entries when
  enabled, 'entries_before': how many, 'off': why it is off (None: on),
  'events': counts of what happened (hits, misses, entries removed, ...)}."""
  with _LOCK:
    return {**_STATUS, 'events': dict(_STATUS['events'])}


def read_regular(path: pathlib.Path) -> bytes | None:
  """The bytes of the cache file `path`, or None if there is none.

  Never blocks on a FIFO and never follows a link.

  Raises:
    OSError: it cannot be read, or is not a regular file (errno ENXIO).
  """
  flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
  try:
    fd = os.open(path, flags)
  except FileNotFoundError:
    return None
  with os.fdopen(fd, 'rb') as f:
    what = _kind(os.fstat(fd).st_mode)
    if what is not None:
      raise OSError(6, f'{what}, not a cache entry', str(path))
    return f.read()


def write_atomic(path: pathlib.Path, data: bytes) -> None:
  """Writes `data` to `path` through a temporary file and a rename; a
  failure (a full disk) leaves no temporary file.

  Raises:
    OSError: it could not be written.
  """
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix='.tmp-')
  try:
    with os.fdopen(fd, 'wb') as f:
      f.write(data)
    os.replace(tmp, path)
  except BaseException:
    try:
      os.unlink(tmp)
    except OSError:
      pass
    raise


def _cannot(what: str, path, e: OSError) -> str:
  return f'{path} cannot be {what} ({e.strerror or e})'


def _install(path: pathlib.Path) -> None:
  """Makes a `CheckedCache` JAX's persistent cache at `path`; JAX's
  warning about an entry it could not load is replaced by one line
  (`CheckedCache.put` writes the entry again)."""
  import warnings

  from jax._src import compilation_cache as jcc

  warnings.filterwarnings(
    'ignore', message='Error reading persistent compilation cache entry'
  )
  with jcc._cache_initialized_mutex:
    if isinstance(jcc._cache, CheckedCache):
      jcc._cache.path = path
    else:
      jcc._cache = CheckedCache(path)
    jcc._cache_initialized = True


class CheckedCache:
  """JAX's cache interface (`get`, `put`) over `{key}-cache` files that
  hold `ENTRY_MAGIC`, the sha256 of the key and JAX's bytes, and the
  bytes: an entry read under another key (another program's, copied or
  swapped) fails as a flipped bit does."""

  def __init__(self, path: pathlib.Path):
    self.path = path
    self._served: set[str] = set()

  @property
  def _path(self):
    return self.path

  def _file(self, key: str) -> pathlib.Path:
    return self.path / f'{key}-cache'

  def get(self, key: str) -> bytes | None:
    if active_dir() is None:
      return None
    path = self._file(key)
    try:
      data = read_regular(path)
    except OSError as e:
      turn_off(_cannot('read', path, e))
      return None
    if data is None:
      count('misses')
      return None
    value = entry_value(data, key)
    if value is None:
      _remove(path)
      if data.startswith(ENTRY_MAGIC):
        note(
          'entries_removed',
          f'removed a damaged entry ({path.name}); compiled again',
        )
      else:  # written by JAX itself, or by an older codesign
        note(
          'entries_unchecked',
          'removed entries written without a digest'
          ' (by an older codesign or by JAX itself); compiled again',
        )
      return None
    self._served.add(key)
    count('hits')
    return value

  def put(self, key: str, value: bytes) -> None:
    if active_dir() is None:
      return
    path = self._file(key)
    if key in self._served:  # JAX could not load what it read
      note(
        'entries_replaced',
        f'replaced an entry that could not be loaded ({path.name})',
      )
    digest = _digest(key, value)
    try:
      write_atomic(path, ENTRY_MAGIC + digest + value)
    except OSError as e:
      turn_off(_cannot('written', self.path, e))


def _digest(key: str, value: bytes) -> bytes:
  return hashlib.sha256(key.encode() + b'\0' + value).digest()


def entry_value(data: bytes, key: str) -> bytes | None:
  """JAX's bytes of an entry stored under `key`, or None if its digest
  does not match (a flipped bit, a truncated write, another key's)."""
  head = len(ENTRY_MAGIC) + _DIGEST_BYTES
  if len(data) < head or not data.startswith(ENTRY_MAGIC):
    return None
  value = data[head:]
  digest = data[len(ENTRY_MAGIC) : head]
  return value if _digest(key, value) == digest else None


def _remove(path: pathlib.Path) -> None:
  try:
    os.unlink(path)
  except FileNotFoundError:
    pass
  except OSError as e:
    turn_off(_cannot('removed', path, e))
