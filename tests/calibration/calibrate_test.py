"""Device profiles (load, apply), microbenchmarks, the fit through the
cost model, the calibration study and the calibrate experiment end to
end."""

import csv
import json
import pathlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from codesign.calibration import device_profile, microbenchmarks, profile_fit
from codesign.core.errors import InputError
from codesign.core.pytree import replace
from codesign.model import cost_model
from codesign.spec import catalog, hardware, platform_presets, stack_presets
from codesign.studies import calibration

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOCAL = device_profile.PROFILES_DIR / 'local_cpu.json'
# The smallest sweep: one shape of every kind, two poolings.
# The GEMM is large enough (8.4 MFLOP) that even a 1 s timing on a
# loaded machine gives a peak inside the profile's bounds (>= 1 MFLOP/s);
# an 8x8x16 GEMM timed at 2 ms fell below them.
TINY_SWEEP = microbenchmarks.Sweep(
  gemm_m=(128,),
  gemm_kn=((128, 256),),
  gemm_precisions=('fp32',),
  layer_m=(8,),
  layer_kn=((8, 16),),
  interaction_shapes=((8, 3, 4),),
  table_rows=(64,),
  bag_batch=8,
  bag_dims=(4,),
  bag_pooling=(1, 2),
  stream_elems=1024,
  chain_layers=(1,),
  min_seconds=0.0,
  rounds=2,
)


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text)
  return str(path)


def _good():
  return device_profile.default_profile('A100-SXM4-80GB')


@pytest.mark.parametrize(
  'text, fragment',
  [
    (None, 'does not exist'),
    ('{"target": ', 'is not valid JSON'),
    ('[1, 2]', 'must be a JSON object'),
    ('{"target": "accelerator"}', "lacks the key 'gemm_efficiency'"),
    ('BAD_TARGET', 'target must be one of'),
    ('BAD_EFFICIENCY', 'gemm_efficiency must lie in'),
    ('BAD_TYPE', 'kernel_overhead_us must be a number'),
  ],
)
def test_bad_profile_files_give_one_sentence(tmp_path, text, fragment):
  good = _good()
  if text == 'BAD_TARGET':
    text = json.dumps({**good, 'target': 'tpu'})
  elif text == 'BAD_EFFICIENCY':
    text = json.dumps({**good, 'gemm_efficiency': 2.0})
  elif text == 'BAD_TYPE':
    text = json.dumps({**good, 'kernel_overhead_us': 'fast'})
  path = str(tmp_path / 'missing.json')
  if text is not None:
    path = _write(tmp_path, 'p.json', text)
  with pytest.raises(InputError) as e:
    device_profile.load(path)
  assert fragment in str(e.value)
  assert '\n' not in str(e.value)


def test_shipped_default_profiles_equal_catalog_assumptions():
  for name in catalog.accelerator_names():
    prof = device_profile.shipped(device_profile.profile_file_name(name))
    assert prof['target'] == 'accelerator'
    assert 'assumption' in prof['source']
    assert prof['gemm_efficiency'] == catalog.assumed('accel_gemm_efficiency')
  # Applying a default profile leaves a catalog platform's numbers as they
  # were (only the recorded sources change), but for the GEMM numbers the
  # public cases fit (data/stack_fit.json), which it sets to the priors.
  p = platform_presets.get('dgx_a100_80gb')
  q = device_profile.apply(p, device_profile.shipped('a100_sxm4_80gb'))
  fitted = {f'accelerator.{k}' for k in catalog.gpu_fit()}
  assert fitted == {
    'accelerator.gemm_efficiency',
    'accelerator.fp32_gemm_efficiency',
    'accelerator.gemm_half_size',
  }
  for path in hardware.leaf_paths(p):
    if path in fitted:
      key = 'accel_' + path.split('.')[1]
      assert float(hardware.get_value(q, path)) == catalog.assumed(key)
      continue
    assert float(hardware.get_value(q, path)) == pytest.approx(
      float(hardware.get_value(p, path)), rel=1e-12
    ), path


