"""Named plans: where the tables go, chosen from the cost model.

`make(workload, platform, stack, placement, sharding)` builds a `Plan`
from concrete numbers. Two rules decide it:

- HBM placement (`fit_hbm`): the stack keeps `hbm_reserve` of every
  accelerator's HBM free, the dense model and its activations take their
  share, and the rest holds table rows, *hottest bytes first*: each
  table gets the fraction f of its rows at which one more byte of HBM
  buys the same hit rate everywhere (water-filling of the lookups served
  from HBM, hit(f) = 1 - (1 - f)^k per table), so small and hot tables
  stay wholly in HBM and the giant ones spill (or, with UVM caching, are
  cached). The total is the largest for which the cost model's own HBM
  requirement of the busiest rank fits (bisection on the numpy mirror
  `hbm_required`, which a test checks against `cost_model.evaluate`).
- Sharding (`auto`): table-wise, except for tables table-wise cannot
  balance, which are split (table-row-wise on several nodes, row-wise on
  one); the fastest feasible of four candidates by the cost model: split
  the tables whose HBM share exceeds a quarter of one accelerator's free
  HBM; split those and the tables whose traffic exceeds half of one
  rank's fair share; split none; every table column-wise.
"""

import numpy as np

from codesign import cost_model, hardware, terms
from codesign import workload as wl
from codesign.errors import InputError
from codesign.hardware import Platform
from codesign.plan import SHARDINGS, Plan
from codesign.smooth import DEFAULT_P
from codesign.stack import Stack

# Bisection steps of the HBM fit (2^-40 of the total table bytes).
FIT_STEPS = 40


def _smax(*xs, p=DEFAULT_P):
  x = np.maximum(np.asarray(xs, dtype=np.float64), 1e-300)
  scale = np.max(x)
  return float(scale * np.sum((x / scale) ** p) ** (1.0 / p))


def _ranks(p: Platform, s: Stack) -> tuple[float, float]:
  """(table ranks, ranks per node), as `terms.setup` computes them."""
  a = float(terms.ranks_per_node(p))
  ranks = float(p.nodes) * a
  if s.bottom_mlp == 'one_device' and p.trainer != 'cpu':
    z = 8.0 * (ranks - terms.ONE_DEVICE_DEDICATED_ABOVE - 0.5)
    dedicated = 1.0 / (1.0 + np.exp(-z))
    return ranks - dedicated, a
  return ranks, a


def table_bytes(w: wl.Workload) -> np.ndarray:
  """Bytes of each table with its optimizer state, shape (T,)."""
  return np.array(
    [float(t.bytes + wl.table_state_bytes(w, t)) for t in w.tables]
  )


def hbm_required(w, p: Platform, s: Stack, sharding, frac) -> float:
  """HBM bytes the busiest accelerator needs for tables at per-table
  fractions `frac` plus the dense model (concrete form of
  `terms.memory`, with its packing bound)."""
  tb = table_bytes(w)
  frac = np.asarray(frac, np.float64)
  dp = np.array([x == 'data_parallel' for x in sharding], np.float64)
  tw = np.array([x == 'table_wise' for x in sharding], np.float64)
  twrw = np.array([x == 'table_row_wise' for x in sharding], np.float64)
  table_ranks, a = _ranks(p, s)
  in_hbm = dp + (1.0 - dp) * frac
  on = in_hbm * tb * (1.0 - dp)
  need = np.sum(on * (1.0 - tw - twrw)) / table_ranks
  if np.any(tw):
    # The cost model's own packing bound, in its order (load_orders).
    order = np.argsort(-(in_hbm * tb), kind='stable')
    need += float(terms.busiest_rank(on, tw, table_ranks, order))
  if np.any(twrw):
    need += _smax(np.sum(on * twrw) / table_ranks, np.max(on * twrw) / a, p=64)
  dense = float(cost_model.dense_hbm_bytes(w, hardware.as_arrays(p), s))
  return need + float(np.sum(dp * tb)) + dense


def hbm_available(p: Platform, s: Stack) -> float:
  """HBM bytes per accelerator the stack lets the plan use."""
  return float(p.accelerator.hbm_capacity) * (1.0 - float(s.hbm_reserve))


