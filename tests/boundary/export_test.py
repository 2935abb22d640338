"""Export to TorchRec: the contents in process (world size, the HBM of a
part sold in GiB, an exact batch per rank, sharding types, kernels on the
one memory truth's threshold, cache load factors and statistics, the
embedding optimizer, the dense part, a sharding plan whose shards tile
every table on ranks.json's ranks, bytes that add up), then the script as
a user runs it on run directories of `experiments.evaluate`: warnings on
the terminal, an overflowing design refused without --force, bad input.
TorchRec itself plans the exports in torchrec_bridge_test.py."""

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
from codesign.model import planner, rank_stats, terms
from codesign.spec import platform_presets, stack_presets
from codesign.spec import workload_presets as presets
from codesign.spec.plan import SHARDINGS

ROOT = pathlib.Path(__file__).resolve().parents[2]
TORCHREC = stack_presets.get('torchrec')
GIB = 2**30


@pytest.fixture(scope='module')
def spilled():
  """zion_scale on one DGX A100: tables spill, TorchRec caches in UVM."""
  w = presets.get('zion_scale')
  p = platform_presets.get('dgx_a100_80gb')
  plan = planner.make(w, p, TORCHREC, sharding='table_wise')
  # Every table spills in part (the water-filling of skewed traffic);
  # one wholly in HBM, one within the knee of whole (whole, as the cost
  # model counts it) and one wholly in DDR cover the other kernels.
  frac = np.array(plan.hbm_fraction)
  frac[:3] = (1.0, 1.0 - terms.HOST_COPY_KNEE / 2, 0.0)
  plan = dataclasses.replace(plan, hbm_fraction=frac)
  return w, p, plan, export.torchrec_planner(w, p, plan, TORCHREC)


def test_topology_and_batch(spilled):
  w, p, _, out = spilled
  topo = out['topology']
  assert topo['world_size'] == 8 and topo['local_world_size'] == 8
  assert topo['compute_device'] == 'cuda'
  # An 80 GB A100 holds 80 GiB.
  assert topo['hbm_cap'] == int(p.accelerator.hbm_capacity) == 80 * GIB
  node_ddr = float(p.sockets_per_node * p.cpu.ddr_capacity)
  assert topo['ddr_cap'] == int(node_ddr / 8)
  assert out['batch_size'] * topo['world_size'] == w.global_batch
  assert isinstance(out['batch_size'], int)
  # TorchRec's bandwidths are bytes/ms; ours are bytes/s.
  bw = out['codesign']['bandwidths_bytes_per_s']
  assert topo['intra_host_bw'] == pytest.approx(
    bw['intra_host_bytes_per_s'] / 1e3
  )
  fabric = p.fabric
  peak = fabric.links_per_accelerator * fabric.link_bandwidth
  assert bw['intra_host_bytes_per_s'] == pytest.approx(peak * fabric.efficiency)
  reserve = out['storage_reservation']
  assert reserve['percentage'] == TORCHREC.hbm_reserve
  dense = rank_stats.per_table(w, p, spilled[2], TORCHREC)['dense_hbm_bytes']
  assert reserve['dense_tensor_estimate'] == round(dense) > 0
  assert out['pipeline_type'] == 'TRAIN_SPARSE_DIST'
  results.dumps(out)  # JSON without NaN or infinities


def test_optimizer_and_dense_part(spilled):
  w, p, plan, out = spilled
  assert w.optimizer == 'rowwise_adagrad'
  assert out['optimizer']['class'] == 'torchrec.optim.RowWiseAdagrad'
  fused = out['optimizer']['fused_params']
  assert fused['optimizer'] == 'EXACT_ROWWISE_ADAGRAD'
  assert fused['learning_rate'] == out['optimizer']['kwargs']['lr']
  adam = dataclasses.replace(w, optimizer='adam')
  opt = export.torchrec_planner(adam, p, plan, TORCHREC)['optimizer']
  assert (opt['class'], opt['fused_params']['optimizer']) == (
    'torch.optim.Adam',
    'ADAM',
  )
  d = out['dense']
  assert d['model'] == 'DLRM' and d['dense_in_features'] == w.num_dense
  assert d['dense_arch_layer_sizes'] == list(w.bottom_mlp)
  assert d['over_arch_layer_sizes'] == list(w.top_mlp)
  dcn = presets.get('mlperf_dlrm_dcnv2')
  d = export.dense_arch(dcn)
  assert d['model'] == 'DLRM_DCN'
  assert (d['dcn_num_layers'], d['dcn_low_rank_dim']) == (
    dcn.dcn_layers,
    dcn.dcn_rank,
  )


