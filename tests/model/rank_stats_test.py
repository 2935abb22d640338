"""Per-rank statistics: the column shards TorchRec cuts, the greedy
placement and its repair towards the model's bound on the busiest rank's
bytes, and the ranks' bytes as the one memory truth counts them (a node's
DDR sums to result.json's need on every preset pair: smoke_test.py)."""

import dataclasses

import numpy as np
import pytest

import codesign
from codesign.model import planner, rank_stats
from codesign.spec import platform_presets, stack_presets
from codesign.spec import workload_presets as presets
from codesign.spec.plan import SHARDINGS


@pytest.mark.parametrize(
  'dim, shards, width',
  [(16, 8, 4), (128, 4, 32), (64, 3, 32), (10, 2, 10), (96, 4, 24)],
)
def test_column_blocks_are_torchrecs(dim, shards, width):
  # The narrowest multiple of 4 that divides dim, at least dim // shards
  # wide; the whole dim where none does.
  assert rank_stats.column_block(dim, shards) == width


def test_greedy_balances_load_and_repairs_bytes():
  tw = ('table_wise',) * 4
  load = np.array([4.0, 3.0, 2.0, 1.0])
  even = rank_stats.assign(tw, load, np.ones(4), ranks=2, per_node=2)
  np.testing.assert_array_equal(even.sum(axis=1), 1.0)
  assert sorted(load @ even) == [5.0, 5.0]  # LPT: {4, 1} and {3, 2}
  # Bytes that the load's order piles on one rank are moved off it, down
  # to the target, at the least cost in load.
  size = np.array([3.0, 1.0, 1.0, 3.0])
  free = rank_stats.assign(tw, load, size, ranks=2, per_node=2)
  assert max(size @ free) == 6.0
  fixed = rank_stats.assign(tw, load, size, ranks=2, per_node=2, target=4.0)
  np.testing.assert_array_equal(size @ fixed, [4.0, 4.0])
  np.testing.assert_array_equal(fixed.sum(axis=1), 1.0)


def test_every_sharding_places_whole_shares():
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('big_basin')
  s = stack_presets.get('torchrec')
  base = planner.make(w, p, s, placement='hbm', sharding='table_wise')
  shardings = tuple(SHARDINGS[i % len(SHARDINGS)] for i in range(26))
  plan = dataclasses.replace(base, sharding=shardings, column_shards=8)
  pt, share = rank_stats.place(w, p, plan, s)
  np.testing.assert_allclose(share.sum(axis=1), 1.0)
  pieces = rank_stats.column_pieces(w, plan)
  for i, x in enumerate(shardings):
    held = np.count_nonzero(share[i] > 1e-12)
    if x in ('row_wise', 'data_parallel'):
      assert held == 8
    elif x == 'column_wise':
      # dim 16 in 8 shards: TorchRec's 4 shards of 4 columns.
      assert pieces[i] == 4 and held <= 4
    elif x == 'table_wise':
      assert held == 1
  stats = rank_stats.compute(w, p, plan, s)
  dp = np.array([x == 'data_parallel' for x in shardings])
  ranks = sum(r['hbm_bytes'] for r in stats['ranks'])
  tables = np.sum(pt['hbm_bytes'] * np.where(dp, 8, 1))
  assert ranks == pytest.approx(tables + pt['overhead_hbm_bytes'].sum())


def test_busiest_rank_meets_the_models_hbm_need():
  """zion_scale fills a DGX A100's HBM: the placement fits it, at the
  model's HBM need, with the stack's reservations counted per rank."""
  w = presets.get('zion_scale')
  p = platform_presets.get('dgx_a100_80gb')
  s = stack_presets.get('torchrec')
  plan = planner.make(w, p, s)
  stats = rank_stats.compute(w, p, plan, s)['summary']
  need = stats['model_hbm_required_bytes']
  assert stats['busiest_hbm_bytes'] == pytest.approx(need, rel=1e-3)
  assert stats['busiest_hbm_bytes'] <= stats['hbm_available_bytes']
  assert stats['stack_hbm_bytes_per_rank'] > stats['kjt_hbm_bytes_per_rank']


def test_cpu_trainer_ranks_hold_their_dense_replica_in_ddr():
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('cpu_2s')
  s = stack_presets.get('ipex_cpu')
  plan = planner.make(w, p, s)
  stats = rank_stats.compute(w, p, plan, s)
  ddr = sum(r['ddr_bytes'] for r in stats['ranks'])
  need = codesign.evaluate(w, p, s, plan)['memory']['ddr']['required_bytes']
  assert ddr / float(p.nodes) == pytest.approx(need, rel=1e-12)
  dense = rank_stats.per_table(w, p, plan, s)['dense_ddr_bytes']
  assert dense > 0
  assert all(r['hbm_bytes'] == 0.0 for r in stats['ranks'])
