"""The Python API refuses what the command line refuses, with
`InputError` and one sentence: wrong types and values of its arguments,
and hand-built `Workload`, `Platform`, `Plan` and `Stack` objects whose
fields are not of their types or not finite (`codesign.typecheck`)."""

import dataclasses

import numpy as np
import pytest

import codesign
from codesign.boundary import inputs
from codesign.studies import proposal

W = codesign.load_workload('criteo_kaggle')
P = codesign.load_platform('big_basin')
S = codesign.load_stack('torchrec')
WJ = inputs.workload_json('criteo_kaggle')


def _refused(fn, words: str) -> None:
  with pytest.raises(codesign.InputError) as e:
    fn()
  assert words in str(e.value), str(e.value)
  assert '\n' not in str(e.value)


@pytest.mark.parametrize(
  'change, words',
  [
    ({'tables': ({'rows': 10, 'dim': 4},)}, 'tables.0 must be of type Table'),
    ({'tables': [W.tables[0]]}, 'tables must be a tuple'),
    ({'global_batch': float('nan')}, 'global_batch must be finite'),
    ({'global_batch': '4096'}, 'global_batch must be a number'),
    ({'top_mlp': 'abc'}, 'top_mlp must be a tuple'),
    ({'top_mlp': [512, 1]}, 'top_mlp must be a tuple'),
    ({'name': 5}, 'name must be a string'),
  ],
)
def test_a_hand_built_workload_is_checked(change, words):
  w = dataclasses.replace(W, **change)
  _refused(lambda: codesign.evaluate(w, P), words)


@pytest.mark.parametrize(
  'change, words',
  [
    ({'nodes': '8'}, 'platform.nodes must be a number'),
    ({'nodes': float('inf')}, 'platform.nodes must be finite'),
    ({'cpu': None}, 'platform.cpu must be given'),
    ({'accelerator': {'name': 'x'}}, 'accelerator must be of type Accelerator'),
  ],
)
def test_a_hand_built_platform_is_checked(change, words):
  p = dataclasses.replace(P, **change)
  _refused(lambda: codesign.evaluate(W, p), words)


def test_a_hand_built_plan_with_nan_is_refused():
  plan = codesign.make_plan(W, P, S)
  nan = np.full(W.num_tables, np.nan)
  bad = dataclasses.replace(plan, hbm_fraction=nan)
  _refused(lambda: codesign.evaluate(W, P, S, plan=bad), 'must be finite')
  bad = dataclasses.replace(plan, sharding='table_wise')
  _refused(lambda: codesign.evaluate(W, P, S, plan=bad), 'must be a tuple')


def test_a_list_where_an_array_is_expected_is_converted():
  """A plan's HBM fractions as a list or tuple cost what the array does
  (they failed in the trace: TracerArrayConversionError)."""
  plan = codesign.make_plan(W, P, S)
  want = codesign.evaluate(W, P, S, plan)['step_time_s']
  for frac in (list(plan.hbm_fraction), tuple(plan.hbm_fraction)):
    got = codesign.evaluate(
      W, P, S, dataclasses.replace(plan, hbm_fraction=frac)
    )
    assert got['step_time_s'] == want


def test_an_array_where_a_number_is_expected_is_refused():
  plan = codesign.make_plan(W, P, S)
  bad = dataclasses.replace(plan, cpu_lookup_fraction=np.full(26, 0.1))
  with pytest.raises(codesign.InputError, match='cpu_lookup_fraction .*shape'):
    codesign.evaluate(W, P, S, bad)
  zero_d = dataclasses.replace(plan, cpu_lookup_fraction=np.array(0.1))
  codesign.evaluate(W, P, S, zero_d)  # a 0-d array is a number


def test_integers_are_checked_as_on_the_command_line():
  """2.9999 shards is refused (it was truncated to 2), 2.0 is 2."""
  plan = codesign.make_plan(W, P, S)
  with pytest.raises(codesign.InputError, match='column_shards must be an int'):
    codesign.evaluate(W, P, S, dataclasses.replace(plan, column_shards=2.9999))
  two = codesign.evaluate(W, P, S, dataclasses.replace(plan, column_shards=2))
  also = codesign.evaluate(
    W, P, S, dataclasses.replace(plan, column_shards=2.0)
  )
  assert two == also
  with pytest.raises(codesign.InputError, match='global_batch must be an int'):
    codesign.evaluate(dataclasses.replace(W, global_batch=4096.5), P)


def test_a_hand_built_stack_is_checked():
  s = dataclasses.replace(S, tf32='yes')
  _refused(lambda: codesign.evaluate(W, P, s), 'stack.tf32 must be True')


def test_json_dicts_with_numbers_too_large_to_hold():
  table = {**WJ['tables'][0], 'rows': 10**400}
  _refused(
    lambda: codesign.load_workload({**WJ, 'tables': [table]}),
    'rows must have at most 19 digits',
  )


@pytest.mark.parametrize(
  'call, words',
  [
    (lambda: codesign.evaluate(5, P), 'workload must be a preset name'),
    (lambda: codesign.evaluate(W, P, stack=5), 'stack must be'),
    (lambda: codesign.evaluate(W, P, plan=5), 'plan must be auto'),
    (lambda: codesign.evaluate(W, P, x64='no'), 'x64 must be True or'),
    (lambda: codesign.load_workload([]), 'workload must be'),
    (lambda: codesign.evaluate(W, P, readers='some'), '--readers must be'),
    (lambda: codesign.evaluate(W, P, checkpoint='half'), 'checkpoint must'),
  ],
)
def test_evaluate_arguments_are_checked(call, words):
  _refused(call, words)


