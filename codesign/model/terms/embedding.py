"""Embedding lookups and row updates per memory tier: the HBM-resident
rows (cache curve, distinct rows, update paths), the busiest rank when
whole tables pack unevenly, the DDR-resident rows on the CPU sockets or
over the host link, and the pooled vectors sent to the accelerators."""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core.smooth import safe_div, smooth_max
from codesign.model.terms import hybrid
from codesign.model.terms.shared import STREAM_EFFICIENCY, Setup, host_link_rate
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

# Gauss-Legendre nodes of the distinct-row integral.
_QUAD_NODES = 16
# Packing bounds in `busiest_rank` (j = 0 .. J-1): exact while a rank
# holds at most J whole tables; beyond, the share bound sum/R is within
# a factor (1 + R/T) <= 1 + 1/J of the packing (each bound costs a
# batched gather, and the model must stay fast).
_MAX_PACKING_BOUNDS = 4
# `busiest_rank`'s `order` for traced loads whose value alone is asked
# (the HBM fit's bisection, under stop_gradient): the loads sorted by a
# network of min/max, where the ranks' T^2 comparisons keep the sorted
# values' gradient.
SORTED_VALUES = 'sorted_values'
# Radix-sort traffic per sorted id: about 4 passes (8-bit digits over the
# ~25 bits of a table's row range), each reading and writing the key.
SORT_PASSES = 4
# FBGEMM TBE block penalties for narrow shards (TorchRec planner
# constants.py: HALF_BLOCK_PENALTY 1.15 below 128 columns,
# QUARTER_BLOCK_PENALTY 1.75 below 64; FULL_BLOCK_EMB_DIM 128).
FULL_BLOCK_DIM = 128
HALF_BLOCK_PENALTY = 1.15
QUARTER_BLOCK_PENALTY = 1.75


@functools.cache
def table_arrays(
  w: wl.Workload, plan_static: tuple, granules: tuple = (64, 64)
) -> dict[str, np.ndarray]:
  """Static per-table arrays (length T); `granules` are the (HBM, DDR)
  access sizes in bytes."""
  sharding, column_shards, _ = plan_static
  rows = np.array([tb.rows for tb in w.tables], dtype=np.float64)
  dim = np.array([tb.dim for tb in w.tables], dtype=np.float64)
  pool = np.array([tb.pooling for tb in w.tables], dtype=np.float64)
  row_bytes = np.array([tb.row_bytes for tb in w.tables], dtype=np.float64)
  state_elems = np.array(
    [wl.optimizer_state_elems_per_row(w.optimizer, tb.dim) for tb in w.tables],
    dtype=np.float64,
  )
  masks = {
    s: np.array([x == s for x in sharding], dtype=np.float64)
    for s in (
      'table_wise',
      'row_wise',
      'table_row_wise',
      'column_wise',
      'data_parallel',
    )
  }
  shards = 1.0 + masks['column_wise'] * (column_shards - 1.0)
  shard_dim = dim / shards
  penalty = np.where(
    shard_dim >= FULL_BLOCK_DIM,
    1.0,
    np.where(shard_dim >= FULL_BLOCK_DIM / 2, HALF_BLOCK_PENALTY, 1.0),
  )
  penalty = np.where(
    shard_dim < FULL_BLOCK_DIM / 2, QUARTER_BLOCK_PENALTY, penalty
  )

  def touched(granule):
    # Bytes moved per lookup (gather) and per row update at `granule`.
    gather, update = [], []
    for tb, k in zip(w.tables, shards, strict=True):
      k = int(k)
      g = k * wl.granule_bytes(tb.row_bytes / k, granule)
      st = 4 * wl.optimizer_state_elems_per_row(w.optimizer, tb.dim)
      # Adam keeps two state vectors; each is touched separately.
      vectors = 2 if w.optimizer == 'adam' else 1
      s = vectors * k * wl.granule_bytes(st / vectors / k, granule)
      s = s if st else 0.0
      gather.append(g)
      update.append(2.0 * (g + s))  # read and write row and state
    return np.array(gather), np.array(update)

  return {
    'rows': rows,
    'dim': dim,
    'pool': pool,
    'pool_exponent': np.maximum(pool, 1.0),
    'row_bytes': row_bytes,
    'table_bytes': rows * (row_bytes + 4.0 * state_elems),
    # Copies of each id sent forward: one per column shard of a
    # column-wise table, one otherwise.
    'id_copies': shards,
    # FBGEMM's penalty for shards narrower than its 128-wide block.
    'block_penalty': penalty,
    'touched_hbm': touched(granules[0]),
    'touched_ddr': touched(granules[1]),
    **masks,
  }


