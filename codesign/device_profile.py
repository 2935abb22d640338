"""Device profiles: what the local JAX device really does, in cost-model terms.

A profile holds the efficiency fields of one device part of the cost model
(`gemm_efficiency`, `gemm_half_size`, `gather_efficiency`,
`update_efficiency`, `kernel_overhead`) and the platform's
`step_overhead`; a measured profile also holds the device's sustained
peaks (`peak_flops_fp32`, `peak_flops_bf16`) and memory bandwidth.
`apply_to_json` writes a profile into a platform's JSON (the accelerator
of an accelerator trainer, the CPU socket of a CPU trainer), so every
experiment can load one with `--device_profile=path`.

`measure` runs microbenchmarks of the local device, none of them a DLRM
train step:
- `gemm`: x W + b over a sweep of (m, k, n) and precisions;
- `layer`: one MLP layer, relu(x W + b), forward and backward;
- `interaction`: the DLRM's dot interaction, forward and backward;
- `gather`: embedding bags (the DLRM's own pooling code) over a sweep of
  dims and pooling factors, ids from the synthetic Zipf law;
- `scatter`: the DLRM's own sparse SGD row update over the same sweep;
- `stream`: y = a x + b in place over arrays far larger than the caches;
- `chain`: jitted calls of 1 to 64 tiny dependent layers (per-call and
  per-op overheads).
The memory bandwidth is measured directly (the streaming rate). `fit`
then fits the sustained GEMM peaks and the efficiency fields by
gradient descent with Optax THROUGH the cost model: each benchmark is
predicted by `cost_model.dense_times` or `cost_model.evaluate` of a
one-layer or one-table workload on a one-device platform, and the loss is
the mean squared log error, averaged per benchmark kind.

Timing (`time_interleaved`): every benchmark is compiled once, then
sampled in turn with all the others, round after round, on the wall
clock; each keeps its fastest sample (the timeit convention: other work
only ever adds time). `experiments.calibrate` samples the validation
train steps in the same rounds.
"""

import dataclasses
import json
import math
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from codesign import (
  cost_model,
  dlrm,
  hardware,
  planner,
  platform_presets,
  stack_presets,
  terms,
)
from codesign import plan as plan_lib
from codesign import stack as stack_lib
from codesign import workload as wl
from codesign.errors import InputError
from codesign.pytree import replace

PROFILES_DIR = pathlib.Path(__file__).parent / 'data' / 'profiles'
TARGETS = ('cpu', 'accelerator')
# Fitted fields: name in the JSON -> (part field, unit multiplier to SI).
EFFICIENCY_KEYS = {
  'gemm_efficiency': ('gemm_efficiency', 1.0),
  'gemm_half_size': ('gemm_half_size', 1.0),
  'gather_efficiency': ('gather_efficiency', 1.0),
  'update_efficiency': ('update_efficiency', 1.0),
  'kernel_overhead_us': ('kernel_overhead', 1e-6),
}
# Measured fields (optional in a profile; needed to build a local platform).
PEAK_KEYS = {
  'peak_flops_fp32_tflops': 1e12,
  'peak_flops_bf16_tflops': 1e12,
  'memory_bandwidth_gb_per_s': 1e9,
}
FIT_PATHS = (
  'gemm_efficiency',
  'gemm_half_size',
  'gather_efficiency',
  'update_efficiency',
  'kernel_overhead',
  'step_overhead',
)


# ---- profiles as JSON -------------------------------------------------------


def _number(d: dict, key: str, where: str, lo: float, hi: float) -> float:
  v = d[key]
  if isinstance(v, bool) or not isinstance(v, int | float):
    raise InputError(f'{where}: {key} must be a number, got {v!r}')
  v = float(v)
  if not (math.isfinite(v) and lo <= v <= hi):
    raise InputError(f'{where}: {key} must lie in [{lo:g}, {hi:g}], got {v}')
  return v


