"""`propose --stack=any` (or a list): one search per stack, the best by
the proposal rule, each stack's best printed (`studies.proposal`
`stack_names`, `best_stack`, `stacks_table`); without running a search:
the names, and the choice among made-up results."""

import pytest

from codesign.core.errors import InputError
from codesign.studies import proposal


def test_stack_names():
  assert proposal.stack_names('any') == proposal.ANY_STACKS
  assert proposal.stack_names('torchrec') == ('torchrec',)
  assert proposal.stack_names('torchrec, hugectr') == ('torchrec', 'hugectr')
  with pytest.raises(InputError, match='empty name'):
    proposal.stack_names('torchrec,')


def _run(thr, capex, ok=True):
  prop = {
    'platform': {
      'name': 'proposal',
      'nodes': 1.0,
      'sockets_per_node': 2.0,
      'accelerators_per_node': 8.0,
      'trainer': 'accelerator',
      'accelerator': {'name': 'H100-SXM5-80GB'},
      'cpu': {'name': 'EPYC-9654 (Genoa)', 'ddr_capacity_gb': 768.0},
      'nic': {'count': 1.0, 'bandwidth_gbit_per_s': 100.0},
    },
    'throughput_samples_per_s': thr,
    'capex_usd': capex,
    'objective_value': thr,
    'within_limits': ok,
    'calibration': {'flags': ['no calibration case runs x on H100']},
  }
  return {'proposal': prop, 'objective_unit': 'samples/s'}, [{'step': 0}]


def test_the_stack_whose_proposal_wins_by_the_rule():
  """Throughput within 2%: the cheaper stack's design wins; a faster one
  outside the limits does not count."""
  settings = proposal.Settings(objective='throughput', tolerance=0.02)
  names = ('a', 'b', 'c')
  runs = [_run(100.0, 10.0), _run(99.0, 5.0), _run(200.0, 1.0, ok=False)]
  result, metrics = proposal.best_stack(settings, names, runs)
  assert [r['chosen'] for r in result['per_stack']] == [False, True, False]
  assert result['proposal']['capex_usd'] == 5.0
  assert [m['stack'] for m in metrics] == ['a', 'b', 'c']
  lines = proposal.stacks_table(result)
  assert lines[-1].startswith('stacks: the proposal needs b')
  assert '<- proposal' in lines[2] and 'no calibration case' in lines[1]