# The shardings a search chooses per table (`table_arrays_mixed`): the
# four the auto planner's candidates use. Data-parallel replication is
# left out: it changes the allreduce's bucket count and the kernel count
# (integers), so it stays a static choice.
SEARCHED_SHARDINGS = ('table_wise', 'row_wise', 'table_row_wise', 'column_wise')


def table_arrays_mixed(
  w: wl.Workload,
  weights,
  column_shards: int,
  granules: tuple = (64, 64),
  data_parallel=None,
) -> dict:
  """`table_arrays` for a relaxed per-table sharding.

  weights: (T, len(SEARCHED_SHARDINGS)) per-table weights (rows sum to 1,
  may be traced; a data-parallel table's row is zeros).
  data_parallel: None (no table replicated) or a static mask (T,) of the
  data-parallel tables, as `table_arrays` has it.

  Every per-table array that depends on the sharding is linear in the
  weights between its unsharded and column-sharded values (copies of each
  id, FBGEMM's block penalty, bytes touched), and the masks are the
  weights themselves, so a one-hot row (or a zero row and the
  data-parallel mask) is exactly that table's sharding (`table_arrays`).
  """
  n_tables = w.num_tables
  whole, cols = (
    table_arrays(w, ((name,) * n_tables, column_shards, 'fp32'), granules)
    for name in ('table_wise', 'column_wise')
  )
  weights = jnp.asarray(weights)
  cw = weights[:, SEARCHED_SHARDINGS.index('column_wise')]

  def mixed(a, b):
    return a + cw * (b - a)

  out = dict(whole)
  for key in ('id_copies', 'block_penalty'):
    out[key] = mixed(whole[key], cols[key])
  for key in ('touched_hbm', 'touched_ddr'):
    out[key] = tuple(
      mixed(a, b) for a, b in zip(whole[key], cols[key], strict=True)
    )
  for i, name in enumerate(SEARCHED_SHARDINGS):
    out[name] = weights[:, i]
  out['data_parallel'] = (
    np.zeros(n_tables)
    if data_parallel is None
    else np.asarray(data_parallel, np.float64)
  )
  return out


def sharding_names(weights) -> tuple[str, ...]:
  """The sharding of each table with the largest weight (T,) (concrete
  weights (T, len(SEARCHED_SHARDINGS)))."""
  return tuple(
    SEARCHED_SHARDINGS[int(i)] for i in np.argmax(np.asarray(weights), axis=1)
  )


def one_hot_sharding(names) -> np.ndarray:
  """Per-table weights (T, len(SEARCHED_SHARDINGS)) that are exactly the
  named shardings (the inverse of `sharding_names`); a data-parallel
  table's row is zeros (its mask is `table_arrays_mixed`'s
  `data_parallel`)."""
  k = len(SEARCHED_SHARDINGS)
  rows = np.vstack([np.eye(k), np.zeros(k)])
  index = {n: i for i, n in enumerate(SEARCHED_SHARDINGS + ('data_parallel',))}
  return rows[[index[n] for n in names]]


def data_parallel_mask(names) -> tuple[bool, ...]:
  """Which tables the named shardings replicate (static, hashable)."""
  return tuple(n == 'data_parallel' for n in names)


def present(mask) -> bool:
  """Whether a sharding's term is needed (static): always for traced or
  relaxed masks, else when some table has that sharding."""
  if isinstance(mask, np.ndarray):
    return bool(np.any(mask))
  return True


def hbm_hits(w: wl.Workload, frac, skew=None):
  """Share of lookups served by the hottest `frac` of each table's rows:
  hit(f) = 1 - (1 - f)^k, k = `popularity_skew` (or `skew`, which may be
  traced)."""
  k = w.popularity_skew if skew is None else skew
  return 1.0 - (1.0 - frac) ** k


