"""Evaluating many independent rows at once on every device.

Rows (starts of a search, candidate designs) are sharded over a
`jax.sharding.Mesh` with one axis, 'starts', built from `devices`
(default `jax.devices()`, all local devices), with `jax.shard_map`:
every device runs `lax.map` over fixed-size blocks of rows, `vmap`ped
within a block, so every device runs the same block program whatever
the device count. Rows are padded (with copies of the first, dropped
afterwards) to at least two blocks per device. On several hosts, call
`jax.distributed.initialize()` on every host before any JAX work and run
the same program: `jax.devices()` is then the global device list, host
arrays (the same on every host) are laid out with
`jax.make_array_from_callback`, and results are gathered with
`multihost_utils.process_allgather`. tests/search/distributed_test.py runs the
search on two processes (localhost, CPU) and gets the bits of one.
"""

import functools

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from codesign.core import interrupts, program_cache, xla_options

AXIS = 'starts'


def make_mesh(devices=None) -> Mesh:
  """A one-axis mesh ('starts') over `devices` (default: all devices)."""
  devices = jax.devices() if devices is None else list(devices)
  return Mesh(np.array(devices), (AXIS,))


def put(x: np.ndarray, mesh: Mesh):
  """Lays out host array x (same on every host) sharded on axis 0."""
  x = np.asarray(x)
  sharding = NamedSharding(mesh, PartitionSpec(AXIS))
  return jax.make_array_from_callback(x.shape, sharding, lambda i: x[i])


def get(x) -> np.ndarray:
  """A sharded array back on the host (gathered from every process)."""
  if jax.process_count() > 1:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)


def pad_rows(x: np.ndarray, n: int) -> np.ndarray:
  """x padded to n rows by repeating its first row."""
  x = np.asarray(x)
  if x.shape[0] == n:
    return x
  pad = np.repeat(x[:1], n - x.shape[0], axis=0)
  return np.concatenate([x, pad], axis=0)


