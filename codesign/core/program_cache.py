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

A file runs no code when read and cannot change a result (`encode`):
it holds a JSON header (the key it was stored under, the payload's
sha256, the output's pytree structure as `codesign.core.tree_json`
writes it: no pickle), the payload (`jax.export`'s serialization) and a
sha256 of the whole. A file that fails a check (a flipped bit, another
program's file under this name, a truncated write), cannot be loaded or
fails to run is removed and the program exported again, with one line
on stderr; a cache that cannot be read or written, or a special file
in it (a FIFO), turns the cache off for the run
(`codesign.core.compile_cache`).

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
import json
import os
import pathlib
import pickle
import threading
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import export

from codesign.core import compile_cache, tree_json

FOLDER = compile_cache.EXPORTED
MAGIC = b'codesign program 2\n'
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
  where = compile_cache.active_dir()
  return None if where is None else where / FOLDER


class _Damaged(ValueError):
  """A cache file that fails its checks."""


def encode(key_hex: str, exported_fn, out_tree) -> bytes:
  """The file of a program: `MAGIC`, the header's length (8 bytes, big
  endian), the header (JSON: the key, the payload's sha256, the output
  structure), the payload (`jax.export`'s serialization) and the sha256
  of everything before it.

  Raises:
    tree_json.Unencodable: the output structure has no JSON form.
  """
  payload = bytes(exported_fn.serialize())
  header = json.dumps(
    {
      'key': key_hex,
      'payload_sha256': hashlib.sha256(payload).hexdigest(),
      'out_tree': tree_json.dumps(out_tree),
    },
    sort_keys=True,
  ).encode()
  body = MAGIC + len(header).to_bytes(8, 'big') + header + payload
  return body + hashlib.sha256(body).digest()


def decode(data: bytes, key_hex: str):
  """(exported, output structure) of a file `encode` wrote under
  `key_hex`.

  Raises:
    _Damaged: its digests, its key or its structure do not check.
  """
  body, digest = data[:-32], data[-32:]
  if not body.startswith(MAGIC) or hashlib.sha256(body).digest() != digest:
    raise _Damaged('its digest does not match')
  size = int.from_bytes(body[len(MAGIC) : len(MAGIC) + 8], 'big')
  start = len(MAGIC) + 8
  try:
    header = json.loads(body[start : start + size])
    payload = body[start + size :]
    if header['key'] != key_hex:
      raise _Damaged('it was stored under another key')
    if header['payload_sha256'] != hashlib.sha256(payload).hexdigest():
      raise _Damaged('its payload digest does not match')
    out_tree = tree_json.loads(header['out_tree'])
    exported_fn = export.deserialize(bytearray(payload))
  except _Damaged:
    raise
  except Exception as e:  # noqa: BLE001  whatever the bytes make it raise
    raise _Damaged(f'it cannot be loaded ({type(e).__name__})') from None
  if len(exported_fn.out_avals) != out_tree.num_leaves:
    raise _Damaged('its output does not match its structure')
  return exported_fn, out_tree


def _read(path: pathlib.Path | None, key_hex: str):
  """(exported, output structure) from `path`, or None: no file, a
  damaged one (removed, one line) or a cache that cannot be read (off)."""
  if path is None:
    return None
  try:
    data = compile_cache.read_regular(path)
  except OSError as e:
    compile_cache.turn_off(f'{path} cannot be read ({e.strerror or e})')
    return None
  if data is None:
    return None
  try:
    return decode(data, key_hex)
  except _Damaged as e:
    _drop(path, str(e))
    return None


def _drop(path: pathlib.Path, why: str) -> None:
  """Removes a program file that failed, with one line (per run)."""
  try:
    os.unlink(path)
  except FileNotFoundError:
    pass
  except OSError as e:
    compile_cache.turn_off(f'{path} cannot be removed ({e.strerror or e})')
  compile_cache.note(
    'programs_dropped',
    f'dropped a kept program ({path.name[:12]}...: {why}); traced again',
  )


def _write(path: pathlib.Path | None, key_hex: str, exported_fn, out_tree):
  """Writes atomically, or not at all (the cache only saves time): an
  output structure with no JSON form stays in memory, a failed write
  (a full disk) turns the cache off and leaves no temporary file."""
  if path is None:
    return
  try:
    data = encode(key_hex, exported_fn, out_tree)
  except tree_json.Unencodable:
    compile_cache.count('programs_not_kept')
    return
  try:
    path.parent.mkdir(exist_ok=True)
    compile_cache.write_atomic(path, data)
  except OSError as e:
    compile_cache.turn_off(
      f'{path.parent} cannot be written ({e.strerror or e})'
    )


def _flat_export(fn, args):
  """(exported, output structure): `fn` exported as a function of the
  leaves of `args` to the leaves of its output (JAX serializes only
  plain containers)."""
  tree = jax.tree.structure(args)
  out_tree = []

  def flat(*leaves):
    out = fn(*jax.tree.unflatten(tree, leaves))
    leaves_out, t = jax.tree.flatten(out)
    out_tree.append(t)
    return tuple(leaves_out)

  exported_fn = export.export(jax.jit(flat))(*jax.tree.leaves(args))
  return exported_fn, out_tree[0]


def exported(fn, key, compiler_options=None):
  """`fn`, jitted and run through its export (see the module docstring),
  as `jax.jit(fn)` is called: one program per structure and shapes of
  the arguments, found in memory, else on disk, else exported and kept,
  once however many threads ask for it at the same time. A program read
  from disk that fails its first run is dropped and exported again.

  Args:
    fn: a traceable function (not jitted: its compile options are
      `compiler_options`).
    key: its static inputs (picklable, equal for the same program),
      pickled (written, never read) only when a program is looked up on
      disk.
    compiler_options: XLA options of the compile.

  On several processes (`jax.distributed`) it is `jax.jit(fn)`: each
  process traces its own program and nothing is kept.
  """
  if jax.process_count() > 1:
    return jax.jit(fn, compiler_options=compiler_options)
  memo = {}
  lock = threading.Lock()
  gates = {}  # shapes -> a lock held by the one thread that makes it

  def call(*args):
    leaves, tree = jax.tree.flatten(args)
    shapes = (tree, tuple(map(_spec, leaves)))
    with lock:
      found = memo.get(shapes)
    if found is None:
      found, out = first(shapes, tree, [_array(x) for x in leaves])
    else:
      # Python scalars go to the jitted call as they are: it reads them
      # as `_array` does, where making each an array first dispatched
      # one eager operation apiece (13 of a design's ~1 ms).
      out = found.run(*leaves)
    return jax.tree.unflatten(found.out_tree, out)

  def first(shapes, tree, leaves):
    # The first call of a shape is made once: threads that ask it at the
    # same time (the presets' evaluation and a search's, both costing one
    # design program) wait for it instead of each exporting and compiling
    # it again.
    with lock:
      gate = gates.setdefault(shapes, threading.Lock())
    with gate:
      with lock:
        found = memo.get(shapes)
      if found is not None:
        return found, found.run(*leaves)
      args = jax.tree.unflatten(tree, leaves)
      found, out = _first_run(fn, key, args, leaves, compiler_options)
      with lock:
        memo[shapes] = found
      return found, out

  return call


def _first_run(fn, key, args, leaves, compiler_options):
  """(program, its outputs' leaves) of the first call of a shape: the
  program from disk or exported now; one read from disk that fails to
  run is dropped and exported again."""
  found = _load(fn, key, args, compiler_options)
  try:
    return found, found.run(*leaves)
  except Exception as e:
    if found.path is None or _out_of_memory(e):
      raise
    _drop(found.path, f'it failed to run ({type(e).__name__})')
    found = _fresh(fn, args, compiler_options, found.path, found.key_hex)
    return found, found.run(*leaves)


def _out_of_memory(e: Exception) -> bool:
  return isinstance(e, MemoryError) or 'RESOURCE_EXHAUSTED' in str(e)


def _weak(x) -> bool:
  """Whether `x` is weakly typed (a Python scalar's array): jit traces it
  apart from a strongly typed array of the same dtype."""
  return bool(getattr(x, 'weak_type', False))


def _array(x):
  """`x`, or a Python scalar as `jax.jit` reads it: a weakly typed array."""
  return x if hasattr(x, 'shape') else jnp.asarray(x)


def _spec(x) -> tuple:
  """(shape, dtype, weakly typed) of a leaf as `jax.jit` reads it; a
  Python scalar's without making its array (`_scalar_spec`)."""
  if hasattr(x, 'shape'):
    return (x.shape, x.dtype, _weak(x))
  return _scalar_spec(type(x), bool(jax.config.jax_enable_x64))


@functools.cache
def _scalar_spec(kind: type, x64: bool) -> tuple:
  """`_spec` of a Python scalar of type `kind` under the x64 setting
  `x64` (the argument keys the cache; `jnp.asarray` reads the setting)."""
  del x64
  a = jnp.asarray(kind(0))
  return (a.shape, a.dtype, _weak(a))


class _Program(NamedTuple):
  run: Any  # the jitted call of the export, on the leaves
  out_tree: Any  # the structure of its output
  path: pathlib.Path | None  # the file it was read from (None: made now)
  key_hex: str


def _load(fn, key, args, compiler_options) -> _Program:
  """The program from disk, or exported now and written."""
  folder = _folder()
  key_hex = file_key(key, args)
  path = None if folder is None else folder / key_hex
  found = _read(path, key_hex)
  if found is None:
    return _fresh(fn, args, compiler_options, path, key_hex)
  exported_fn, out_tree = found
  run = jax.jit(exported_fn.call, compiler_options=compiler_options)
  return _Program(run, out_tree, path, key_hex)


def _fresh(fn, args, compiler_options, path, key_hex) -> _Program:
  """`fn` exported now (and written to `path`)."""
  exported_fn, out_tree = _flat_export(fn, args)
  _write(path, key_hex, exported_fn, out_tree)
  run = jax.jit(exported_fn.call, compiler_options=compiler_options)
  return _Program(run, out_tree, None, key_hex)