@functools.cache
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
  x, wt = np.polynomial.legendre.leggauss(n)
  return 0.5 * (x + 1.0), 0.5 * wt  # on [0, 1]


def distinct_rows(rows, lookups, skew: float, lo, hi):
  """Expected distinct rows touched among the rows ranked in [lo, hi).

  `lookups` draws over `rows` rows whose popularity follows the cache
  curve hit(f) = 1 - (1 - f)^k: the row at rank fraction x is drawn with
  probability k (1 - x)^(k - 1) / rows per lookup. A row is touched
  unless every draw misses it:
    distinct = rows * integral_lo^hi [1 - exp(-lookups k (1 - x)^(k-1)
    / rows)] dx,
  by Gauss-Legendre quadrature. Uniform traffic (k = 1) gives the
  classical rows (1 - exp(-lookups / rows)) over the whole table; a
  traced skew takes the quadrature (exact for k = 1 too, up to
  rounding). Shapes broadcast (per table).
  """
  if isinstance(skew, int | float) and skew == 1.0:  # uniform: constant
    rate = safe_div(jnp.asarray(lookups), jnp.asarray(rows))
    return rows * -jnp.expm1(-rate) * (jnp.asarray(hi) - jnp.asarray(lo))
  nodes, wt = _gauss_legendre(_QUAD_NODES)
  lo = jnp.asarray(lo)[..., None]
  hi = jnp.asarray(hi)[..., None]
  x = lo + (hi - lo) * nodes
  density = skew * jnp.maximum(1.0 - x, 0.0) ** (skew - 1.0)
  rate = safe_div(jnp.asarray(lookups)[..., None], jnp.asarray(rows)[..., None])
  touched = -jnp.expm1(-rate * density)
  return rows * jnp.sum(wt * touched, axis=-1) * (hi - lo)[..., 0]


def busiest_rank(load, whole, ranks, order):
  """Load of the busiest of `ranks` ranks that hold whole tables.

  `load` (..., T) is each table's load (several loads at once along the
  leading axes), `whole` (T,) masks the tables placed whole (static; or
  a search's relaxed per-table weights, traced: see below), and
  `order` ((..., T) or (T,), static) orders the tables from the largest
  load down. A greedy planner cannot beat the packing bounds: every
  rank's share sum/R, and for each j the (jR + 1) largest whole tables,
  of which some rank holds j + 1, so at least (j + 1) times the
  (jR + 1)-th largest. (26 equal tables on 8 ranks: 4 on one rank, not
  3.25.) The bounds combine by a smooth maximum; j runs to
  `_MAX_PACKING_BOUNDS` - 1 (beyond, the share bound dominates but for
  very uneven tables). The largest table is the exact maximum (j = 0);
  for j >= 1 the ordered loads of the whole tables are read at the
  position jR by a Catmull-Rom spline over the four nearest tables: the
  loads themselves at whole positions, continuously differentiable in R
  between them (a linear interpolation has a corner at every integer R,
  where every buildable design sits). Positions past the last table
  saturate smoothly (softplus) and read zero. The order is static, not a
  sort of the traced loads (a sort per design halved the batched model's
  speed): `load_orders` derives it from the plan's HBM fractions when
  they are concrete and from the tables' static sizes otherwise. `order`
  None sorts the loads instead (the traced HBM fit of
  `codesign.model.planner`, whose fractions move the order), by their
  ranks; `SORTED_VALUES` sorts them by a min/max network, the same
  values but not the ranks' gradient at ties (for a value under
  stop_gradient).
  """
  values_only = isinstance(order, str) and order == SORTED_VALUES
  if values_only:
    order = None
  if isinstance(whole, np.ndarray):
    whole = whole > 0.5
    idx = np.flatnonzero(whole)
    x = jnp.asarray(load)[..., idx]
    n_tables = len(idx)
    count = float(n_tables)
  else:
    # Relaxed (traced) masks: every table, its load weighted by how much
    # of it is placed whole; the loads are sorted (order None).
    x = jnp.asarray(load) * whole
    n_tables = x.shape[-1]
    count = jnp.sum(whole, axis=-1)[..., None]
    order = None
  total = jnp.sum(x, axis=-1) / ranks
  bounds = [total[..., None], jnp.max(x, axis=-1)[..., None]]
  j = np.arange(1, min(n_tables, _MAX_PACKING_BOUNDS), dtype=np.float64)
  if len(j) and order is None and values_only:
    read = _reader_padded(sorted_values(x))
  elif len(j) and order is None:
    read = _reader_by_rank(x)  # traced loads: no sort
  elif len(j) and isinstance(order, jax.Array):
    # A traced order of the whole tables (the HBM fit's `fill_orders`):
    # right but near crossings, where rounding may swap neighbours.
    read = _reader_padded(_settled(jnp.take(x, order, axis=-1)))
  elif len(j):
    # The order of the whole tables alone, as positions within `idx`.
    where = np.full(len(whole), -1)
    where[idx] = np.arange(n_tables)
    order = np.broadcast_to(np.asarray(order), jnp.shape(load))
    kept = where[order]
    kept = kept[kept >= 0].reshape(order.shape[:-1] + (n_tables,))
    read = _reader_padded(jnp.take_along_axis(x, kept, axis=-1))

  if len(j):
    gap = count - j * ranks
    pos = count - 0.25 * jax.nn.softplus(4.0 * gap)  # smooth min(jR, T)
    pos = jnp.maximum(pos, 0.0)
    below = jnp.floor(pos)
    u = pos - below
    i = below.astype(jnp.int32) + 1  # index of position `below` in padded
    p0, p1, p2, p3 = read(i - 1), read(i), read(i + 1), read(i + 2)
    at = p1 + 0.5 * u * (
      (p2 - p0)
      + u
      * (
        (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3) + u * (3.0 * (p1 - p2) + p3 - p0)
      )
    )
    bounds.append((j + 1.0) * jnp.maximum(at, 0.0))
  return smooth_max(jnp.concatenate(bounds, axis=-1), axis=-1)


