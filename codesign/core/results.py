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
import stat
import subprocess
import sys
import tempfile
import threading
from importlib import metadata

import numpy as np

from codesign.core import compile_cache, locks
from codesign.core.errors import InputError, printable
from codesign.core.paths import CHECKOUT

ROOT = CHECKOUT


# Staging directories of the runs of this process: staging -> (final,
# overwrite). A run writes into a hidden sibling of its directory and is
# renamed into place when it completes (`finish_runs`), so a reader sees
# either no run or a whole one.
_STAGED: dict[pathlib.Path, tuple[pathlib.Path, bool]] = {}
# Held while runs are renamed into place or removed, so that an interrupt
# waits for a rename instead of leaving neither run in place.
SWAP_LOCK = threading.RLock()
STAGING_MARK = '.partial-'
OLD_MARK = '.old-'
# The files every run writes (`write_run`): a directory holding both, with
# env.json as `env_info` writes it, is a codesign run, which --overwrite
# may replace; nothing else is.
RUN_MARKERS = ('config.json', 'env.json')
# The files a run wrote, listed when it is renamed into place (and by a
# later writer into it: export); --overwrite replaces a run only when it
# holds nothing else.
MANIFEST = 'manifest.json'
# What runs wrote before they listed their files: a run without a
# manifest holding only these may be replaced.
UNLISTED_RUN_FILES = frozenset(
  {
    *RUN_MARKERS,
    'result.json',
    'metrics.jsonl',
    'timing.json',
    'proposal.json',
    'ranks.json',
    'device_profile.json',
    'stack_fit.json',
    'torchrec_planner.json',
    'benchmark.csv',
    'breakdown.csv',
    'calibration.csv',
    'compare_platforms.csv',
    'growth.csv',
    'pareto.csv',
    'propose.csv',
    'ranks.csv',
    'scale_out.csv',
    'search_quality.csv',
    'search_quality_large.csv',
    'sensitivity.csv',
    'zion_decision.csv',
    'breakdown.png',
    'calibration.png',
    'efficiency.png',
    'elasticities.png',
    'frontier.png',
    'growth.png',
    'nic_required.png',
    'platforms.png',
    'throughput.png',
  }
)


def _writable_root() -> pathlib.Path:
  """Where default run directories go: results/ in the checkout, or a
  per-user directory when the checkout cannot be written or there is no
  checkout (an installed package: not into site-packages)."""
  checkout = ROOT / 'results'
  try:
    if not (ROOT / 'pyproject.toml').is_file():
      raise NotADirectoryError(ROOT)
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


def workdir_path(experiment: str, workdir: str | None) -> pathlib.Path:
  """The final path of a run: `workdir` made absolute with its symlinks
  followed (a link to a run directory replaces the run it points at, and
  stays a link), or the default one of `experiment`."""
  if not workdir:
    return default_workdir(experiment)
  return pathlib.Path(os.path.realpath(os.path.abspath(workdir)))


def _staging_path(final: pathlib.Path) -> pathlib.Path:
  return final.parent / f'.{final.name}{STAGING_MARK}{os.getpid()}'


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except (PermissionError, OverflowError, ValueError):
    return pid > 0
  return True


def _pid_of(name: str, mark: str) -> int | None:
  tail = name.rpartition(mark)[2]
  return int(tail) if tail.isdigit() else None


def _remove_stale(folder: pathlib.Path) -> None:
  """Cleans what killed processes left in `folder` (a study's results
  folder, or the parent of a --workdir): staging directories are removed,
  an old run moved aside is put back (or removed if its new run is in
  place), and free lock files of dead processes are removed."""
  try:
    entries = list(folder.iterdir())
  except OSError:
    return
  for entry in entries:
    name = entry.name
    if not name.startswith('.'):
      continue
    for mark in (STAGING_MARK, OLD_MARK):
      pid = _pid_of(name, mark) if mark in name else None
      if pid is None or _alive(pid) or entry.is_symlink():
        continue
      final = folder / name[1:].rpartition(mark)[0]
      if mark == OLD_MARK and not os.path.lexists(final):
        os.replace(entry, final)
      else:
        shutil.rmtree(entry, ignore_errors=True)
    if name.endswith(locks.LOCK_SUFFIX):
      locks.remove_free(entry)


def _unwritable(final: pathlib.Path, e: OSError) -> InputError:
  return InputError(
    f'--workdir {printable(str(final))!r} cannot be written ({e.strerror or e})'
  )


def _kind(path: pathlib.Path) -> str:
  """What a path that is not a directory is, in words."""
  mode = path.stat().st_mode
  for test, word in (
    (stat.S_ISFIFO, 'a FIFO'),
    (stat.S_ISSOCK, 'a socket'),
    (stat.S_ISCHR, 'a device'),
    (stat.S_ISBLK, 'a device'),
  ):
    if test(mode):
      return word
  return 'a file'


