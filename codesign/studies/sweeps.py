"""The pure computations behind the studies in `experiments/`.

Each function here answers one question about the cost model over many
points at once (model sizes, hardware fields, node counts, NIC bandwidths)
and returns plain numpy arrays and dicts; the experiment scripts add flags,
files and plots. The cost model itself stays unjitted (`cost_model.evaluate`
handles one design); these drivers `vmap` it over the points and `jit` the
batch, so a sweep compiles once per static shape (workload structure and
plan sharding) instead of once per point.

Conventions: sizes in bytes, times in seconds, bandwidths in bytes/s inside;
boundary units appear in key names (`_gb`, `_gbit_per_s`).
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core import program_cache
from codesign.core.errors import InputError
from codesign.model import cost_model, planner
from codesign.spec import hardware
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

# Batched evaluations are padded to a multiple of this many points, so that
# sweeps and their refinements reuse one compiled function per sharding.
CHUNK = 32


# ---- workloads ---------------------------------------------------------


def scale_rows(w: wl.Workload, factor: float) -> wl.Workload:
  """`w` with every table's rows multiplied by `factor` (rounded, >= 1)."""
  if not factor > 0:
    raise InputError(f'row scale factor must be positive, got {factor}')
  tables = tuple(
    dataclasses.replace(t, rows=max(1, round(t.rows * factor)))
    for t in w.tables
  )
  return dataclasses.replace(w, tables=tables)


def _scale_widths(w: wl.Workload, m: float) -> wl.Workload:
  """Hidden MLP widths times `m`; the widths that the interaction needs
  (the last bottom layer) and the output width stay."""

  def widths(ws):
    return tuple(max(1, round(x * m)) for x in ws[:-1]) + (ws[-1],)

  return dataclasses.replace(
    w, bottom_mlp=widths(w.bottom_mlp), top_mlp=widths(w.top_mlp)
  )


def grow(w: wl.Workload, factor: float) -> wl.Workload:
  """`w` grown `factor`-fold in embedding size and in dense compute.

  Rows of every table scale by `factor`. Hidden MLP widths scale by one
  common multiplier, found by bisection, so that dense FLOPs per sample
  grow by `factor` as closely as integer widths allow (GEMM FLOPs grow
  about as the square of the width). The name gets a `_x<factor>` suffix.
  """
  if factor == 1:
    return w
  target = factor * wl.dense_flops_per_sample(w)
  lo, hi = 1.0, max(2.0, factor)
  while wl.dense_flops_per_sample(_scale_widths(w, hi)) < target:
    hi *= 2.0
  for _ in range(60):
    mid = 0.5 * (lo + hi)
    if wl.dense_flops_per_sample(_scale_widths(w, mid)) < target:
      lo = mid
    else:
      hi = mid
  grown = scale_rows(_scale_widths(w, hi), factor)
  return dataclasses.replace(grown, name=f'{w.name}_x{factor:g}')


# ---- batched evaluation ------------------------------------------------


def _report_fields(r: cost_model.CostReport) -> dict:
  return {
    'step_time': r.step_time,
    'throughput': r.throughput,
    'perf_per_usd': r.perf_per_usd,
    'perf_per_watt': r.perf_per_watt,
    'capex': r.capex,
    'power': r.power,
    'feasible': r.feasible,
    'feasibility_margin': r.feasibility_margin,
    'hbm_required': r.memory_required['hbm'],
    'hbm_available': r.memory_available['hbm'],
    'ddr_required': r.memory_required['ddr'],
    'ddr_available': r.memory_available['ddr'],
    'bottleneck_index': r.bottleneck_index,
    'breakdown': jnp.stack([r.breakdown[k] for k in cost_model.COMPONENTS]),
  }


@functools.partial(jax.jit, static_argnames=('workload',))
def _eval_points(platform, workload, stack, plan, row_scale):
  """Reports for N plans/row scales on one platform (leading axis N)."""

  def one(frac, scale):
    p = dataclasses.replace(plan, hbm_fraction=frac)
    return _report_fields(
      cost_model.evaluate(platform, workload, p, stack, scale)
    )

  return jax.vmap(one)(plan.hbm_fraction, row_scale)


def _as_numpy(tree) -> dict:
  return jax.tree.map(np.asarray, tree)