def _reader_padded(ordered):
  """`read(k)` of loads already in decreasing order (..., T), padded: the
  largest once before position 0, zeros after the last."""
  zeros = jnp.zeros(ordered.shape[:-1] + (3,), ordered.dtype)
  padded = jnp.concatenate([ordered[..., :1], ordered, zeros], axis=-1)

  def read(k):
    return padded[..., k]

  return read


def sorted_values(x):
  """The loads x (..., T) in decreasing order by a bitonic network of
  min/max (T padded to a power of two with -inf, which sorts last): the
  values of the sort, exactly, at a fraction of the cost of the T^2
  comparisons of `_reader_by_rank` (measured in WORKSPACE); the gradient
  at equal loads splits between them, so only for values (the HBM fit's
  bisection)."""
  t = x.shape[-1]
  n = 1 << max(t - 1, 0).bit_length()
  lead = x.shape[:-1]
  x = jnp.concatenate([x, jnp.full(lead + (n - t,), -jnp.inf, x.dtype)], -1)
  size = 2
  while size <= n:  # merge bitonic runs of `size` (descending, ascending)
    half = size // 2
    while half >= 1:  # compare elements `half` apart within each run
      runs = n // (2 * half)
      down = ((np.arange(runs) * 2 * half) & size == 0)[:, None]
      pairs = x.reshape(lead + (runs, 2, half))
      a, b = pairs[..., 0, :], pairs[..., 1, :]
      big, small = jnp.maximum(a, b), jnp.minimum(a, b)
      first = jnp.where(down, big, small)
      second = jnp.where(down, small, big)
      x = jnp.stack([first, second], axis=-2).reshape(lead + (n,))
      half //= 2
    size *= 2
  return x[..., :t]


def _settled(v, passes: int = 2):
  """`v` (..., T) nearly in decreasing order (neighbours swapped by
  rounding) put in order by `passes` odd-even transposition passes: a
  neighbour pair out of order is swapped, the values themselves kept."""
  n = v.shape[-1]
  for p in range(min(passes, n - 1)):
    pair = np.arange(n - 1) % 2 == p % 2  # pairs (i, i + 1) of this pass
    a, b = v[..., :-1], v[..., 1:]
    swap = pair & (a < b)
    first = jnp.where(swap, b, a)  # new value at i
    second = jnp.where(swap, a, b)  # new value at i + 1
    at_first = np.append(pair, False)
    at_second = np.insert(pair, 0, False)
    v = jnp.where(
      at_first,
      jnp.concatenate([first, v[..., -1:]], axis=-1),
      jnp.where(at_second, jnp.concatenate([v[..., :1], second], axis=-1), v),
    )
  return v