def _round_up(n: int, k: int) -> int:
  return -(-n // k) * k


def padded_rows(n: int, block: int, mesh: Mesh) -> int:
  """Rows to lay out n items in blocks: a multiple of block x devices with
  at least two blocks per device."""
  per = block * mesh.size
  return max(_round_up(n, per), 2 * per)


def bucket_rows(
  n: int, block: int, mesh: Mesh, cap: int, fine: bool = False
) -> int:
  """Rows to lay out n items in one call of at most about `cap` rows: the
  fewest of 2, 4, 8, ... blocks per device (with `fine`, also 3, 6, 12,
  ...: at most a third of padding), and at most `cap` rounded up to whole
  blocks, so that a program sees a few shapes, not one per n (each shape
  is a compile)."""
  per = block * mesh.size
  cap = padded_rows(cap, block, mesh)
  blocks = 2  # per device: 2, (3,) 4, (6,) 8, (12,) ...
  while blocks * per < min(n, cap):
    if not fine:
      blocks *= 2
    elif blocks & (blocks - 1) == 0:  # a power of two: 1.5x
      blocks = blocks * 3 // 2
    else:  # 3 x 2^k: to 2^(k+2)
      blocks = blocks * 4 // 3
  return min(blocks * per, cap)


def groups(keys: np.ndarray, size: int) -> tuple:
  """Rows with equal `keys` rows (N, K) gathered into groups of `size`,
  or of one row where keys are mostly distinct (under 2 rows per key:
  groups of `size` would be mostly padding). Two group shapes, so that
  a program compiled for them serves every batch.

  Returns (first, of_group, members, real): first (D,), the first row of
  each distinct key (in sorted key order); of_group (G,), each group's
  key (a position in `first`); members (G, size), each group's rows,
  padded with its key's first row; real (G, size), which members are not
  padding. A key of n rows has ceil(n / size) groups."""
  first, inverse = unique_rows(keys)
  if len(inverse) < 2 * len(first):
    size = 1
  order = np.argsort(inverse, kind='stable')  # rows by key, in row order
  counts = np.bincount(inverse, minlength=len(first))
  per_key = -(-counts // size)
  group_start = np.cumsum(per_key) - per_key
  rank = np.arange(len(order)) - (np.cumsum(counts) - counts)[inverse[order]]
  group = group_start[inverse[order]] + rank // size
  of_group = np.repeat(np.arange(len(first)), per_key)
  members = np.repeat(first[of_group][:, None], size, axis=1)
  real = np.zeros(members.shape, bool)
  members[group, rank % size] = order
  real[group, rank % size] = True
  return first, of_group, members, real


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(first, inverse) of `np.unique(keys, axis=0, return_index=True,
  return_inverse=True)`: the first row of each distinct row (N, K) in
  sorted row order, and each row's position among them. A stable
  lexicographic sort of the columns: the same arrays, about 9x faster
  for 16,384 rows (`np.unique` sorts rows as structured records)."""
  if keys.shape[1] == 0:  # every row the same (empty) key
    return np.zeros(min(len(keys), 1), np.intp), np.zeros(len(keys), np.intp)
  order = np.lexsort(keys.T[::-1])
  ordered = keys[order]
  new = np.ones(len(keys), bool)
  new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
  inverse = np.empty(len(keys), np.intp)
  inverse[order] = np.cumsum(new) - 1
  return order[new], inverse


def _sharded(fn, block: int, mesh: Mesh):
  """`fn` (one row -> pytree) over rows sharded on 'starts': each device
  maps over blocks of `block` rows, vmapped within a block."""

  def local(*args):
    n = jax.tree.leaves(args)[0].shape[0]
    nb = n // block  # explicit: rows may have no other elements (P = 0)
    blocks = jax.tree.map(lambda x: x.reshape((nb, block) + x.shape[1:]), args)
    out = jax.lax.map(lambda xs: jax.vmap(fn)(*xs), blocks)
    return jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), out)

  spec = PartitionSpec(AXIS)
  return jax.shard_map(local, mesh=mesh, in_specs=spec, out_specs=spec)


@functools.cache
def _blocked(fn, block: int, mesh: Mesh):
  """jit of `_sharded`."""
  return jax.jit(
    _sharded(fn, block, mesh),
    compiler_options=xla_options.SEARCH_COMPILER_OPTIONS,
  )


@functools.cache
def _exported(fn, block: int, mesh: Mesh):
  """`_blocked`, traced once and then read back from disk
  (`program_cache`), keyed by `fn.program_key`, the block and the mesh."""
  devices = tuple(d.id for d in mesh.devices.flat)
  return program_cache.exported(
    _sharded(fn, block, mesh),
    (fn.program_key, block, mesh.axis_names, devices),
    xla_options.SEARCH_COMPILER_OPTIONS,
  )


def run_blocked(fn, block: int, mesh: Mesh, *rows, at_least: int = 0):
  """Applies `fn` to every row of the host arrays `rows` (same leading n),
  padded per `padded_rows` (to `at_least` rows or more: a caller that
  runs the same program on fewer rows keeps its shape, and its compile);
  returns host arrays of n rows. `fn` must be hashable and stable (one
  compile per fn, block, mesh and padded shape); an `fn` with a
  `program_key` attribute (its static inputs, picklable) is exported
  once and read back by later runs (`codesign.core.program_cache`).
  Every chunk of a search and of a batched evaluation comes through
  here, so this is where a stop that was asked
  (`codesign.core.interrupts`) takes effect."""
  interrupts.check()
  n = jax.tree.leaves(rows)[0].shape[0]
  total = padded_rows(max(n, at_least), block, mesh)
  args = jax.tree.map(lambda x: put(pad_rows(x, total), mesh), rows)
  kept = hasattr(fn, 'program_key')
  out = (_exported if kept else _blocked)(fn, block, mesh)(*args)
  return jax.tree.map(lambda x: get(x)[:n], out)
