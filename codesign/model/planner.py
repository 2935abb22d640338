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
  requirement of the busiest rank (`hbm_need`, its memory term) fits.
  This is the one HBM rule of the package, in two forms: `fit_hbm` for
  concrete platforms (bisection on the capacity, numpy) and
  `fit_hbm_traced` for traced ones (the design space's `auto` plans:
  bisection on the fill level with an implicit gradient); a test checks
  that they agree on every preset.
- Sharding (`auto`): table-wise, except for tables table-wise cannot
  balance, which are split (table-row-wise on several nodes, row-wise on
  one); the fastest feasible of four candidates by the cost model: split
  the tables whose HBM share exceeds a quarter of one accelerator's free
  HBM; split those and the tables whose traffic exceeds half of one
  rank's fair share; split none; every table column-wise.
- Hybrid (`hybrid`, HugeCTR's hybrid embedding): the tables sharded as
  `auto` shards them; the stack's hybrid embedding replicates each
  table's frequent rows inside the cost model (`terms.hybrid`), so the
  split is the software's whatever the plan.
"""

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core import memory
from codesign.core.errors import InputError
from codesign.core.smooth import safe_div
from codesign.model import cost_model, terms
from codesign.model.terms import embedding
from codesign.spec import hardware
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import SHARDINGS, Plan
from codesign.spec.stack import Stack

# Bisection steps of the HBM fit (2^-40 of the total table bytes).
FIT_STEPS = 40
# Bisection steps of the traced fit (2^-50 of the fill level's range).
TRACED_FIT_STEPS = 50


def table_bytes(w: wl.Workload) -> np.ndarray:
  """Bytes of each table with its optimizer state, shape (T,)."""
  return np.array(
    [float(tb.bytes + wl.table_state_bytes(w, tb)) for tb in w.tables]
  )


def _tables(w: wl.Workload, sharding, data_parallel=None) -> dict:
  """The cost model's per-table arrays for these shardings: names (T,),
  or relaxed weights (T, len(terms.SEARCHED_SHARDINGS)) as the cost
  model's `sharding_weights` (with the static mask of data-parallel
  tables, `terms.table_arrays_mixed`)."""
  if _named(sharding):
    return terms.table_arrays(w, (sharding, 4, 'fp32'))
  return terms.table_arrays_mixed(w, sharding, 4, data_parallel=data_parallel)


def _named(sharding) -> bool:
  """Whether `sharding` names each table's sharding (a tuple of names),
  rather than giving relaxed weights (an array, maybe traced)."""
  return isinstance(sharding, tuple) and all(
    isinstance(x, str) for x in sharding
  )


def hbm_need(
  w,
  p: Platform,
  s: Stack,
  sharding,
  frac,
  row_scale=1.0,
  data_parallel=None,
  order=None,
):
  """HBM bytes the busiest accelerator needs: its share of the tables at
  per-table HBM fractions `frac` (T,), the data-parallel replicas, the
  dense model and the stack's reservations (`terms.stack_hbm_reserved`).
  The cost model's own memory term (`terms.per_rank` over the resident
  bytes, `terms.memory`), in jnp: `p` with array leaves
  (`hardware.as_arrays`) and `frac` may be traced, and then the packing
  bound sorts the loads (as the cost model does for traced fractions);
  concrete fractions use the cost model's static order. `data_parallel`:
  with weights, the static mask of replicated tables. `order`: the
  whole tables' order along the fill curve at this level, traced
  (`fill_orders`), for traced fractions of named shardings, or
  `embedding.SORTED_VALUES` (traced loads sorted for their value only)."""
  t = _tables(w, sharding, data_parallel)
  st = terms.setup(p, w, s)
  dp = t['data_parallel']
  tb = t['table_bytes'] * row_scale
  in_hbm = dp + (1.0 - dp) * frac
  on = in_hbm * tb * (1.0 - dp)
  if order is None and not isinstance(frac, jax.core.Tracer):
    order = np.argsort(-(np.asarray(in_hbm) * t['table_bytes']), kind='stable')
  tables = terms.per_rank(on, t, st, order)
  reserved = terms.stack_hbm_reserved(w, s, t, st, in_hbm, row_scale)
  return tables + jnp.sum(dp * tb) + terms.dense_hbm_bytes(w, p, s) + reserved


def hbm_required(w, p: Platform, s: Stack, sharding, frac, row_scale=1.0):
  """`hbm_need` of a concrete platform and plan, in bytes (float).

  Jitted, once per workload (up to its popularity skew, which no term of
  the need reads) and kind of platform (the row scale is an argument):
  the platform's labels are dropped (`hardware.unlabelled`) and named
  shardings are passed as one-hot weights (`terms.table_arrays_mixed`,
  the same bytes), so that every preset, size, skew and candidate
  sharding shares one compile (one more per set of data-parallel
  tables, a static mask)."""
  return _hbm_required_fn(w, p, s, sharding, row_scale)(frac)


def _hbm_required_fn(w, p: Platform, s: Stack, sharding, row_scale=1.0):
  """`frac -> hbm_required(w, p, s, sharding, frac, row_scale)`, with the
  platform's arrays made once (a bisection asks it many times); the
  platform and stack without their labels, so that one compile serves
  the platforms and releases that differ only in them."""
  weights = terms.one_hot_sharding(sharding)
  hw = hardware.unlabelled(hardware.as_numpy(p))
  s = stack_lib.unlabelled(s)
  # No term of the need reads the skew: one program serves every skew
  # (a test checks that the programs are the same).
  w = dataclasses.replace(w, popularity_skew=1.0)
  fn = _hbm_need_jit(w, terms.data_parallel_mask(sharding))
  return lambda frac: float(
    fn(hw, s, weights, np.asarray(frac, np.float64), float(row_scale))
  )


@functools.cache
def _hbm_need_jit(w: wl.Workload, data_parallel: tuple):
  return jax.jit(
    lambda p, s, weights, frac, row_scale: hbm_need(
      w, p, s, weights, frac, row_scale, data_parallel
    )
  )


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
  pool = np.array([tb.pooling for tb in w.tables], np.float64)
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

  def fill(log_lam):  # log_lam (...): fractions (..., T)
    lam = np.exp(np.asarray(log_lam))[..., None]
    f = 1.0 - (lam / (k * density)) ** (1.0 / (k - 1.0))
    return np.where(free, np.clip(f, 0.0, 1.0), 0.0)

  def over(levels):  # level -> whether its fill exceeds the capacity
    return dict(zip(levels, np.sum(fill(levels) * tb, axis=-1) > capacity))

  lo, hi = np.log(k * density.min()) - 60.0, np.log(k * density.max())
  for _ in range(200 // _FILL_LEVELS):
    judged = over(_bisection_tree(lo, hi, _FILL_LEVELS))
    for _ in range(_FILL_LEVELS):
      mid = 0.5 * (lo + hi)
      bracket = (mid, hi) if judged[mid] else (lo, mid)
      if bracket == (lo, hi):  # no float between them: every later step
        return fill(hi)  # would leave the bracket as it is
      lo, hi = bracket
  return fill(hi)


# Steps of `water_fill`'s bisection judged in one numpy call: the 2^L - 1
# midpoints they can reach (numpy's cost per call, not the arithmetic, is
# most of a step on 64 tables: 0.42 to 0.30 ms a fill, measured in
# WORKSPACE).
_FILL_LEVELS = 4


def _bisection_tree(lo: float, hi: float, levels: int) -> list:
  """Every midpoint a bisection of [lo, hi] can visit in its next
  `levels` steps, computed as it computes them (0.5 (lo + hi))."""
  out, brackets = [], [(lo, hi)]
  for _ in range(levels):
    nxt = []
    for a, b in brackets:
      m = 0.5 * (a + b)
      out.append(m)
      nxt += [(a, m), (m, b)]
    brackets = nxt
  return out


def fit_hbm(w, p: Platform, s: Stack, sharding, row_scale=1.0) -> np.ndarray:
  """Per-table HBM fractions (T,): the water-filling of the largest
  capacity whose busiest-rank requirement (`hbm_need`) fits the HBM the
  stack allows. `row_scale` multiplies every table's rows (as in
  `cost_model.evaluate`). The concrete form of the rule; the traced form
  is `fit_hbm_traced`."""
  dp = np.array([x == 'data_parallel' for x in sharding], np.float64)
  avail = hbm_available(p, s)
  total = float(np.sum(table_bytes(w) * (1.0 - dp)))
  frac = water_fill(w, total, dp)

  need = _hbm_required_fn(w, p, s, sharding, row_scale)

  def fits(f):
    return need(f) <= avail

  if fits(frac):
    return frac
  lo, hi = 0.0, total
  for _ in range(FIT_STEPS):
    mid = 0.5 * (lo + hi)
    if fits(water_fill(w, mid, dp)):
      lo = mid
    else:
      hi = mid
  return water_fill(w, lo, dp)


def fill_curve(w: wl.Workload, dp_mask, u, xp=jnp):
  """The water-filling fractions (T,) at fill level u in [0, 1] (0: no
  rows in HBM, 1: every row), increasing in u, in jnp (u may be traced).

  With skew k > 1 the level is the marginal hits per byte lam of
  `water_fill`, log-linear in u between the level that holds nothing
  (log k max density) and one 40 (k - 1) e-folds below the smallest (every
  fraction within e^-40 of 1). With k = 1 it is the capacity, u times the
  bytes of the tables that are not data-parallel, filled densest first.
  Fractions do not depend on the tables' absolute size, so one curve
  serves every `row_scale`. `xp`: jnp, or numpy for float64 levels known
  when tracing.
  """
  c = _curve(w, dp_mask)
  if c.uniform:
    capacity = u * c.capacity
    return xp.clip((capacity - c.before) / c.tb, 0.0, 1.0) * c.free
  log_level = c.top - u * (c.top - c.bottom)
  k = c.skew
  f = 1.0 - xp.exp((log_level - np.log(k * c.density)) / (k - 1.0))
  return xp.clip(f, 0.0, 1.0) * c.free


class _Curve(NamedTuple):
  """The constants of `fill_curve` for a workload and data-parallel mask
  (numpy, static): `fill_curve` and the breaks of `fill_orders` read the
  same ones. Per table (T,): tb (bytes), free (1: not data-parallel),
  density (lookups per byte); with uniform traffic (skew 1) `before`
  (the bytes filled before the table, densest first) and `capacity` (the
  bytes of the free tables); with skew k > 1 the levels `top` (nothing
  held) and `bottom` (everything within e^-40)."""

  skew: float
  uniform: bool
  tb: np.ndarray
  free: np.ndarray
  density: np.ndarray
  before: np.ndarray | None
  capacity: float | None
  top: float | None
  bottom: float | None


def _curve(w: wl.Workload, dp_mask) -> _Curve:
  tb = table_bytes(w)
  pool = np.array([tb.pooling for tb in w.tables], np.float64)
  k = float(w.popularity_skew)
  free = (np.asarray(dp_mask) < 0.5).astype(np.float64)
  density = pool / tb
  if k <= 1.0 + 1e-9:
    order = np.argsort(-density, kind='stable')
    sizes = (tb * free)[order]
    before = np.empty_like(tb)
    before[order] = np.cumsum(sizes) - sizes
    capacity = float(np.sum(tb * free))
    return _Curve(k, True, tb, free, density, before, capacity, None, None)
  top = math.log(k * float(density.max()))
  bottom = math.log(k * float(density.min())) - 40.0 * max(k - 1.0, 1.0)
  return _Curve(k, False, tb, free, density, None, None, top, bottom)


# Most candidate crossings `fill_orders` tabulates (about T^2 / 2 for T
# tables): beyond, the fit ranks the traced loads instead.
MAX_ORDER_BREAKS = 1 << 15


@functools.cache
def fill_orders(w: wl.Workload, names: tuple):
  """(breaks (B,), orders (B + 1, W)): the order, largest first (ties by
  index), of the W whole tables' HBM bytes along `fill_curve`, for fill
  levels u in (breaks[i - 1], breaks[i]] (`jnp.searchsorted(breaks, u)`),
  or None (no whole tables, more candidate breaks than MAX_ORDER_BREAKS,
  or orders that a grid of 4,097 levels does not confirm).

  Each table's bytes along the curve are tb (1 - a z)^+ with z =
  exp(level / (k - 1)) monotone in u (skew k > 1), or (u C - before)
  clipped to [0, tb] (k = 1), so two tables swap only where their lines
  cross or one bends: those u are the candidate breaks, and the order
  between two of them is the order at their midpoint. A traced fit then
  reads the loads in this order (`embedding.busiest_rank`'s near-sorted
  reader) instead of ranking them by T^2 comparisons at each of the
  bisection's 49 steps."""
  t = _tables(w, names)
  whole = np.flatnonzero(np.asarray(t['table_wise']) > 0.5)
  if len(whole) == 0:
    return None
  cand = _order_breaks(w, t['data_parallel'], whole)
  if cand is None:
    return None
  cand = np.unique(cand[(cand > 0.0) & (cand < 1.0)])
  edges = np.concatenate([[0.0], cand, [1.0]])
  mids = 0.5 * (edges[:-1] + edges[1:])
  loads = _whole_loads(w, t, whole, mids)
  orders = np.argsort(-loads, axis=-1, kind='stable').astype(np.int32)
  keep = np.ones(len(orders), bool)  # drop breaks where nothing swaps
  keep[1:] = np.any(orders[1:] != orders[:-1], axis=1)
  breaks, orders = cand[keep[1:]], orders[keep]
  # A check on a grid of levels (a break lost to rounding would show):
  # else the ranking.
  grid = np.linspace(0.0, 1.0, 4097)
  loads = _whole_loads(w, t, whole, grid)
  read = np.take_along_axis(loads, orders[np.searchsorted(breaks, grid)], -1)
  if not np.allclose(read, -np.sort(-loads, axis=-1), rtol=1e-9, atol=0.0):
    return None
  return breaks, orders