def test_kernels_and_cache_follow_the_memory_truth(spilled):
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
    if frac[i] >= 1.0 - terms.HOST_COPY_KNEE:  # whole: no host copy
      assert kernel == 'fused' and 'cache_params' not in c
      assert ours['ddr_bytes'] == 0.0
    elif frac[i] > 0.0:
      assert kernel == 'fused_uvm_caching'
      load = c['cache_params']['load_factor']
      assert load == pytest.approx(frac[i])
      assert load * ours['table_bytes'] == pytest.approx(ours['hbm_bytes'])
      assert ours['ddr_bytes'] == pytest.approx(tb[i])  # the whole table
    else:
      assert kernel == 'fused_uvm' and ours['ddr_bytes'] == tb[i]
    assert out['sharding_plan']['tables'][name]['compute_kernel'] == kernel
  assert kinds == {'fused', 'fused_uvm_caching', 'fused_uvm'}
  # The knee table is whole, as the cost model counts it.
  assert out['constraints']['t_cat_1']['compute_kernels'] == ['fused']
  hbm = sum(t['hbm_bytes'] for t in out['codesign']['tables'].values())
  assert hbm == pytest.approx(float(np.sum(frac * tb)))


def test_cache_statistics_carry_the_skew(spilled):
  w, _, _, out = spilled
  k = w.popularity_skew
  stats = out['constraints']['t_cat_5']['cache_params']['stats']
  t = w.tables[5]
  assert stats['height'] == t.rows
  assert stats['cacheability'] == pytest.approx(1.0 / (k + 1.0))
  hist = np.array(stats['mrc_hist_counts'])
  lookups = w.global_batch * t.pooling
  assert hist.sum() == pytest.approx(lookups)
  # TorchRec reads the miss ratio at a load factor f from the cumulated
  # histogram: (1 - f)^k, the cost model's, at the bin edges.
  f = 0.25
  seen = 1.0 - hist[: int(f * len(hist))].sum() / hist.sum()
  assert seen == pytest.approx((1.0 - f) ** k)
  assert 0 < stats['expected_lookups'] <= min(t.rows, lookups)


def _tiles(shards, rows, dim) -> bool:
  """Whether `shards` cover a rows x dim table exactly once."""
  scale = min(rows, 64)  # rows scaled to at most 64
  cover = np.zeros((scale, dim), int)
  for s in shards:
    (r0, c0), (nr, nc) = s['offsets'], s['sizes']
    lo, hi = r0 * scale // rows, (r0 + nr) * scale // rows
    cover[lo:hi, c0 : c0 + nc] += 1
  area = sum(s['sizes'][0] * s['sizes'][1] for s in shards)
  return area == rows * dim and bool(np.all(cover == 1))


def test_sharding_plan_tiles_each_table_on_the_ranks_of_ranks_json(spilled):
  w, p, plan, out = spilled
  stats = rank_stats.compute(w, p, plan, TORCHREC)
  _, share = rank_stats.place(w, p, plan, TORCHREC)
  sp = out['sharding_plan']
  assert sp['module_path'] == 'sparse_arch.embedding_bag_collection'
  for i, name in enumerate(export.table_names(w)):
    x = sp['tables'][name]
    t = w.tables[i]
    assert x['sharding_type'] == 'table_wise'
    assert x['ranks'] == [int(np.argmax(share[i]))]
    assert _tiles(x['shards'], t.rows, t.dim), name
  ranks = out['codesign']['ranks']
  hbm = [r['hbm_bytes'] for r in stats['ranks']]
  np.testing.assert_allclose(ranks['table_hbm_bytes'], hbm, rtol=1e-12)
  ddr = [r['ddr_bytes'] for r in stats['ranks']]
  np.testing.assert_allclose(ranks['table_ddr_bytes'], ddr, rtol=1e-12)