def test_profile_overrides_the_training_part_only():
  prof = {**_good(), 'gemm_efficiency': 0.5, 'kernel_overhead_us': 7.0}
  p = platform_presets.get('big_basin')
  q = device_profile.apply(p, prof)
  assert float(q.accelerator.gemm_efficiency) == 0.5
  assert float(q.accelerator.kernel_overhead) == pytest.approx(7e-6)
  assert float(q.cpu.gemm_efficiency) == float(p.cpu.gemm_efficiency)
  with pytest.raises(InputError, match='trains on its cpu'):
    device_profile.apply(platform_presets.get('cpu_2s'), prof)
  cpu_prof = {**prof, 'target': 'cpu'}
  r = device_profile.apply(platform_presets.get('cpu_2s'), cpu_prof)
  assert float(r.cpu.gemm_efficiency) == 0.5


def test_fit_through_the_cost_model_recovers_a_known_device():
  # Records whose seconds ARE the cost model's predictions for a known
  # device: the fit must find that device again (no timing involved).
  truth = {
    'target': 'cpu',
    'peak_flops_fp32_tflops': 0.1,
    'peak_flops_bf16_tflops': 0.1,
    'memory_bandwidth_gb_per_s': 20.0,
    'gemm_efficiency': 0.7,
    'gemm_half_size': 24.0,
    'gather_efficiency': 0.3,
    'update_efficiency': 0.1,
    'kernel_overhead_us': 3.0,
    'step_overhead_us': 20.0,
  }
  p = hardware.as_arrays(device_profile.local_platform(truth), jnp.float32)
  stack = device_profile.local_stack(truth)
  recs = [
    {'kind': 'gemm', 'm': m, 'k': k, 'n': n, 'precision': 'fp32'}
    for m, k, n in ((64, 16, 64), (1024, 256, 512), (512, 64, 256))
  ]
  recs += [
    {'kind': 'layer', 'm': 256, 'k': 100, 'n': 300, 'precision': 'fp32'},
    {'kind': 'interaction', 'batch': 512, 'features': 9, 'dim': 32},
  ]
  recs += [
    {'kind': kind, 'rows': 4096, 'dim': d, 'pooling': pool, 'batch': 512}
    for kind in ('gather', 'scatter')
    for d, pool in ((16, 1), (64, 16))
  ]
  recs += [{'kind': 'chain', 'layers': n} for n in (1, 64)]
  for r in recs:
    r['seconds'] = float(
      profile_fit.predict(p, stack, r, profile_fit.bench_plan(p, r))
    )
  recs.append({'kind': 'stream', 'bytes': 2e8, 'seconds': 2e8 / 20e9})
  prof, report = profile_fit.fit(recs, target='cpu', steps=1500)
  assert report['loss_final'] < 1e-3 < report['loss_initial']
  assert prof['gather_efficiency'] == pytest.approx(0.3, rel=0.05)
  assert prof['update_efficiency'] == pytest.approx(0.1, rel=0.05)
  assert prof['kernel_overhead_us'] == pytest.approx(3.0, rel=0.2)
  assert prof['step_overhead_us'] == pytest.approx(20.0, rel=0.05)
  assert prof['gemm_half_size'] == pytest.approx(24.0, rel=0.1)
  # Only peak x gemm_efficiency enters the model; the fit sets the
  # efficiency to 1 and finds the sustained peak.
  assert prof['gemm_efficiency'] == 1.0
  assert prof['peak_flops_fp32_tflops'] == pytest.approx(0.07, rel=0.05)
  for r in report['predictions']:
    assert r['predicted'] == pytest.approx(r['seconds'], rel=0.05)


def test_time_interleaved_samples_in_turn_and_keeps_the_fastest():
  # A fake clock: each call of function i advances it by the next of its
  # scripted durations, so the expected result is known exactly.
  durations = {
    0: iter([1.0, 1.0, 5.0, 2.0, 3.0]),
    1: iter([1.0, 1.0, 4.0, 7.0, 0.5]),
  }
  now, order = [0.0], []

  def make(i):
    def fn():
      order.append(i)
      now[0] += next(durations[i])
      return jnp.zeros(())

    return fn

  secs = microbenchmarks.time_interleaved(
    [make(0), make(1)], rounds=3, min_seconds=0.0, clock=lambda: now[0]
  )
  # Two warm-up calls each (compile, then one timed call that sets one
  # call per sample), then the rounds alternate between the functions.
  assert order == [0, 0, 1, 1, 0, 1, 0, 1, 0, 1]
  assert secs == [2.0, 0.5]


