"""Import from TorchRec: an export read back evaluates to the same figures
(1e-9), with and without the export's own `codesign` section; what a
description changes (rows, HBM, nodes) takes effect and is said; a bare
description is completed by guesses, each printed; bad descriptions are
one sentence; the script writes what evaluate takes. Descriptions built
from TorchRec's objects and a user's Python file: torchrec_bridge_test.py.
"""

import copy
import dataclasses
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import codesign
from codesign.boundary import export, torchrec_import
from codesign.core.errors import InputError
from codesign.model import planner, terms
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import workload_presets as presets
from codesign.spec.plan import SHARDINGS

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTIONS = ('workload', 'platform', 'plan', 'stack')
FIGURES = ('step_time_s', 'throughput_samples_per_s', 'capex_usd', 'power_w')


def _design(workload, platform, stack='torchrec', edit=None):
  w = presets.get(workload)
  p = platform_presets.get(platform)
  s = stack_presets.get(stack)
  plan = planner.make(w, p, s)
  if edit is not None:
    w, p, plan = edit(w, p, plan)
  return w, p, plan, s


def _mixed(w, p, plan):
  """Every sharding by turns, one table within the knee of whole."""
  shardings = tuple(SHARDINGS[i % len(SHARDINGS)] for i in range(26))
  frac = np.array(plan.hbm_fraction)
  frac[1] = 0.9995
  plan = dataclasses.replace(
    plan, sharding=shardings, column_shards=4, hbm_fraction=frac
  )
  return w, p, plan


def _zion_on_two_nodes(w, p, plan):
  p = hardware.with_value(p, 'nodes', 2.0)
  s = stack_presets.get('torchrec')
  return w, p, planner.make(w, p, s)


DESIGNS = {
  'mlperf_dgx_a100': ('mlperf_dlrm_v1', 'dgx_a100_80gb', 'torchrec', None),
  'zion_two_nodes': (
    'zion_scale',
    'dgx_a100_80gb',
    'torchrec',
    _zion_on_two_nodes,
  ),
  'kaggle_mixed_shardings': ('criteo_kaggle', 'big_basin', 'torchrec', _mixed),
  'kaggle_cpu': ('criteo_kaggle', 'cpu_2s', 'ipex_cpu', None),
}


def _figures(w, p, s, plan) -> dict:
  r = codesign.evaluate(w, p, s, plan)
  out = {k: r[k] for k in FIGURES}
  for tier, m in r['memory'].items():
    out[f'{tier}_required'] = m['required_bytes']
    out[f'{tier}_available'] = m['available_bytes']
  return out


def _close(a: dict, b: dict, rel=1e-9) -> list:
  return [
    (k, a[k], b[k])
    for k in a
    if abs(a[k] - b[k]) > rel * max(abs(a[k]), abs(b[k]), 1e-300)
  ]


@pytest.mark.parametrize('name', list(DESIGNS))
def test_export_import_evaluate_gives_the_same_figures(name):
  w, p, plan, s = _design(*DESIGNS[name])
  d = json.loads(json.dumps(export.torchrec_planner(w, p, plan, s)))
  before = _figures(w, p, s, plan)
  got = codesign.from_torchrec(d)
  assert got['guesses'] == []
  after = _figures(got['workload'], got['platform'], got['stack'], got['plan'])
  assert not _close(before, after), name
  # Without the export's own section, what TorchRec states is read the
  # same; the rest comes from guesses, each said.
  bare = {k: v for k, v in d.items() if k != 'codesign'}
  again = torchrec_import.to_inputs(bare)
  mine = torchrec_import.to_inputs(d)
  for key in ('tables', 'global_batch', 'optimizer', 'bottom_mlp'):
    assert again.workload[key] == mine.workload[key], key
  assert again.plan['sharding'] == mine.plan['sharding']
  # A table within the knee of whole is whole to TorchRec (fused).
  frac = np.array(mine.plan['hbm_fraction'])
  if p.trainer != 'cpu':
    frac = np.where(terms.whole_in_hbm(frac), 1.0, frac)
  np.testing.assert_allclose(again.plan['hbm_fraction'], frac, rtol=1e-12)
  assert any('plan:' in g for g in again.guesses)