def _whole_loads(w: wl.Workload, t: dict, whole, u) -> np.ndarray:
  """The whole tables' HBM bytes (U, W) at fill levels u (U,), float64."""
  fill = fill_curve(w, t['data_parallel'], np.asarray(u)[:, None], xp=np)
  return fill[:, whole] * np.asarray(t['table_bytes'])[whole]


def _order_breaks(w: wl.Workload, dp_mask, whole) -> np.ndarray | None:
  """Fill levels u where two whole tables' bytes along `fill_curve` may
  swap (`fill_orders`), or None when there are too many."""
  n = len(whole)
  if n * (n + 1) > 2 * MAX_ORDER_BREAKS:
    return None
  c = _curve(w, dp_mask)
  tb = c.tb[whole]
  i, j = np.triu_indices(n, 1)
  if c.uniform:
    # Bends at before and before + tb; a rising line meets a flat one
    # at before_s + tb_t.
    before = c.before[whole]
    caps = np.concatenate(
      [before, before + tb, before[i] + tb[j], before[j] + tb[i]]
    )
    return caps / c.capacity
  k = c.skew
  # a = exp(e) scaled by exp(-max e) (a skew near 1 would overflow it);
  # z scales the other way, so log z = log z' - max e.
  e = -np.log(k * c.density[whole]) / (k - 1.0)
  a = np.exp(e - e.max())
  with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
    cross = (tb[i] - tb[j]) / (tb[i] * a[i] - tb[j] * a[j])
    z = np.concatenate([cross, 1.0 / a])
  z = z[np.isfinite(z) & (z > 0)]
  level = (k - 1.0) * (np.log(z) - e.max())
  return (c.top - level) / (c.top - c.bottom)


