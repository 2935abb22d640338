"""`evaluate --dump_schema=json` (`codesign.spec.json_schema`): a draft
2020-12 JSON Schema that a standard validator (`jsonschema`) reads, which
every shipped preset and example passes, with units and the same ranges
the loaders enforce."""

import json
import pathlib
import subprocess
import sys

import jsonschema
import pytest

from codesign.boundary import inputs
from codesign.core.errors import InputError
from codesign.model import planner
from codesign.spec import (
  hardware,
  json_schema,
  platform_presets,
  schema,
  stack_presets,
  workload_presets,
)
from codesign.spec import stack as stack_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope='module')
def dumped() -> dict:
  """What `--dump_schema=json` prints."""
  proc = subprocess.run(
    [sys.executable, '-m', 'experiments.evaluate', '--dump_schema=json'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  return json.loads(proc.stdout)


@pytest.fixture(scope='module')
def validator(dumped):
  jsonschema.Draft202012Validator.check_schema(dumped)
  return jsonschema.Draft202012Validator(dumped)


def _errors(validator, doc) -> list[str]:
  return [e.message for e in validator.iter_errors(doc)]


def test_it_is_the_librarys_schema_and_json_has_no_infinities(dumped):
  assert dumped == json_schema.json_schema()
  assert dumped['$schema'] == 'https://json-schema.org/draft/2020-12/schema'
  assert json_schema.is_finite_schema(dumped)


def test_every_shipped_preset_validates(validator):
  for name in workload_presets.WORKLOADS:
    w = workload_presets.get(name)
    assert not _errors(validator, {'workload': schema.workload_to_json(w)})
  for name in stack_presets.PRESETS:
    sj = schema.stack_to_json(stack_presets.get(name))
    assert not _errors(validator, {'stack': sj}), name
  w = workload_presets.get('rm1')
  for name in platform_presets.PLATFORMS:
    p = platform_presets.get(name)
    doc = {'platform': schema.platform_to_json(p)}
    assert not _errors(validator, doc), (name, _errors(validator, doc))
  plan = planner.make(
    w, platform_presets.get('big_basin'), stack_presets.get('torchrec')
  )
  assert not _errors(validator, {'plan': schema.plan_to_json(plan)})


def test_the_examples_and_a_config_json_validate(validator):
  for path in (ROOT / 'examples' / 'inputs').glob('my_*.json'):
    d = json.loads(path.read_text())
    if 'base' not in d:
      continue
    section = (
      'stack'
      if d['base'] in stack_presets.PRESETS
      else 'workload'
      if d['base'] in workload_presets.WORKLOADS
      else 'platform'
    )
    assert not _errors(validator, {section: d}), path.name
  config = {
    'workload': inputs.workload_json('criteo_kaggle'),
    'platform': inputs.platform_json('cpu_2s'),
    'stack': inputs.stack_json('ipex_cpu'),
    'plan': {
      'hbm_fraction': 0.5,
      'cpu_lookup_fraction': 0,
      'overlap': 1,
      'sharding': 'row_wise',
      'column_shards': 1,
      'comm_precision': 'fp32',
    },
  }
  assert not _errors(validator, config)


@pytest.mark.parametrize(
  'change, words',
  [
    ({'nodes': 2.5}, 'is not of type'),
    ({'nodes': 5000}, 'is greater than the maximum'),
    ({'nic': {'count': 0}}, 'is less than the minimum'),
    ({'trainer': 'gpu'}, 'is not one of'),
    ({'accelerator': {'hbm_capacity_gb': -1}}, 'is less than the minimum'),
    ({'nodez': 4}, 'nodez'),
  ],
)
def test_a_bad_partial_platform_fails(validator, change, words):
  errors = _errors(validator, {'platform': {'base': 'zion', **change}})
  assert any(words in e for e in errors), errors


def test_a_whole_platform_needs_every_required_key(validator):
  pj = inputs.platform_json('zion')
  del pj['nodes']
  assert any(
    "'nodes' is a required" in e for e in _errors(validator, {'platform': pj})
  )


def _leaf_keys(d: dict, prefix=()):
  """(path of JSON keys) of every number in a JSON object."""
  for k, v in d.items():
    if k == 'sources':
      continue
    if isinstance(v, dict):
      yield from _leaf_keys(v, prefix + (k,))
    elif isinstance(v, int | float) and not isinstance(v, bool):
      yield prefix + (k,)


def _set(d: dict, keys, value) -> dict:
  out = json.loads(json.dumps(d))
  node = out
  for k in keys[:-1]:
    node = node[k]
  node[keys[-1]] = value
  return out


def _loader_accepts(section: str, d: dict) -> bool:
  load = {
    'platform': schema.platform_from_json,
    'stack': schema.stack_from_json,
  }[section]
  try:
    load(d)
  except InputError:
    return False
  return True


@pytest.mark.parametrize(
  'section, preset',
  [('platform', 'dgx_h100'), ('stack', 'torchrec')],
)
def test_the_ranges_are_the_loaders(validator, section, preset):
  """At every number's maximum and minimum both accept; a little past
  either both refuse; every number with a unit names it."""
  base = {'platform': inputs.platform_json, 'stack': inputs.stack_json}[
    section
  ](preset)
  props = validator.schema['$defs'][section]
  checked = 0
  for keys in _leaf_keys(base):
    node = props
    for k in keys:
      node = node['properties'][k]
    if keys[-1].rpartition('_')[0] and 'x-unit' in node:
      assert keys[-1].endswith('_' + node['x-unit']), keys
      assert f'[unit: {node["x-unit"]};' in node['description']
    for bound, step in (('maximum', 1.01), ('minimum', 0.99)):
      if bound not in node or node[bound] == 0:
        continue
      edge = node[bound]
      for value, ok in ((edge, True), (edge * step, False)):
        if isinstance(value, float) and node['type'] == 'integer':
          value = edge + (1 if bound == 'maximum' else -1)
        d = _set(base, keys, value)
        in_schema = not _errors(validator, {section: d})
        assert in_schema == ok, (keys, value)
        assert _loader_accepts(section, d) == ok, (keys, value)
      checked += 1
  expected = (
    len(hardware.BOUNDS) if section == 'platform' else len(stack_lib.BOUNDS)
  )
  assert checked >= expected