def validate(profile: dict, where: str = 'device profile') -> dict:
  """Raises `InputError` (one sentence) unless `profile` is usable."""
  if not isinstance(profile, dict):
    raise InputError(f'{where} must be a JSON object')
  required = ['target', *EFFICIENCY_KEYS]
  missing = [k for k in required if k not in profile]
  if missing:
    raise InputError(f'{where} lacks the key {missing[0]!r}')
  if profile['target'] not in TARGETS:
    raise InputError(
      f'{where}: target must be one of {", ".join(TARGETS)}, got '
      f'{profile["target"]!r}'
    )
  part = 'cpu' if profile['target'] == 'cpu' else 'accelerator'
  for key, (fname, scale) in EFFICIENCY_KEYS.items():
    lo, hi = hardware.BOUNDS[f'{part}.{fname}']
    _number(profile, key, where, lo / scale, hi / scale)
  if 'step_overhead_us' in profile:
    lo, hi = stack_lib.BOUNDS['step_floor']
    _number(profile, 'step_overhead_us', where, lo * 1e6, hi * 1e6)
  for key in PEAK_KEYS:
    if key in profile:
      _number(profile, key, where, 1e-6, 1e6)
  return profile


def load(path: str | pathlib.Path) -> dict:
  """Reads and validates a profile JSON file (one-sentence errors)."""
  p = pathlib.Path(path)
  if not p.is_file():
    raise InputError(f'device profile file {str(path)!r} does not exist')
  try:
    d = json.loads(p.read_text())
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise InputError(
      f'device profile file {str(path)!r} is not valid JSON ({e})'
    ) from None
  return validate(d, f'device profile {str(path)!r}')


def save(path: str | pathlib.Path, profile: dict) -> None:
  """Writes a profile atomically with sorted keys (reproducible bytes)."""
  from codesign import results

  validate(profile)
  results.write_json(pathlib.Path(path), profile)


def shipped(name: str) -> dict:
  """A profile shipped in `codesign/data/profiles/` (without `.json`)."""
  return load(PROFILES_DIR / f'{name}.json')


def _article(target: str) -> str:
  return ('an ' if target[0] in 'aeiou' else 'a ') + target


def apply_to_json(platform_json: dict, profile: dict) -> dict:
  """A platform JSON dict with the profile's efficiency fields written in.

  The profile must describe the part that trains: `cpu` for a CPU
  trainer, `accelerator` otherwise. (Its `step_overhead_us`, the cost of
  one jitted call, belongs to the `jax_xla` stack: `local_stack`.)
  Returns a new dict; raises `InputError` on a mismatch.
  """
  validate(profile)
  out = json.loads(json.dumps(platform_json))
  trainer = out.get('trainer')
  part = 'cpu' if trainer == 'cpu' else 'accelerator'
  if profile['target'] != part:
    raise InputError(
      f'the device profile describes {_article(profile["target"])} but '
      f'platform {out.get("name")!r} trains on its {part}'
    )
  for key in EFFICIENCY_KEYS:
    out[part][key] = float(profile[key])
  src = out[part].get('sources', {})
  for key, (fname, _) in EFFICIENCY_KEYS.items():
    src[fname] = 'device profile: ' + str(profile.get('source', ''))
  out[part]['sources'] = src
  return out


def apply(platform: hardware.Platform, profile: dict) -> hardware.Platform:
  """`apply_to_json` for a `Platform` object."""
  from codesign import schema

  pj = apply_to_json(schema.platform_to_json(platform), profile)
  return schema.platform_from_json(pj)


# ---- the local device as a platform ----------------------------------------


def local_platform(profile: dict) -> hardware.Platform:
  """One node with one device (the local JAX device) from a measured profile.

  A `cpu` profile gives a CPU trainer with one socket; an `accelerator`
  profile a one-accelerator platform with the tables in its memory. Fields
  the profile does not measure (capacities, links, prices) come from the
  `cpu_2s` (CPU) or `dgx_a100_80gb` (accelerator) presets; with one device
  and one node they do not enter the step time.
  """
  validate(profile)
  missing = [k for k in PEAK_KEYS if k not in profile]
  if missing:
    raise InputError(f'the device profile lacks the measured {missing[0]!r}')
  peak32 = profile['peak_flops_fp32_tflops'] * 1e12
  peak16 = profile['peak_flops_bf16_tflops'] * 1e12
  bw = profile['memory_bandwidth_gb_per_s'] * 1e9
  eff = {
    fname: float(profile[key]) * scale
    for key, (fname, scale) in EFFICIENCY_KEYS.items()
  }
  if profile['target'] == 'cpu':
    base = platform_presets.get('cpu_2s')
    cpu = replace(
      base.cpu,
      name='local ' + str(profile.get('device_kind', 'cpu')),
      peak_flops_fp32=peak32,
      peak_flops_bf16=peak16,
      ddr_bandwidth=bw,
      **eff,
    )
    return replace(
      base,
      name='local_cpu',
      nodes=1.0,
      sockets_per_node=1.0,
      cpu=cpu,
    )
  base = platform_presets.get('dgx_a100_80gb')
  acc = replace(
    base.accelerator,
    name='local ' + str(profile.get('device_kind', 'accelerator')),
    peak_flops_fp32=peak32,
    peak_flops_tf32=peak32,
    peak_flops_bf16=peak16,
    hbm_bandwidth=bw,
    **eff,
  )
  return replace(
    base,
    name='local_accelerator',
    nodes=1.0,
    accelerators_per_node=1.0,
    accelerator=acc,
  )


