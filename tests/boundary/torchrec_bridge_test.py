"""The export planned in TorchRec's own planner (its CPU build, installed
by tools/install_torchrec.sh; skipped with the reason where it is not
installed, a failure where CODESIGN_REQUIRE_TORCHREC is set, as CI sets
it). Five runs: mlperf_dlrm_v1 and zion_scale (HBM full, UVM-cached
tables) on a DGX A100, criteo_1tb on one A100, the propose result in
torchrec_proposal.json (`codesign propose` with its defaults: zion_scale
on 8 MI300X, three tables within the knee of whole), and mlperf_dlrm_v1
trained with Adam. For each: TorchRec plans under the exported
constraints with the same sharding type and kernel per table; the
exported ShardingPlan is TorchRec's own objects, valid as given, and fits
TorchRec's reserved storage; TorchRec's busiest-rank HBM and every rank's
DDR on that plan are within 3% of codesign's (and the busiest rank
within 3% of result.json's HBM need); no table whole in HBM by the cost
model's threshold is exported cached. Then a user's Python model file
(torchrec_user_model.py) imports, evaluates and proposes as written, and
its objects describe the same as the file."""

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import codesign
from codesign.boundary import export, torchrec_bridge, torchrec_import
from codesign.model import planner, terms
from codesign.spec import hardware, platform_presets, schema, stack_presets
from codesign.spec import workload_presets as presets

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).parent
REQUIRED = 'CODESIGN_REQUIRE_TORCHREC'
WITHIN = 0.03
SECTIONS = ('workload', 'platform', 'plan', 'stack')


@pytest.fixture(scope='module', autouse=True)
def torchrec():
  """Skips the module, saying why, where TorchRec does not import (fails
  instead where CI installed it: CODESIGN_REQUIRE_TORCHREC)."""
  why = torchrec_bridge.missing()
  if why is not None and os.environ.get(REQUIRED):
    pytest.fail(f'{REQUIRED} is set but {why}')
  if why is not None:
    pytest.skip(why)


def _auto(workload, platform, edit=None):
  w = presets.get(workload)
  p = platform_presets.get(platform)
  if edit is not None:
    w, p = edit(w, p)
  s = stack_presets.get('torchrec')
  return w, p, planner.make(w, p, s), s


def _proposal():
  d = json.loads((HERE / 'torchrec_proposal.json').read_text())
  w = codesign.load_workload(d)
  plan = schema.plan_from_json(d['plan'], w)
  return w, codesign.load_platform(d), plan, codesign.load_stack(d)


RUNS = {
  'mlperf_dgx_a100': lambda: _auto('mlperf_dlrm_v1', 'dgx_a100_80gb'),
  'zion_dgx_a100': lambda: _auto('zion_scale', 'dgx_a100_80gb'),
  'criteo_1tb_one_gpu': lambda: _auto(
    'criteo_1tb',
    'dgx_a100_80gb',
    lambda w, p: (w, hardware.with_value(p, 'accelerators_per_node', 1.0)),
  ),
  'proposal': _proposal,
  'mlperf_adam': lambda: _auto(
    'mlperf_dlrm_v1',
    'dgx_a100_80gb',
    lambda w, p: (dataclasses.replace(w, optimizer='adam'), p),
  ),
}


@pytest.fixture(scope='module')
def planned():
  """Per run: the design, its figures, its export and TorchRec's plans."""
  out = {}
  for name, make in RUNS.items():
    w, p, plan, s = make()
    figures = codesign.evaluate(w, p, s, plan)
    d = export.torchrec_planner(w, p, plan, s, figures=figures)
    d = json.loads(json.dumps(d))  # as a file holds it
    out[name] = (w, p, plan, figures, d, torchrec_bridge.plan_both(d))
  return out


@pytest.mark.parametrize('name', list(RUNS))
def test_torchrec_plans_the_same_shardings_and_kernels(planned, name):
  *_, figures, d, both = planned[name]
  assert figures['feasible'], name
  own = both['torchrec']
  assert 'error' not in own, own
  for table, x in d['sharding_plan']['tables'].items():
    assert own['tables'][table] == {
      'sharding': x['sharding_type'],
      'kernel': x['compute_kernel'],
    }, table
  assert own['fits'] and both['export']['fits'], name


@pytest.mark.parametrize('name', list(RUNS))
def test_the_sharding_plan_is_torchrecs_own_and_valid(planned, name):
  from torchrec.distributed.planner.planners import validate_rank_assignment

  d = planned[name][4]
  o = torchrec_bridge.objects(d)
  plan = torchrec_bridge.sharding_plan(d)
  validate_rank_assignment(plan, o.topology)
  ((path, module),) = plan.plan.items()
  assert path == d['sharding_plan']['module_path']
  assert len(module) == len(d['tables'])
  for name_, ps in module.items():
    x = d['sharding_plan']['tables'][name_]
    assert (ps.sharding_type, ps.compute_kernel) == (
      x['sharding_type'],
      x['compute_kernel'],
    )
    if ps.sharding_spec is not None:
      ranks = [s.placement.rank() for s in ps.sharding_spec.shards]
      assert ranks == x['ranks']