def bisect_level(excess):
  """(level, nothing, everything): the fill level in [0, 1] where
  `excess` (increasing) crosses zero, from below (`TRACED_FIT_STEPS`
  bisection steps), whether nothing fits (E(0) > 0) and whether
  everything does (E(1) <= 0).

  E at 0, 1/2 and 1 is one batched call (the bisection's first step and
  both ends): one copy of E in the program where there were three (the
  default chunk's compile about 5% shorter; its run time and the relaxed
  rate unchanged, measured in WORKSPACE, "One copy of the forward
  model"). The same values, bit for bit.

  The loop stops early once no step can move the level: the bracket's
  midpoint rounds onto one of its ends (float32 reaches that after
  about 25 steps where the level is near 1, float64 not within the 50).
  Where nothing fits the bracket keeps shrinking towards 0 and runs all
  the steps (the caller discards that level). Past the stop a step
  leaves `lo` as it is (a midpoint equal to `lo` or `hi` is a point
  already judged), so the level is the full loop's, bit for bit (a
  test), but where everything fits: there the full loop's last step
  lands on 1 (never judged) and this one stays an ulp below, and the
  caller returns every row either way. Under `vmap` the loop runs until
  every design of the batch is done."""

  ends = jax.vmap(excess)(jnp.array([0.0, 0.5, 1.0]))
  nothing = ends[0] > 0.0

  def moving(state):
    step, lo, hi = state
    mid = 0.5 * (lo + hi)
    return (step < TRACED_FIT_STEPS) & (mid > lo) & (mid < hi)

  def body(state):
    step, lo, hi = state
    mid = 0.5 * (lo + hi)
    over = excess(mid) > 0.0
    return step + 1, jnp.where(over, lo, mid), jnp.where(over, mid, hi)

  # The first step is outside the loop so that the carry already has the
  # type the body returns (inside shard_map the bracket becomes varying).
  over = ends[1] > 0.0
  bracket = jnp.where(over, 0.0, 0.5), jnp.where(over, 0.5, 1.0)
  _, lo, _ = jax.lax.while_loop(moving, body, (jnp.int32(1), *bracket))
  return lo, nothing, ends[2] <= 0.0


