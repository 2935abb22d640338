"""What a user's own inputs may be (`codesign.boundary.inputs`): partial
files and dicts on a base (a preset or another file), the shipped
examples, counts that must be whole numbers, and the batch each rank
trains (refused below one sample, flagged below the stack's fitted
least)."""

import json
import pathlib
import subprocess
import sys

import pytest

import codesign
from codesign.boundary import inputs
from codesign.calibration import public_cases
from codesign.model import report
from codesign.spec import (
  hardware,
  platform_presets,
  stack_presets,
  workload_presets,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / 'examples' / 'inputs'


def _refused(fn, *words: str) -> str:
  with pytest.raises(codesign.InputError) as e:
    fn()
  message = str(e.value)
  assert '\n' not in message
  for w in words:
    assert w in message, message
  return message


def _write(path: pathlib.Path, d: dict) -> str:
  path.write_text(json.dumps(d))
  return str(path)


# ---- partial inputs --------------------------------------------------------


def test_a_five_key_platform_file_evaluates_from_the_command_line(tmp_path):
  f = EXAMPLES / 'my_cluster.json'
  assert len(json.loads(f.read_text())) == 5
  proc = subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.evaluate',
      f'--platform={f}',
      '--workload=rm1',
      f'--workdir={tmp_path / "run"}',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  config = json.loads((tmp_path / 'run' / 'config.json').read_text())
  pj = config['platform']
  assert pj['name'] == 'my_h100_cluster'
  assert (pj['nodes'], pj['nic']['count']) == (4.0, 4.0)
  assert pj['cpu']['ddr_capacity_gb'] == 512.0
  base = inputs.platform_json('dgx_h100')
  assert pj['accelerator'] == base['accelerator']  # the rest is the base's
  result = json.loads((tmp_path / 'run' / 'result.json').read_text())
  assert result['throughput_samples_per_s'] > 0


# The example inputs (a parts file, my_parts.json, is not one: its test
# is tests/spec/user_parts_test.py).
INPUTS = sorted(
  p.name for p in EXAMPLES.glob('*.json') if 'base' in json.loads(p.read_text())
)


def test_the_examples_are_there():
  assert len(INPUTS) >= 4 and (EXAMPLES / 'my_parts.json').is_file()


@pytest.mark.parametrize('name', INPUTS)
def test_every_example_input_evaluates(name):
  d = json.loads((EXAMPLES / name).read_text())
  path = str(EXAMPLES / name)
  kind = (
    'stack'
    if d['base'] in stack_presets.PRESETS
    else 'workload'
    if d['base'] in workload_presets.WORKLOADS
    else 'platform'
  )
  args = {'workload': 'rm1', 'platform': 'dgx_h100', 'stack': None}
  args[kind] = path
  r = codesign.evaluate(args['workload'], args['platform'], args['stack'])
  assert r['throughput_samples_per_s'] > 0 and r['capex_usd'] > 0
  assert r[kind] == d['name']


def test_partial_objects_merge_key_by_key_and_record_their_source(tmp_path):
  f = _write(
    tmp_path / 'p.json',
    {'base': 'dgx_h100', 'nodes': 2, 'nic': {'count': 2}},
  )
  p, base = codesign.load_platform(f), platform_presets.get('dgx_h100')
  assert p.name == 'dgx_h100'  # a partial without a name keeps the base's
  assert float(p.nic.count) == 2.0 and float(p.nodes) == 2.0
  assert float(p.nic.bandwidth) == float(base.nic.bandwidth)
  assert dict(p.nic.sources)['count'] == f'{f}: set over the base dgx_h100'
  assert dict(p.nic.sources)['bandwidth'] == dict(base.nic.sources)['bandwidth']
  assert dict(p.sources)['nodes'].startswith(f)


def test_a_list_replaces_the_bases_and_is_checked_as_a_whole(tmp_path):
  tables = [{'rows': 1000, 'dim': 64}, {'rows': 50, 'dim': 64, 'pooling': 3}]
  w = codesign.load_workload(
    _write(tmp_path / 'w.json', {'base': 'rm1', 'tables': tables})
  )
  assert [(t.rows, t.pooling) for t in w.tables] == [(1000, 1.0), (50, 3.0)]
  bad = _write(tmp_path / 'bad.json', {'base': 'rm1', 'tables': [{'rows': 5}]})
  _refused(lambda: codesign.load_workload(bad), 'workload.tables.0.dim')


def test_a_base_may_be_another_file_from_this_ones_folder(tmp_path):
  (tmp_path / 'sub').mkdir()
  _write(tmp_path / 'sub' / 'a.json', {'base': 'zion', 'nodes': 3})
  b = _write(tmp_path / 'sub' / 'b.json', {'base': 'a.json', 'name': 'b'})
  p = codesign.load_platform(b)
  assert (p.name, float(p.nodes)) == ('b', 3.0)
  bigger = codesign.load_platform(str(EXAMPLES / 'my_bigger_cluster.json'))
  assert float(bigger.nodes) == 8.0 and float(bigger.nic.count) == 4.0


def test_a_partial_dict_goes_through_the_api():
  s = codesign.load_stack({'base': 'hugectr', 'step_floor_us': 123})
  assert s.name == 'hugectr' and s.step_floor == pytest.approx(123e-6)
  r = codesign.evaluate(
    {'base': 'rm1', 'global_batch': 4096}, {'base': 'dgx_h100', 'nodes': 2}
  )
  assert r['platform'] == 'dgx_h100' and r['throughput_samples_per_s'] > 0


def test_a_bad_partial_is_one_sentence(tmp_path):
  cases = {
    'unknown_key': ({'base': 'zion', 'nic': {'cont': 4}}, 'platform.nic.cont'),
    'unknown_base': ({'base': 'zion2'}, "'zion2'"),
    'not_a_name': ({'base': 5}, '"base" must name a platform preset'),
    'missing_file': ({'base': 'nope.json'}, 'nope.json'),
    'out_of_range': ({'base': 'zion', 'nodes': 5000}, 'platform.nodes'),
    'self': ({'base': 'self.json'}, 'bases nest more than'),
  }
  for name, (d, words) in cases.items():
    f = _write(tmp_path / f'{name}.json', d)
    _refused(lambda f=f: codesign.load_platform(f), words)


# ---- counts ----------------------------------------------------------------


@pytest.mark.parametrize(
  'override, key',
  [
    ('platform.nodes=2.5', 'platform.nodes'),
    ('platform.sockets_per_node=1.5', 'platform.sockets_per_node'),
    ('platform.accelerators_per_node=7.5', 'platform.accelerators_per_node'),
    ('platform.nic.count=1.5', 'platform.nic.count'),
    (
      'platform.fabric.hosts_per_domain=1.5',
      'platform.fabric.hosts_per_domain',
    ),
  ],
)
def test_a_fractional_count_is_refused_at_the_boundary(override, key):
  message = _refused(
    lambda: inputs.load_platform('big_basin', [override]), key, 'whole number'
  )
  assert message.count('must') == 1


def test_a_hand_built_fractional_count_is_refused_but_the_model_takes_it():
  relaxed = hardware.with_value(platform_presets.get('big_basin'), 'nodes', 2.5)
  _refused(lambda: codesign.evaluate('rm1', relaxed), 'platform.nodes')
  # The search's relaxed designs never pass the boundary: the model
  # costs them as they are.
  w, s = codesign.load_workload('rm1'), codesign.load_stack('torchrec')
  fig = report.design_figures(relaxed, w, codesign.make_plan(w, 'big_basin'), s)
  assert fig['throughput_samples_per_s'] > 0


# ---- the batch per rank ----------------------------------------------------


def test_less_than_one_sample_per_rank_is_refused():
  words = ('global_batch must be at least one sample per rank', '128 ranks')
  _refused(
    lambda: inputs.resolve(
      'criteo_kaggle',
      'big_basin',
      overrides=['workload.global_batch=100', 'platform.nodes=16'],
    ),
    *words,
  )
  w = {'base': 'criteo_kaggle', 'global_batch': 100}
  p = {'base': 'big_basin', 'nodes': 16}
  _refused(lambda: codesign.evaluate(w, p), *words)
  _refused(lambda: codesign.make_plan(w, p), *words)


def test_a_batch_below_the_stacks_fitted_least_is_flagged():
  w = {'base': 'rm1', 'global_batch': 1024}
  r = codesign.evaluate(w, 'big_basin', 'torchrec')  # 128 a rank
  info = r['rank_batch']
  assert info['samples_per_rank'] == 128.0
  assert info['stack_minimum'] == 256 and info['below_stack_minimum']
  line = inputs.rank_batch_warning(info, 'torchrec')
  assert line.startswith('warning: 128 samples per rank') and 'C16' in line
  r = codesign.evaluate('rm1', 'big_basin', 'torchrec')  # 256 a rank
  assert not r['rank_batch']['below_stack_minimum']
  assert inputs.rank_batch_warning(r['rank_batch'], 'torchrec') is None


def test_fitted_rank_batches_are_the_public_cases_least():
  data = json.loads(public_cases.CASES_FILE.read_text())
  batch = {c['id']: c['global_batch'] for c in data['cases']}
  least = {}
  for k in public_cases.case_keys():
    per_rank = batch[k.case_id] / (k.devices * k.nodes)
    here = (per_rank, k.case_id)
    family = stack_presets.family(k.stack)  # every release of a stack
    least[family] = min(least.get(family, here), here)
  for stack, (value, source) in stack_presets.FITTED_RANK_BATCH.items():
    assert (value, source.split(':')[0]) == least[stack], stack
  assert set(least) - set(stack_presets.FITTED_RANK_BATCH) <= {'jax_xla'}
