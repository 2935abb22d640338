"""JAX's persistent compilation cache, switched on for every script.

Most of a run's wall time on a CPU is XLA compiling the cost model and
the search; the persistent cache keeps each compiled executable on disk
(keyed by JAX on the program, the compile options, the backend and the
XLA flags), so a second run of the same question skips those compiles.
A cached executable is the same binary the compiler would produce, so
results do not depend on whether the cache was warm.

Where: `--compile_cache` (a directory, or `off`), else the environment
variable `CODESIGN_COMPILE_CACHE` (the same two forms), else
`$XDG_CACHE_HOME/codesign/jax` (`~/.cache/codesign/jax`). env.json
records the directory and whether it held entries when the run began
(`compile_cache`). Its `exported` folder holds the search's traced
programs (`codesign.core.program_cache`).
"""

import os
import pathlib

ENV_VAR = 'CODESIGN_COMPILE_CACHE'
OFF = 'off'
# Cache every compile: ours are many small ones (0.05-2 s each), and the
# default 1 s floor would leave most of them out.
MIN_COMPILE_TIME_S = 0.0

_STATUS: dict = {'dir': None, 'warm': False, 'entries_before': 0}


def default_dir() -> pathlib.Path:
  """The per-user cache directory."""
  base = os.environ.get('XDG_CACHE_HOME') or pathlib.Path.home() / '.cache'
  return pathlib.Path(base) / 'codesign' / 'jax'


def resolve(where: str | None = None) -> pathlib.Path | None:
  """The cache directory for `where` (a flag value), the environment or
  the default; None when switched off."""
  choice = where or os.environ.get(ENV_VAR) or str(default_dir())
  if choice.strip().lower() == OFF:
    return None
  return pathlib.Path(choice).expanduser()


def enable(where: str | None = None) -> dict:
  """Switches the cache on (before any compile) and returns `status()`.

  A directory that cannot be created or written leaves the cache off:
  it only saves time, so it never stops a run.
  """
  import jax

  path = resolve(where)
  if path is None:
    _STATUS.update(dir=None, warm=False, entries_before=0)
    return status()
  try:
    path.mkdir(parents=True, exist_ok=True)
    entries = sum(1 for _ in path.iterdir())
    if not os.access(path, os.W_OK):
      raise OSError(f'{path} is not writable')
  except OSError:
    _STATUS.update(dir=None, warm=False, entries_before=0)
    return status()
  jax.config.update('jax_compilation_cache_dir', str(path))
  jax.config.update(
    'jax_persistent_cache_min_compile_time_secs', MIN_COMPILE_TIME_S
  )
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', 0)
  _STATUS.update(dir=str(path), warm=entries > 0, entries_before=entries)
  return status()


def status() -> dict:
  """{'dir': the directory or None (off), 'warm': it held entries when
  enabled, 'entries_before': how many}."""
  return dict(_STATUS)