def fit_hbm_traced(w, p: Platform, s: Stack, sharding, row_scale=1.0):
  """The rule of `fit_hbm` in jnp, for a traced platform (`p` with array
  leaves) and row scale: the fill level u of `fill_curve` at which
  `hbm_need` equals the HBM the stack allows, found by bisection and
  differentiated implicitly (du/dx = -(dE/dx) /
  (dE/du) for the excess E), so that a search sees what more HBM or more
  ranks buy. Every row when everything fits; none when even the dense
  model does not fit. Returns fractions (T,)."""
  dp = _tables(w, sharding)['data_parallel']
  avail = p.accelerator.hbm_capacity * (1.0 - s.hbm_reserve)
  named = _named(sharding)
  weights = None if named else sharding
  args = (p, s, weights, row_scale, avail)

  def excess(u, values_only=False):
    return _excess_jit(w, sharding if named else None, values_only)(u, *args)

  # Implicit differentiation written out (`jax.lax.custom_root` does the
  # same but fails under shard_map's varying-axes check): the value is the
  # bisected level, the gradient -(dE/dx) / (dE/du) at that level.
  level, nothing, everything = jax.lax.stop_gradient(
    bisect_level(functools.partial(excess, values_only=True))
  )
  e, slope = jax.jvp(excess, (level,), (jnp.ones_like(level),))
  u = level - safe_div(
    e - jax.lax.stop_gradient(e), jax.lax.stop_gradient(slope)
  )
  frac = fill_curve(w, dp, u)
  return jnp.where(everything, 1.0, jnp.where(nothing, 0.0, frac))