def size_sweep(
  platform: Platform,
  base: wl.Workload,
  stack: Stack,
  sizes_bytes,
) -> dict:
  """The auto plan's cost on `platform` as the base workload's tables grow.

  Every table's rows are scaled by the same factor so that the embedding
  bytes (tables with optimizer state) equal each of `sizes_bytes`. The plan
  at each size is `planner.make(..., row_scale=factor)`: its HBM
  fractions fit the busiest rank's HBM by the cost model's own memory
  term. One compile per distinct sharding.

  Args:
    platform: the hardware.
    base: the workload whose tables are scaled.
    stack: the software stack.
    sizes_bytes: shape (N,), target embedding bytes.

  Returns:
    A dict of numpy arrays of leading length N: the `_report_fields` keys
    (SI units, `breakdown` of shape (N, len(COMPONENTS))) plus
    `row_scale`, `hbm_fraction` (mean over tables of the plan used) and
    `spilling` (an accelerator trainer with part of the tables in DDR).
  """
  sizes = np.asarray(sizes_bytes, dtype=np.float64)
  scales = sizes / wl.embedding_bytes(base)
  p = hardware.as_arrays(platform)
  plans = [
    planner.make(base, platform, stack, row_scale=float(x)) for x in scales
  ]
  groups: dict[tuple, list[int]] = {}
  for i, pl in enumerate(plans):
    groups.setdefault(pl.sharding, []).append(i)
  rows = [None] * len(sizes)
  for idx in groups.values():
    # Pad with copies of the last point up to a multiple of CHUNK.
    pad = [idx[-1]] * (-len(idx) % CHUNK)
    stacked = dataclasses.replace(
      plans[idx[0]],
      hbm_fraction=np.stack([plans[i].hbm_fraction for i in idx + pad]),
    )
    rs = scales[idx + pad]
    out = _as_numpy(_eval_points(p, base, stack, stacked, rs))
    for j, i in enumerate(idx):
      row = {k: v[j] for k, v in out.items()}
      row['row_scale'] = scales[i]
      row['hbm_fraction'] = float(np.mean(stacked.hbm_fraction[j]))
      if platform.trainer == 'cpu':
        row['hbm_fraction'] = 0.0
      # A CPU trainer keeps every table in DDR by design: not a spill.
      row['spilling'] = platform.trainer != 'cpu' and row['hbm_fraction'] < 1
      rows[i] = row
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def leaders(values: np.ndarray, feasible: np.ndarray) -> list[int | None]:
  """Per column, the row index of the largest feasible value (or None).

  Args:
    values: shape (P, N), a metric of P platforms at N points.
    feasible: shape (P, N) booleans.
  """
  out = []
  for j in range(values.shape[1]):
    ok = np.flatnonzero(feasible[:, j])
    out.append(int(ok[np.argmax(values[ok, j])]) if ok.size else None)
  return out


def crossovers(leader: list, labels: list[str], sizes) -> list[dict]:
  """Where the leader changes between consecutive points.

  Returns:
    One dict per change: `from`, `to` (labels or None for no feasible
    platform), `between` (the two neighbouring `sizes`).
  """
  out = []
  for j in range(1, len(leader)):
    if leader[j] != leader[j - 1]:
      name = [None if i is None else labels[i] for i in leader[j - 1 : j + 1]]
      out.append(
        {
          'from': name[0],
          'to': name[1],
          'between': [float(sizes[j - 1]), float(sizes[j])],
        }
      )
  return out


def first_index(mask) -> int | None:
  """Index of the first True in a 1-D mask, or None."""
  hits = np.flatnonzero(np.asarray(mask))
  return int(hits[0]) if hits.size else None


def log_space(lo: float, hi: float, n: int) -> np.ndarray:
  """`n` log-spaced points from `lo` to `hi` inclusive (float64)."""
  if not (lo > 0 and hi > lo and n >= 2):
    raise InputError(
      f'need 0 < lo < hi and at least 2 points, got {lo}, {hi}, {n}'
    )
  return np.exp(np.linspace(math.log(lo), math.log(hi), n))


def refine(predicate, lo: float, hi: float, rounds: int) -> tuple[float, float]:
  """Multisection in log space for where a predicate first turns True.

  Each round evaluates `CHUNK - 1` points strictly inside the bracket in one
  batched call and keeps the sub-interval where the predicate first turns
  True, so the bracket shrinks `CHUNK`-fold per round at one batched cost.

  Args:
    predicate: maps a (CHUNK - 1,) array of positive numbers to booleans;
      False at `lo`, True at `hi`.
    lo, hi: the bracket, 0 < lo < hi.
    rounds: multisection rounds; the log-bracket shrinks by CHUNK^rounds.

  Returns:
    The final bracket (lo, hi): the largest value known False and the
    smallest known True.
  """
  a, b = math.log(lo), math.log(hi)
  for _ in range(rounds):
    inner = np.exp(np.linspace(a, b, CHUNK + 1)[1:-1])
    hits = np.flatnonzero(np.asarray(predicate(inner)))
    j = int(hits[0]) if hits.size else len(inner)
    a = math.log(inner[j - 1]) if j > 0 else a
    b = math.log(inner[j]) if j < len(inner) else b
  return math.exp(a), math.exp(b)