def is_run(directory: pathlib.Path) -> bool:
  """Whether `directory` holds a codesign run (its marker files)."""
  try:
    env = json.loads((directory / 'env.json').read_text())
  except (OSError, ValueError, RecursionError):
    return False
  config = directory / 'config.json'
  return (
    isinstance(env, dict)
    and 'versions' in env
    and config.is_file()
    and not config.is_symlink()
  )


def _names(names, most: int = 3) -> str:
  names = sorted(names)
  shown = ', '.join(printable(n) for n in names[:most])
  more = len(names) - most
  return shown + (f' and {more} more' if more > 0 else '')


def _listing(directory: pathlib.Path, most: int = 3) -> str:
  return _names((p.name for p in directory.iterdir()), most)


def files_under(directory: pathlib.Path) -> list[str]:
  """Every file, link and special file under `directory` (links not
  followed), as sorted paths relative to it; an empty directory is
  listed as `name/`."""
  found = []
  for dirpath, dirnames, filenames in os.walk(directory):
    rel = os.path.relpath(dirpath, directory)
    for name in filenames + [
      d for d in dirnames if os.path.islink(os.path.join(dirpath, d))
    ]:
      found.append(os.path.normpath(os.path.join(rel, name)))
    if rel != '.' and not dirnames and not filenames:
      found.append(rel + '/')
  return sorted(found)


def write_manifest(staging: pathlib.Path) -> None:
  """Lists every file of the run in `staging` in its `MANIFEST`."""
  files = [f for f in files_under(staging) if f != MANIFEST]
  write_json(staging / MANIFEST, {'files': files})


def add_to_manifest(run: pathlib.Path, names: list[str]) -> None:
  """Adds files a later writer (export) put into the finished `run` to
  its manifest (a run without one lists nothing)."""
  listed = _listed(run)
  if listed is not None:
    write_json(run / MANIFEST, {'files': sorted(set(listed) | set(names))})


def _listed(directory: pathlib.Path) -> list[str] | None:
  """The files the run's manifest lists, or None (no manifest)."""
  try:
    doc = json.loads((directory / MANIFEST).read_text())
  except (OSError, ValueError, RecursionError):
    return None
  files = doc.get('files') if isinstance(doc, dict) else None
  if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
    return None
  return files


def foreign_files(directory: pathlib.Path) -> list[str]:
  """What a run directory holds that the run did not write: neither in
  its manifest (nor, for a run written before manifests, among the files
  runs write)."""
  listed = _listed(directory)
  ours = set(UNLISTED_RUN_FILES if listed is None else listed) | {MANIFEST}
  return [f for f in files_under(directory) if f not in ours]


def _check_replaceable(final: pathlib.Path, overwrite: bool) -> None:
  """Refuses a workdir that holds files, unless it holds a codesign run,
  nothing else, and `overwrite` is given."""
  if not final.is_dir() or not any(final.iterdir()):
    return
  where = f'--workdir {printable(str(final))!r}'
  if not is_run(final):
    raise InputError(
      f'{where} holds {_listing(final)}, which is not a codesign run (no '
      f'{" and ".join(RUN_MARKERS)}), so it is never replaced, with '
      '--overwrite or without; choose another directory'
    )
  if not overwrite:
    raise InputError(
      f'{where} already holds a run; pass --overwrite to replace it or '
      'choose another directory'
    )
  foreign = foreign_files(final)
  if foreign:
    raise InputError(
      f'{where} holds a run and {_names(foreign)}, which the run did not '
      'write; --overwrite replaces only a whole run, so move them out of it '
      'or choose another directory'
    )


def _check_place(final: pathlib.Path) -> None:
  where = f'--workdir {printable(str(final))!r}'
  if final.exists() and not final.is_dir():
    raise InputError(f'{where} is {_kind(final)}, not a directory')
  above = next((d for d in final.parents if d.exists()), None)
  if above is not None and not above.is_dir():
    raise InputError(
      f'{where} lies under {printable(str(above))!r}, which is {_kind(above)}'
    )


def reserve_workdir(
  experiment: str, workdir: str | None, overwrite: bool = False
) -> pathlib.Path:
  """Checks, before any work, that the run directory can be written and
  holds no other run, takes its lock (one run per directory at a time) and
  creates its staging directory. Returns the final path (the default
  `results/<experiment>/<UTC timestamp>/` when `workdir` is empty; a
  symlink followed).

  Raises:
    InputError: the path is not a directory or lies under a file, cannot
      be written, is in use by another run, holds files and `overwrite` is
      false, or holds something other than a codesign run.
  """
  final = workdir_path(experiment, workdir)
  _check_place(final)
  try:
    final.parent.mkdir(parents=True, exist_ok=True)
  except OSError as e:
    raise _unwritable(final, e) from None
  locks.take(final)
  try:
    _check_replaceable(final, overwrite)
    _remove_stale(final.parent)
    staging = _staging_path(final)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
  except OSError as e:
    locks.release(final)
    raise _unwritable(final, e) from None
  except BaseException:
    locks.release(final)
    raise
  _STAGED[staging] = (final, overwrite)
  _watch(staging, final)
  return final