@functools.cache
def _excess_jit(w: wl.Workload, names: tuple | None, values_only: bool):
  """`fit_hbm_traced`'s excess E(u) = `hbm_need` at fill level u minus
  the HBM allowed, jitted: the fit asks it three times (the ends and the
  bisection's first step batched, its loop, the slope), and a jitted
  function is traced once and its jaxpr reused (differentiated and
  batched once), where the plain function was traced at every call, the
  largest share of the search's trace. The same operations, so the same
  bits. `names`: the shardings by name, or None for relaxed weights (an
  argument). `values_only`: E's value alone is asked (the bisection,
  under stop_gradient), so loads without a static order are sorted by
  `embedding.SORTED_VALUES`'s network: the same values as their ranks,
  cheaper, without the ranks' gradient at ties."""

  orders = None if names is None else fill_orders(w, names)

  def excess(u, p, s, weights, row_scale, avail):
    sharding = names if weights is None else weights
    dp = _tables(w, sharding)['data_parallel']
    frac = fill_curve(w, dp, u)
    order = embedding.SORTED_VALUES if values_only else None
    if orders is not None:
      breaks, table = orders
      order = jnp.asarray(table)[jnp.searchsorted(breaks, u)]
    return hbm_need(w, p, s, sharding, frac, row_scale, order=order) - avail

  return jax.jit(excess)


