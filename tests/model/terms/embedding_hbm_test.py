"""Known answers, worked by hand, for the model: embedding terms in HBM.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import math

import jax
import numpy as np
import pytest

from codesign.model import terms as ct
from codesign.spec import workload as wl
from tests.model.fixtures import (
  ACC_GATHER,
  ACC_KERNEL,
  CPU_GATHER,
  DDR_BW,
  DIM,
  HBM_BW,
  PENALTY,
  POOL,
  B,
  close,
  hand_busiest,
  make_plan,
  run,
  smax,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)

# ---- embedding terms in HBM ------------------------------------------------


@pytest.mark.parametrize('sharding', ['table_wise', 'row_wise', 'column_wise'])
def test_embedding_hbm_terms(sharding):
  r = run(tiny_platform(), tiny_workload(), make_plan(sharding=sharding))
  bd = r['breakdown']
  ranks = 8
  # Every table in HBM: B x pooling lookups per table, 64 B each (a 16 x 4 B
  # row is exactly one 64 B transaction).
  loads = [B * pool * 64 for pool in POOL]  # bytes per table per step
  total = sum(loads)
  if sharding == 'table_wise':
    # Whole tables per rank: the busiest rank carries at least the largest
    # table (2 MiB) although the mean is only total / 8: imbalance. (The
    # other packing bounds, j = 1, 2 < T = 3, read past the tables: the
    # positions 8 and 16 saturate at 3, where the spline reads nothing.)
    busiest = hand_busiest(loads, ranks)
    close(busiest, smax(total / ranks, max(loads)), rel=1e-6)
  elif sharding == 'row_wise':
    busiest = total / ranks  # rows spread evenly
  else:
    # 4 column shards of 4 elements = 16 B each; each still costs a full
    # 64 B transaction, so a lookup moves 4 x 64 B, spread evenly.
    busiest = 4 * total / ranks
  # 16 (or 4) columns: the quarter-block penalty slows the kernel 1.75x.
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], busiest / rate)
  # scatter update: read and write each looked-up row (no optimizer state).
  close(bd['embedding_update_hbm'], 2 * busiest / rate)
  # Nothing lives in DDR.
  assert bd['embedding_gather_ddr'] < 1e-25
  assert bd['embedding_update_ddr'] < 1e-25


def test_table_wise_imbalance_against_row_wise():
  w = tiny_workload()
  tw = run(tiny_platform(), w, make_plan())['breakdown']
  rw = run(tiny_platform(), w, make_plan(sharding='row_wise'))['breakdown']
  # Largest table: 4 lookups of 64 B per sample; mean over 8 ranks:
  # (1 + 2 + 4) x 64 / 8 per sample. Ratio about 4 x 8 / 7 (the bounds
  # past the 3 tables read nothing).
  ratio = hand_busiest([1, 2, 4], 8) / (7 / 8)
  close(ratio, smax(7 / 8, 4) / (7 / 8), rel=1e-6)
  close(tw['embedding_gather_hbm'] / rw['embedding_gather_hbm'], ratio)
  assert ratio > 4.5


def test_busiest_rank_packing_bounds():
  """`busiest_rank`: the smooth max of the share bound sum / R, the
  largest table (j = 0) and, for j = 1 .. J-1 (J = 4), (j + 1) x the
  ordered loads read at the position jR by a Catmull-Rom spline over the
  four nearest tables (`hand_busiest`)."""
  assert ct.embedding._MAX_PACKING_BOUNDS == 4
  # 26 equal tables on 8 ranks: some rank holds 4 (26 > 3 x 8), not 3.25.
  # Bounds: 26/8, 1 x 1st, 2 x 9th, 3 x 17th, 4 x 25th largest (equal
  # neighbours: the spline reads 1).
  x = np.ones(26)
  got = float(ct.busiest_rank(x, np.ones(26), 8.0, np.arange(26)))
  close(got, smax(26 / 8, 1, 2, 3, 4))
  assert 4.0 < got < 4.2
  # 9 equal tables on 8 ranks: some rank holds 2 (9 > 8); the spline
  # reads the 9th table exactly at the whole position 8 (up to the
  # softplus saturation, 0.25 ln(1 + e^4) - 1 = 0.0045 below 8, and the
  # spline's overshoot towards the zero past the end).
  got = float(ct.busiest_rank(np.ones(9), np.ones(9), 8.0, np.arange(9)))
  close(got, hand_busiest([1.0] * 9, 8.0))
  assert 2.0 < got < 2.01
  # One huge table: the busiest rank holds it (the mean is 103 / 8); the
  # positions 8, 16, 24 saturate at the end, where the spline reads 0.
  x = np.array([1.0, 100.0, 1.0, 1.0])
  got = float(ct.busiest_rank(x, np.ones(4), 8.0, np.array([1, 0, 2, 3])))
  close(hand_busiest(list(x), 8.0), got)
  close(got, smax(103 / 8, 100.0), rel=1e-6)
  # Tables not placed whole (the mask) are left out of the order too:
  # loads 1, 1, 1.
  mask = np.array([1, 0, 1, 1.0])
  got = float(ct.busiest_rank(x, mask, 8.0, np.array([0, 2, 3, 1])))
  close(got, hand_busiest([1.0, 1.0, 1.0], 8.0))
  close(got, smax(3 / 8, 1.0), rel=1e-6)
  # The j = 0 bound is the exact maximum whatever the order.
  got = float(ct.busiest_rank(x, np.ones(4), 8.0, np.arange(4)))
  close(got, hand_busiest(list(x), 8.0, in_order=True))
  assert got >= 100.0
  # Fractional R over 4, 3, 2, 1: R = 1.5 and 1.25, by hand.
  x = np.array([4.0, 3.0, 2.0, 1.0])
  for r in (1.5, 1.25, 2.0):
    got = float(ct.busiest_rank(x, np.ones(4), r, np.arange(4)))
    close(got, hand_busiest(list(x), r))
  # At R = 2 the bounds read whole positions exactly: the 3rd largest (2)
  # for j = 1; j = 2 and 3 reach past the end (positions 4 and 6).
  close(
    float(ct.busiest_rank(x, np.ones(4), 2.0, np.arange(4))),
    smax(10 / 2, 4.0, 2 * 2.0),
    rel=1e-4,  # the softplus saturation moves position 2 by 8e-5
  )
  # Several loads at once along a leading axis, in one order ...
  got = ct.busiest_rank(np.stack([x, 2 * x]), np.ones(4), 1.5, np.arange(4))
  close(float(got[1]), 2 * hand_busiest(list(x), 1.5))
  # ... or each in its own: the second load reversed, read in its order.
  orders = np.stack([np.arange(4), np.arange(4)[::-1]])
  got = ct.busiest_rank(np.stack([x, x[::-1]]), np.ones(4), 1.5, orders)
  close(float(got[0]), float(got[1]))
  close(float(got[1]), hand_busiest(list(x), 1.5))


def test_reading_by_rank_is_the_sort_bit_for_bit():
  """Traced loads are read by rank (`_reader_by_rank`, no sort): at
  every padded position, values and gradients equal those of the
  sorted, padded loads exactly, ties included (tied loads take their
  positions in index order, as a stable sort does)."""
  rng = np.random.default_rng(0)
  x = rng.choice([0.5, 1.0, 2.0, 3.5], size=(3, 12))  # many ties
  x[1] = rng.random(12)
  k = np.arange(0, 12 + 4)

  def by_rank(x):
    return ct.embedding._reader_by_rank(x)(k)

  def by_sort(x):
    ordered = -jax.numpy.sort(-x, axis=-1)
    pad = jax.numpy.zeros(x.shape[:-1] + (3,))
    return jax.numpy.concatenate([ordered[..., :1], ordered, pad], -1)[..., k]

  np.testing.assert_array_equal(by_rank(x), by_sort(x))
  weights = rng.random((3, len(k)))
  grads = [
    jax.grad(lambda x, f=f: jax.numpy.sum(weights * f(x)))(x)
    for f in (by_rank, by_sort)
  ]
  np.testing.assert_array_equal(*grads)


@pytest.mark.parametrize('tables', [1, 5, 12, 64, 100])
def test_sorted_values_network_is_the_sort(tables):
  """The min/max network of the HBM fit's bisection
  (`embedding.SORTED_VALUES`) returns the sorted loads exactly, ties and
  zeros included, for table counts that are and are not powers of two;
  `busiest_rank` reads the same bound from it as from the ranks."""
  rng = np.random.default_rng(tables)
  x = rng.choice([0.0, 0.5, 1.0, 2.0], size=(3, tables))  # many ties
  x[1] = rng.random(tables)
  x[2] = rng.lognormal(0.0, 3.0, tables)
  got = np.asarray(jax.jit(ct.embedding.sorted_values)(x))
  np.testing.assert_array_equal(got, -np.sort(-x, axis=-1))
  weights = jax.numpy.asarray(rng.random(tables))  # relaxed: traced mask

  def bound(order):
    return jax.jit(lambda x, w: ct.busiest_rank(x, w, 8.0, order))(x, weights)

  np.testing.assert_array_equal(bound(ct.embedding.SORTED_VALUES), bound(None))


@pytest.mark.parametrize('r', [2.0, 3.0, 8.0])
def test_busiest_rank_is_smooth_in_the_rank_count(r):
  # 9 equal tables and smaller ones: on 8 ranks one rank holds 2 of the 9
  # (the bound 2 x the 9th largest); just below R = 8 the 9th position
  # lies between equal tables, just above between unequal ones. The
  # B-spline's derivative is continuous at every integer position: the
  # derivatives from both sides agree, and with jax.grad at R.
  x = np.array([1.0] * 9 + [0.5, 0.4, 0.3, 0.2, 0.1])
  order = np.arange(len(x))

  def f(r):
    return ct.busiest_rank(x, np.ones(len(x)), r, order)

  left = float(jax.grad(f)(r - 1e-6))
  right = float(jax.grad(f)(r + 1e-6))
  at = float(jax.grad(f)(r))
  assert left == pytest.approx(right, rel=1e-4, abs=1e-9)
  assert at == pytest.approx(right, rel=1e-4, abs=1e-9)


@pytest.mark.parametrize('tables, r', [(8, 8.0), (26, 13.0)])
def test_busiest_rank_is_smooth_where_jr_reaches_the_last_table(tables, r):
  x = np.ones(tables)
  order = np.arange(tables)

  def f(r):
    return ct.busiest_rank(x, np.ones(tables), r, order)

  left = float(jax.grad(f)(r - 1e-7))
  right = float(jax.grad(f)(r + 1e-7))
  assert left == pytest.approx(right, rel=1e-5, abs=1e-9)


def test_busiest_rank_in_the_step():
  # 26 equal tables (1000 rows, dim 16, 1 lookup) table-wise on 8 ranks:
  # the gather of the busiest rank is smax(26/8, 1, 2, 3, 4) tables' worth,
  # against 26/8 row-wise.
  w = wl.Workload(
    name='equal',
    tables=tuple(wl.Table(1000, DIM, 1.0) for _ in range(26)),
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    global_batch=B,
  )
  frac = (1.0,) * 26
  tw = run(tiny_platform(), w, make_plan(frac))['breakdown']
  rw = run(tiny_platform(), w, make_plan(frac, 'row_wise'))['breakdown']
  one = B * 64 * PENALTY / (HBM_BW * ACC_GATHER)  # one table's gather
  close(tw['embedding_gather_hbm'], smax(26 / 8, 1, 2, 3, 4) * one)
  close(rw['embedding_gather_hbm'], 26 / 8 * one)


def hot_small_workload(copies=1):
  """`copies` x table A (100 rows, 10 lookups per sample) and `copies` x
  table B (10^6 rows, 5 lookups), all fp32 dim 16."""
  return wl.Workload(
    name='hot_small',
    tables=(wl.Table(100, DIM, 10.0),) * copies
    + (wl.Table(1_000_000, DIM, 5.0),) * copies,
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    global_batch=B,
  )


# Fused update bytes of the hot-small tables: sort 32 B per lookup (4 B
# ids, 4 radix passes read and written), each bag's fp32 gradient (64 B),
# each distinct row read and written (128 B): A has only ~100 distinct
# rows, B ~B x 5.
HOT_A = 32 * B * 10 + 64 * B + 128 * 100 * (1 - math.exp(-B * 10 / 100))
HOT_B = 32 * B * 5 + 64 * B + 128 * 1e6 * (1 - math.exp(-B * 5 / 1e6))


def test_busiest_update_is_at_least_the_largest_whole_table():
  # Table A has more lookups (traffic 640 B per sample against B's 320 B)
  # but B moves more than twice A's update bytes.
  s = tiny_stack(update_path='fused')
  bd = run(tiny_platform(), hot_small_workload(), make_plan((1.0, 1.0)), s)
  bd = bd['breakdown']
  rate = HBM_BW * ACC_GATHER / PENALTY
  assert HOT_B > 2 * HOT_A
  # A whole table lies on one rank: that rank updates at least B's bytes
  # (the j = 0 bound is the exact maximum whatever the static order).
  assert bd['embedding_update_hbm'] >= HOT_B / rate * (1 - 1e-9)


def test_busiest_update_packs_the_update_loads_in_their_order():
  s = tiny_stack(update_path='fused')
  plan = make_plan((1.0,) * 18)
  bd = run(tiny_platform(), hot_small_workload(9), plan, s)['breakdown']
  rate = HBM_BW * ACC_GATHER / PENALTY
  busiest = hand_busiest([HOT_A] * 9 + [HOT_B] * 9, 8)
  close(bd['embedding_update_hbm'], busiest / rate, rel=1e-9)


def test_busiest_rank_packs_only_the_whole_tables_in_order():
  # 13 tables row-wise with 2 lookups per sample (spread over the 8
  # ranks), then 13 table-wise with 1: some rank holds 2 of the 13 whole
  # tables (13 > 8), none needs to hold 3 (13 < 17).
  w = wl.Workload(
    name='mixed',
    tables=(wl.Table(1000, DIM, 2.0),) * 13 + (wl.Table(1000, DIM, 1.0),) * 13,
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    global_batch=B,
  )
  plan = make_plan((1.0,) * 26, ('row_wise',) * 13 + ('table_wise',) * 13)
  bd = run(tiny_platform(), w, plan)['breakdown']
  one = B * 64  # one table-wise table's gather bytes
  busiest = 13 * 2 * one / 8 + hand_busiest([one] * 13, 8)
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], busiest / rate)


@pytest.mark.parametrize(
  'optimizer, gather, update',
  [
    # table A: 18 x 4 B = 72 B rows -> two 64 B transactions (128 B);
    # table B: 8 x 4 B = 32 B rows -> one transaction (64 B).
    # update = 2 x (row + state), each rounded up to transactions.
    ('sgd', (128, 64), (2 * 128, 2 * 64)),
    # one fp32 per element: 72 B -> 128 B and 32 B -> 64 B
    ('adagrad', (128, 64), (2 * (128 + 128), 2 * (64 + 64))),
    # one fp32 per row: 4 B -> one 64 B transaction
    ('rowwise_adagrad', (128, 64), (2 * (128 + 64), 2 * (64 + 64))),
    # two moments touched separately: 2 x 128 B and 2 x 64 B
    ('adam', (128, 64), (2 * (128 + 256), 2 * (64 + 128))),
  ],
)
def test_access_granularity_and_optimizer_state(optimizer, gather, update):
  w = wl.Workload(
    name='granular',
    tables=(wl.Table(500, 18), wl.Table(300, 8)),
    num_dense=4,
    bottom_mlp=(8,),
    top_mlp=(4, 1),
    interaction='cat',
    global_batch=B,
    optimizer=optimizer,
  )
  plan = make_plan(frac=(1.0, 1.0), sharding=('table_wise',) * 2)
  bd = run(tiny_platform(), w, plan)['breakdown']
  rate = HBM_BW * ACC_GATHER / PENALTY  # 18 and 8 columns: both < 64

  def busiest(per_lookup):  # one lookup per sample per table
    return hand_busiest([B * x for x in per_lookup], 8)

  close(bd['embedding_gather_hbm'], busiest(gather) / rate)
  close(bd['embedding_update_hbm'], busiest(update) / rate)
  # Dense optimizer: 12 B per parameter plus a read and a write of each
  # fp32 state element (adagrad and rowwise: 1 per parameter, adam: 2).
  # Parameters: 4*8+8 + (8+18+8)*4+4 + 4*1+1 = 185.
  state = {'sgd': 0, 'adagrad': 1, 'rowwise_adagrad': 1, 'adam': 2}
  per_param = 12 + 8 * state[optimizer]
  close(bd['dense_optimizer'], 185 * per_param / HBM_BW + ACC_KERNEL)


def test_each_tier_has_its_own_access_granularity():
  # HBM read in 32 B sectors, DDR in 64 B cache lines: a 72 B row costs
  # 96 B from HBM and 128 B from DDR. Half of each table in each tier.
  w = wl.Workload(
    name='granular',
    tables=(wl.Table(500, 18), wl.Table(300, 18)),
    num_dense=4,
    bottom_mlp=(8,),
    top_mlp=(4, 1),
    interaction='cat',
    global_batch=B,
  )
  plan = make_plan(frac=(0.5, 0.5), sharding=('row_wise',) * 2)
  p = tiny_platform(access_granularity=32)
  bd = run(p, w, plan)['breakdown']
  lookups = 2 * B * 0.5  # per tier: 2 tables x B lookups x half
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], lookups * 96 / 8 / rate)
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER  # all DDR lookups on the CPUs
  close(bd['embedding_gather_ddr'], lookups * 128 / ddr_rate)


@pytest.mark.parametrize(
  'dim, shards, penalty',
  [
    (128, 1, 1.0),  # a full 128-column block
    (256, 4, 1.15),  # 4 column shards of 64: half block
    (100, 1, 1.15),  # 64 <= 100 < 128: half-block penalty
    (64, 1, 1.15),
    (63, 1, 1.75),  # below 64: quarter-block penalty
    (512, 4, 1.0),  # 4 column shards of 128
  ],
)
def test_block_penalty_and_embedding_rate(dim, shards, penalty):
  # FBGEMM runs a row in blocks of 128 columns (TorchRec planner:
  # HALF_BLOCK_PENALTY 1.15 below 128 columns, QUARTER_BLOCK_PENALTY 1.75
  # below 64), by the width of each shard.
  sharding = 'column_wise' if shards > 1 else 'row_wise'
  w = wl.Workload(
    name='wide',
    tables=(wl.Table(1000, dim, 1.0),),
    num_dense=4,
    bottom_mlp=(8,),
    top_mlp=(4, 1),
    interaction='cat',
    global_batch=B,
  )
  t = ct.table_arrays(w, ((sharding,), 4, 'fp32'), (64, 64))
  close(float(t['block_penalty'][0]), penalty)
  # One lookup per sample, spread over 8 ranks: each shard's 4 x dim /
  # shards bytes, rounded up to 64 B, at 0.5 x 1 TB/s / penalty.
  shard_bytes = 64 * math.ceil(4 * dim / shards / 64)
  rate = HBM_BW * ACC_GATHER / penalty
  bd = run(tiny_platform(), w, make_plan((1.0,), sharding))['breakdown']
  close(bd['embedding_gather_hbm'], B * shards * shard_bytes / 8 / rate)
  # The stack's embedding efficiency and a per-table kernel (half the rate
  # of a fused one, TorchRec planner DENSE vs FUSED) divide the rate.
  s = tiny_stack(embedding_efficiency=0.4, embedding_kernel='per_table')
  bd2 = run(tiny_platform(), w, make_plan((1.0,), sharding), s)['breakdown']
  for k in ('embedding_gather_hbm', 'embedding_update_hbm'):
    close(bd2[k], bd[k] / (0.4 * 0.5))


def test_busiest_rank_in_a_traced_order_settles_swapped_neighbours():
  """A traced order (the HBM fit's `fill_orders`) with neighbours swapped,
  as rounding swaps them near a crossing, reads what the sorted loads
  read, bit for bit."""
  rng = np.random.default_rng(0)
  x = rng.random(26) * 10.0
  x[3] = x[7]  # a tie
  order = np.argsort(-x, kind='stable')
  swapped = order.copy()
  swapped[[4, 5]] = swapped[[5, 4]]
  swapped[[10, 11]] = swapped[[11, 10]]
  want = ct.busiest_rank(x, np.ones(26), 3.0, None)  # ranked, no order
  for o in (order, swapped):
    got = ct.busiest_rank(x, np.ones(26), 3.0, jax.numpy.asarray(o))
    assert float(got) == float(want)