@pytest.mark.parametrize('name', list(RUNS))
def test_memory_agrees_within_3_percent(planned, name):
  w, p, plan, figures, d, both = planned[name]
  ours = torchrec_bridge.ours_per_rank(d)
  theirs = both['export']
  busiest = max(ours['hbm_bytes'])
  assert max(theirs['hbm_bytes']) == pytest.approx(busiest, rel=WITHIN)
  need = figures['memory']['hbm']['required_bytes']
  assert busiest == pytest.approx(need, rel=WITHIN)
  np.testing.assert_allclose(
    theirs['ddr_bytes'], ours['ddr_bytes'], rtol=WITHIN, atol=1e6
  )
  # A node's ranks hold the DDR need of result.json.
  per_node = sum(ours['ddr_bytes']) / float(p.nodes)
  assert per_node == pytest.approx(
    figures['memory']['ddr']['required_bytes'], rel=1e-9, abs=1.0
  )
  frac = np.asarray(plan.hbm_fraction)
  for i, table in enumerate(export.table_names(w)):
    kernel = d['constraints'][table]['compute_kernels'][0]
    if terms.whole_in_hbm(frac[i]):
      assert kernel != 'fused_uvm_caching', (table, frac[i])


def test_the_adam_run_counts_adams_state(planned):
  """TorchRec sizes Adam's two state vectors per row (the optimizer the
  export applies), as the cost model does: twice the rows' bytes more
  than SGD, over all ranks."""
  sgd, adam = planned['mlperf_dgx_a100'], planned['mlperf_adam']
  rows = sum(t['table_bytes'] for t in sgd[4]['codesign']['tables'].values())
  extra = sum(adam[5]['export']['shard_hbm_bytes'])
  extra -= sum(sgd[5]['export']['shard_hbm_bytes'])
  assert extra == pytest.approx(2 * rows, rel=WITHIN)


def test_the_propose_result_keeps_its_knee_tables_whole(planned):
  w, _, plan, figures, d, _ = planned['proposal']
  frac = np.asarray(plan.hbm_fraction)
  knee = np.flatnonzero((frac < 1.0) & terms.whole_in_hbm(frac))
  assert len(knee) >= 1
  for i in knee:
    c = d['constraints'][export.table_names(w)[i]]
    assert c['compute_kernels'] == ['fused']
  assert figures['memory']['ddr']['required_bytes'] == 0.0


def test_compare_prints_both_tools_per_rank(planned):
  d, both = planned['zion_dgx_a100'][4:]
  text = torchrec_bridge.compare_table(d, both)
  lines = text.splitlines()
  assert len(lines) == 2 + 8 + 1
  assert 'TorchRec' in lines[1] and 'fits its reserved storage' in lines[-1]


def _python(args, timeout=600):
  return subprocess.run(
    [sys.executable, '-m', *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


@pytest.mark.heavy
def test_a_users_model_file_imports_evaluates_and_proposes(tmp_path):
  """The file as written: imported by the script (every guess printed),
  evaluated from the files it writes, exported back with --compare (16
  ranks side by side) and proposed for (a tiny search)."""
  source = HERE / 'torchrec_user_model.py'
  out = tmp_path / 'imported'
  got = _python(
    ['experiments.import_torchrec', f'--source={source}', f'--workdir={out}']
  )
  assert got.returncode == 0, got.stderr[-2000:]
  assert 'guess: platform: the nearest preset' in got.stdout
  w = json.loads((out / 'workload.json').read_text())['workload']
  assert [t['rows'] for t in w['tables']][:2] == [40_000_000, 10_000_000]
  assert w['optimizer'] == 'rowwise_adagrad' and w['num_dense'] == 13
  assert w['global_batch'] == 1024 * 16
  ev = _python(
    ['experiments.evaluate']
    + [f'--{k}={out / (k + ".json")}' for k in SECTIONS]
    + [f'--workdir={tmp_path / "ev"}']
  )
  assert ev.returncode == 0, ev.stderr[-2000:]
  # The evaluated run back out, both tools' per-rank estimates printed.
  ex = _python(['experiments.export', '--compare', str(tmp_path / 'ev')])
  assert ex.returncode == 0, ex.stderr[-2000:]
  rows = [x for x in ex.stdout.splitlines() if x.split()[:1] == ['15']]
  assert len(rows) == 1 and 'busiest HBM: codesign' in ex.stdout
  r = codesign.propose(
    workload=out / 'workload.json',
    budget_usd=1e6,
    max_nodes=2,
    starts=2,
    steps=4,
    presets=('dgx_a100_80gb',),
    only_parts=('A100-SXM4-80GB', 'EPYC-7742'),
    trainers=('accelerator',),
  )
  assert r['proposal']['throughput_samples_per_s'] > 0


def test_objects_describe_what_the_file_does():
  import runpy

  g = runpy.run_path(str(HERE / 'torchrec_user_model.py'))
  d = torchrec_import.describe(
    tables=g['tables'],
    model=g['model'],
    topology=g['topology'],
    batch_size=g['batch_size'],
    constraints=g['constraints'],
  )
  assert d == torchrec_import.read_python(str(HERE / 'torchrec_user_model.py'))
  got = codesign.from_torchrec(
    model=g['model'], topology=g['topology'], batch_size=g['batch_size']
  )
  assert got['workload']['optimizer'] == 'rowwise_adagrad'
  assert len(got['workload']['tables']) == 8