def _reader_by_rank(x):
  """`read(k)`: the loads x (..., T) in decreasing order, padded as
  `busiest_rank` pads them (position k - 1; the largest at k = 0, zero
  past the last), read at integer positions k (K,), without sorting.
  Each load's rank (the loads above it, ties by index) comes from T^2
  comparisons, and the value at a position is the sum of the loads of
  that rank: exactly the sorted value, with the sorted value's gradient.
  XLA's CPU sort runs a comparator per element pair it visits; at T = 64
  the comparisons run about 5x faster, inside the traced HBM fit's
  bisection and the relaxed search."""
  t = x.shape[-1]
  idx = np.arange(t)
  above = (x[..., None, :] > x[..., :, None]) | (
    (x[..., None, :] == x[..., :, None]) & (idx[None, :] < idx[:, None])
  )
  rank = jnp.sum(above, axis=-1, dtype=x.dtype)  # (..., T): 0: the largest

  def read(k):
    want = jnp.maximum(k - 1, 0)[..., :, None]  # (K, 1)
    hit = rank[..., None, :] == want  # (..., K, T)
    return jnp.sum(jnp.where(hit, x[..., None, :], 0.0), axis=-1)

  return read


def per_rank(load, t: dict, st: Setup, orders):
  """Load of the busiest rank for per-table `load` (..., T), by sharding.

  Whole tables (table-wise) pack by `busiest_rank` over the ranks that
  hold tables, in the static `orders` ((..., T) or (T,); see
  `load_orders`; None sorts the loads); table-row-wise tables split
  over one scale-up domain's ranks (a node's, or `hosts_per_domain`
  nodes': at least the largest / ranks per domain); other
  shardings spread evenly.
  Positively homogeneous in `load`, so per-table seconds and per-table
  bytes over a common rate give the same answer.
  """
  tw, twrw = t['table_wise'], t['table_row_wise']
  spread = jnp.sum(load * (1.0 - tw - twrw), axis=-1) / st.table_ranks
  out = spread
  if present(tw):  # static: the plan's sharding
    out = out + busiest_rank(load, tw, st.table_ranks, orders)
  if present(twrw):  # static: the plan's sharding
    # p = 64: on one node the two bounds tie (one table), where p = 8
    # would overstate the load by 9%; p = 64 by 1%.
    out = out + smooth_max(
      jnp.sum(load * twrw, axis=-1) / st.table_ranks,
      jnp.max(load * twrw, axis=-1) / st.per_domain,
      p=64,
    )
  return out


def _distinct_np(rows, lookups, skew: float, frac):
  """numpy `distinct_rows` over the hottest `frac` of each table."""
  rows = np.maximum(rows, 1.0)
  if skew == 1.0:
    return rows * frac * -np.expm1(-lookups / rows)
  nodes, wt = _gauss_legendre(_QUAD_NODES)
  x = frac[..., None] * nodes
  density = skew * np.maximum(1.0 - x, 0.0) ** (skew - 1.0)
  touched = -np.expm1(-(lookups / rows)[..., None] * density)
  return rows * np.sum(wt * touched, axis=-1) * frac


def load_orders(w: wl.Workload, plan: Plan, s: Stack, t: dict) -> dict | None:
  """Static orders of the tables, largest first, for `busiest_rank`:
  `gather` (lookups served from HBM x bytes each), `update` (the bytes
  `update_bytes` moves on the stack's update path), `cast` (pooled bytes)
  and `bytes` (bytes in HBM), from the plan's concrete HBM fractions.
  None when the fractions are traced (a search, a batch of plans): the
  loads are then sorted where they are computed, so that a plan costs
  the same traced as concrete (a fixed order would read the packing
  bounds at the wrong tables once the fractions reorder them)."""
  frac = plan.hbm_fraction
  if isinstance(frac, jax.core.Tracer):
    return None
  frac = np.asarray(frac, np.float64)
  frac = t['data_parallel'] + (1.0 - t['data_parallel']) * frac
  hit = 1.0 - (1.0 - frac) ** w.popularity_skew
  lookups = w.global_batch * t['pool'] * hit
  gather_b, update_b = t['touched_hbm']
  distinct = _distinct_np(
    t['rows'], w.global_batch * t['pool'], w.popularity_skew, frac
  )
  bags = w.global_batch * (1.0 - (1.0 - hit) ** t['pool_exponent'])
  update = np.asarray(
    update_bytes(s, t, lookups, distinct, t['touched_hbm'], bags)
  )

  def order(x):
    return np.argsort(-x, kind='stable')

  return {
    'gather': order(lookups * gather_b * t['block_penalty']),
    'update': order(update * t['block_penalty']),
    'cast': order(t['dim']),
    'bytes': order(frac * t['table_bytes']),
  }


