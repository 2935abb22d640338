"""The JSON schema (`codesign.spec.schema`) and the inputs
(`codesign.boundary.inputs`): defaults honoured, every problem of a file in one
message, the schema described, presets through JSON and back bit for bit."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from codesign.boundary import inputs
from codesign.calibration import device_profile
from codesign.core.errors import InputError
from codesign.model import planner
from codesign.spec import (
  hardware,
  platform_presets,
  schema,
  stack_presets,
  workload_presets,
)
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl

ROOT = pathlib.Path(__file__).resolve().parents[2]

# criteo_terabyte (10M hash) as a person writes it: no interaction,
# dcn_layers, dcn_rank, global_batch, optimizer, dense_precision,
# popularity_skew or source, and tables without pooling or precision.
MINIMAL_TERABYTE = """{
  "name": "criteo_terabyte",
  "num_dense": 13,
  "bottom_mlp": [512, 256, 64],
  "top_mlp": [512, 512, 256, 1],
  "tables": [
    {"rows": 9980333, "dim": 64}, {"rows": 36084, "dim": 64},
    {"rows": 17217, "dim": 64}, {"rows": 7378, "dim": 64},
    {"rows": 20134, "dim": 64}, {"rows": 3, "dim": 64},
    {"rows": 7112, "dim": 64}, {"rows": 1442, "dim": 64},
    {"rows": 61, "dim": 64}, {"rows": 9758201, "dim": 64},
    {"rows": 1333352, "dim": 64}, {"rows": 313829, "dim": 64},
    {"rows": 10, "dim": 64}, {"rows": 2208, "dim": 64},
    {"rows": 11156, "dim": 64}, {"rows": 122, "dim": 64},
    {"rows": 4, "dim": 64}, {"rows": 970, "dim": 64},
    {"rows": 14, "dim": 64}, {"rows": 9994222, "dim": 64},
    {"rows": 7267859, "dim": 64}, {"rows": 9946608, "dim": 64},
    {"rows": 415421, "dim": 64}, {"rows": 12420, "dim": 64},
    {"rows": 101, "dim": 64}, {"rows": 36, "dim": 64}
  ]
}"""

# Three problems of the schema and two of the values, in one file.
BROKEN_WORKLOAD = {
  'name': 'broken',
  'tables': [{'rows': 1000, 'dim': 16}, {'rows': 'x', 'dim': 16}],
  'bottom_mlp': [64, 16],
  'top_mlp': [1],
  'foo': 1,
  'optimizer': 'lamb',
  'global_batch': 0,
}
BROKEN_PROBLEMS = [
  'missing key workload.num_dense',
  "workload.tables.1.rows must be an integer, got 'x'",
  'unknown key workload.foo (valid keys: name, tables,',
  "unknown optimizer 'lamb'",
  'workload.global_batch must be an integer in [1, 1e+08], got 0',
]


def test_minimal_workload_takes_the_dataclass_defaults():
  got = schema.workload_from_json(json.loads(MINIMAL_TERABYTE))
  preset = workload_presets.get('criteo_terabyte')
  assert got == dataclasses.replace(preset, source='')
  with_source = {**json.loads(MINIMAL_TERABYTE), 'source': preset.source}
  assert schema.workload_from_json(with_source) == preset
  # Every defaulted field came from the dataclasses.
  assert got.tables[0] == wl.Table(9980333, 64)
  assert (got.interaction, got.optimizer, got.global_batch) == (
    'dot',
    'sgd',
    2048,
  )


def test_fields_without_defaults_stay_required():
  d = json.loads(MINIMAL_TERABYTE)
  del d['tables'][3]['dim'], d['num_dense']
  with pytest.raises(InputError) as e:
    schema.workload_from_json(d)
  assert 'missing key workload.tables.3.dim' in str(e.value)
  assert 'missing key workload.num_dense' in str(e.value)
  sj = schema.stack_to_json(stack_presets.get('torchrec'))
  del sj['op_host_time_us']
  with pytest.raises(InputError, match='missing key stack.op_host_time_us'):
    schema.stack_from_json(sj)
  # `sources` may always be left out.
  pj = schema.platform_to_json(platform_presets.get('zion'))
  del pj['sources'], pj['nic']['sources']
  assert schema.platform_from_json(pj).nic.sources == ()


def test_platform_files_without_link_kind_or_memory_kind_still_load():
  """Platform JSON written before NVLink-C2C and soldered memory (issue
  21 item 6) has no host_link.kind nor cpu.memory: they take 'pcie' and
  'dimm', and the platform is the preset, bit for bit. GH200's 'c2c' and
  'soldered' survive a round trip; an unknown kind names the valid ones."""
  old = schema.platform_to_json(platform_presets.get('dgx_h100'))
  assert (old['host_link'].pop('kind'), old['cpu'].pop('memory')) == (
    'pcie',
    'dimm',
  )
  got = schema.platform_from_json(old)
  assert (got.host_link.kind, got.cpu.memory) == ('pcie', 'dimm')
  _same_bits(got, platform_presets.get('dgx_h100'))
  gh = _round_trip(
    platform_presets.get('gh200'),
    schema.platform_to_json,
    schema.platform_from_json,
  )
  assert (gh.host_link.kind, gh.cpu.memory) == ('c2c', 'soldered')
  bad = schema.platform_to_json(platform_presets.get('gh200'))
  bad['host_link']['kind'] = 'cxl'
  with pytest.raises(InputError, match='pcie, c2c'):
    schema.platform_from_json(bad)


def test_stack_files_without_the_per_sample_loading_still_load():
  """Stack JSON written before the per-sample batch loading has no
  sample_host_time_us: it loads as 0 (no loading on the training thread),
  every other field as written; TorchRec's own value survives a round
  trip."""
  trec = stack_presets.get('torchrec')
  assert trec.sample_host_time > 0.0
  old = schema.stack_to_json(trec)
  assert old.pop('sample_host_time_us') == pytest.approx(
    trec.sample_host_time * 1e6
  )
  got = schema.stack_from_json(old)
  assert got.sample_host_time == 0.0
  _same_bits(got, dataclasses.replace(trec, sample_host_time=0.0))
  back = _round_trip(trec, schema.stack_to_json, schema.stack_from_json)
  assert back.sample_host_time == trec.sample_host_time


def test_every_problem_of_a_file_in_one_message(tmp_path):
  path = tmp_path / 'workload.json'
  path.write_text(json.dumps(BROKEN_WORKLOAD))
  with pytest.raises(InputError) as e:
    inputs.resolve(str(path), 'big_basin')
  message = str(e.value)
  assert message.startswith(f'{path} has 5 problems: '), message
  assert '\n' not in message
  for words in BROKEN_PROBLEMS:
    assert words in message, (words, message)
  # The same from each part of a platform and from a stack.
  pj = schema.platform_to_json(platform_presets.get('zion'))
  pj['nodes'] = 0
  pj['fabric']['topology'] = 'dragonfly'
  del pj['cpu']['power_w']
  pj['nic']['count'] = 'two'
  with pytest.raises(InputError) as e:
    schema.platform_from_json(pj, 'p.json')
  message = str(e.value)
  assert message.startswith('p.json has 4 problems: '), message
  for words in (
    'missing key platform.cpu.power_w',
    "platform.nic.count must be a number, got 'two'",
    "unknown topology 'dragonfly' (valid choices: switch,",
    'platform.nodes must lie in [1, 1024], got 0',
  ):
    assert words in message, (words, message)
  sj = schema.stack_to_json(stack_presets.get('hugectr'))
  sj.update(host_overlap=1.5, graph_scope='all', tf32='yes')
  with pytest.raises(InputError, match='stack has 3 problems: '):
    schema.stack_from_json(sj)


def test_one_problem_is_one_sentence():
  with pytest.raises(InputError) as e:
    inputs.resolve('criteo_kaggle', 'big_basin', overrides=['plan.overlap=2'])
  assert str(e.value) == 'plan.overlap must lie in [0, 1], got 2.0'


def test_validators_name_every_problem():
  w = dataclasses.replace(
    workload_presets.get('criteo_kaggle'), optimizer='lamb', global_batch=0
  )
  assert len(wl.problems(w)) == 2
  with pytest.raises(InputError, match='workload has 2 problems: '):
    wl.validate(w)
  s = dataclasses.replace(
    stack_presets.get('torchrec'), id_bytes=3, host_overlap=2.0
  )
  assert len(stack_lib.problems(s)) == 2


def test_overrides_reach_keys_a_file_leaves_out(tmp_path):
  path = tmp_path / 'minimal.json'
  path.write_text(MINIMAL_TERABYTE)
  w, _, _, _ = inputs.resolve(
    str(path),
    'big_basin',
    overrides=[
      'workload.optimizer=adam',
      'workload.tables.0.precision=fp16',
      'workload.tables.1.pooling=2',
    ],
  )
  assert w.optimizer == 'adam'
  assert w.tables[0].precision == 'fp16' and w.tables[1].precision == 'fp32'
  assert w.tables[1].pooling == 2.0 and w.tables[0].pooling == 1.0


def test_device_profile_is_passed_explicitly():
  path = device_profile.PROFILES_DIR / 'local_cpu.json'
  profile = device_profile.load(path)
  _, p, _, _ = inputs.resolve(
    'criteo_kaggle', 'cpu_2s', 'ddr', device_profile=str(path)
  )
  assert p.cpu.gemm_half_size == profile['gemm_half_size']
  # No state is left behind: the next call without it gets the preset.
  _, q, _, _ = inputs.resolve('criteo_kaggle', 'cpu_2s', 'ddr')
  preset = platform_presets.get('cpu_2s')
  assert q.cpu.gemm_half_size == preset.cpu.gemm_half_size
  assert q.cpu.gemm_half_size != profile['gemm_half_size']


def _same_bits(a, b):
  la, ta = jax.tree.flatten(a)
  lb, tb = jax.tree.flatten(b)
  assert ta == tb
  for x, y in zip(la, lb, strict=True):
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    assert x.shape == y.shape and x.tobytes() == y.tobytes()


def _round_trip(obj, to_json, from_json):
  d = to_json(obj)
  back = from_json(json.loads(json.dumps(d)))
  if isinstance(obj, wl.Workload):  # static: plain Python values
    assert back == obj
  else:
    _same_bits(obj, back)
  assert json.dumps(to_json(back)) == json.dumps(d)
  return back


def test_presets_round_trip_bit_for_bit():
  for name in workload_presets.WORKLOADS:
    w = workload_presets.get(name)
    _round_trip(w, schema.workload_to_json, schema.workload_from_json)
  for name in platform_presets.PLATFORMS:
    p = platform_presets.get(name)
    _round_trip(p, schema.platform_to_json, schema.platform_from_json)
  for name in stack_presets.PRESETS:
    for fitted in (True, False):
      s = stack_presets.get(name, fitted=fitted)
      _round_trip(s, schema.stack_to_json, schema.stack_from_json)


def test_objects_read_back_equal_the_presets_sources_included():
  """A run's config.json writes sources with sorted keys; the preset's
  sources are kept in that order too, so the stack and platform read
  back are equal (and hash equal): the same compiled programs."""
  s = stack_presets.get('torchrec')
  assert [k for k, _ in s.sources] == sorted(k for k, _ in s.sources)
  back = schema.stack_from_json(
    json.loads(json.dumps(schema.stack_to_json(s), sort_keys=True))
  )
  assert back == s and hash(back) == hash(s)
  p = platform_presets.get('dgx_h100')
  back = schema.platform_from_json(
    json.loads(json.dumps(schema.platform_to_json(p), sort_keys=True))
  )
  assert back == p


@pytest.mark.parametrize(
  'workload, platform, stack',
  [
    ('criteo_kaggle', 'big_basin', 'torchrec'),
    ('zion_scale', 'zionex', 'hugectr'),
    ('mlperf_dlrm_dcnv2', 'cpu_2s', 'ipex_cpu'),
  ],
)
def test_plans_round_trip_bit_for_bit(workload, platform, stack):
  w = workload_presets.get(workload)
  p = platform_presets.get(platform)
  s = stack_presets.get(stack)
  for placement in ('auto', 'hbm', 'ddr'):
    plan = planner.make(w, p, s, placement=placement)
    back = _round_trip(
      plan, schema.plan_to_json, lambda d: schema.plan_from_json(d, w)
    )
    assert back.sharding == plan.sharding


def test_schema_description_covers_every_field():
  desc = schema.schema_description()
  keys = {e['key']: e for entries in desc.values() for e in entries}
  for section, prefix, cls in _every_dataclass():
    for f in dataclasses.fields(cls):
      e = keys[f'{prefix}.{schema.json_key(f)}']
      assert e['doc'], e
      assert e['unit'] == f.metadata.get('unit'), e
      assert section in desc
  assert keys['workload.optimizer']['default'] == '"sgd"'
  assert keys['workload.global_batch']['default'] == '2048'
  assert keys['workload.tables.<i>.pooling']['default'] == '1.0'
  assert keys['workload.tables.<i>.rows']['default'] == 'required'
  assert keys['platform.nodes']['default'] == 'required'
  assert keys['stack.step_floor_us']['si_factor'] == 1e-6
  assert keys['platform.fabric.topology']['choices'] == list(
    hardware.TOPOLOGIES
  )
  assert keys['plan.sharding']['choices'] == list(plan_lib.SHARDINGS)
  assert keys['stack.update_path']['choices'] == list(stack_lib.UPDATE_PATHS)
  assert keys['platform.trainer']['choices'] == list(hardware.TRAINERS)


def _every_dataclass():
  """(section, key prefix, class) of every object of the schema."""
  parts = [
    ('workload', 'workload', wl.Workload),
    ('workload', 'workload.tables.<i>', wl.Table),
    ('platform', 'platform', hardware.Platform),
    ('plan', 'plan', plan_lib.Plan),
    ('stack', 'stack', stack_lib.Stack),
  ]
  for name in ('cpu', 'accelerator', 'fabric', 'host_link', 'nic'):
    f = next(f for f in dataclasses.fields(hardware.Platform) if f.name == name)
    parts.append(('platform', f'platform.{name}', f.type))
  return parts


def test_cli_dump_schema_and_a_broken_file(tmp_path):
  # Both subprocesses start together (each pays for a JAX import).
  broken = tmp_path / 'workload.json'
  broken.write_text(json.dumps(BROKEN_WORKLOAD))

  def start(flags, workdir):
    return subprocess.Popen(
      [sys.executable, '-m', 'experiments.evaluate', *flags]
      + [f'--workdir={workdir}'],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )

  dump = start(['--dump_schema'], tmp_path / 'dump')
  bad = start([f'--workload={broken}'], tmp_path / 'bad')
  out, err = dump.communicate(timeout=300)
  assert dump.returncode == 0, err
  assert not (tmp_path / 'dump').exists()
  lines = {line.split()[0]: line for line in out.splitlines() if line}
  for _, prefix, cls in _every_dataclass():
    for f in dataclasses.fields(cls):
      line = lines[f'{prefix}.{schema.json_key(f)}']
      unit = f.metadata.get('unit')
      assert (unit or ' - ') in line, line
  assert 'one of: switch, fully_connected' in lines['platform.fabric.topology']
  assert ' 2048 ' in lines['workload.global_batch']
  out, err = bad.communicate(timeout=300)
  assert bad.returncode == 2
  assert len(err.strip().splitlines()) == 1, err
  assert 'Traceback' not in out + err
  assert f'{broken} has 5 problems: ' in err
  for words in BROKEN_PROBLEMS:
    assert words in err, (words, err)
  assert not (tmp_path / 'bad').exists()