def test_microbenchmarks_run_once_per_shape():
  sweep = TINY_SWEEP
  records = microbenchmarks.measure(sweep)
  kinds = [r['kind'] for r in records]
  assert kinds == [
    'stream',
    'gemm',
    'layer',
    'interaction',
    'gather',
    'scatter',
    'gather',
    'scatter',
    'chain',
  ]
  assert all(np.isfinite(r['seconds']) and r['seconds'] > 0 for r in records)
  assert [r['pooling'] for r in records if r['kind'] == 'gather'] == [1, 2]


def test_bag_benchmarks_of_one_shape_share_their_table():
  # Held once per (rows, dim): the pooling-2 update must change what the
  # pooling-1 gather reads.
  bags = microbenchmarks.bag_fns(64, 4, (1, 2), 8, 0)
  before = np.asarray(bags[1][0]())
  bags[2][1]()
  after = np.asarray(bags[1][0]())
  assert np.all(np.isfinite(after))
  assert not np.allclose(before, after)


def test_local_platform_is_one_cpu_socket():
  prof = device_profile.load(LOCAL)
  p = device_profile.local_platform(prof)
  assert p.trainer == 'cpu'
  assert float(p.nodes) == 1.0 and float(p.sockets_per_node) == 1.0
  assert float(p.cpu.peak_flops_fp32) == pytest.approx(
    prof['peak_flops_fp32_tflops'] * 1e12
  )
  w = microbenchmarks.table_workload(1000, 16, 4, 256)
  r = cost_model.evaluate(
    hardware.as_arrays(p),
    w,
    device_profile.local_plan(w, p),
    device_profile.local_stack(prof),
  )
  assert np.isfinite(float(r.step_time)) and float(r.step_time) > 0
  with pytest.raises(InputError, match='lacks the measured'):
    device_profile.local_platform(_good())
  cpu = replace(p, trainer='cpu')
  assert cpu.trainer == 'cpu'