class Lookups(NamedTuple):
  """Per-table lookup traffic of one step, shape (T,) each.

  frac: share of rows in HBM (1 for data-parallel tables, 0 on a CPU
  trainer); hit: lookups served by HBM; hbm, ddr: lookups per tier;
  distinct_hbm, distinct_ddr: distinct rows updated per tier.
  """

  frac: jax.Array
  hit: jax.Array
  hbm: jax.Array
  ddr: jax.Array
  distinct_hbm: jax.Array
  distinct_ddr: jax.Array


def lookups(
  w: wl.Workload, plan: Plan, t: dict, st: Setup, row_scale, skew=None
):
  """The step's `Lookups` under the workload's popularity skew, or under
  `skew` (may be traced: `cost_model.evaluate`'s)."""
  dp = t['data_parallel']
  if st.cpu_trainer:
    frac = jnp.zeros_like(plan.hbm_fraction)
  else:
    frac = dp + (1.0 - dp) * plan.hbm_fraction
  k = w.popularity_skew if skew is None else skew
  hit = hbm_hits(w, frac, k)
  n = st.batch * t['pool']
  rows = t['rows'] * row_scale
  d_hbm = distinct_rows(rows, n, k, 0.0, frac)
  d_ddr = distinct_rows(rows, n, k, frac, 1.0)
  # On a CPU trainer every table, data-parallel ones included, is in DDR.
  ddr_share = 1.0 if st.cpu_trainer else 1.0 - dp
  return Lookups(
    frac=frac,
    hit=hit,
    hbm=n * hit,
    ddr=n * (1.0 - hit) * ddr_share,
    distinct_hbm=d_hbm,
    distinct_ddr=d_ddr * ddr_share,
  )


def embedding_rate_factor(s: Stack, t: dict):
  """Per-table divisor of the hardware rate: the stack's efficiency, one
  kernel per table, FBGEMM block penalties. Shape (T,)."""
  kernel = (
    1.0 if s.embedding_kernel == 'fused' else stack_lib.PER_TABLE_EFFICIENCY
  )
  hybrid = s.planner == 'hybrid'  # static: HugeCTR's hybrid embedding
  eff = s.hybrid_embedding_efficiency if hybrid else s.embedding_efficiency
  return t['block_penalty'] / (eff * kernel)


def update_bytes(s: Stack, t: dict, lk_lookups, lk_distinct, touched, bags):
  """Bytes moved per table (T,) to apply one step's row gradients.

  `lk_lookups` and `lk_distinct` are the lookups and distinct rows of
  the tier, `touched` its (gather, update) bytes per row, `bags` the
  pooled vectors per table (samples). By `stack.update_path`:
  - fused (FBGEMM TBE, HugeCTR): sort the ids, read each bag's pooled
    gradient once, read-modify-write each distinct row and its
    optimizer state once;
  - sparse_grad (PyTorch sparse gradients, coalesced, then the
    optimizer): write one gradient row per lookup, read and write them
    again to sort by row, read them to sum per row and write the sums,
    then read-modify-write each distinct row and its state;
  - scatter (XLA scatter-add): every lookup read-modify-writes its row
    and state, no sort.
  """
  gather_b, update_b = touched
  if s.update_path == 'scatter':
    return lk_lookups * update_b
  sort = lk_lookups * s.id_bytes * 2.0 * SORT_PASSES
  if s.update_path == 'fused':
    grads = bags * t['dim'] * 4.0
    return sort + grads + lk_distinct * update_b
  return (
    sort + 4.0 * lk_lookups * gather_b + lk_distinct * (gather_b + update_b)
  )


