"""Programs traced once and kept on disk: the search's batched programs
and the elasticities' reverse pass.

A warm run of a search found every compile in JAX's persistent cache
(`codesign.core.compile_cache`) but still traced and lowered each
program before asking it: 13 of the 24 s of a warm tiny `zion_decision`
run. Here a program is exported once (`jax.export`: its traced and
lowered StableHLO, serialized) into the `exported` folder of the compile
cache's directory, and a later run deserializes it in milliseconds; its
compile is then the persistent cache's hit.

The file's key is everything the program is traced from: the sources
and data of the `codesign` package (any edit makes a new key), the JAX
version and its x64 setting, what the caller names as the program's
static inputs (`key`, pickled: the problem, the phase's settings), the
argument shapes, dtypes and weak types, and the device count. A program
is always run through its export, cache on or off, warm or cold, so the
cache never changes a bit of a result. Python scalars among the arguments
become weakly typed arrays first, as `jax.jit` reads them.

A program seen for the first time costs more than under `jax.jit` (it
is traced and lowered for its export, then its call lowered again), so
this is for the few large programs later runs ask again, not the many a
process makes once: the planner's per-preset programs stay plain jits
(measured in WORKSPACE, Speed: "Programs kept on disk beyond the
search").
"""

import functools
import hashlib
import io
import os
import pathlib
import pickle
import tempfile
import threading

import jax
import jax.numpy as jnp
from jax import export

from codesign.core import compile_cache

FOLDER = 'exported'
_PACKAGE = pathlib.Path(__file__).resolve().parents[1]


@functools.cache
def source_digest() -> str:
  """sha256 of the package's files (sources and data) and JAX's version."""
  h = hashlib.sha256(f'jax {jax.__version__}'.encode())
  for path in sorted(_PACKAGE.rglob('*')):
    if path.is_file() and '__pycache__' not in path.parts:
      h.update(str(path.relative_to(_PACKAGE)).encode())
      h.update(path.read_bytes())
  return h.hexdigest()


def file_key(key, args) -> str:
  """The file name of a program: `key` (its static inputs, picklable)
  with the structure, shapes and dtypes of `args`, the device count,
  x64 and the package's `source_digest`."""
  h = hashlib.sha256(source_digest().encode())
  h.update(_key_bytes(key))
  shapes = [(x.shape, str(x.dtype), _weak(x)) for x in jax.tree.leaves(args)]
  tree = str(jax.tree.structure(args))
  h.update(
    repr((tree, shapes, jax.device_count(), jax.config.jax_enable_x64)).encode()
  )
  return h.hexdigest()


def _key_bytes(key) -> bytes:
  """`key` pickled without pickle's memo, so that equal keys give equal
  bytes whichever of their parts are one object: a stack read back from
  a run's config.json shares no strings with its workload, the preset
  did, and memoized pickles of the two differed."""
  buf = io.BytesIO()
  pickler = pickle.Pickler(buf, protocol=5)
  pickler.fast = True  # no memo (keys are trees, not cyclic graphs)
  pickler.dump(key)
  return buf.getvalue()


def _folder() -> pathlib.Path | None:
  where = compile_cache.status()['dir']
  return None if where is None else pathlib.Path(where) / FOLDER


def _read(path: pathlib.Path | None):
  """(exported, output skeleton) from `path`, or None."""
  if path is None or not path.is_file():
    return None
  try:
    skeleton, blob = pickle.loads(path.read_bytes())
    return export.deserialize(bytearray(blob)), skeleton
  except Exception:  # noqa: BLE001  a damaged file is exported again
    return None


def _write(path: pathlib.Path | None, exported, skeleton) -> None:
  """Writes atomically (a temporary file renamed), or not at all: the
  cache only saves time."""
  if path is None:
    return
  try:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix='.tmp-')
    with os.fdopen(fd, 'wb') as f:
      f.write(pickle.dumps((skeleton, exported.serialize())))
    os.replace(tmp, path)
  except OSError:
    pass


def _flat_export(fn, args):
  """(exported, output skeleton): `fn` exported as a function of the
  leaves of `args` to the leaves of its output (JAX serializes only
  plain containers); the skeleton is the output with its leaves
  numbered, which rebuilds its structure (optimizer states included)."""
  tree = jax.tree.structure(args)
  out_tree = []

  def flat(*leaves):
    out = fn(*jax.tree.unflatten(tree, leaves))
    leaves_out, t = jax.tree.flatten(out)
    out_tree.append(t)
    return tuple(leaves_out)

  exported = export.export(jax.jit(flat))(*jax.tree.leaves(args))
  skeleton = jax.tree.unflatten(out_tree[0], range(out_tree[0].num_leaves))
  return exported, skeleton


def exported(fn, key, compiler_options=None):
  """`fn`, jitted and run through its export (see the module docstring),
  as `jax.jit(fn)` is called: one program per structure and shapes of
  the arguments, found in memory, else on disk, else exported and kept.

  Args:
    fn: a traceable function (not jitted: its compile options are
      `compiler_options`).
    key: its static inputs (picklable, equal for the same program),
      pickled only when a program is looked up on disk.
    compiler_options: XLA options of the compile.

  On several processes (`jax.distributed`) it is `jax.jit(fn)`: each
  process traces its own program and nothing is kept.
  """
  if jax.process_count() > 1:
    return jax.jit(fn, compiler_options=compiler_options)
  memo = {}
  lock = threading.Lock()

  def call(*args):
    leaves, tree = jax.tree.flatten(args)
    leaves = [_array(x) for x in leaves]
    shapes = tuple((x.shape, x.dtype, _weak(x)) for x in leaves)
    with lock:
      found = memo.get((tree, shapes))
    if found is None:
      args = jax.tree.unflatten(tree, leaves)
      found = _load(fn, key, args, compiler_options)
      with lock:
        memo[(tree, shapes)] = found
    run, out_tree = found
    return jax.tree.unflatten(out_tree, run(*leaves))

  return call


def _weak(x) -> bool:
  """Whether `x` is weakly typed (a Python scalar's array): jit traces it
  apart from a strongly typed array of the same dtype."""
  return bool(getattr(x, 'weak_type', False))


def _array(x):
  """`x`, or a Python scalar as `jax.jit` reads it: a weakly typed array."""
  return x if hasattr(x, 'shape') else jnp.asarray(x)


def _load(fn, key, args, compiler_options):
  """(jitted call of the export, its output's structure) from disk, or
  exported now and written."""
  folder = _folder()
  path = None if folder is None else folder / file_key(key, args)
  found = _read(path)
  if found is None:
    found = _flat_export(fn, args)
    _write(path, *found)
  exported_fn, skeleton = found
  run = jax.jit(exported_fn.call, compiler_options=compiler_options)
  return run, jax.tree.structure(skeleton)