# Memory of a plan per pair of tables: the HBM fit's packing bound reads
# the ordered loads of every table against every other. Measured peak RSS
# of evaluate's auto plan on big_basin, 1,000 to 16,000 tables: 27-31
# bytes per pair beyond 0.36 GB (16,000 tables: 8.2 GB, 415 s); rounded
# up.
BYTES_PER_TABLE_PAIR = 40


def check_memory(w: wl.Workload) -> None:
  """Refuses, before compiling, a plan of more tables than this
  machine's memory holds (`codesign.core.memory.check`).

  Raises:
    InputError: naming the tables and both amounts.
  """
  t = w.num_tables
  memory.check(
    BYTES_PER_TABLE_PAIR * t * t,
    f'a plan of {t:,} tables',
    'the number of tables of the workload',
  )


def make(
  w: wl.Workload,
  p: Platform,
  s: Stack,
  placement: str | None = None,
  sharding: str | None = None,
  comm_precision: str = 'fp32',
  row_scale: float = 1.0,
) -> Plan:
  """A plan from named choices (see the module docstring).

  placement: `auto` (hottest bytes in the HBM the stack allows, the rest
  in DDR), `hbm` (every table in HBM) or `ddr` (every table in DDR);
  None: the stack planner's (`STACK_PLANS`).
  sharding: one of `plan.SHARDINGS` for every table, `auto`, `hybrid`
  (`auto` for a stack whose embedding is hybrid) or `intel`
  (`intel_shardings`); None: the plan the stack's software makes
  (`Stack.planner`, `STACK_PLANS`).
  row_scale: the plan is for `w` with every table's rows times this
  (as `cost_model.evaluate(..., row_scale)` costs it).
  """
  own_placement, own_sharding = STACK_PLANS[s.planner]
  placement = own_placement if placement is None else placement
  sharding = own_sharding if sharding is None else sharding
  if placement not in ('auto', 'hbm', 'ddr'):
    raise InputError(
      f'unknown placement {placement!r}; valid choices: auto, hbm, ddr'
    )
  if sharding not in SHARDINGS + ('auto', 'hybrid', 'intel'):
    raise InputError(
      f'unknown sharding {sharding!r}; valid choices: auto, hybrid, intel, '
      + ', '.join(SHARDINGS)
    )
  if sharding == 'hybrid' and s.planner != 'hybrid':
    raise InputError(
      "sharding 'hybrid' is HugeCTR's hybrid embedding, which stack "
      f'{s.name!r} does not run; name a stack whose planner is hybrid '
      '(hugectr@2021-05, hugectr@2021, hugectr@2022)'
    )
  if placement == 'auto':  # the HBM fit
    check_memory(w)
  if sharding == 'intel':
    shardings = intel_shardings(w, p)
    return _build(w, p, s, shardings, placement, comm_precision, row_scale)
  if sharding not in ('auto', 'hybrid'):
    return _build(
      w, p, s, (sharding,) * w.num_tables, placement, comm_precision, row_scale
    )
  candidates = auto_candidates(w, p, s, row_scale)
  plans = [
    _build(w, p, s, c, placement, comm_precision, row_scale)
    for c in dict.fromkeys(candidates)  # distinct, in order
  ]
  if len(plans) == 1:
    return plans[0]

  def rank(pl):  # feasible first, then faster
    feasible, step_time = feasible_and_step_time(w, p, s, pl, row_scale)
    return (not feasible, step_time)

  return min(plans, key=rank)