def _run(*args, timeout=600):
  return subprocess.run(
    [sys.executable, '-m', 'experiments.calibrate', *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
  )


def test_calibrate_bad_profile_exits_with_one_line(tmp_path):
  workdir = tmp_path / 'run'
  out = _run(
    f'--device_profile={tmp_path / "nope.json"}', f'--workdir={workdir}'
  )
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: device profile')
  assert not workdir.exists()


@pytest.mark.heavy
def test_calibration_study_smoke_measures_and_fits(monkeypatch):
  # The smoke run with the tiny sweep in place of the quick one: the
  # measuring path end to end (a given profile: the launcher test). The
  # public cases are the launcher test's (its result.json): their fit is
  # compiled under the launcher's XLA flags, so a second one here would
  # be a second compile of the largest program of the study.
  monkeypatch.setattr(microbenchmarks, 'QUICK_SWEEP', TINY_SWEEP)
  progress = []
  r, metrics = calibration.run(
    calibration.Settings(smoke=True, fit_steps=20, public=False),
    progress.append,
  )
  assert metrics == []
  assert any('fitting the profile' in line for line in progress)
  assert not any('public cases' in line for line in progress)
  assert r['public_cases'] == [] and r['public_fit'] is None
  assert r['stack_fit'] is None and r['max_abs_rel_error_public'] is None
  kinds = [b['kind'] for b in r['microbenchmarks']]
  assert kinds == [b['kind'] for b, _ in microbenchmarks.benchmarks(TINY_SWEEP)]
  assert r['fit']['steps'] == 20 and len(r['fit']['predictions']) == 8
  prof = device_profile.validate(r['device_profile'])  # savable as is
  assert prof['target'] == 'cpu' and prof['backend'] == 'cpu'
  assert all(k in prof for k in device_profile.PEAK_KEYS)
  assert prof['memory_bandwidth_gb_per_s'] == pytest.approx(
    profile_fit.measured_peaks(r['microbenchmarks'])[
      'memory_bandwidth_gb_per_s'
    ]
  )
  for c in r['param_check']:
    assert c['measured'] == c['analytic'] and c['rel_error'] == 0.0
  for c in r['flops_check']:
    assert abs(c['rel_error']) < 0.05
    assert c['analytic_bytes'] > 0 and c['measured_bytes_accessed'] > 0
  names = [w.name for w in calibration.local_configs(quick=True, smoke=True)]
  assert [c['name'] for c in r['local_cases']] == names
  for c in r['local_cases']:
    assert c['rel_error'] == pytest.approx(c['predicted'] / c['measured'] - 1)
  errs = np.abs([c['rel_error'] for c in r['local_cases']])
  assert r['median_abs_rel_error_local'] == pytest.approx(np.median(errs))
  # The main table: one row per local case, in the units of its header.
  header, rows = calibration.csv_table(r)
  assert header[:4] == [
    'name',
    'measured_step_s',
    'predicted_step_s',
    'rel_error',
  ]
  assert [row[:4] for row in rows] == [
    [c['name'], c['measured'], c['predicted'], c['rel_error']]
    for c in r['local_cases']
  ]
  text = calibration.table(r)
  for c in r['local_cases'] + r['public_cases']:
    assert c['name'] in text


def test_calibration_study_rejects_an_unmeasured_profile(tmp_path):
  path = _write(tmp_path, 'p.json', json.dumps(_good()))
  with pytest.raises(InputError, match='lacks the measured'):
    calibration.run(calibration.Settings(smoke=True, device_profile=path))


@pytest.mark.heavy
def test_calibrate_smoke_writes_every_file(tmp_path):
  workdir = tmp_path / 'run'
  out = _run('--smoke', f'--device_profile={LOCAL}', f'--workdir={workdir}')
  assert out.returncode == 0, out.stderr[-2000:]
  # Tables on stdout, progress on stderr.
  assert 'public cases C1-C19' in out.stdout and 'public cases' in out.stderr
  r = json.loads((workdir / 'result.json').read_text())
  assert len(r['local_cases']) == 2 and 'stack_fit' not in r
  # The public cases C1-C19, each judged out of sample.
  assert len(r['public_cases']) == 23
  for c in r['local_cases'] + r['public_cases']:
    assert c['measured'] > 0 and c['predicted'] > 0
    assert c['rel_error'] == pytest.approx(c['predicted'] / c['measured'] - 1)
    assert c['bottleneck'] in cost_model.COMPONENTS
  errs = np.abs([c['rel_error'] for c in r['local_cases']])
  assert r['median_abs_rel_error_local'] == pytest.approx(np.median(errs))
  assert r['max_abs_rel_error_local'] == pytest.approx(np.max(errs))
  pub = r['public_cases']
  for c in pub:  # judged out of sample: never fitted on its own case
    assert c['name'].startswith(c['case_id'] + '_')
    assert c['case_id'] not in c['fitted_on']
    assert stack_presets.family(c['stack']) in stack_presets.PRESETS
    assert c['rel_error_prior'] == pytest.approx(
      c['predicted_prior'] / c['measured'] - 1
    )
  errs = np.abs([c['rel_error'] for c in pub])
  assert r['median_abs_rel_error_public'] == pytest.approx(np.median(errs))
  assert r['max_abs_rel_error_public'] == pytest.approx(np.max(errs))
  # How far the band holds on this run's own errors, printed.
  band = r['public_fit']['band']
  assert band['cases'] == 19 and 0 <= band['covered'] <= 19
  assert f'holds {band["covered"]} of 19 cases' in out.stdout
  for name, fit in r['public_fit']['parameters'].items():
    lo, hi = fit['range']
    assert lo <= fit['loco_min'] <= fit['value'] * 1.5
    assert fit['loco_max'] <= hi and lo <= fit['value'] <= hi, name
  # A given profile: nothing measured but the validation steps, no fit.
  assert r['fit'] is None and r['microbenchmarks'] is None
  assert r['device_profile'] == device_profile.load(LOCAL)
  with open(workdir / 'calibration.csv') as f:
    rows = list(csv.reader(f))
  assert rows[0][:3] == ['name', 'measured_step_s', 'predicted_step_s']
  assert [row[0] for row in rows[1:]] == [c['name'] for c in r['local_cases']]
  assert [float(row[2]) for row in rows[1:]] == [
    c['predicted'] for c in r['local_cases']
  ]
  shipped = json.loads((workdir / 'stack_fit.json').read_text())
  assert set(shipped['stacks']) >= {'torchrec', 'nvidia_pytorch', 'hugectr'}
  v = shipped['stacks']['torchrec']['op_host_time']['value']
  assert v == r['public_fit']['parameters']['op_host_time']['value']
  # A given profile is not written again (only a measured one is).
  assert not (workdir / 'device_profile.json').exists()
  assert (workdir / 'calibration.png').read_bytes()[:4] == b'\x89PNG'
  assert (workdir / 'env.json').exists() and (workdir / 'config.json').exists()
  env = json.loads((workdir / 'env.json').read_text())
  assert 'xla_cpu_multi_thread_eigen=false' in env['xla_flags']
