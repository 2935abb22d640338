"""Microbenchmarks of the local JAX device: what is timed, and how.

None of them is a DLRM train step (`benchmarks` builds them from a
`Sweep`; `QUICK_SWEEP` is the short one):
- `gemm`: x W + b over a sweep of (m, k, n) and precisions;
- `layer`: one MLP layer, relu(x W + b), forward and backward;
- `interaction`: the DLRM's dot interaction, forward and backward;
- `gather`: embedding bags (the DLRM's own pooling code) over a sweep of
  dims and pooling factors, ids from the synthetic Zipf law;
- `scatter`: the DLRM's own sparse SGD row update over the same sweep;
- `stream`: y = a x + b in place over arrays far larger than the caches;
- `chain`: jitted calls of 1 to 64 tiny dependent layers (per-call and
  per-op overheads).
Each kind has a one-layer or one-table workload (`gemm_workload`, ...)
that says what the cost model is asked about it
(`codesign.calibration.profile_fit.predict`).

Timing (`time_interleaved`): every benchmark is compiled once, then
sampled in turn with all the others, round after round, on the wall
clock (`default_clock`); each keeps its fastest sample (the timeit
convention: other work only ever adds time). `codesign.studies.
calibration` samples the validation train steps in the same rounds.
`hold_freed_memory` and `SINGLE_THREAD_XLA_FLAGS` set up the process the
way a training framework would run. Times are in seconds, sizes in bytes.
"""

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from codesign.calibration import dlrm
from codesign.spec import workload as wl

# ---- timing -----------------------------------------------------------------


def default_clock():
  """The clock of every measurement: wall time (`time.perf_counter`).

  Process CPU time is no measure of XLA's CPU runtime: while its worker
  thread computes, a second runtime thread spins waiting for it, so the
  process time of a jitted GEMM is 1.6-2.0 times its wall time, depending
  on the size (measured on the 2-core VM: 1.57 at 128^3, 1.98 at 512^3).
  Wall time counts other processes' use of our cores; `time_interleaved`
  samples every benchmark many times, spread over the run, and keeps the
  fastest sample.
  """
  return time.perf_counter


def hold_freed_memory() -> bool:
  """Keeps freed host memory in the process (glibc `mallopt`).

  XLA's CPU runtime takes its buffers from `malloc`; by default glibc
  hands large freed blocks back to the OS, so every step touches fresh
  pages and pays a page fault per 4 KiB (about 1-3 GB/s instead of tens).
  A training framework's caching allocator avoids that; this does the
  same for the measurements (no mmap-backed blocks, no trimming).
  Returns whether glibc accepted the settings; elsewhere it does nothing.
  """
  import ctypes
  import ctypes.util

  name = ctypes.util.find_library('c')
  if not name:
    return False
  try:
    libc = ctypes.CDLL(name)
    m_trim_threshold, m_top_pad, m_mmap_max = -1, -2, -4
    ok = libc.mallopt(m_mmap_max, 0)  # no mmap: every block from the heap
    ok &= libc.mallopt(m_trim_threshold, 1 << 40)
    ok &= libc.mallopt(m_top_pad, 256 * 1024 * 1024)
  except (OSError, AttributeError):
    return False
  return bool(ok)


# XLA CPU flags that run each op on one thread (set before JAX starts).
SINGLE_THREAD_XLA_FLAGS = (
  '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1'
)


def _calls_per_sample(fn, min_seconds: float, clock) -> int:
  """Compiles and warms up `fn`, then returns how many back-to-back calls
  last about `min_seconds` (1 to 1000)."""
  jax.block_until_ready(fn())
  t0 = clock()
  jax.block_until_ready(fn())
  one = max(clock() - t0, 1e-6)
  return int(min(1000, max(1, math.ceil(min_seconds / one))))