# ---- sensitivity -------------------------------------------------------


def replan_applies(platform: Platform, plan: Plan) -> bool:
  """Whether `log_metrics` can re-derive this plan's HBM fractions: an
  accelerator trainer with a table that spills (0 < HBM fraction < 1). A
  plan that holds every table in HBM keeps it there under small changes
  (more HBM changes nothing), and a CPU trainer has no HBM."""
  frac = np.asarray(plan.hbm_fraction)
  return platform.trainer != 'cpu' and bool(np.any((frac > 0) & (frac < 1)))


def log_metrics(
  platform: Platform,
  workload: wl.Workload,
  stack: Stack,
  plan: Plan,
  replan: bool = False,
) -> jax.Array:
  """[log throughput, log perf per USD] of one design, shape (2,).

  Args:
    platform: the hardware (may be traced).
    workload: static.
    plan: the plan.
    replan: (only where `replan_applies`) the HBM fractions follow the
      planner's rule as the platform moves (`planner.fit_hbm_traced`, for
      the plan's sharding), so HBM capacity, accelerator count and the
      dense model's size count in the derivative. At the platform the
      plan was made for, an auto plan's fractions are the rule's.
  """
  if replan:
    frac = planner.fit_hbm_traced(workload, platform, stack, plan.sharding)
    plan = dataclasses.replace(plan, hbm_fraction=frac)
  r = cost_model.evaluate(platform, workload, plan, stack)
  return jnp.stack([jnp.log(r.throughput), jnp.log(r.perf_per_usd)])


@functools.cache
def _elasticity_fn(workload, replan):
  """`(platform, stack, plan) -> (log metrics, elasticities)`, jitted and
  kept on disk (`program_cache`: a warm run skips its trace)."""

  def run(platform, stack, plan):
    def f(p):
      return log_metrics(p, workload, stack, plan, replan)

    # One forward pass serves the value and both rows of the Jacobian
    # (`jax.jacrev` beside a call of f held two copies of the model: a
    # quarter more of the program to compile, same numbers).
    value, pullback = jax.vjp(f, platform)
    (jac,) = jax.vmap(pullback)(jnp.eye(value.shape[0], dtype=value.dtype))
    return value, jax.tree.map(lambda g, x: g * x, jac, platform)

  return program_cache.exported(run, ('elasticities', workload, replan))


def elasticities(
  platform: Platform,
  workload: wl.Workload,
  stack: Stack,
  plan: Plan,
  *,
  replan: bool,
) -> tuple[list[str], np.ndarray, np.ndarray]:
  """d log(metric) / d log(field) for every continuous platform field.

  One reverse-mode pass (`jax.vjp` of the two log metrics, its pullback
  batched over both) gives the gradient with respect to every field and
  the metrics themselves; times the field's value it is the elasticity:
  the % change of the metric per 1% change of the field. Fields at zero
  have elasticity zero.

  Args:
    replan: re-derive a spilling plan as the platform changes (see
      `log_metrics`); ignored where `replan_applies` is False.

  Returns:
    (paths, values, e): dotted field paths (L,), their SI values (L,), and
    e of shape (2, L): row 0 throughput, row 1 perf per USD.
  """
  replan = replan and replan_applies(platform, plan)
  # Without labels: platforms that differ in parts share one compile.
  p = hardware.unlabelled(hardware.as_arrays(platform, jnp.float64))
  _, e = _elasticity_fn(workload, replan)(p, stack, plan)
  paths = hardware.leaf_paths(platform)
  values = np.array([float(hardware.get_value(platform, k)) for k in paths])
  e = np.stack([np.asarray(hardware.get_value(e, k)) for k in paths], axis=1)
  return paths, values, e


@functools.partial(jax.jit, static_argnames=('workload', 'replan'))
def _metrics_batch(platforms, workload, stack, plan, replan):
  return jax.vmap(lambda p: log_metrics(p, workload, stack, plan, replan))(
    platforms
  )