def local_stack(profile: dict) -> stack_lib.Stack:
  """The `jax_xla` stack on the profiled device: its per-step floor is the
  measured cost of one jitted call (`step_overhead_us`)."""
  s = stack_presets.get('jax_xla')
  step = float(profile.get('step_overhead_us', s.step_floor * 1e6)) * 1e-6
  return replace(s, step_floor=step)


def local_plan(w: wl.Workload, p: hardware.Platform) -> plan_lib.Plan:
  """All tables in the device's memory; nothing overlaps (one device runs
  every op in turn, so there is no communication to hide)."""
  pl = planner.make(w, p, stack_presets.get('jax_xla'), placement='hbm')
  return replace(pl, overlap=0.0)


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


@dataclasses.dataclass(frozen=True)
class Sweep:
  """The microbenchmark sweep (shapes chosen as a grid, not from any
  validation configuration)."""

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
  prec = dlrm._precision(precision)
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
  prec = dlrm._precision(precision)
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
    z = dlrm._gram(s, prec)
    return jnp.concatenate([s[:, 0, :], dlrm._upper_triangle(z)], axis=1)

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


def _bag_fns(rows, dim, poolings, batch, seed):
  """{pooling: (gather, update)} for one table of `rows` x `dim`.

  All of them share one table (the update writes it in place, donated):
  the sweep keeps every benchmark alive at once, and a table per pooling
  would hold 4 GB.
  """
  from codesign import synthetic_data

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
      bags = _bag_fns(rows, dim, sweep.bag_pooling, sweep.bag_batch, seed)
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


# ---- the fit ----------------------------------------------------------------


def measured_peaks(records: list[dict]) -> dict:
  """Peak FLOP/s per precision (fastest GEMMs) and streaming bandwidth."""
  peaks = {}
  for prec in ('fp32', 'bf16'):
    rates = [
      2.0 * r['m'] * r['k'] * r['n'] / r['seconds']
      for r in records
      if r['kind'] == 'gemm' and r['precision'] == prec
    ]
    # The median of the three fastest: one glitched timing does not set
    # the peak.
    peaks[prec] = float(np.median(sorted(rates)[-3:])) if rates else None
  if peaks['bf16'] is None:
    peaks['bf16'] = peaks['fp32']
  streams = [
    r['bytes'] / r['seconds'] for r in records if r['kind'] == 'stream'
  ]
  return {
    'peak_flops_fp32_tflops': peaks['fp32'] / 1e12,
    'peak_flops_bf16_tflops': peaks['bf16'] / 1e12,
    'memory_bandwidth_gb_per_s': max(streams) / 1e9,
  }


def bench_plan(platform: hardware.Platform, rec: dict):
  """The plan of a gather or scatter record (built from concrete values,
  outside any trace); None for other kinds."""
  if rec['kind'] == 'interaction':
    w = interaction_workload(rec['batch'], rec['features'], rec['dim'])
    return local_plan(w, platform)
  if rec['kind'] not in ('gather', 'scatter'):
    return None
  w = table_workload(rec['rows'], rec['dim'], rec['pooling'], rec['batch'])
  return local_plan(w, platform)