def pooled_cast_bytes(s: Stack, t: dict, st: Setup, payload: int):
  """Bytes per table (T,) of casting pooled embeddings to the payload
  precision in a pass of their own (`stack.pooled_cast`), one way: read
  in the table precision and write in the payload's (forward), the
  reverse backward. None where the kernel writes the payload precision
  itself or the two precisions agree. `st` None gives bytes per sample
  (to tell whether any move)."""
  if not s.pooled_cast or (st is not None and st.cpu_trainer):
    return None
  elem = t['row_bytes'] / t['dim']
  batch = 1.0 if st is None else st.batch
  moved = batch * t['dim'] * (elem + payload) * (elem != payload)
  if not np.any(moved):
    return None
  return moved * (1.0 - t['data_parallel'])


def hbm_loads(s: Stack, t: dict, lk: Lookups, st: Setup, payload: int):
  """Per-table bytes (T,) of each kind of HBM work, by name: `gather`
  (lookups x bytes), `update` (`update_bytes`), `cast` (pooled cast, when
  there is one) and `resident` (rows held in HBM; data-parallel tables
  apart). Gather and update carry the stack's rate factor
  (`embedding_rate_factor`)."""
  gather_b, _ = t['touched_hbm']
  factor = embedding_rate_factor(s, t)
  bags = st.batch * (1.0 - t['data_parallel'])
  if not st.cpu_trainer:
    bags = bags * (1.0 - (1.0 - lk.hit) ** t['pool_exponent'])
  rmw = update_bytes(s, t, lk.hbm, lk.distinct_hbm, t['touched_hbm'], bags)
  out = {'gather': lk.hbm * gather_b * factor, 'update': rmw * factor}
  cast = pooled_cast_bytes(s, t, st, payload)
  if cast is not None:
    out['cast'] = cast
  if not st.cpu_trainer:
    out['resident'] = lk.frac * t['table_bytes'] * (1.0 - t['data_parallel'])
  return out


ORDER_OF = {
  'gather': 'gather',
  'update': 'update',
  'cast': 'cast',
  'resident': 'bytes',
}


def busiest_loads(loads: dict, t: dict, st: Setup) -> dict:
  """The busiest rank's share of each per-table load (`hbm_loads`), all
  packed in one `per_rank` call (each in its own order)."""
  names = list(loads)
  orders = t['orders']
  if orders is not None:
    orders = np.stack([orders[ORDER_OF[k]] for k in names])
  stacked = jnp.stack([loads[k] for k in names])
  if 'infrequent' not in t:
    packed = per_rank(stacked, t, st, orders)
    return {k: packed[i] for i, k in enumerate(names)}
  # Hybrid embedding: each GPU serves its own samples' lookups of the
  # frequent rows (and their share of the updates); the rows stay where
  # the plan puts them (the replicas of the frequent rows are few).
  split = t['infrequent']
  inf = jnp.stack(
    [jnp.ones_like(split) if k == 'resident' else split for k in names]
  )
  kept, own = hybrid.served_by_owners(stacked, inf, st.ranks)
  packed = per_rank(kept, t, st, orders) + own
  return {k: packed[i] for i, k in enumerate(names)}


def embedding_hbm(p, t, st: Setup, busiest: dict):
  """(gather, update) seconds of the HBM-resident lookups on the busiest
  rank (`busiest_loads`), each with its share of the pooled cast at the
  streaming rate. Data-parallel tables update their whole replica
  densely."""
  acc = p.accelerator
  gather = busiest['gather'] / (acc.hbm_bandwidth * acc.gather_efficiency)
  dp_dense = jnp.sum(t['data_parallel'] * t['table_bytes'] * 2.0)
  dp_on_hbm = 0.0 if st.cpu_trainer else dp_dense
  update = (busiest['update'] + dp_on_hbm) / (
    acc.hbm_bandwidth * acc.update_efficiency
  )
  if 'cast' in busiest:
    cast_s = busiest['cast'] / (acc.hbm_bandwidth * STREAM_EFFICIENCY)
    gather, update = gather + cast_s, update + cast_s
  return gather, update