# Run by a detached watcher process: when the run's process is gone
# (killed, even by SIGKILL), remove its staging directory; if it died
# between moving the old run aside and moving the new one in, put the old
# run back; remove its lock file if no process holds it.
_WATCHER = """
import fcntl, os, shutil, sys, time
pid, staging, final, old, lock = int(sys.argv[1]), *sys.argv[2:6]
while True:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break
    except PermissionError:
        pass
    time.sleep(0.5)
shutil.rmtree(staging, ignore_errors=True)
if os.path.isdir(old):
    if os.path.exists(final):  # the new run is in place
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(old, final)
try:
    fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    mine = os.pread(fd, 32, 0).split(b' ')[0] == str(pid).encode()
    if mine and os.stat(lock).st_ino == os.fstat(fd).st_ino:
        os.unlink(lock)
except OSError:
    pass
"""


def _watch(staging: pathlib.Path, final: pathlib.Path) -> None:
  """Starts the watcher that cleans up after this process if it is killed
  before `finish_runs` or `abandon_runs` (no leftover on kill -9)."""
  old = final.parent / f'.{final.name}{OLD_MARK}{os.getpid()}'
  subprocess.Popen(
    [
      sys.executable,
      '-c',
      _WATCHER,
      str(os.getpid()),
      str(staging),
      str(final),
      str(old),
      str(locks.lock_path(final)),
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
  final = workdir_path(experiment, workdir)
  for staging, (f, _) in _STAGED.items():
    if f == final:
      return staging
  final = reserve_workdir(experiment, str(final))
  return _staging_path(final)


def final_path(workdir: pathlib.Path) -> pathlib.Path:
  """Where the run written into `workdir` (a staging directory) ends up."""
  workdir = pathlib.Path(workdir)
  return _STAGED[workdir][0] if workdir in _STAGED else workdir


def _free_sibling(final: pathlib.Path) -> pathlib.Path:
  n = 2
  while os.path.lexists(final.parent / f'{final.name}-{n}'):
    n += 1
  return final.parent / f'{final.name}-{n}'


def _finish(staging: pathlib.Path, final: pathlib.Path, overwrite: bool):
  """Renames one staged run into place; returns where it went (a free
  sibling of `final` if something other than a run it may replace was put
  there meanwhile), or None when it wrote nothing."""
  if not any(staging.iterdir()):  # the run wrote nothing (--dump_schema)
    staging.rmdir()
    return None
  write_manifest(staging)
  target = final
  if final.is_dir() and any(final.iterdir()):
    if not (overwrite and is_run(final) and not foreign_files(final)):
      target = _free_sibling(final)  # something else was put there meanwhile
  old = None
  if target.exists():
    old = final.parent / f'.{final.name}{OLD_MARK}{os.getpid()}'
    os.replace(target, old)  # the watcher puts it back if killed here
  os.replace(staging, target)
  if old is not None:
    shutil.rmtree(old, ignore_errors=True)
  return target


def finish_runs() -> list[pathlib.Path]:
  """Renames every staged run of this process into place (replacing the
  old run where --overwrite allowed it) and releases its lock. Returns
  the final paths."""
  done = []
  with SWAP_LOCK:
    for staging, (final, overwrite) in list(_STAGED.items()):
      del _STAGED[staging]
      try:
        target = _finish(staging, final, overwrite)
      finally:
        locks.release(final)
      if target is not None:
        done.append(target)
  return done


def abandon_runs(wait_s: float = -1) -> bool:
  """Removes the staging directories of this process (a failed run leaves
  no directory behind) and releases their locks. Waits for a run being
  renamed into place (at most `wait_s` seconds when not negative; an
  interrupt does not wait long). Returns whether a run was discarded."""
  got = SWAP_LOCK.acquire(timeout=wait_s)
  try:
    discarded = bool(_STAGED)
    for staging, (final, _) in list(_STAGED.items()):
      shutil.rmtree(staging, ignore_errors=True)
      del _STAGED[staging]
      locks.release(final)
    return discarded
  finally:
    if got:
      SWAP_LOCK.release()


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
  """Writes `text` (UTF-8; a lone surrogate from a name is escaped) to
  `path` through a temporary file and a rename.

  Raises:
    InputError: the file cannot be written (the disk is full, ...), in
      one sentence naming it and why.
  """
  path = pathlib.Path(path)
  tmp = None
  try:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix='.' + path.name)
    with os.fdopen(fd, 'w', encoding='utf-8', errors='backslashreplace') as f:
      f.write(text)
    # mkstemp creates 0600; the file gets the mode the umask gives others.
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException as e:
    if tmp is not None and os.path.exists(tmp):
      os.unlink(tmp)
    if isinstance(e, OSError):
      raise InputError(
        f'cannot write {printable(str(final_path(path.parent) / path.name))!r}'
        f' ({e.strerror or e})'
      ) from None
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
  for pkg in (
    'jax',
    'jaxlib',
    'ml_dtypes',
    'flax',
    'optax',
    'numpy',
    'absl-py',
  ):
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