def water_fill(w: wl.Workload, capacity: float, dp_mask) -> np.ndarray:
  """Per-table HBM fractions that serve the most lookups from HBM with
  `capacity` bytes of table rows in total (data-parallel tables are
  whole and not counted).

  With hit(f) = 1 - (1 - f)^k, table t's marginal hits per byte at f are
  L_t k (1 - f)^(k-1) / B_t (L_t lookups per sample, B_t bytes). Equal
  marginals at a level lam give f_t = 1 - (lam B_t / (k L_t))^(1/(k-1)),
  clipped to [0, 1]; lam is found by bisection in log space. Uniform
  traffic (k = 1) has constant marginals: the densest tables (lookups per
  byte) fill first.
  """
  tb = table_bytes(w)
  pool = np.array([t.pooling for t in w.tables], np.float64)
  k = float(w.popularity_skew)
  free = np.asarray(dp_mask) < 0.5
  total = float(np.sum(tb[free]))
  if capacity >= total:
    return np.ones(len(tb))
  if capacity <= 0.0:
    return np.zeros(len(tb))
  density = pool / tb
  out = np.zeros(len(tb))
  if k <= 1.0 + 1e-9:
    left = capacity
    for i in np.argsort(-density, kind='stable'):
      if not free[i]:
        continue
      take = min(tb[i], left)
      out[i] = take / tb[i]
      left -= take
    return out

  def fill(log_lam):
    f = 1.0 - (np.exp(log_lam) / (k * density)) ** (1.0 / (k - 1.0))
    return np.where(free, np.clip(f, 0.0, 1.0), 0.0)

  lo, hi = np.log(k * density.min()) - 60.0, np.log(k * density.max())
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    if np.sum(fill(mid) * tb) > capacity:
      lo = mid
    else:
      hi = mid
  return fill(hi)


def fit_hbm(w, p: Platform, s: Stack, sharding) -> np.ndarray:
  """Per-table HBM fractions: the water-filling of the largest capacity
  whose busiest-rank requirement fits the HBM the stack allows."""
  dp = np.array([x == 'data_parallel' for x in sharding], np.float64)
  avail = hbm_available(p, s)
  total = float(np.sum(table_bytes(w) * (1.0 - dp)))
  frac = water_fill(w, total, dp)
  if hbm_required(w, p, s, sharding, frac) <= avail:
    return frac
  lo, hi = 0.0, total
  for _ in range(FIT_STEPS):
    mid = 0.5 * (lo + hi)
    if hbm_required(w, p, s, sharding, water_fill(w, mid, dp)) <= avail:
      lo = mid
    else:
      hi = mid
  return water_fill(w, lo, dp)


def make(
  w: wl.Workload,
  p: Platform,
  s: Stack,
  placement: str = 'auto',
  sharding: str = 'auto',
  comm_precision: str = 'fp32',
) -> Plan:
  """A plan from named choices (see the module docstring).

  placement: `auto` (hottest bytes in the HBM the stack allows, the rest
  in DDR), `hbm` (every table in HBM) or `ddr` (every table in DDR).
  sharding: one of `plan.SHARDINGS` for every table, or `auto`.
  """
  if placement not in ('auto', 'hbm', 'ddr'):
    raise InputError(
      f'unknown placement {placement!r}; valid choices: auto, hbm, ddr'
    )
  if sharding not in SHARDINGS + ('auto',):
    raise InputError(
      f'unknown sharding {sharding!r}; valid choices: auto, '
      + ', '.join(SHARDINGS)
    )
  t = w.num_tables
  if sharding != 'auto':
    return _build(w, p, s, (sharding,) * t, placement, comm_precision)
  ranks = float(p.nodes) * float(p.accelerators_per_node)
  dense = float(cost_model.dense_hbm_bytes(w, hardware.as_arrays(p), s))
  free = hbm_available(p, s) - dense
  share = min(1.0, max(0.0, free * ranks / float(table_bytes(w).sum())))
  per_table = share * table_bytes(w)
  big = 'table_row_wise' if float(p.nodes) > 1.0 else 'row_wise'
  by_size = tuple(big if b > 0.25 * free else 'table_wise' for b in per_table)
  if p.trainer == 'cpu':
    return _build(w, p, s, by_size, placement, comm_precision)
  traffic = [tb.pooling * tb.row_bytes for tb in w.tables]  # per sample
  fair = sum(traffic) / ranks
  by_traffic = tuple(
    big if x == big or y > 0.5 * fair else 'table_wise'
    for x, y in zip(by_size, traffic, strict=True)
  )
  candidates = (by_size, by_traffic, ('table_wise',) * t, ('column_wise',) * t)
  plans = [
    _build(w, p, s, c, placement, comm_precision)
    for c in dict.fromkeys(candidates)  # distinct, in order
  ]
  if len(plans) == 1:
    return plans[0]
  hw = hardware.as_arrays(p)

  def rank(pl):  # feasible first, then faster
    r = cost_model.evaluate(hw, w, pl, s)
    return (not bool(r.feasible), float(r.step_time))

  return min(plans, key=rank)


def _build(w, p, s, shardings, placement, comm_precision) -> Plan:
  """A plan of these shardings with the placement's HBM fractions."""
  t = w.num_tables
  if placement == 'hbm' or p.trainer == 'cpu':
    frac = np.ones(t)
  elif placement == 'ddr':
    frac = np.zeros(t)
  else:
    frac = fit_hbm(w, p, s, shardings)
  return Plan(
    hbm_fraction=frac,
    cpu_lookup_fraction=1.0,
    overlap=float(s.comm_overlap),
    sharding=tuple(shardings),
    column_shards=4,
    comm_precision=comm_precision,
  )