def test_a_description_changes_what_it_states():
  w, p, plan, s = _design('mlperf_dlrm_v1', 'dgx_a100_80gb')
  d = export.torchrec_planner(w, p, plan, s)
  d = copy.deepcopy(d)
  d['tables'][3]['num_embeddings'] = 12345
  d['topology']['hbm_cap'] = 40 * 2**30
  d['topology']['world_size'] = 16  # two nodes of 8
  d['batch_size'] = w.global_batch // 16
  got = torchrec_import.to_inputs(d)
  assert got.workload['tables'][3]['rows'] == 12345
  assert got.workload['global_batch'] == w.global_batch
  assert got.platform['nodes'] == 2
  assert got.platform['accelerator']['hbm_capacity_gb'] == pytest.approx(
    40 * 2**30 / 1e9
  )
  said = ' '.join(got.guesses)
  assert 'nodes 2' in said and 'accelerator.hbm_capacity' in said


def test_a_bare_description_is_completed_by_guesses():
  d = {
    'tables': [
      {
        'name': f't{i}',
        'num_embeddings': 10**5 * (i + 1),
        'embedding_dim': 64,
        'feature_names': [f'f{i}'],
        'data_type': 'FP32',
      }
      for i in range(4)
    ],
    'topology': {
      'world_size': 8,
      'local_world_size': 8,
      'compute_device': 'cuda',
      'hbm_cap': 80 * 2**30,
      'ddr_cap': 128 * 2**30,
      'intra_host_bw': 600 * 2**30 / 1e3,
      'inter_host_bw': 12.5 * 2**30 / 1e3,
      'hbm_mem_bw': 2039e9 / 1e3,
      'ddr_mem_bw': 51 * 2**30 / 1e3,
      'hbm_to_ddr_mem_bw': 32 * 2**30 / 1e3,
    },
    'batch_size': 512,
  }
  got = torchrec_import.to_inputs(d)
  said = '\n'.join(got.guesses)
  for what in ('dense', 'pooling', 'optimizer', 'skew', 'nearest preset'):
    assert what in said, (what, said)
  assert got.platform['name'] == 'dgx_a100_80gb'
  assert got.workload['global_batch'] == 4096
  assert got.workload['bottom_mlp'][-1] == 64
  r = codesign.evaluate(got.workload, got.platform, got.stack, got.plan)
  assert r['step_time_s'] > 0


@pytest.mark.parametrize(
  'edit, words',
  [
    (lambda d: d.pop('topology'), ['tables and topology']),
    (lambda d: d['topology'].update(world_size=12), ['world_size 12']),
    (
      lambda d: d.update(optimizer={'class': 'torch.optim.LBFGS'}),
      ['LBFGS', 'optimizer'],
    ),
    (lambda d: d['tables'][0].update(data_type='FP8'), ['FP8']),
  ],
)
def test_bad_descriptions_are_one_sentence(edit, words):
  w, p, plan, s = _design('criteo_kaggle', 'big_basin')
  d = copy.deepcopy(export.torchrec_planner(w, p, plan, s))
  edit(d)
  with pytest.raises(InputError) as e:
    torchrec_import.to_inputs(d)
  msg = str(e.value)
  assert '\n' not in msg and all(x in msg for x in words), msg


def _python(args, cwd=ROOT):
  return subprocess.run(
    [sys.executable, '-m', *args],
    cwd=cwd,
    capture_output=True,
    text=True,
    timeout=300,
  )


def test_cli_writes_what_evaluate_takes(tmp_path):
  w, p, plan, s = _design('criteo_kaggle', 'big_basin')
  src = tmp_path / 'torchrec_planner.json'
  src.write_text(json.dumps(export.torchrec_planner(w, p, plan, s)))
  out = tmp_path / 'imported'
  got = _python(
    ['experiments.import_torchrec', f'--source={src}', f'--workdir={out}']
  )
  assert got.returncode == 0, got.stderr
  assert 'guess: none' in got.stdout
  files = {f.name for f in out.iterdir()}
  assert {'workload.json', 'platform.json', 'plan.json', 'stack.json'} <= files
  ev = tmp_path / 'ev'
  run = _python(
    [
      'experiments.evaluate',
      *(f'--{k}={out / (k + ".json")}' for k in SECTIONS),
      f'--workdir={ev}',
    ]
  )
  assert run.returncode == 0, run.stderr
  result = json.loads((ev / 'result.json').read_text())
  want = codesign.evaluate(w, p, s, plan)['throughput_samples_per_s']
  assert result['throughput_samples_per_s'] == pytest.approx(want, rel=1e-9)
  for args, words in (
    ([f'--source={tmp_path / "nope.json"}'], ['not a file']),
    ([], ['--source']),
  ):
    bad = _python(['experiments.import_torchrec', *args, f'--workdir={ev}2'])
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert all(x in bad.stderr for x in words), bad.stderr
  assert not (tmp_path / 'ev2').exists()
