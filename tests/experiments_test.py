"""The experiment scripts: tiny end-to-end runs, reproducibility, bad flags.

Each script runs as a subprocess (the scripts share absl flag names, so
they cannot be imported into one process) on a setting small enough to
finish in seconds. The pure pieces of `codesign.studies.sweeps` they rely on are
checked in-process.
"""

import dataclasses
import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.spec import (
  hardware,
  platform_presets,
  stack_presets,
  workload_presets,
)
from codesign.spec import workload as wl
from codesign.studies import sweeps
from tests import streams

STACK = stack_presets.get('torchrec')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY = {
  'compare_platforms': [
    '--workload=criteo_kaggle',
    '--platforms=big_basin,zion',
    '--gpu_platforms=big_basin',
    '--large_memory_platforms=zion',
    '--points=4',
    '--min_size_gb=10',
    '--max_size_gb=3000',
    '--refine_steps=1',
  ],
  'sensitivity': [
    '--quiet',  # results only: read in test_progress_goes_to_stderr
    '--workload=mlperf_dlrm_v1',
    '--platform=big_basin',
    # 8 GB of HBM per accelerator: the tables spill, so replanning runs.
    '--override=platform.accelerator.hbm_capacity_gb=8',
  ],
  'scale_out': [
    '--workload=criteo_kaggle',
    '--platform=dgx_a100_80gb',
    '--nodes=1,2,4',
    '--rounds=1',
  ],
  'pareto': [
    '--workload=criteo_kaggle',
    '--budgets=2',
    '--starts=2',
    '--steps=4',
    '--snap_top=1',
    '--max_nodes=2',
    # The settings of tests/studies/search_studies_test.py's PARETO (and
    # growth's of its GROWTH): one compile for both (tests/conftest.py).
    '--presets=big_basin,zion',
  ],
  'growth': [
    '--workload=criteo_kaggle',
    '--factors=1,2',
    '--starts=2',
    '--steps=4',
    '--snap_top=1',
    '--max_nodes=2',
  ],
}
PLOTS = {
  'compare_platforms': ['platforms.png'],
  'sensitivity': ['elasticities.png'],
  'scale_out': [
    'throughput.png',
    'nic_required.png',
    'efficiency.png',
    'breakdown.png',
  ],
  'pareto': ['frontier.png'],
  'growth': ['growth.png'],
}
HAS_METRICS = ('compare_platforms', 'scale_out', 'pareto', 'growth')
# The study's main table beside result.json (first column of its header).
CSVS = {
  'compare_platforms': ('compare_platforms.csv', 'embedding_size_gb'),
  'sensitivity': ('sensitivity.csv', 'rank'),
  'scale_out': ('scale_out.csv', 'nodes'),
}


def _command(name, args):
  return [sys.executable, '-m', f'experiments.{name}', *args]


# The suite's fast compiles (tests/conftest.py's XLA_FLAGS, inherited).
ENV = dict(os.environ, JAX_PLATFORMS='cpu')