@pytest.mark.parametrize(
  'change, words',
  [
    ({'budget_usd': '1e6'}, 'budget_usd must be a number'),
    ({'max_nodes': 2.7}, 'max_nodes must be an integer'),
    ({'max_nodes': True}, 'max_nodes must be an integer'),
    ({'starts': 2.5}, 'starts must be an integer'),
    ({'seed': -1}, 'seed must be at least 0'),
    ({'trainers': 'cpu'}, 'trainers must be a tuple or list'),
    ({'presets': 'zion'}, 'presets must be a tuple or list'),
    ({'price': ('H100', 5)}, 'price must hold strings'),
    ({'objective': 'speed'}, 'objective must be one of'),
    ({'samples': float('nan')}, 'samples must be finite'),
    ({'workload': 5}, 'workload must be a Workload'),
    ({'x64': 'no'}, 'x64 must be True or False'),
    ({'progress': 5}, 'progress must be callable'),
    ({'cpu_stack': 5}, 'cpu_stack must be a Stack'),
  ],
)
def test_propose_arguments_are_checked_before_any_work(
  monkeypatch, change, words
):
  def no_search(settings, **kw):
    raise AssertionError('the search must not start')

  monkeypatch.setattr(proposal, 'run', no_search)
  args = {'workload': 'criteo_kaggle', 'starts': 1, 'steps': 1, **change}
  _refused(lambda: codesign.propose(**args), words)


def test_propose_passes_its_stacks_on(monkeypatch):
  seen = {}

  def capture(settings, **kw):
    seen['settings'] = settings
    raise codesign.InputError('captured')

  monkeypatch.setattr(proposal, 'run', capture)
  cpu = codesign.load_stack('ipex_cpu')
  with pytest.raises(codesign.InputError, match='captured'):
    codesign.propose('criteo_kaggle', stack=S, cpu_stack=cpu)
  assert seen['settings'].stack == S
  assert seen['settings'].cpu_stack == cpu


def test_evaluate_records_what_a_hand_written_platform_breaks():
  """16 x 800 Gb/s NICs on a Gen5 node and one socket for 8 MI300X: the
  figures come, and so do the rules they break (`nic_slot`: 100 GB/s per
  NIC over a 63 GB/s x16; `board`: the 8-OAM board has two sockets); a
  preset as sold breaks none."""
  from codesign.core.pytree import replace

  p = codesign.load_platform('mi300x_8')
  nic = replace(p.nic, count=16.0, bandwidth=100e9)
  bad = replace(p, nic=nic, sockets_per_node=1.0)
  r = codesign.evaluate('criteo_kaggle', bad)
  rules = {v['rule'] for v in r['buildability_violations']}
  assert {'nic_slot', 'board'} <= rules
  assert all(v['sentence'] for v in r['buildability_violations'])
  assert r['throughput_samples_per_s'] > 0
  good = codesign.evaluate('criteo_kaggle', 'dgx_h100')
  assert good['buildability_violations'] == []


def test_evaluate_prices_the_system_around_the_trainers_when_asked():
  """Readers sized to feed the trainers join the bill and the figures
  (as a proposal's); the default is the step alone; two reader nodes
  feed no more than two nodes can."""
  alone = codesign.evaluate('criteo_kaggle', 'dgx_h100')
  fed = codesign.evaluate('criteo_kaggle', 'dgx_h100', readers='auto')
  assert 'system' not in alone and fed['system']['reader_nodes'] >= 1
  trainers = fed['system']['trainers_usd']
  assert trainers == pytest.approx(alone['capex_usd'], rel=1e-12)
  assert fed['capex_usd'] > alone['capex_usd']
  assert fed['throughput_samples_per_s'] <= alone['throughput_samples_per_s']
  two = codesign.evaluate('criteo_kaggle', 'dgx_h100', readers=2)
  feed = two['system']['readers_feed_samples_per_s']
  assert two['throughput_samples_per_s'] <= feed * (1 + 1e-9)


def test_make_plan_without_a_sharding_is_the_stacks_own_plan():
  """No placement or sharding: the plan the stack's software makes
  (`Stack.planner`): NVIDIA's whole tables in HBM, Intel's split,
  HugeCTR's hybrid embedding (the auto plan's tables, each table's
  frequent rows replicated by the cost model); the same as naming that
  plan."""
  from codesign.model import planner

  w = codesign.load_workload('mlperf_dlrm_v1')
  for stack, platform in (
    ('nvidia_pytorch', 'dgx_a100_80gb'),
    ('hugectr@2021', 'dgx_a100_80gb'),
    ('ipex_cpu', 'cpu_4s'),
  ):
    s = codesign.load_stack(stack)
    p = codesign.load_platform(platform)
    placement, sharding = planner.STACK_PLANS[s.planner]
    own = codesign.make_plan(w, p, s)
    named = codesign.make_plan(w, p, s, placement=placement, sharding=sharding)
    assert own.sharding == named.sharding, stack
    np.testing.assert_array_equal(own.hbm_fraction, named.hbm_fraction)
    auto = codesign.make_plan(w, p, s, sharding='auto')
    if stack == 'nvidia_pytorch':
      assert set(own.sharding) == {'table_wise'}
      np.testing.assert_array_equal(own.hbm_fraction, 1.0)
    elif stack == 'ipex_cpu':
      assert 'data_parallel' in own.sharding, stack
      assert auto.sharding != own.sharding, stack
    else:
      assert 'data_parallel' not in own.sharding
      assert own.sharding == auto.sharding
  new = codesign.load_stack('hugectr')
  p = codesign.load_platform('dgx_a100_80gb')
  assert codesign.make_plan(w, p, new).sharding == auto_of(w, p, new)


def auto_of(w, p, s):
  return codesign.make_plan(w, p, s, placement='auto', sharding='auto').sharding
