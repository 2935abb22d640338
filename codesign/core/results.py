"""The run directory every experiment writes, and how it is written.

`--workdir` (default `results/<experiment>/<UTC timestamp>/`) holds:
  config.json    every flag and the fully resolved inputs;
  env.json       versions, git SHA and dirty flag, backend, device, x64,
                 XLA flags, seed (it differs between machines, so it is kept
                 apart from the reproducible files);
  metrics.jsonl  one JSON object per step, where there are steps;
  result.json    the answer;
  <name>.csv     the study's main table, one row per line (`write_csv`);
  *.png          plots.
A run is written into a hidden staging sibling of its directory
(`.<name>.partial-<pid>`) and renamed into place when it completes
(`reserve_workdir`, `make_workdir`, `finish_runs`; `experiments.common`
calls them), so a reader sees either no run or a whole one; a workdir that
holds files is refused unless --overwrite is given. Files are written
atomically (temporary file, then rename) with the umask's mode. JSON is
written with sorted keys and a fixed float format, so the same inputs give
byte-identical files.
"""

import csv
import datetime
import io
import json
import os
import pathlib
import platform as py_platform
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata

import numpy as np

from codesign.core import compile_cache
from codesign.core.paths import CHECKOUT

ROOT = CHECKOUT


# Staging directories of the runs of this process: staging -> (final,
# overwrite). A run writes into a hidden sibling of its directory and is
# renamed into place when it completes (`finish_runs`), so a reader sees
# either no run or a whole one.
_STAGED: dict[pathlib.Path, tuple[pathlib.Path, bool]] = {}
STAGING_MARK = '.partial-'


def _writable_root() -> pathlib.Path:
  """Where default run directories go: results/ in the checkout, or a
  per-user directory when the checkout cannot be written."""
  checkout = ROOT / 'results'
  try:
    checkout.mkdir(exist_ok=True)
    probe = tempfile.NamedTemporaryFile(dir=checkout, prefix='.probe')
    probe.close()
    return checkout
  except OSError:
    state = os.environ.get('XDG_STATE_HOME') or (
      pathlib.Path.home() / '.local' / 'state'
    )
    return pathlib.Path(state) / 'codesign' / 'results'


def default_workdir(experiment: str) -> pathlib.Path:
  stamp = datetime.datetime.now(datetime.UTC).strftime('%Y%m%d-%H%M%S-%f')
  return _writable_root() / experiment / stamp


def _staging_path(final: pathlib.Path) -> pathlib.Path:
  return final.parent / f'.{final.name}{STAGING_MARK}{os.getpid()}'


def _remove_stale_staging(final: pathlib.Path) -> None:
  """Removes staging directories of `final` left by killed processes."""
  for old in final.parent.glob(f'.{final.name}{STAGING_MARK}*'):
    pid = old.name.rpartition(STAGING_MARK)[2]
    try:
      os.kill(int(pid), 0)
      continue  # that process still runs
    except (ValueError, ProcessLookupError):
      shutil.rmtree(old, ignore_errors=True)
    except PermissionError:
      continue


def reserve_workdir(
  experiment: str, workdir: str | None, overwrite: bool = False
) -> pathlib.Path:
  """Checks, before any work, that the run directory can be written and
  holds no other run, and creates its staging directory. Returns the final
  path (the default `results/<experiment>/<UTC timestamp>/` when
  `workdir` is empty).

  Raises:
    InputError: the path is a file, lies under a file, cannot be written,
      or holds files and `overwrite` is false.
  """
  from codesign.core.errors import InputError

  final = (
    pathlib.Path(workdir).absolute() if workdir else default_workdir(experiment)
  )
  if final.exists() and not final.is_dir():
    raise InputError(f'--workdir {str(final)!r} is a file, not a directory')
  above = next((d for d in final.parents if d.exists()), None)
  if above is not None and not above.is_dir():
    raise InputError(
      f'--workdir {str(final)!r} lies under {str(above)!r}, which is a file'
    )
  if final.is_dir() and any(final.iterdir()) and not overwrite:
    raise InputError(
      f'--workdir {str(final)!r} already holds files (another run?); pass '
      '--overwrite to replace them or choose another directory'
    )
  try:
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(final)
    staging = _staging_path(final)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
  except OSError as e:
    raise InputError(
      f'--workdir {str(final)!r} cannot be written ({e.strerror or e})'
    ) from None
  _STAGED[staging] = (final, overwrite)
  _watch(staging, final)
  return final


# Run by a detached watcher process: when the run's process is gone
# (killed, even by SIGKILL), remove its staging directory; if it died
# between moving the old run aside and moving the new one in, put the old
# run back. A completed run has renamed its staging away by then.
_WATCHER = """
import os, shutil, sys, time
pid, staging, final, old = int(sys.argv[1]), *sys.argv[2:5]
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(0.5)
shutil.rmtree(staging, ignore_errors=True)
if os.path.isdir(old) and not os.path.exists(final):
    os.replace(old, final)
"""


def _watch(staging: pathlib.Path, final: pathlib.Path) -> None:
  """Starts the watcher that cleans up after this process if it is killed
  before `finish_runs` or `abandon_runs` (no leftover on kill -9)."""
  old = final.parent / f'.{final.name}.old-{os.getpid()}'
  subprocess.Popen(
    [
      sys.executable,
      '-c',
      _WATCHER,
      str(os.getpid()),
      str(staging),
      str(final),
      str(old),
    ],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session=True,  # survives a signal to the run's group
    close_fds=True,
  )