def test_every_sharding_maps_to_torchrec():
  assert set(export.SHARDING_TYPES) == set(SHARDINGS)
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('big_basin')
  base = planner.make(w, p, TORCHREC, placement='hbm', sharding='table_wise')
  shardings = tuple(SHARDINGS[i % len(SHARDINGS)] for i in range(26))
  plan = dataclasses.replace(base, sharding=shardings, column_shards=8)
  out = export.torchrec_planner(w, p, plan, TORCHREC)
  world = out['topology']['world_size']
  for i, name in enumerate(export.table_names(w)):
    c, t = out['constraints'][name], w.tables[i]
    x = out['sharding_plan']['tables'][name]
    assert c['sharding_types'] == [shardings[i]] == [x['sharding_type']]
    kernel = 'dense' if shardings[i] == 'data_parallel' else 'fused'
    assert c['compute_kernels'] == [kernel]
    if shardings[i] == 'data_parallel':
      assert x['ranks'] == list(range(world))
    else:
      assert _tiles(x['shards'], t.rows, t.dim), name
    if shardings[i] == 'row_wise':
      assert x['ranks'] == list(range(world))
    if shardings[i] == 'column_wise':
      assert c['min_partition'] == t.dim // 8
      # criteo_kaggle's dim 16 in 8 shards: TorchRec cuts multiples of 4.
      assert [s['sizes'][1] for s in x['shards']] == [4] * 4
    else:
      assert 'min_partition' not in c
  assert any('multiple of 4' in x for x in out['header']['warnings'])


def test_batch_per_rank_is_exact():
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('big_basin')
  plan = planner.make(w, p, TORCHREC, placement='hbm', sharding='table_wise')
  odd = dataclasses.replace(w, global_batch=65536 + 4)  # over 8 ranks
  out = export.torchrec_planner(odd, p, plan, TORCHREC)
  assert out['batch_size'] * 8 == odd.global_batch
  assert not float(out['batch_size']).is_integer()
  assert any('does not divide' in x for x in out['header']['warnings'])


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
  assert out['pipeline_type'] == 'NONE'
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


def _run(args, wait=True):
  """`python -m args` from the checkout: (stdout, stderr, status), or
  the process where not `wait`."""
  proc = subprocess.Popen(
    [sys.executable, '-m', *args],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  return proc.communicate(timeout=300) + (proc.returncode,) if wait else proc


def test_cli_on_evaluate_runs_and_bad_input(tmp_path):
  """A run of another stack exports with its warning on the terminal; a
  run whose HBM overflows is refused, then exported with --force."""
  run, full = tmp_path / 'run', tmp_path / 'full'
  evals = [
    _run(['experiments.evaluate', f'--workdir={run}', '--stack=hugectr'], 0),
    _run(
      [
        'experiments.evaluate',
        f'--workdir={full}',
        '--workload=criteo_1tb',
        '--plan=hbm',
        '--override=platform.accelerator.hbm_capacity_gb=1',
      ],
      False,
    ),
  ]
  for proc in evals:
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
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
    'overflow': ([str(full)], ['HBM', 'does not fit', '--force']),
    'cannot_write': (
      [str(tmp_path / 'blocked')],
      ['cannot write', 'torchrec_planner.json'],
    ),
  }
  procs = {
    name: _run(['experiments.export', *args], False)
    for name, (args, _) in bad.items()
  }
  good = _run(['experiments.export', '--to=torchrec', str(run)], False)
  forced = _run(['experiments.export', '--force', str(full)], False)
  stdout, stderr = good.communicate(timeout=300)
  assert good.returncode == 0, stderr
  assert 'warning: the plan was made for the hugectr stack' in stderr
  out = json.loads((run / 'torchrec_planner.json').read_text())
  assert out['header']['source_file'] == 'config.json'
  assert out['header']['workload'] == 'criteo_kaggle'
  assert out['header']['codesign_version']
  assert out['header']['feasible'] and not out['header']['forced']
  assert out['topology']['world_size'] == 8  # big_basin: 8 V100
  assert len(out['constraints']) == 26
  _, stderr = forced.communicate(timeout=300)
  assert forced.returncode == 0, stderr
  over = json.loads((full / 'torchrec_planner.json').read_text())
  assert over['header']['forced'] and over['header']['overflowing_tiers']
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
  written = sorted(
    str(f) for f in tmp_path.rglob('torchrec_planner.json') if f.is_file()
  )
  want = sorted(str(d / 'torchrec_planner.json') for d in (run, full))
  if written != want:
    problems.append(('files', written))
  assert not problems, problems