def time_interleaved(
  fns, *, rounds: int, min_seconds, clock=None
) -> list[float]:
  """Seconds per call of each `fns[i]()` (which returns JAX arrays).

  Every function is compiled and warmed up first. Then `rounds` times, in
  turn over all functions, one sample is taken: the mean time of
  back-to-back calls lasting about `min_seconds` (a float, or one per
  function). Each function keeps its fastest sample (the timeit
  convention: other work on the machine only ever adds time).

  Why in turn: this shared machine's speed drifts by 15-35% for seconds to
  minutes at a time (other tenants' memory traffic). Sampling every
  function in every round gives all of them the same spread of machine
  states, and the fastest of many spread-out samples is close to the
  quiet machine's speed. Timing one function after another instead lets a
  slow spell set some of them and not others.
  """
  clock = clock or default_clock()
  if isinstance(min_seconds, (int, float)):
    min_seconds = [float(min_seconds)] * len(fns)
  calls = [
    _calls_per_sample(f, s, clock)
    for f, s in zip(fns, min_seconds, strict=True)
  ]
  best = [math.inf] * len(fns)
  for _ in range(rounds):
    for i, (fn, n) in enumerate(zip(fns, calls, strict=True)):
      t0 = clock()
      out = None
      for _ in range(n):
        out = fn()
      jax.block_until_ready(out)
      best[i] = min(best[i], (clock() - t0) / n)
  return best


# ---- microbenchmark workloads (what the cost model is asked) ---------------


def gemm_workload(m: int, k: int, n: int, precision: str) -> wl.Workload:
  """A workload whose first bottom-MLP layer is the (m x k)(k x n) GEMM."""
  return wl.Workload(
    name=f'gemm_{m}x{k}x{n}_{precision}',
    tables=(wl.Table(1, n),),
    num_dense=k,
    bottom_mlp=(n,),
    top_mlp=(1,),
    global_batch=m,
    dense_precision=precision,
  )


def layer_workload(m: int, k: int, n: int, precision: str) -> wl.Workload:
  """A workload whose (only) top-MLP layer maps k inputs to n outputs at
  batch m (`cat` of a 1-wide bottom output and a (k - 1)-wide table)."""
  return wl.Workload(
    name=f'layer_{m}x{k}x{n}_{precision}',
    tables=(wl.Table(1, k - 1),),
    num_dense=1,
    bottom_mlp=(1,),
    top_mlp=(n,),
    interaction='cat',
    global_batch=m,
    dense_precision=precision,
  )


def interaction_workload(batch: int, features: int, dim: int):
  """A dot-interaction workload of `features` vectors of `dim`; its second
  GEMM is the per-sample (F x d)(d x F) product."""
  return wl.Workload(
    name=f'interaction_{batch}x{features}x{dim}',
    tables=(wl.Table(1, dim),) * (features - 1),
    num_dense=1,
    bottom_mlp=(dim,),
    top_mlp=(1,),
    global_batch=batch,
  )


def chain_workload(layers: int) -> wl.Workload:
  """`layers` tiny (8 x 8) layers in a row, batch 8."""
  return wl.Workload(
    name=f'chain_{layers}',
    tables=(wl.Table(1, 8),),
    num_dense=8,
    bottom_mlp=(8,) * layers,
    top_mlp=(1,),
    global_batch=8,
  )


def table_workload(rows: int, dim: int, pooling: int, batch: int):
  """A workload of one table (for the gather and scatter benchmarks)."""
  return wl.Workload(
    name=f'bag_{rows}x{dim}_p{pooling}',
    tables=(wl.Table(rows, dim, float(pooling)),),
    num_dense=1,
    bottom_mlp=(dim,),
    top_mlp=(1,),
    global_batch=batch,
  )


# ---- the benchmarks ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Sweep:
  """The microbenchmark sweep (shapes chosen as a grid, not from any
  validation configuration). Shapes count elements: m and batch in
  samples, k and n in features, table rows in rows, dims in floats per
  row, pooling in lookups per sample; `min_seconds` in seconds."""

  gemm_m: tuple = (64, 512, 4096)
  gemm_kn: tuple = ((16, 64), (64, 256), (256, 64), (256, 512), (1024, 256))
  gemm_precisions: tuple = ('fp32', 'bf16')
  layer_m: tuple = (128, 1024, 4096)
  layer_kn: tuple = ((24, 96), (100, 300), (256, 256), (300, 100), (600, 40))
  layer_precisions: tuple = ('fp32',)
  interaction_shapes: tuple = (
    (256, 9, 32),
    (2048, 9, 32),
    (1024, 17, 64),
    (4096, 5, 16),
    (512, 33, 16),
  )
  # A table within the last-level cache and one far beyond it: the
  # caches' share of Zipf traffic depends on the footprint.
  table_rows: tuple = (1 << 17, 1 << 20)
  # 4096 samples per bag call (64k-131k lookups at pooling 16-32): at 1024
  # the calls took 10-400 us and the scatter fit missed by 25-30%.
  bag_batch: int = 4096
  bag_dims: tuple = (16, 32, 64, 128)
  bag_pooling: tuple = (1, 4, 16, 32)
  stream_elems: int = 1 << 25
  chain_layers: tuple = (1, 4, 16, 64)
  # One sample: back-to-back calls lasting about this long.
  min_seconds: float = 0.02
  # Samples per benchmark, taken in turn over all of them (see
  # `time_interleaved`); each keeps its fastest.
  rounds: int = 16


