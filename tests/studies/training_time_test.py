"""Time to train as a cluster grows (`codesign.studies.training_time`):
the efficiency's reference is the smallest node count that holds the
tables, with the capacity effect apart; the verdict finds where the time
to train turns up or stops falling, on rows made by hand."""

import pytest

from codesign.studies import training_time as tt


def _row(nodes, thr, frac, feasible=True):
  return {
    'nodes': nodes,
    'throughput_samples_per_s': thr,
    'hbm_fraction': frac,
    'feasible': feasible,
    'global_batch': 65536 * nodes,
  }


def test_reference_is_the_first_count_that_holds_the_tables():
  rows = [_row(1, 1e5, 0.3), _row(2, 8e5, 1.0), _row(4, 1.5e6, 1.0)]
  ref = tt.reference_index(rows)
  assert ref == 1
  info = tt.efficiency_reference(rows, ref)
  assert info['per_node_samples_per_s'] == 4e5
  assert info['capacity_effect'] == pytest.approx(4.0)
  assert 'capacity effect' in info['why']


def test_first_count_is_the_reference_where_it_holds_them():
  rows = [_row(1, 1e5, 1.0), _row(2, 1.8e5, 1.0)]
  assert tt.reference_index(rows) == 0
  assert tt.efficiency_reference(rows, 0)['capacity_effect'] is None


def _times(ts):
  return [
    {
      'nodes': 2**i,
      'global_batch': 65536.0 * 2**i,
      'time_to_train_s': t,
      'samples_to_target': 1e9 * (1 + 2**i / 5),
      'goodput': 1.0 - 0.001 * 2**i,
      'past_knee': 65536.0 * 2**i > 3.2e5,
      'extrapolated': 65536.0 * 2**i > 1.6e5,
    }
    for i, t in enumerate(ts)
  ]


def test_verdict_finds_the_turn():
  v = tt.verdict(_times([100, 60, 40, 35, 38, 45]), 'mlperf_dlrm_dcnv2')
  assert v['best_nodes'] == 8
  assert v['turns_up_after_nodes'] == 8
  assert 'turns up past 8 nodes' in v['sentence']
  assert 'knee' in v['sentence'] and 'EXTRAPOLATED' in v['sentence']


def test_verdict_finds_a_plateau():
  v = tt.verdict(_times([100, 60, 40, 37, 36.5, 36.4]), 'mlperf_dlrm_dcnv2')
  assert v['turns_up_after_nodes'] is None
  assert v['flat_from_nodes'] == 8
  assert 'less than 10%' in v['sentence']