def _run(name, args):
  return subprocess.run(
    _command(name, args),
    cwd=ROOT,
    env=ENV,
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.fixture(scope='module')
def ran(tmp_path_factory):
  """Each experiment once on its tiny setting: name -> (workdir, stdout,
  stderr). The runs start together (they are independent) and share the
  CPU cores."""
  procs, out = {}, {}
  for name, args in TINY.items():
    workdir = tmp_path_factory.mktemp(name)
    procs[name] = subprocess.Popen(
      _command(name, [*args, f'--workdir={workdir}']),
      cwd=ROOT,
      env=ENV,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    out[name] = workdir
  streams_of = {name: p.communicate(timeout=600) for name, p in procs.items()}
  for name, p in procs.items():
    assert p.returncode == 0, (name, streams_of[name][1][-2000:])
  return {name: (out[name], *streams_of[name]) for name in procs}


@pytest.fixture(scope='module')
def runs(ran):
  """name -> the workdir of its tiny run."""
  return {name: workdir for name, (workdir, _, _) in ran.items()}


@pytest.mark.heavy
@pytest.mark.parametrize('name', sorted(TINY))
def test_progress_goes_to_stderr(ran, name):
  """Results on stdout, progress on stderr, never silent for 5 s (the
  runs share 2 cores); --quiet prints the results alone."""
  _, stdout, stderr = ran[name]
  assert streams.progress_lines(stdout) == []
  assert f'wrote {ran[name][0]}' in stdout
  if '--quiet' in TINY[name]:
    assert streams.stamps(stderr) == [], stderr[-2000:]
    assert stdout.strip().splitlines()[0]  # the table
    return
  assert streams.stamps(stderr), stderr[-2000:]
  assert streams.longest_silence(stderr) <= 5.0, stderr[-3000:]


@pytest.mark.heavy
@pytest.mark.parametrize('name', sorted(TINY))
def test_writes_the_run_directory(runs, name):
  workdir = runs[name]
  for f in ['config.json', 'env.json', 'result.json', *PLOTS[name]]:
    assert (workdir / f).is_file(), f
  for f in PLOTS[name]:
    assert (workdir / f).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  env = json.loads((workdir / 'env.json').read_text())
  assert env['x64'] is True and 'jax' in env['versions']
  config = json.loads((workdir / 'config.json').read_text())
  assert config['flags']['workdir'] == str(workdir)
  if name in CSVS:
    csv_name, first = CSVS[name]
    assert (workdir / csv_name).read_text().startswith(first + ',')
  if name in HAS_METRICS:
    lines = (workdir / 'metrics.jsonl').read_text().splitlines()
    steps = [json.loads(x)['step'] for x in lines]
    assert steps == list(range(len(steps))) and steps


@pytest.mark.parametrize('name', ['pareto', 'growth'])
def test_search_studies_write_their_csv(runs, name):
  """<study>.csv beside result.json: a header with units, a row per
  limit (pareto: 2 x --budgets) or per growth factor."""
  lines = (runs[name] / f'{name}.csv').read_text().splitlines()
  header = lines[0].split(',')
  assert 'throughput_samples_per_s' in ''.join(header)
  assert len(lines) - 1 == {'pareto': 4, 'growth': 2}[name]


def test_compare_platforms_result(runs):
  r = json.loads((runs['compare_platforms'] / 'result.json').read_text())
  assert len(r['sizes_gb']) == 4
  for name in ('big_basin', 'zion'):
    d = r['platforms'][name]
    thr = np.array(d['throughput_samples_per_s'])
    assert np.all(np.isfinite(thr)) and np.all(thr > 0)
    # Bigger tables never make a platform faster on the auto plan.
    assert np.all(np.diff(thr) <= 1e-9 * thr[:-1])
    assert d['spilling'][0] is False
  # 3 TB of tables fit in neither 8 x 32 GB of HBM nor 1.5 TB of DDR.
  assert r['platforms']['big_basin']['feasible'][-1] is False
  assert r['summary']


def test_sensitivity_matches_finite_differences(runs):
  r = json.loads((runs['sensitivity'] / 'result.json').read_text())
  assert r['replan_applied'] is True
  checks = r['finite_difference_check']
  assert len(checks) == 6  # top three fields x two metrics
  for c in checks:
    assert c['relative_gap'] <= 0.02, c
  # The ranking is by the size of the throughput elasticity.
  e = [abs(x['elasticity']) for x in r['upgrade_for_throughput']]
  assert e == sorted(e, reverse=True)
  # Spilled tables: more HBM is worth something once the plan follows it.
  assert r['elasticities']['accelerator.hbm_capacity_gb']['throughput'] > 0


def test_scale_out_result(runs):
  r = json.loads((runs['scale_out'] / 'result.json').read_text())
  rows = r['per_node_count']
  assert [x['nodes'] for x in rows] == [1, 2, 4]
  assert rows[0]['efficiency'] == pytest.approx(1.0)
  for x in rows:
    assert sum(x['breakdown_share'].values()) == pytest.approx(1.0)
    if x['required_status'] == 'found':
      # One round of 32-fold multisection over 10..8000 Gb/s per NIC.
      lo, hi = x['required_bracket_gbit_per_s_per_accelerator']
      assert lo < hi <= lo * 800.0 ** (1.0 / 32) * (1 + 1e-9)


def test_pareto_frontier_is_monotone(runs):
  r = json.loads((runs['pareto'] / 'result.json').read_text())
  for key, cost_key in (('capex', 'capex_usd'), ('power', 'power_w')):
    f = r['frontier'][key]
    cost = [x['cost'] for x in f]
    thr = [x['throughput_samples_per_s'] for x in f]
    assert cost == sorted(cost) and thr == sorted(thr)
    for x in f:
      s = r['searches'][x['search']]
      assert s['feasible'] and s[cost_key] == x['cost']
  assert set(r['presets']) == {'big_basin', 'zion'}


def test_growth_regret(runs):
  r = json.loads((runs['growth'] / 'result.json').read_text())
  assert r['factors'] == [1.0, 2.0]
  for d in r['designs'].values():
    for reg in d['regret_log']:
      assert reg is None or reg >= 0.0


def test_from_config_is_byte_identical(runs, tmp_path):
  """Re-running a seeded search from its config.json (same flags and
  seed) gives byte-identical result.json and metrics.jsonl."""
  first = runs['pareto']
  proc = _run(
    'pareto', [f'--from_config={first}/config.json', f'--workdir={tmp_path}']
  )
  assert proc.returncode == 0, proc.stderr[-2000:]
  for f in ('result.json', 'metrics.jsonl'):
    assert (tmp_path / f).read_bytes() == (first / f).read_bytes(), f


@pytest.mark.parametrize(
  'name, flag, words',
  [
    ('compare_platforms', '--points=1', '--points'),
    ('sensitivity', '--check_top=0', '--check_top'),
    ('scale_out', '--nodes=2,4', '--nodes'),
    ('pareto', '--min_budget_usd=-1', '--min_budget_usd'),
    ('growth', '--factors=2,4', '--factors'),
  ],
)
def test_bad_flag_is_one_sentence(name, flag, words, tmp_path):
  proc = _run(name, [flag, f'--workdir={tmp_path / "run"}'])
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ')
  assert words in lines[0]
  assert not (tmp_path / 'run').exists()  # no partial run directory


def test_doc_numbers_bad_flag_is_one_sentence(tmp_path):
  proc = subprocess.run(
    [sys.executable, '-m', 'experiments.doc_numbers', '--include_slow=x'],
    cwd=tmp_path,  # nothing to write there, and nothing is
    env={**ENV, 'PYTHONPATH': ROOT},
    capture_output=True,
    text=True,
    timeout=60,
  )
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: ')
  assert '--include_slow' in lines[0]
  assert list(tmp_path.iterdir()) == []


# A script that ends without JAX's teardown (`common._exit_finished`):
# what it printed after its last flush and during it still arrives, its
# run is in place, and a failure keeps its status.
FAST_EXIT = """
import sys
from absl import flags
from experiments import common
from codesign.core import results
from codesign.core.errors import InputError
flags.DEFINE_string('workdir', None, '')
flags.DEFINE_bool('overwrite', False, '')
flags.DEFINE_bool('fail', False, '')

def main():
  import jax.numpy as jnp
  run = results.make_workdir('fast_exit', flags.FLAGS.workdir)
  results.write_run(run, {}, {'sum': float(jnp.sum(jnp.arange(4.0)))}, [])
  if flags.FLAGS.fail:
    raise InputError('asked to fail')
  sys.stdout.write('x' * 100000)  # more than a pipe's buffer, unflushed
  sys.stderr.write('last words')

common.run(main)
"""


def _buffered(env: dict) -> dict:
  return {k: v for k, v in env.items() if k != 'PYTHONUNBUFFERED'}


@pytest.mark.parametrize('fail', [False, True])
def test_a_finished_script_exits_with_its_output(fail, tmp_path):
  proc = subprocess.run(
    [sys.executable, '-c', FAST_EXIT, f'--workdir={tmp_path / "run"}']
    + (['--fail'] if fail else []),
    # Buffered output, as a user's pipe has it.
    env={**_buffered(ENV), 'PYTHONPATH': ROOT},
    capture_output=True,
    text=True,
    timeout=60,
  )
  if fail:
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'error: asked to fail'
    assert not (tmp_path / 'run').exists()
    return
  assert proc.returncode == 0, proc.stderr[-2000:]
  assert proc.stdout.startswith('x' * 100000)
  assert f'wrote {tmp_path / "run"}' in proc.stdout
  assert proc.stderr.endswith('last words')
  result = json.loads((tmp_path / 'run' / 'result.json').read_text())
  assert result['sum'] == 6.0


# ---- the pure pieces -------------------------------------------------------


def test_row_scale_matches_a_scaled_workload():
  w = workload_presets.get('criteo_kaggle')
  p = platform_presets.get('big_basin')
  scaled = sweeps.scale_rows(w, 1000.0)
  pl = planner.make(scaled, p, STACK)
  a = cost_model.evaluate(hardware.as_arrays(p), scaled, pl, STACK)
  exact = wl.embedding_bytes(scaled) / wl.embedding_bytes(w)
  b = cost_model.evaluate(
    hardware.as_arrays(p), w, pl, STACK, jnp.asarray(exact)
  )
  for tier in ('hbm', 'ddr'):
    np.testing.assert_allclose(
      a.memory_required[tier], b.memory_required[tier], rtol=1e-12
    )
  np.testing.assert_allclose(a.step_time, b.step_time, rtol=1e-12)


def test_grow_scales_rows_and_dense_flops():
  w = workload_presets.get('criteo_kaggle')
  g = sweeps.grow(w, 4.0)
  assert [t.rows for t in g.tables] == [max(1, 4 * t.rows) for t in w.tables]
  ratio = wl.dense_flops_per_sample(g) / wl.dense_flops_per_sample(w)
  assert ratio == pytest.approx(4.0, rel=0.02)
  assert g.bottom_mlp[-1] == w.bottom_mlp[-1] and g.top_mlp[-1] == 1
  assert dataclasses.replace(g, name=w.name) != w


def test_refine_brackets_the_switch():
  lo, hi = sweeps.refine(lambda x: np.asarray(x) >= 3.7, 1.0, 10.0, 2)
  assert lo < 3.7 <= hi and hi / lo < 10.0 ** (1 / 32**2) * 1.0001


def test_size_sweep_plans_fit_hbm_at_every_size():
  # The planner fits each size by the cost model's own memory term, so the
  # batched (traced) evaluation of its plans finds them within HBM.
  w = workload_presets.get('mlperf_dlrm_v1')
  p = hardware.with_value(
    platform_presets.get('big_basin'), 'accelerator.hbm_capacity', 8e9
  )
  base = wl.embedding_bytes(w)
  r = sweeps.size_sweep(p, w, STACK, [0.5 * base, base, 4.0 * base])
  assert np.all(r['hbm_required'] <= r['hbm_available'])
  assert np.all(r['spilling'][1:])