def predict(
  platform: hardware.Platform, stack: stack_lib.Stack, rec: dict, plan=None
):
  """The cost model's seconds for one microbenchmark record (traceable in
  the platform and the stack; `plan` from `bench_plan` for gathers and
  scatters)."""
  p, s = platform, stack
  dev = p.cpu if p.trainer == 'cpu' else p.accelerator
  kind = rec['kind']
  # Every benchmark is one jitted call: the call's fixed cost is the
  # stack's per-step floor.
  if kind in ('gemm', 'layer', 'chain'):
    if kind == 'gemm':
      w = gemm_workload(rec['m'], rec['k'], rec['n'], rec['precision'])
    elif kind == 'layer':
      w = layer_workload(rec['m'], rec['k'], rec['n'], rec['precision'])
    else:
      w = chain_workload(rec['layers'])
    fwd, bwd = terms.dense_times(p, w, s, terms.setup(p, w, s))
    if kind == 'gemm':
      return fwd[0] + s.step_floor
    if kind == 'layer':
      # A top-MLP layer (it has an input gradient): forward plus backward.
      return fwd[1] + bwd[1] + s.step_floor
    return jnp.sum(fwd[: rec['layers']]) + s.step_floor
  if kind == 'interaction':
    w = interaction_workload(rec['batch'], rec['features'], rec['dim'])
    r = cost_model.evaluate(p, w, plan, s)
    return r.breakdown['dense_interaction'] + s.step_floor
  if kind in ('gather', 'scatter'):
    w = table_workload(rec['rows'], rec['dim'], rec['pooling'], rec['batch'])
    r = cost_model.evaluate(p, w, plan, s)
    tier = 'ddr' if p.trainer == 'cpu' else 'hbm'
    name = 'gather' if kind == 'gather' else 'update'
    t = r.breakdown[f'embedding_{name}_{tier}']
    return t + dev.kernel_overhead + s.step_floor
  raise ValueError(f'no prediction for kind {kind!r}')


FIT_KINDS = ('gemm', 'layer', 'interaction', 'gather', 'scatter', 'chain')


def _with_fit(p: hardware.Platform, s: stack_lib.Stack, values: dict):
  """(platform, stack) with fitted values: device fields into the part
  that trains, the call overhead into the stack's floor."""
  part = 'cpu' if p.trainer == 'cpu' else 'accelerator'
  dev = replace(
    getattr(p, part),
    **{k: v for k, v in values.items() if k != 'step_overhead'},
  )
  return replace(p, **{part: dev}), replace(
    s, step_floor=values['step_overhead']
  )