class DdrTerms(NamedTuple):
  """Seconds of the DDR-resident lookups: on the CPU sockets (`cpu_*`)
  or read by the accelerators over the host link (`uvm_*`)."""

  cpu_gather: jax.Array
  cpu_update: jax.Array
  uvm_gather: jax.Array
  uvm_update: jax.Array


def embedding_ddr(p, w, plan, s, t, lk: Lookups, st: Setup, row_scale):
  """Seconds of the DDR-resident lookups and updates (whole cluster).

  Without UVM caching the plan's `cpu_lookup_fraction` c of them run on
  the CPU sockets, the rest are read row by row by the accelerators over
  the host link (at its random-access efficiency). With UVM caching
  (`stack.uvm_caching`) the accelerators fetch every miss over the host
  link at the stack's fill efficiency and write updated rows back.
  """
  cpu = p.cpu
  ddr_gather_b, _ = t['touched_ddr']
  gather_bytes = jnp.sum(lk.ddr * ddr_gather_b)
  bags = st.batch * (1.0 - (1.0 if st.cpu_trainer else t['data_parallel']))
  bags = bags * (1.0 - lk.hit ** t['pool_exponent'])
  moved = jnp.sum(
    update_bytes(s, t, lk.ddr, lk.distinct_ddr, t['touched_ddr'], bags)
  )
  sockets = p.nodes * p.sockets_per_node
  ddr_rate = sockets * cpu.ddr_bandwidth * cpu.gather_efficiency
  ddr_update_rate = sockets * cpu.ddr_bandwidth * cpu.update_efficiency
  zero = jnp.zeros(())
  if st.cpu_trainer:  # each socket also streams its replica of dp tables
    dp_dense = jnp.sum(t['data_parallel'] * t['table_bytes'] * 2.0)
    return DdrTerms(
      cpu_gather=gather_bytes / ddr_rate,
      cpu_update=moved / ddr_update_rate
      + dp_dense / (cpu.ddr_bandwidth * cpu.update_efficiency),
      uvm_gather=zero,
      uvm_update=zero,
    )
  link = p.nodes * host_link_rate(p, st.structure)
  if s.uvm_caching:
    fill = link * s.uvm_fill_efficiency
    return DdrTerms(
      cpu_gather=zero,
      cpu_update=zero,
      uvm_gather=smooth_max(gather_bytes / fill, gather_bytes / ddr_rate),
      uvm_update=smooth_max(moved / fill, moved / ddr_update_rate),
    )
  c = plan.cpu_lookup_fraction
  uvm_rate = link * p.host_link.random_access_efficiency
  # The (1 - c) share stays outside the smooth max: inside, at c = 1 both
  # arguments hit the TINY floor and the gradient in c vanishes.
  return DdrTerms(
    cpu_gather=c * gather_bytes / ddr_rate,
    cpu_update=c * moved / ddr_update_rate,
    uvm_gather=(1.0 - c)
    * gather_bytes
    * smooth_max(1.0 / uvm_rate, 1.0 / ddr_rate),
    uvm_update=(1.0 - c)
    * moved
    * smooth_max(1.0 / uvm_rate, 1.0 / ddr_update_rate),
  )


def pooled_to_host(p, w, plan, s, t, lk: Lookups, st: Setup, payload: int):
  """(host link, socket links) seconds, one direction, of the pooled
  vectors the CPU sockets produce for the accelerators: one per sample
  and table unless all of its lookups hit HBM. None with UVM caching or
  on a CPU trainer."""
  if st.cpu_trainer or s.uvm_caching:
    return jnp.zeros(()), jnp.zeros(())
  c = plan.cpu_lookup_fraction
  all_hit = lk.hit ** t['pool_exponent']
  pooled_bytes = t['dim'] * payload
  pooled = (
    c
    * jnp.sum(
      (1.0 - t['data_parallel']) * st.batch * pooled_bytes * (1.0 - all_hit)
    )
    / p.nodes
  )
  cpu, sockets = p.cpu, p.sockets_per_node
  upi = sockets * cpu.socket_links * cpu.socket_link_bandwidth / 2.0
  host = pooled / host_link_rate(p, st.structure) + p.host_link.latency
  links = pooled * safe_div(sockets - 1.0, sockets) / upi
  return host, links