QUICK_SWEEP = Sweep(
  gemm_m=(64, 1024),
  gemm_kn=((16, 64), (64, 256), (256, 512), (1024, 256)),
  gemm_precisions=('fp32', 'bf16'),
  layer_m=(256, 2048),
  layer_kn=((24, 96), (100, 300), (256, 256), (600, 40)),
  interaction_shapes=((256, 9, 32), (2048, 9, 32), (512, 33, 16)),
  bag_dims=(16, 64, 128),
  bag_pooling=(1, 16),
  stream_elems=1 << 24,
  chain_layers=(1, 8, 64),
  min_seconds=0.01,
  rounds=8,
)


def _gemm_fn(m, k, n, precision, key):
  """x W + b: batch m, k inputs, n outputs."""
  dtype = dlrm.COMPUTE_DTYPES[precision]
  prec = dlrm.dot_precision(precision)
  kx, kw = jax.random.split(key)
  x = jax.random.normal(kx, (m, k), jnp.float32).astype(dtype)
  wt = jax.random.normal(kw, (k, n), jnp.float32).astype(dtype)
  b = jnp.zeros((n,), dtype)
  f = jax.jit(lambda x, wt, b: jnp.dot(x, wt, precision=prec) + b)
  return lambda: f(x, wt, b)


def _layer_fn(m, k, n, precision, key):
  """One MLP layer as a train step runs it: relu(x W + b) forward, and
  backward (given dy) the gradients of W, b and x."""
  dtype = dlrm.COMPUTE_DTYPES[precision]
  prec = dlrm.dot_precision(precision)
  kx, kw, ky = jax.random.split(key, 3)
  x = jax.random.normal(kx, (m, k), jnp.float32)
  wt = jax.random.normal(kw, (k, n), jnp.float32) / np.sqrt(k)
  b = jnp.zeros((n,), jnp.float32)
  dy = jax.random.normal(ky, (m, n), jnp.float32)

  def layer(wt, b, x):
    y = jnp.dot(x.astype(dtype), wt.astype(dtype), precision=prec)
    return jax.nn.relu(y + b.astype(dtype)).astype(jnp.float32)

  def fwd_bwd(wt, b, x, dy):
    y, vjp = jax.vjp(layer, wt, b, x)
    return y, vjp(dy)

  f = jax.jit(fwd_bwd)
  return lambda: f(wt, b, x, dy)


def _interaction_fn(batch, features, dim, key):
  """The DLRM's dot interaction, forward and backward: the strict upper
  triangle of S S^T per sample, concatenated after the bottom output."""
  ks, ky = jax.random.split(key)
  s = jax.random.normal(ks, (batch, features, dim), jnp.float32)
  width = dim + features * (features - 1) // 2
  dy = jax.random.normal(ky, (batch, width), jnp.float32)
  prec = jax.lax.Precision.HIGHEST

  def inter(s):
    z = dlrm.gram(s, prec)
    return jnp.concatenate([s[:, 0, :], dlrm.upper_triangle(z)], axis=1)

  def fwd_bwd(s, dy):
    y, vjp = jax.vjp(inter, s)
    return y, vjp(dy)

  f = jax.jit(fwd_bwd)
  return lambda: f(s, dy)


def _chain_fn(layers, key):
  ws = jax.random.normal(key, (layers, 8, 8), jnp.float32) * 0.3
  x = jnp.ones((8, 8), jnp.float32)

  def f(x, ws):
    for i in range(layers):  # unrolled: one dot per layer
      x = jnp.dot(x, ws[i], precision=jax.lax.Precision.HIGHEST)
    return x

  g = jax.jit(f)
  return lambda: g(x, ws)