def fit(
  records: list[dict],
  target: str | None = None,
  steps: int = 1500,
  learning_rate: float = 0.05,
) -> tuple[dict, dict]:
  """Fits the device's fields to the microbenchmarks.

  The memory bandwidth is measured (the streaming rate). A device's
  nominal peak is not known here, and only the product peak x
  gemm_efficiency enters the model, so the fit takes gemm_efficiency = 1
  and fits the sustained peaks (fp32 and, when there are 16-bit GEMM
  records, bf16) together with gemm_half_size, gather_efficiency (from the
  gathers), update_efficiency (from the scatters: row read-modify-write),
  kernel_overhead and step_overhead. Parameters move in log space (the
  efficiencies through a sigmoid, in (0, 1)) with Adam, from the
  fastest measured GEMM rates and generic starting values. The loss is,
  per kind of benchmark, the mean of (log predicted - log measured)^2,
  averaged over kinds.

  Returns:
    (profile dict, fit report with per-kind errors and the loss).
  """
  target = target or ('cpu' if jax.default_backend() == 'cpu' else 'accel')
  target = 'cpu' if target == 'cpu' else 'accelerator'
  peaks = measured_peaks(records)
  seed_profile = {
    'target': target,
    **peaks,
    'gemm_efficiency': 1.0,
    'gemm_half_size': 16.0,
    'gather_efficiency': 0.5,
    'update_efficiency': 0.5,
    'kernel_overhead_us': 10.0,
    'step_overhead_us': 50.0,
  }
  base = hardware.as_arrays(local_platform(seed_profile), jnp.float32)
  base_stack = local_stack(seed_profile)
  fitted = [r for r in records if r['kind'] in FIT_KINDS]
  kinds = sorted({r['kind'] for r in fitted})
  log_meas = jnp.log(jnp.array([r['seconds'] for r in fitted], jnp.float32))
  kind_id = np.array([kinds.index(r['kind']) for r in fitted])
  weight = np.array(
    [1.0 / np.sum(kind_id == i) / len(kinds) for i in kind_id], np.float32
  )

  def unpack(theta):
    out = {
      'peak_flops_fp32': jnp.exp(theta[0]),
      'peak_flops_bf16': jnp.exp(theta[1]),
      'gemm_half_size': jnp.exp(theta[2]),
      'gather_efficiency': jax.nn.sigmoid(theta[3]),
      'kernel_overhead': jnp.exp(theta[4]),
      'step_overhead': jnp.exp(theta[5]),
      'update_efficiency': jax.nn.sigmoid(theta[6]),
    }
    if target == 'accelerator':
      out['peak_flops_tf32'] = out['peak_flops_fp32']
    return out

  plans = [bench_plan(base, r) for r in fitted]

  def preds(theta):
    p, s = _with_fit(base, base_stack, unpack(theta))
    return jnp.stack(
      [predict(p, s, r, pl) for r, pl in zip(fitted, plans, strict=True)]
    )

  def loss_fn(theta):
    err = jnp.log(preds(theta)) - log_meas
    return jnp.sum(weight * err * err)

  def logit(x):
    return float(np.log(x / (1.0 - x)))

  theta0 = jnp.array(
    [
      np.log(peaks['peak_flops_fp32_tflops'] * 1e12),
      np.log(peaks['peak_flops_bf16_tflops'] * 1e12),
      np.log(16.0),
      logit(0.5),
      np.log(10e-6),
      np.log(50e-6),
      logit(0.5),
    ],
    jnp.float32,
  )
  tx = optax.adam(learning_rate)

  @jax.jit
  def run(theta):
    def body(carry, _):
      theta, st = carry
      loss, g = jax.value_and_grad(loss_fn)(theta)
      upd, st = tx.update(g, st, theta)
      return (optax.apply_updates(theta, upd), st), loss

    (theta, _), losses = jax.lax.scan(
      body, (theta, tx.init(theta)), None, length=steps
    )
    return theta, losses, preds(theta)

  theta, losses, pred = run(theta0)
  values = {k: float(v) for k, v in unpack(theta).items()}
  pred = np.asarray(pred, np.float64)
  rel = pred / np.array([r['seconds'] for r in fitted]) - 1.0
  per_kind = {
    k: {
      'count': int(np.sum(kind_id == i)),
      'median_abs_rel_error': float(np.median(np.abs(rel[kind_id == i]))),
      'max_abs_rel_error': float(np.max(np.abs(rel[kind_id == i]))),
    }
    for i, k in enumerate(kinds)
  }
  profile = {
    'target': target,
    **peaks,
    'peak_flops_fp32_tflops': values['peak_flops_fp32'] / 1e12,
    'peak_flops_bf16_tflops': values['peak_flops_bf16'] / 1e12,
    'gemm_efficiency': 1.0,
    'gemm_half_size': values['gemm_half_size'],
    'gather_efficiency': values['gather_efficiency'],
    'update_efficiency': values['update_efficiency'],
    'kernel_overhead_us': values['kernel_overhead'] * 1e6,
    'step_overhead_us': values['step_overhead'] * 1e6,
  }
  report = {
    'loss_initial': float(losses[0]),
    'loss_final': float(losses[-1]),
    'steps': steps,
    'per_kind': per_kind,
    'predictions': [
      {**r, 'predicted': float(q)} for r, q in zip(fitted, pred, strict=True)
    ],
  }
  return profile, report


def device_description() -> dict:
  d = jax.devices()[0]
  return {
    'backend': jax.default_backend(),
    'device_kind': d.device_kind,
    'platform': d.platform,
  }


def default_profile(accelerator_name: str) -> dict:
  """The shipped default profile of a catalog accelerator.

  These are NOT measurements: they repeat the catalog's assumed
  efficiencies (`catalog.ASSUMED`, each with its reasoning), the priors
  from which `codesign.public_cases` fits. Nothing in them is tuned on
  the public calibration cases (the GEMM numbers fitted there ship in
  `data/stack_fit.json` and reach the catalog parts directly).
  """
  from codesign import catalog

  catalog.accelerator(accelerator_name)  # raises InputError if unknown
  a = catalog.assumed
  return {
    'target': 'accelerator',
    'accelerator': accelerator_name,
    'gemm_efficiency': a('accel_gemm_efficiency'),
    'gemm_half_size': a('accel_gemm_half_size'),
    'gather_efficiency': a('accel_gather_efficiency'),
    'update_efficiency': a('accel_update_efficiency'),
    'kernel_overhead_us': a('accel_kernel_overhead_us'),
    'source': 'default (assumption, not measured): codesign.catalog.ASSUMED '
    'accel_* values',
    'assumptions': {
      k: catalog.ASSUMED[k][1]
      for k in (
        'accel_gemm_efficiency',
        'accel_gemm_half_size',
        'accel_gather_efficiency',
        'accel_update_efficiency',
        'accel_kernel_overhead_us',
      )
    },
  }


def profile_file_name(accelerator_name: str) -> str:
  """'A100-SXM4-80GB' -> 'a100_sxm4_80gb'."""
  return accelerator_name.lower().replace('-', '_').replace(' ', '_')
