"""A proposal with the system around its trainers
(`studies.proposal` with `readers`, `with_failures`): the proposal's
figures include its readers, storage and front-end network, which the
table prints with their shares; its throughput is no higher than its
readers feed; `local` keeps the step alone. The batch as a decision of
`time_to_train` (`studies.batch_choice`) on a design made here."""

import pytest

from codesign.model import planner, report
from codesign.spec import platform_presets, stack_presets
from codesign.spec import whole_system as ws
from codesign.spec import workload_presets as wp
from codesign.studies import batch_choice, proposal

TINY = dict(
  workload='criteo_kaggle',
  objective='throughput',
  budget_usd=2e6,
  starts=2,
  steps=4,
  max_nodes=2,
  presets=('dgx_a100_80gb',),
  trainers=('accelerator',),
  systems=('board',),
)


@pytest.fixture(scope='module')
def proposed():
  return proposal.run(
    proposal.Settings(**TINY, readers='auto', with_failures='true')
  )[0]


def test_the_proposal_bills_its_readers_and_storage(proposed):
  prop = proposed['proposal']
  sysd = prop['system']
  assert sysd['reader_nodes'] >= 1 and sysd['storage_nodes'] >= 1
  assert prop['throughput_samples_per_s'] <= sysd['readers_feed_samples_per_s']
  assert 0 < sysd['goodput'] < 1
  shares = [b['capex_share'] for b in sysd['bill'].values()]
  assert all(0 < x < 1 for x in shares)
  bill = sum(b['usd'] for b in sysd['bill'].values())
  assert sysd['trainers_usd'] + bill == pytest.approx(prop['capex_usd'])
  assert sysd['trainers_usd'] == pytest.approx(
    prop['capex_breakdown']['total_usd']
  )
  text = proposal.table(proposed)
  assert 'readers: ' in text and 'storage: ' in text and 'goodput' in text
  assert f'system: capex ${prop["capex_usd"]:,.0f} = trainers' in text
  # The presets beside it carry the same system.
  assert all('system' in r for r in proposed['presets'])


def test_local_data_keeps_the_step_alone():
  s = proposal.Settings(**TINY, readers='local', with_failures='false')
  assert proposal.system_of(s) is None


def test_a_bad_readers_setting_is_one_sentence():
  from codesign.core.errors import InputError

  with pytest.raises(InputError, match='--readers'):
    proposal.system_of(proposal.Settings(**TINY, readers='many'))


def test_time_to_train_counts_the_samples_to_the_target():
  w = wp.get('mlperf_dlrm_v1')
  s = proposal.Settings(**{**TINY, 'objective': 'time_to_train'})
  samples = proposal.samples_of(s, w)
  assert samples == pytest.approx(
    1.551 * (1 + 55296 / 247317) * 4195197692, rel=0.01
  )
  off = proposal.Settings(
    **{**TINY, 'objective': 'time_to_train'}, convergence=False
  )
  assert proposal.samples_of(off, w) == 1e9


def test_batch_is_a_decision_of_time_to_train():
  w = wp.get('mlperf_dlrm_v1')
  p = platform_presets.get('dgx_a100_80gb')
  s = stack_presets.get('hugectr')
  out = batch_choice.choose(p, w, s, ws.WholeSystem('auto'), lambda f: 1.0)
  rows = out['rows']
  assert [r['global_batch'] for r in rows] == sorted(
    r['global_batch'] for r in rows
  )
  times = {r['global_batch']: r['time_to_train_s'] for r in rows}
  chosen = out['chosen_global_batch']
  ok = [r for r in rows if r['inside_measured']]
  assert times[chosen] == min(r['time_to_train_s'] for r in ok)
  assert out['sentence'].startswith('batch: global batch')
  # More samples at a larger batch (the curve), whatever the throughput.
  samples = [r['samples_to_target'] for r in rows]
  assert samples == sorted(samples)
  planner.make(w, p, s)  # the design the rows were judged on plans
  assert report.design_figures(p, w, planner.make(w, p, s), s)