def bag_fns(rows: int, dim: int, poolings, batch: int, seed: int) -> dict:
  """The gather and scatter benchmarks of one table of `rows` x `dim`
  floats: {pooling: (gather, update)}, one pair per mean pooling factor
  (lookups per sample) in `poolings`, each over `batch` samples of ids
  from the synthetic Zipf law (`seed`). `gather()` pools the bags with
  the DLRM's own code and returns the (batch, dim) pooled vectors;
  `update()` applies the DLRM's sparse SGD row update and returns the
  table.

  All of them share one table (the update writes it in place, donated):
  the sweep keeps every benchmark alive at once, and a table per pooling
  would hold 4 GB.
  """
  from codesign.calibration import synthetic_data

  w = table_workload(rows, dim, poolings[0], batch)
  table = [dlrm.init(w, jax.random.PRNGKey(seed))['embedding_0']]
  out = {}
  for pooling in poolings:
    w = table_workload(rows, dim, pooling, batch)
    model = dlrm.DLRM(w)
    data = synthetic_data.SyntheticCriteo(w, seed=seed).batch(0, batch)
    idx, wts = jax.device_put((data.indices, data.weights))
    pool = jax.jit(
      lambda p, i, wt, model=model: model.apply(
        {'params': p}, i, wt, method=dlrm.DLRM.pool
      )
    )
    grad = jnp.full((batch, dim), 1e-3, jnp.float32)
    update = jax.jit(
      lambda t, i, wt, grad=grad: dlrm.sparse_update(
        'sgd', 0.1, t, (), i, wt, grad, 0
      )[0],
      donate_argnums=0,
    )

    def run_pool(pool=pool, idx=idx, wts=wts):
      return pool({'embedding_0': table[0]}, idx, wts)

    def run_update(update=update, idx=idx, wts=wts):
      table[0] = update(table[0], idx[0], wts[0])
      return table[0]

    out[pooling] = (run_pool, run_update)
  return out


def _stream_fn(elems: int):
  """y = 1.0001 x + 1 in place (donated), so that the OS's first touch of
  fresh pages is not what is measured."""
  stream = jax.jit(lambda x: 1.0001 * x + 1.0, donate_argnums=0)
  buf = [jnp.ones((elems,), jnp.float32)]

  def run():
    buf[0] = stream(buf[0])
    return buf[0]

  return run


def benchmarks(sweep: Sweep = Sweep(), seed: int = 0) -> list[tuple]:
  """The microbenchmarks of `sweep`, each ready to run on the default JAX
  device: a list of (record without 'seconds', run), where `run()` makes
  one call and returns JAX arrays."""
  key = jax.random.PRNGKey(seed)
  out = [
    (
      {'kind': 'stream', 'bytes': 2 * 4 * sweep.stream_elems},
      _stream_fn(sweep.stream_elems),
    )
  ]
  for precision in sweep.gemm_precisions:
    for m in sweep.gemm_m:
      for k, n in sweep.gemm_kn:
        rec = {'kind': 'gemm', 'm': m, 'k': k, 'n': n, 'precision': precision}
        out.append((rec, _gemm_fn(m, k, n, precision, key)))
  for precision in sweep.layer_precisions:
    for m in sweep.layer_m:
      for k, n in sweep.layer_kn:
        rec = {'kind': 'layer', 'm': m, 'k': k, 'n': n, 'precision': precision}
        out.append((rec, _layer_fn(m, k, n, precision, key)))
  for batch, features, dim in sweep.interaction_shapes:
    rec = {
      'kind': 'interaction',
      'batch': batch,
      'features': features,
      'dim': dim,
    }
    out.append((rec, _interaction_fn(batch, features, dim, key)))
  for rows in sweep.table_rows:
    for dim in sweep.bag_dims:
      bags = bag_fns(rows, dim, sweep.bag_pooling, sweep.bag_batch, seed)
      for pooling, (pool, update) in bags.items():
        shape = {
          'rows': rows,
          'dim': dim,
          'pooling': pooling,
          'batch': sweep.bag_batch,
        }
        out.append(({'kind': 'gather', **shape}, pool))
        out.append(({'kind': 'scatter', **shape}, update))
  for layers in sweep.chain_layers:
    out.append(({'kind': 'chain', 'layers': layers}, _chain_fn(layers, key)))
  return out


def measure(sweep: Sweep = Sweep(), seed: int = 0) -> list[dict]:
  """Runs the microbenchmarks on the default JAX device (see
  `time_interleaved`).

  Returns:
    A list of records, each {'kind', shape keys, 'seconds'}.
  """
  items = benchmarks(sweep, seed)
  secs = time_interleaved(
    [run for _, run in items],
    rounds=sweep.rounds,
    min_seconds=sweep.min_seconds,
  )
  return [
    {**rec, 'seconds': t} for (rec, _), t in zip(items, secs, strict=True)
  ]