def make_workdir(experiment: str, workdir: str | None) -> pathlib.Path:
  """The directory a run writes its files into: the staging directory of
  `workdir` (reserved by `reserve_workdir`, which this calls if needed).
  `final_path` gives where it will be once `finish_runs` renames it."""
  final = (
    pathlib.Path(workdir).absolute() if workdir else default_workdir(experiment)
  )
  for staging, (f, _) in _STAGED.items():
    if f == final:
      return staging
  reserve_workdir(experiment, str(final))
  return _staging_path(final)


def final_path(workdir: pathlib.Path) -> pathlib.Path:
  """Where the run written into `workdir` (a staging directory) ends up."""
  workdir = pathlib.Path(workdir)
  return _STAGED[workdir][0] if workdir in _STAGED else workdir


def finish_runs() -> list[pathlib.Path]:
  """Renames every staged run of this process into place (replacing the
  old directory where --overwrite allowed it). Returns the final paths."""
  done = []
  for staging, (final, overwrite) in list(_STAGED.items()):
    del _STAGED[staging]
    if not any(staging.iterdir()):  # the run wrote nothing (--dump_schema)
      staging.rmdir()
      continue
    old = None
    if final.exists():
      if any(final.iterdir()) and not overwrite:
        raise OSError(f'{final} was filled by another run meanwhile')
      old = final.parent / f'.{final.name}.old-{os.getpid()}'
      os.replace(final, old)  # the watcher puts it back if killed here
    os.replace(staging, final)
    if old is not None:
      shutil.rmtree(old, ignore_errors=True)
    done.append(final)
  return done


def abandon_runs() -> None:
  """Removes the staging directories of this process (a failed run leaves
  no directory behind)."""
  for staging in list(_STAGED):
    shutil.rmtree(staging, ignore_errors=True)
    del _STAGED[staging]


def jsonable(obj):
  """Converts arrays, numpy scalars, tuples and paths to JSON types."""
  if isinstance(obj, dict):
    return {str(k): jsonable(v) for k, v in obj.items()}
  if isinstance(obj, list | tuple):
    return [jsonable(v) for v in obj]
  if isinstance(obj, pathlib.Path):
    return str(obj)
  if hasattr(obj, 'shape') and hasattr(obj, 'dtype'):
    arr = np.asarray(obj)
    if arr.dtype == bool:
      return arr.tolist()
    if np.issubdtype(arr.dtype, np.integer):
      return arr.tolist()
    return np.asarray(arr, dtype=np.float64).tolist()
  if isinstance(obj, np.generic):
    return obj.item()
  return obj


def dumps(obj) -> str:
  return (
    json.dumps(jsonable(obj), sort_keys=True, indent=1, allow_nan=False) + '\n'
  )


def write_text_atomic(path: pathlib.Path, text: str) -> None:
  path = pathlib.Path(path)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix='.' + path.name)
  try:
    with os.fdopen(fd, 'w') as f:
      f.write(text)
    # mkstemp creates 0600; the file gets the mode the umask gives others.
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def write_json(path: pathlib.Path, obj) -> None:
  write_text_atomic(path, dumps(obj))


def write_jsonl(path: pathlib.Path, rows: list[dict]) -> None:
  text = ''.join(
    json.dumps(jsonable(r), sort_keys=True, allow_nan=False) + '\n'
    for r in rows
  )
  write_text_atomic(path, text)


def write_csv(path: pathlib.Path, header: list[str], rows: list) -> None:
  """Writes a table as CSV (atomically): `header` names the columns, with
  units in the names (`throughput_samples_per_s`); each row is a sequence
  of values in that order. Floats are written with repr, so the file is
  as reproducible as result.json."""
  buf = io.StringIO()
  out = csv.writer(buf, lineterminator='\n')
  out.writerow(header)
  for row in rows:
    if len(row) != len(header):
      raise ValueError(f'row {row!r} has {len(row)} values, not {len(header)}')
    out.writerow(['' if x is None else x for x in row])
  write_text_atomic(path, buf.getvalue())


def _git(*args) -> str:
  try:
    return subprocess.run(
      ['git', *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
      check=True,
      timeout=10,
    ).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return ''


def env_info(seed: int | None = None) -> dict:
  """Versions, git state, backend and numerics of this run."""
  import jax

  versions = {'python': py_platform.python_version()}
  for pkg in ('jax', 'jaxlib', 'flax', 'optax', 'numpy', 'absl-py'):
    try:
      versions[pkg] = metadata.version(pkg)
    except metadata.PackageNotFoundError:
      versions[pkg] = None
  devices = jax.devices()
  return {
    'versions': versions,
    'git_sha': _git('rev-parse', 'HEAD') or None,
    'git_dirty': bool(_git('status', '--porcelain')),
    'backend': jax.default_backend(),
    'device_kind': devices[0].device_kind if devices else None,
    'device_count': len(devices),
    'x64': bool(jax.config.jax_enable_x64),
    'xla_flags': os.environ.get('XLA_FLAGS', ''),
    'compile_cache': compile_cache.status(),
    'seed': seed,
  }


def write_run(
  workdir: pathlib.Path,
  config: dict,
  result: dict,
  metrics: list[dict] | None = None,
  seed: int | None = None,
):
  """Writes config.json, env.json, result.json (and metrics.jsonl)."""
  write_json(workdir / 'config.json', config)
  write_json(workdir / 'env.json', env_info(seed))
  if metrics is not None:
    write_jsonl(workdir / 'metrics.jsonl', metrics)
  write_json(workdir / 'result.json', result)
