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
Files are written atomically (temporary file, then rename), so a killed run
never leaves a truncated file. JSON is written with sorted keys and a fixed
float format, so the same inputs give byte-identical files.
"""

import csv
import datetime
import io
import json
import os
import pathlib
import platform as py_platform
import subprocess
import tempfile
from importlib import metadata

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent


def default_workdir(experiment: str) -> pathlib.Path:
  stamp = datetime.datetime.now(datetime.UTC).strftime('%Y%m%d-%H%M%S-%f')
  return ROOT / 'results' / experiment / stamp


def make_workdir(experiment: str, workdir: str | None) -> pathlib.Path:
  path = pathlib.Path(workdir) if workdir else default_workdir(experiment)
  path.mkdir(parents=True, exist_ok=True)
  return path


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
    os.replace(tmp, path)
  except BaseException:
    if os.path.exists(tmp):
      os.unlink(tmp)
    raise


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
