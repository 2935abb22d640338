"""Export to TorchRec's sharding planner: the contents in process (world
size, sharding types, compute kernels and cache load factors from the
plan's HBM fractions, bytes that add up), then the script as a user runs
it on a run directory of `experiments.evaluate`, and with bad input."""

import dataclasses
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from codesign.boundary import export
from codesign.core import results
from codesign.model import planner
from codesign.spec import platform_presets, stack_presets
from codesign.spec import workload_presets as presets
from codesign.spec.plan import SHARDINGS

ROOT = pathlib.Path(__file__).resolve().parents[2]
TORCHREC = stack_presets.get('torchrec')


@pytest.fixture(scope='module')
def spilled():
  """zion_scale on one DGX A100: tables spill, TorchRec caches in UVM."""
  w = presets.get('zion_scale')
  p = platform_presets.get('dgx_a100_80gb')
  plan = planner.make(w, p, TORCHREC, sharding='table_wise')
  # Every table spills in part (the water-filling of skewed traffic);
  # two wholly in HBM and one wholly in DDR cover the other kernels.
  frac = np.array(plan.hbm_fraction)
  frac[:3] = (1.0, 1.0, 0.0)
  plan = dataclasses.replace(plan, hbm_fraction=frac)
  return w, p, plan, export.torchrec_planner(w, p, plan, TORCHREC)


def test_topology_and_batch(spilled):
  w, p, _, out = spilled
  topo = out['topology']
  assert topo['world_size'] == 8 and topo['local_world_size'] == 8
  assert topo['compute_device'] == 'cuda'
  assert topo['hbm_cap'] == int(p.accelerator.hbm_capacity) == 80 * 10**9
  node_ddr = float(p.sockets_per_node * p.cpu.ddr_capacity)
  assert topo['ddr_cap'] == int(node_ddr / 8)
  assert out['batch_size'] * topo['world_size'] == w.global_batch
  # TorchRec's bandwidths are bytes/ms; ours are bytes/s.
  bw = out['codesign']['bandwidths_bytes_per_s']
  assert topo['intra_host_bw'] == pytest.approx(
    bw['intra_host_bytes_per_s'] / 1e3
  )
  fabric = p.fabric
  peak = fabric.links_per_accelerator * fabric.link_bandwidth
  assert bw['intra_host_bytes_per_s'] == pytest.approx(peak * fabric.efficiency)
  assert out['storage_reservation'] == {'percentage': TORCHREC.hbm_reserve}
  results.dumps(out)  # JSON without NaN or infinities


def test_kernels_and_load_factors_follow_the_hbm_fraction(spilled):
  w, _, plan, out = spilled
  tb = planner.table_bytes(w)
  frac = np.asarray(plan.hbm_fraction)
  kinds = set()
  for i, name in enumerate(export.table_names(w)):
    c, ours = out['constraints'][name], out['codesign']['tables'][name]
    assert c['sharding_types'] == ['table_wise']
    assert c['pooling_factors'] == [w.tables[i].pooling]
    (kernel,) = c['compute_kernels']
    kinds.add(kernel)
    if frac[i] >= 1.0 - export.WHOLE:
      assert kernel == 'fused' and 'cache_params' not in c
    elif frac[i] > export.WHOLE:
      assert kernel == 'fused_uvm_caching'
      load = c['cache_params']['load_factor']
      assert load == pytest.approx(frac[i])
      assert load * ours['table_bytes'] == pytest.approx(ours['hbm_bytes'])
    else:
      assert kernel == 'fused_uvm'
    assert ours['table_bytes'] == pytest.approx(tb[i])
    # UVM caching keeps the whole table in DDR.
    whole_in_ddr = kernel != 'fused'
    assert ours['ddr_bytes'] == (tb[i] if whole_in_ddr else 0.0)
    table = out['tables'][i]
    assert table['name'] == name
    assert (table['num_embeddings'], table['embedding_dim']) == (
      w.tables[i].rows,
      w.tables[i].dim,
    )
  assert kinds == {'fused', 'fused_uvm_caching', 'fused_uvm'}
  hbm = sum(t['hbm_bytes'] for t in out['codesign']['tables'].values())
  assert hbm == pytest.approx(float(np.sum(frac * tb)))