def finite_difference(
  platform: Platform,
  workload: wl.Workload,
  stack: Stack,
  plan: Plan,
  paths: list[str],
  *,
  replan: bool,
  rel_step: float = 1e-4,
) -> np.ndarray:
  """Central differences of the log metrics in log field, shape (2, K).

  Each field in `paths` is multiplied by exp(+h) and exp(-h) (h =
  `rel_step`); all 2K designs are evaluated in one batch.
  """
  replan = replan and replan_applies(platform, plan)
  base = hardware.unlabelled(hardware.as_arrays(platform, jnp.float64))
  designs = []
  for k in paths:
    x = float(hardware.get_value(platform, k))
    for sign in (1.0, -1.0):
      designs.append(
        hardware.with_value(base, k, jnp.float64(x * math.exp(sign * rel_step)))
      )
  stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *designs)
  out = np.asarray(_metrics_batch(stacked, workload, stack, plan, replan))
  out = out.reshape(len(paths), 2, 2)  # (field, +/-, metric)
  return ((out[:, 0] - out[:, 1]) / (2.0 * rel_step)).T


# ---- scale-out ---------------------------------------------------------


@functools.partial(jax.jit, static_argnames=('workload',))
def _eval_nic(platform, workload, stack, plan, bandwidths):
  """Reports for the platform with each NIC bandwidth (leading axis)."""

  def one(bw):
    p = hardware.with_value(platform, 'nic.bandwidth', bw)
    return _report_fields(cost_model.evaluate(p, workload, plan, stack))

  return jax.vmap(one)(bandwidths)


def nic_sweep(
  platform: Platform,
  workload: wl.Workload,
  stack: Stack,
  plan: Plan,
  bandwidths,
) -> dict:
  """The cost at each per-NIC bandwidth (bytes/s, shape (N,)).

  Evaluated in batches of CHUNK (the last one padded), so every call with
  the same workload and plan structure reuses one compiled function.

  Returns:
    `_report_fields` keys as numpy arrays of leading length N.
  """
  bw = np.asarray(bandwidths, dtype=np.float64)
  n = len(bw)
  padded = np.concatenate([bw, np.full(-n % CHUNK, bw[-1])])
  p = hardware.as_arrays(platform)
  outs = [
    _as_numpy(_eval_nic(p, workload, stack, plan, padded[i : i + CHUNK]))
    for i in range(0, len(padded), CHUNK)
  ]
  return {k: np.concatenate([o[k] for o in outs])[:n] for k in outs[0]}


def with_nodes(
  platform: Platform, workload: wl.Workload, nodes: int, *, weak: bool
):
  """The platform with `nodes` nodes and the workload's global batch.

  Weak scaling keeps the batch per node of (platform, workload); strong
  scaling keeps the global batch. Returns (platform, workload).
  """
  p = hardware.with_value(platform, 'nodes', float(nodes))
  if not weak:
    return p, workload
  per_node = workload.global_batch / float(platform.nodes)
  batch = max(1, round(per_node * nodes))
  return p, dataclasses.replace(workload, global_batch=batch)


def required_nic_bandwidth(
  platform: Platform,
  workload: wl.Workload,
  stack: Stack,
  plan: Plan,
  single_node_throughput: float,
  target: float,
  lo: float,
  hi: float,
  rounds: int,
) -> dict:
  """The per-NIC bandwidth at which scaling efficiency reaches `target`.

  Efficiency is throughput / (nodes x single-node throughput); it grows
  with NIC bandwidth, so multisection in log bandwidth (`refine`) locates
  the smallest bandwidth that reaches `target` inside [lo, hi].

  Returns:
    {'status': 'found' | 'below_range' | 'unreachable', 'bandwidth':
    bytes/s (None if unreachable), 'bracket': [lo, hi] bytes/s,
    'efficiency_at_hi': efficiency at `hi`}.
  """
  nodes = float(platform.nodes)

  def eff(bws):
    r = nic_sweep(platform, workload, stack, plan, bws)
    return r['throughput'] / (nodes * single_node_throughput)

  ends = eff(np.array([lo, hi]))
  if ends[0] >= target:
    return {
      'status': 'below_range',
      'bandwidth': lo,
      'bracket': [None, lo],
      'efficiency_at_hi': float(ends[1]),
    }
  if ends[1] < target:
    return {
      'status': 'unreachable',
      'bandwidth': None,
      'bracket': [hi, None],
      'efficiency_at_hi': float(ends[1]),
    }
  a, b = refine(lambda x: eff(x) >= target, lo, hi, rounds)
  return {
    'status': 'found',
    'bandwidth': b,
    'bracket': [a, b],
    'efficiency_at_hi': float(ends[1]),
  }