# Stack.planner -> the (placement, sharding) its software makes.
STACK_PLANS = {
  # TorchRec's planner (EmbeddingShardingPlanner: the cheapest feasible
  # sharding of each table by its cost estimates) and HugeCTR's embedding
  # collection (sharding plan `hier_auto`) balance tables by their cost;
  # the auto plan's fastest feasible candidate stands for them.
  'auto': ('auto', 'auto'),
  # HugeCTR's HybridSparseEmbedding: the auto plan, each table's frequent
  # rows replicated by the cost model (`terms.hybrid`).
  'hybrid': ('auto', 'hybrid'),
  # NVIDIA DeepLearningExamples DLRM dlrm/utils/distributed.py
  # get_device_mapping: every table whole on one GPU, all in HBM.
  'table_placement': ('hbm', 'table_wise'),
  # Intel's MLPerf DLRM (training_results_v0.7 Intel 1-node-4s-cpx-pytorch
  # README): large tables model-parallel, small ones data-parallel.
  'intel': ('hbm', 'intel'),
}
# Tables a rank holds whole under Intel's split: "4 ranks x ...; small
# tables data-parallel, large tables model-parallel (4 per rank)"
# (mlcommons/training_results_v0.7 Intel/benchmarks/dlrm/
# 1-node-4s-cpx-pytorch/README.md, calibration_cases.json C7).
INTEL_TABLES_PER_RANK = 4


def intel_shardings(w: wl.Workload, p: Platform) -> tuple:
  """Intel's split: the `INTEL_TABLES_PER_RANK` x ranks largest tables
  table-wise (model-parallel), the rest data-parallel."""
  ranks = float(p.nodes) * float(terms.ranks_per_node(p))
  big = min(w.num_tables, int(round(INTEL_TABLES_PER_RANK * ranks)))
  order = np.argsort([-t.rows for t in w.tables], kind='stable')
  whole = set(order[:big].tolist())
  return tuple(
    'table_wise' if i in whole else 'data_parallel' for i in range(w.num_tables)
  )


def auto_candidates(w: wl.Workload, p: Platform, s: Stack, row_scale) -> tuple:
  """The `auto` rule's candidate shardings (module docstring); a CPU
  trainer has one."""
  n_tables = w.num_tables
  ranks = float(p.nodes) * float(p.accelerators_per_node)
  dense = float(cost_model.dense_hbm_bytes(w, hardware.as_arrays(p), s))
  free = hbm_available(p, s) - dense
  tb = row_scale * table_bytes(w)
  share = min(1.0, max(0.0, free * ranks / float(tb.sum())))
  per_table = share * tb
  # Table-row-wise where there is more than one scale-up domain (its
  # rows split over one domain's fabric); row-wise inside one domain.
  # (A CPU trainer's domain is one node: `terms.domain_hosts`.)
  domains = float(p.nodes) / float(terms.domain_hosts(hardware.as_arrays(p)))
  big = 'table_row_wise' if domains > 1.0 else 'row_wise'
  by_size = tuple(big if b > 0.25 * free else 'table_wise' for b in per_table)
  if p.trainer == 'cpu':
    return (by_size,)
  traffic = [tb.pooling * tb.row_bytes for tb in w.tables]  # per sample
  fair = sum(traffic) / ranks
  by_traffic = tuple(
    big if x == big or y > 0.5 * fair else 'table_wise'
    for x, y in zip(by_size, traffic, strict=True)
  )
  return (
    by_size,
    by_traffic,
    ('table_wise',) * n_tables,
    ('column_wise',) * n_tables,
  )


def feasible_and_step_time(w, p: Platform, s: Stack, plan: Plan, row_scale=1.0):
  """(feasible, step time in s) of a concrete plan, from the program of
  `cost_model.evaluate_design` (labels dropped, shardings as one-hot
  weights): ranking the candidates of every preset shares one compile
  per workload and stack, and the report of the plan chosen shares it
  too."""
  r = cost_model.evaluate_design(p, w, plan, s, row_scale)
  return bool(r.feasible), float(r.step_time)


def _build(w, p, s, shardings, placement, comm_precision, row_scale) -> Plan:
  """A plan of these shardings with the placement's HBM fractions."""
  n_tables = w.num_tables
  if placement == 'hbm' or p.trainer == 'cpu':
    frac = np.ones(n_tables)
  elif placement == 'ddr':
    frac = np.zeros(n_tables)
  else:
    frac = fit_hbm(w, p, s, shardings, row_scale)
  return Plan(
    hbm_fraction=frac,
    cpu_lookup_fraction=1.0,
    overlap=float(s.comm_overlap),
    sharding=tuple(shardings),
    column_shards=4,
    comm_precision=comm_precision,
  )