def test_every_sharding_maps_to_torchrec():
  assert set(export.SHARDING_TYPES) == set(SHARDINGS)
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('big_basin')
  base = planner.make(w, p, TORCHREC, placement='hbm', sharding='table_wise')
  shardings = tuple(SHARDINGS[i % len(SHARDINGS)] for i in range(26))
  plan = dataclasses.replace(base, sharding=shardings, column_shards=4)
  out = export.torchrec_planner(w, p, plan, TORCHREC)
  for i, name in enumerate(export.table_names(w)):
    c = out['constraints'][name]
    assert c['sharding_types'] == [shardings[i]]
    kernel = 'dense' if shardings[i] == 'data_parallel' else 'fused'
    assert c['compute_kernels'] == [kernel]
    if shardings[i] == 'column_wise':
      assert c['min_partition'] == w.tables[i].dim // 4
    else:
      assert 'min_partition' not in c


def test_cpu_trainer_and_stacks_without_caching():
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('cpu_2s')
  s = stack_presets.get('ipex_cpu')
  out = export.torchrec_planner(w, p, planner.make(w, p, s), s)
  topo = out['topology']
  assert topo['compute_device'] == 'cpu' and topo['hbm_cap'] == 0
  assert topo['world_size'] == 2 and topo['local_world_size'] == 2
  kernels = {c['compute_kernels'][0] for c in out['constraints'].values()}
  assert kernels <= {'fused', 'dense'}
  assert any('ipex_cpu' in x for x in out['header']['warnings'])
  # A table partly in HBM without UVM caching takes the UVM path.
  assert (
    export.compute_kernel(
      'table_wise', 0.5, cpu_trainer=False, uvm_caching=False
    )
    == 'fused_uvm'
  )
  assert (
    export.compute_kernel('row_wise', 0.0, cpu_trainer=False, uvm_caching=True)
    == 'fused_uvm'
  )


def _export(args, cwd=ROOT):
  return subprocess.Popen(
    [sys.executable, '-m', 'experiments.export', *args],
    cwd=cwd,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def test_cli_on_an_evaluate_run_and_bad_input(tmp_path):
  run = tmp_path / 'run'
  ev = subprocess.run(
    [sys.executable, '-m', 'experiments.evaluate', f'--workdir={run}'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert ev.returncode == 0, ev.stderr
  (tmp_path / 'empty').mkdir()
  (tmp_path / 'broken').mkdir()
  (tmp_path / 'broken' / 'config.json').write_text('{"workload": ')
  (tmp_path / 'partial').mkdir()
  (tmp_path / 'partial' / 'config.json').write_text('{"flags": {}}')
  # A run whose folder cannot take the file (as a read-only or full one).
  shutil.copytree(run, tmp_path / 'blocked')
  (tmp_path / 'blocked' / 'torchrec_planner.json').mkdir()
  bad = {
    'missing': ([str(tmp_path / 'missing')], ['does not exist']),
    'empty': ([str(tmp_path / 'empty')], ['no config.json']),
    'broken': ([str(tmp_path / 'broken')], ['not valid JSON']),
    'partial': ([str(tmp_path / 'partial')], ['platform', 'section']),
    'unknown_to': (['--to=hugectr', str(run)], ['--to', 'torchrec']),
    'no_run': ([], ['run directory']),
    'cannot_write': (
      [str(tmp_path / 'blocked')],
      ['cannot write', 'torchrec_planner.json'],
    ),
  }
  good = _export(['--to=torchrec', str(run)])
  procs = {name: _export(args) for name, (args, _) in bad.items()}
  stdout, stderr = good.communicate(timeout=300)
  assert good.returncode == 0, stderr
  out = json.loads((run / 'torchrec_planner.json').read_text())
  assert out['header']['source_file'] == 'config.json'
  assert out['header']['workload'] == 'criteo_kaggle'
  assert out['header']['codesign_version']
  assert out['topology']['world_size'] == 8  # big_basin: 8 V100
  assert len(out['constraints']) == 26
  problems = []
  for name, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    if proc.returncode != 2:
      problems.append((name, f'exit status {proc.returncode}'))
    if len(lines) != 1 or 'Traceback' in stderr + stdout:
      problems.append((name, stderr[-500:]))
    missing = [x for x in bad[name][1] if x not in stderr]
    if missing:
      problems.append((name, f'message lacks {missing}', stderr[-300:]))
  written = [
    str(f) for f in tmp_path.rglob('torchrec_planner.json') if f.is_file()
  ]
  if written != [str(run / 'torchrec_planner.json')]:
    problems.append(('files', written))
  assert not problems, problems
