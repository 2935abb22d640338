"""Ground the cost model: a real Flax DLRM, XLA's counts, measured steps.

The library part of `experiments.calibrate`, with no file I/O and no
printing. `run(settings)` (JAX picks the backend; nothing here is
CPU-specific):
1. `param_check`: parameters of the Flax DLRM (`jax.eval_shape` of its
   init, so preset-sized tables cost no memory) against
   `workload.param_count`.
2. `flops_check`: FLOPs of the compiled dense part of a train step
   (forward, backward, Optax update) from XLA's `cost_analysis()` against
   `workload.dense_flops_per_sample * batch`; bytes accessed beside the
   cost model's dense bytes.
3. The device profile: microbenchmarks of the local device
   (`codesign.calibration.microbenchmarks`) and the efficiency fields fitted to
   them through the cost model (`codesign.calibration.profile_fit`), or the
   profile given in the settings. FITTING DATA: the microbenchmarks only. They
   are timed in the same interleaved rounds as the validation steps of 4, so
   that both see the same machine (`microbenchmarks.time_interleaved`).
4. `local_cases`: real jitted train steps of the Flax DLRM on synthetic
   data for configurations that differ in batch, tables, dims, pooling,
   MLP widths and interaction, against the cost model's step time on a
   one-device platform built from the profile. VALIDATION DATA: none of
   these steps is used in the fit.
5. `public_cases`: the published DLRM training throughputs C1-C19
   (`calibration_cases.json`: NVIDIA PyTorch, HugeCTR, TorchRec, Intel
   CPU) against the cost model with the stack each case names. The few
   physical numbers the cases share (`public_cases.FIT_PARAMETERS`: host
   time per eager operator, per-step floors, fused and hybrid embedding
   efficiency, GPU GEMM efficiency and tile size) are fitted with Adam
   through the cost model; each case is predicted with the values fitted
   on the other cases only (leave-one-case-out); the prediction from the
   sourced priors is reported beside it.

Times are in seconds (step times, `measured` and `predicted`), errors
relative (predicted / measured - 1). Measured times vary from run to run
(and with other load on the machine); with the same given device profile
the predictions, checks and public cases are reproducible.
"""

import dataclasses
import pathlib
from collections.abc import Callable

import jax
import numpy as np

from codesign.calibration import (
  count_checks,
  coverage,
  device_profile,
  dlrm,
  microbenchmarks,
  profile_fit,
  synthetic_data,
)
from codesign.calibration import public_cases as pc
from codesign.core.errors import InputError
from codesign.model import cost_model
from codesign.spec import hardware, workload_presets
from codesign.spec import workload as wl


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to calibrate (the flags of `experiments.calibrate`).

  Attributes:
    quick: the small sweep (`microbenchmarks.QUICK_SWEEP`) and 6 local
      configurations instead of 8.
    smoke: a tiny run for tests (implies quick): 2 local configurations
      and 2 checks; not a calibration.
    device_profile: path of a measured device profile JSON to use instead
      of measuring one (no microbenchmarks, no fit); None: measure.
    fit_steps: Adam steps of the profile fit.
    public: fit and judge the public cases C1-C19 (False: the local
      device alone; no public figures and no stack fit).
    seed: seed of parameters, data and benchmarks.

  XLA's threads per op (`experiments.calibrate --single_thread`) must be
  set before JAX starts, so they are the launcher's, not a setting.
  """

  quick: bool = False
  smoke: bool = False
  device_profile: str | pathlib.Path | None = None
  fit_steps: int = 1500
  public: bool = True
  seed: int = 0


# The validation configurations, never used in the fit: name, global
# batch, one table's (rows, dim, pooling), tables, dense features, bottom
# and top MLP widths, other Workload fields. The first 6 are the quick
# set; the smoke set is L1 and L5.
LOCAL_CONFIGS = (
  ('L1_b512_t8_d32_p1', 512, (100_000, 32, 1), 8, 13, (128, 32),
   (256, 128, 1), {}),
  ('L2_b2048_t4_d16_p8', 2048, (50_000, 16, 8), 4, 13, (64, 16),
   (128, 64, 1), {}),
  ('L3_b256_t16_d64_p2', 256, (20_000, 64, 2), 16, 32, (256, 64),
   (512, 256, 1), {}),
  ('L4_b1024_t6_d128_p1', 1024, (200_000, 128, 1), 6, 13, (256, 128),
   (512, 1), {}),
  ('L5_b1024_t10_d32_p20_cat', 1024, (100_000, 32, 20), 10, 16, (64, 32),
   (128, 64, 1), {'interaction': 'cat'}),
  ('L6_b4096_t26_d16_p1', 4096, (50_000, 16, 1), 26, 13, (256, 64, 16),
   (256, 128, 1), {}),
  ('L7_b512_t8_d32_p3_dcnv2', 512, (100_000, 32, 3), 8, 13, (128, 32),
   (256, 1), {'interaction': 'dcnv2', 'dcn_layers': 2, 'dcn_rank': 64}),
  ('L8_b8192_t3_d64_p4', 8192, (300_000, 64, 4), 3, 8, (64, 64),
   (64, 32, 1), {}),
)  # fmt: skip
QUICK_CONFIGS = 6


def _local_workload(row: tuple) -> wl.Workload:
  """The Workload of a `LOCAL_CONFIGS` row."""
  name, batch, table, n_tables, dense, bottom, top, kw = row
  return wl.Workload(
    name=name,
    tables=(wl.Table(*table),) * n_tables,
    num_dense=dense,
    bottom_mlp=bottom,
    top_mlp=top,
    global_batch=batch,
    source='experiments.calibrate local configuration',
    **kw,
  )


def local_configs(quick: bool, smoke: bool = False) -> list[wl.Workload]:
  """The validation configurations (never used in the fit): 8, 6 when
  `quick`, 2 when `smoke`."""
  out = [_local_workload(row) for row in LOCAL_CONFIGS]
  if smoke:
    return [out[0], out[4]]
  return out[:QUICK_CONFIGS] if quick else out


def check_configs(quick: bool, smoke: bool = False) -> list[wl.Workload]:
  """Workloads for the parameter and FLOP checks (small batch)."""
  local = local_configs(quick=True)
  if smoke:
    return [
      local[0],
      dataclasses.replace(
        workload_presets.get('mlperf_dlrm_dcnv2'),
        global_batch=64,
        dense_precision='fp32',  # the counts, not the casts of fp16 AMP
      ),
    ]
  names = ['criteo_kaggle', 'mlperf_dlrm_dcnv2', 'nv_dlrm_small']
  if not quick:
    names += ['dlrm_benchmark', 'rm2', 'zion_scale']
  presets = [workload_presets.get(n) for n in names]
  # FLOP checks of presets at a batch that compiles fast; counts scale
  # linearly with the batch.
  # fp32 dense: the MLPerf presets train in fp16 mixed precision, whose
  # casts XLA counts as FLOPs; the check is of the layers' counts.
  presets = [
    dataclasses.replace(p, global_batch=512, dense_precision='fp32')
    for p in presets
  ]
  return local + presets


def train_step_runner(w, seed: int):
  """A compiled, warmed-up `run()` doing one jitted train step of the Flax
  DLRM on synthetic data (cycling over 4 batches)."""
  gen = synthetic_data.SyntheticCriteo(w, seed=seed)
  batches = [jax.device_put(gen.batch(i, w.global_batch)) for i in range(4)]
  state = dlrm.init_state(w, jax.random.PRNGKey(seed), 0.01)
  step = jax.jit(dlrm.make_train_step(w, 0.01), donate_argnums=0)
  holder = {'state': state, 'i': 0}

  def run():
    s, loss = step(holder['state'], batches[holder['i'] % len(batches)])
    holder['state'], holder['i'] = s, holder['i'] + 1
    return loss

  jax.block_until_ready(run())
  return run


# One timing sample of a validation step: back-to-back steps lasting
# about this long (a step takes 2-60 ms here).
STEP_MIN_SECONDS = 0.05


def measure(
  sweep: microbenchmarks.Sweep,
  configs,
  seed: int,
  with_microbenchmarks: bool,
  progress: Callable[[str], None],
):
  """Times the microbenchmarks (if asked) and the validation train steps,
  interleaved in the same rounds (`microbenchmarks.time_interleaved`), so
  that the fitting data and the validation data see the same spread of
  machine states.

  Returns:
    (microbenchmark records or None, step seconds per configuration).
  """
  items = (
    microbenchmarks.benchmarks(sweep, seed) if with_microbenchmarks else []
  )
  runners = [train_step_runner(w, seed) for w in configs]
  progress(
    f'timing {len(items)} microbenchmarks (fitting data) and '
    f'{len(runners)} train steps (validation data), interleaved, '
    f'{sweep.rounds} rounds ...'
  )
  secs = microbenchmarks.time_interleaved(
    [run for _, run in items] + runners,
    rounds=sweep.rounds,
    min_seconds=[sweep.min_seconds] * len(items)
    + [STEP_MIN_SECONDS] * len(runners),
  )
  records = [
    {**rec, 'seconds': t}
    for (rec, _), t in zip(items, secs[: len(items)], strict=True)
  ]
  return (records or None), secs[len(items) :]


def _breakdown(r) -> dict:
  """The nonzero components of a `CostReport`, in seconds."""
  return {k: float(v) for k, v in r.breakdown.items() if float(v) > 0}


def local_cases(profile: dict, configs, measured_s) -> list[dict]:
  """The validation cases: each configuration's measured step time
  (`measured_s`, seconds) against the cost model under `profile`."""
  p = device_profile.local_platform(profile)
  s = device_profile.local_stack(profile)
  out = []
  for w, measured in zip(configs, measured_s, strict=True):
    plan = device_profile.local_plan(w, p)
    # The model on the CPU whatever device was timed: its numbers do not
    # depend on the backend.
    with jax.default_device(jax.devices('cpu')[0]):
      r = cost_model.evaluate(hardware.as_arrays(p), w, plan, s)
    pred = float(r.step_time)
    out.append(
      {
        'name': w.name,
        'measured': measured,
        'predicted': pred,
        'rel_error': pred / measured - 1.0,
        'bottleneck': r.bottleneck,
        'breakdown_s': _breakdown(r),
      }
    )
  return out


def _public_case(c, fold: dict) -> dict:
  """One public case predicted with the values of its fold."""
  r = pc.predict(c, fold['values'])
  prior = float(pc.predict(c).step_time)
  pred = float(r.step_time)
  w = c.workload
  return {
    'name': c.name,
    'case_id': c.case_id,
    'stack': c.stack.name,
    'hardware': c.hardware,
    'workload': w.name,
    'global_batch': w.global_batch,
    'dense_precision': w.dense_precision,
    'measured': c.measured,
    'predicted': pred,
    'rel_error': pred / c.measured - 1.0,
    'predicted_prior': prior,
    'rel_error_prior': prior / c.measured - 1.0,
    'fitted_on': fold['fitted_on'],
    'fitted_values': {k: fold['values'][k] for k in pc.used_parameters(c)},
    'measured_records_per_s': w.global_batch / c.measured,
    'predicted_records_per_s': w.global_batch / pred,
    'bottleneck': r.bottleneck,
    'breakdown_s': _breakdown(r),
    'notes': list(c.notes),
  }


def public_cases():
  """The published cases C1-C19, each predicted out of sample: with the
  stack and GPU numbers fitted on the OTHER cases only (leave-one-case-
  out, `codesign.calibration.public_cases`), and with the priors beside it.
  Returns (cases, per-parameter fit report, stack_fit.json dict).

  In float64 whatever the script's precision: the fit's gradient is a
  central difference of step `pc.FD_STEP` (1e-4 in fit coordinates), and
  in float32 the loss's rounding (1e-7 relative) moved the weakly pinned
  numbers by up to 1.3% from the float64 fit (HugeCTR's floor)."""
  cpu = jax.devices('cpu')[0]
  with jax.default_device(cpu), jax.enable_x64(True):
    cases = pc.load()
    loco = pc.leave_one_case_out(cases)
    out = [_public_case(c, loco['folds'][c.case_id]) for c in cases]
  fit = {}
  for param in pc.FIT_PARAMETERS:
    folds = [f['values'][param.name] for f in loco['folds'].values()]
    value = loco['all']['values'][param.name]
    fit[param.name] = {
      'value': value,
      'loco_min': float(np.min(folds)),
      'loco_max': float(np.max(folds)),
      'prior': param.prior,
      'range': [param.lo, param.hi],
      'range_why': param.why,
      'at_bound': pc.at_bound(param.name, value),
      'applies_to': [f'{who}.{field}' for who, field in param.targets],
    }
  spread = {k: (v['loco_min'], v['loco_max']) for k, v in fit.items()}
  shipped = pc.stack_fit_json(
    loco['all']['values'], loco['all']['fitted_on'], spread
  )
  # Each case's out-of-sample error (of its variants, the largest), what a
  # design's band is made of (`calibration.coverage`).
  errors = {}
  for c in out:
    e = errors.get(c['case_id'])
    if e is None or abs(c['rel_error']) > abs(e):
      errors[c['case_id']] = c['rel_error']
  shipped['loo_errors'] = errors
  report = {
    'parameters': fit,
    'prior_weight': pc.PRIOR_WEIGHT,
    'robust_scale': pc.ROBUST_SCALE,
    # Each case's band made without it against its error: how far the
    # band `propose` and `evaluate` print holds on this fit.
    'band': coverage.band_check(errors),
    'fit_loss_all': loco['all']['fit_loss'],
    'folds': loco['folds'],
  }
  return out, report, shipped


PROTOCOL = {
  'fitting_data': 'microbenchmarks only (gemm, gather, scatter, chain; '
  'stream and the fastest GEMM give bandwidth and peaks)',
  'validation_data': 'local_cases: full jitted DLRM train steps of '
  'configurations absent from the fit',
  'timing': 'wall clock; microbenchmarks and validation steps sampled '
  'in turn in the same rounds, each keeping its fastest sample',
  'public_cases': 'published DLRM training throughputs C1-C19 (NVIDIA '
  'PyTorch, HugeCTR, TorchRec, Intel CPU) against the catalog parts '
  'and the stack each case names; the few physical numbers in '
  'codesign.public_cases.FIT_PARAMETERS are fitted with Adam through '
  'the cost model, and every case is predicted with the values fitted '
  'on the OTHER cases (leave-one-case-out, `fitted_on`). '
  '`predicted_prior` uses the sourced priors instead.',
}
# Keys of `run`'s result that are not part of result.json.
EXTRA_KEYS = ('stack_fit',)


def _given_profile(path) -> dict:
  """A measured profile from a file; raises `InputError` unless it holds
  the measured peaks a local platform needs."""
  given = device_profile.load(path)
  missing = [k for k in device_profile.PEAK_KEYS if k not in given]
  if missing:
    raise InputError(
      f'device profile {str(path)!r} lacks the measured {missing[0]!r}, '
      'so it cannot describe the local device'
    )
  return given


def _abs_errors(cases, key='rel_error'):
  return np.abs([c[key] for c in cases])


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Calibrates the cost model against the local device and the public
  cases.

  Args:
    settings: what to calibrate.
    progress: called with one line of text as each phase starts (timing,
      fit, XLA checks, public cases: each takes 5 s to minutes).

  Returns:
    (result, metrics). result: the dict `experiments.calibrate` writes to
    result.json (device_profile, fit (None for a given profile),
    microbenchmarks (records with measured seconds, or None),
    param_check, flops_check, local_cases, public_cases, public_fit,
    error medians and maxima, ...) plus `stack_fit` (the stack_fit.json
    dict: the values fitted on every public case, with provenance).
    metrics: empty (there are no steps).

  Raises:
    InputError: a given profile that is not a measured one.
  """
  progress = progress or (lambda line: None)
  quick = settings.quick or settings.smoke
  given = None
  if settings.device_profile:  # bad input fails before any measurement
    given = _given_profile(settings.device_profile)
  measured = _measure_local(settings, given is None, progress)
  records = measured['records']
  profile, fit_report = _profile(settings, given, records, progress)
  progress('parameter and FLOP checks (compiling dense steps) ...')
  param_check, flops_check = count_checks.check(
    check_configs(quick, settings.smoke), settings.seed
  )
  local = local_cases(profile, measured['configs'], measured['step_times'])
  public, public_fit, stack_fit = [], None, None
  if settings.public:
    progress(
      'public cases C1-C19 (stack and GPU numbers fitted leave-one-case-out)'
      ' ...'
    )
    public, public_fit, stack_fit = public_cases()
  result = {
    **_environment(measured),
    'device_profile': profile,
    'fit': fit_report,
    'microbenchmarks': records,
    'param_check': param_check,
    'flops_check': flops_check,
    'flops_note': count_checks.FLOPS_NOTE,
    'bytes_note': count_checks.BYTES_NOTE,
    'max_abs_rel_error_flops': float(np.max(_abs_errors(flops_check))),
    'local_cases': local,
    'public_cases': public,
    'public_fit': public_fit,
    **_error_summary(local, public),
    'stack_fit': stack_fit,
  }
  return result, []


def _measure_local(settings: Settings, microbench: bool, progress) -> dict:
  """The local timings: `held` (freed memory held), `rounds`, `configs`
  (the validation configurations), `records` (the microbenchmarks, when
  `microbench`) and `step_times` (their measured train steps)."""
  quick = settings.quick or settings.smoke
  held = microbenchmarks.hold_freed_memory()
  sweep = microbenchmarks.QUICK_SWEEP if quick else microbenchmarks.Sweep()
  configs = local_configs(quick, settings.smoke)
  progress(
    f'compiling {len(configs)} train steps'
    + (' and the microbenchmarks' if microbench else '')
    + ' ...'
  )
  records, step_times = measure(
    sweep, configs, settings.seed, microbench, progress
  )
  return {
    'held': held,
    'rounds': sweep.rounds,
    'configs': configs,
    'records': records,
    'step_times': step_times,
  }


def _profile(settings: Settings, given, records, progress):
  """(profile, fit report): the given profile (no report), or the one
  fitted to the microbenchmark `records` with the device's description."""
  if given is not None:
    return given, None
  progress(f'fitting the profile to {len(records)} microbenchmarks ...')
  profile, fit_report = profile_fit.fit(records, steps=settings.fit_steps)
  profile = {
    **profile,
    **device_profile.device_description(),
    'source': 'measured by experiments.calibrate (codesign.microbenchmarks, '
    'fitted through the cost model by codesign.profile_fit)',
  }
  return profile, fit_report


def _environment(measured: dict) -> dict:
  """result.json's backend, device kind, clock, freed memory held and
  timing protocol."""
  return {
    'backend': jax.default_backend(),
    'device_kind': jax.devices()[0].device_kind,
    'clock': microbenchmarks.default_clock().__name__,
    'freed_memory_held': measured['held'],
    'protocol': {**PROTOCOL, 'rounds': measured['rounds']},
  }


def _error_summary(local: list[dict], public: list[dict]) -> dict:
  """Median and maximum |relative error| of the local and public cases,
  and the public cases' median with the priors (None without public
  cases)."""
  local_err = _abs_errors(local)
  out = {
    'median_abs_rel_error_local': float(np.median(local_err)),
    'max_abs_rel_error_local': float(np.max(local_err)),
  }
  public_keys = (
    'median_abs_rel_error_public',
    'max_abs_rel_error_public',
    'median_abs_rel_error_public_prior',
  )
  if not public:
    return out | dict.fromkeys(public_keys)
  public_err = _abs_errors(public)
  prior_err = _abs_errors(public, 'rel_error_prior')
  values = (np.median(public_err), np.max(public_err), np.median(prior_err))
  return out | {k: float(v) for k, v in zip(public_keys, values, strict=True)}


def table(result: dict) -> str:
  """The profile, the checks, the local and the public cases (measured
  and predicted step times in ms, relative errors) and the public fit, as
  plain text (a `run` result)."""
  r = result
  local_line = (
    f'local: median |error| {r["median_abs_rel_error_local"]:.1%}, worst '
    f'{r["max_abs_rel_error_local"]:.1%}'
  )
  lines = _local_lines(result)
  if r['public_fit'] is None:
    return '\n'.join(lines + [local_line + '; public cases not run'])
  lines += _public_lines(result)
  lines.append(
    f'{local_line}; public: median '
    f'{r["median_abs_rel_error_public"]:.1%}, worst '
    f'{r["max_abs_rel_error_public"]:.1%} (priors median '
    f'{r["median_abs_rel_error_public_prior"]:.1%})'
  )
  return '\n'.join(lines)


def _local_lines(result: dict) -> list[str]:
  """The profile, its fit, the XLA checks and the local cases."""
  profile, fit = result['device_profile'], result['fit']
  keys = (
    *device_profile.PEAK_KEYS,
    *device_profile.EFFICIENCY_KEYS,
    'step_overhead_us',
  )
  lines = [
    'profile: '
    + ', '.join(f'{k}={profile[k]:.4g}' for k in keys if k in profile)
  ]
  if fit is not None:
    lines.append(
      f'fit: loss {fit["loss_initial"]:.3f} -> {fit["loss_final"]:.3f}; '
      + ', '.join(
        f'{k} median {v["median_abs_rel_error"]:.0%}'
        for k, v in fit['per_kind'].items()
      )
    )
  lines.append('parameter and FLOP checks (XLA / analytic):')
  for p, c in zip(result['param_check'], result['flops_check'], strict=True):
    lines.append(
      f'  {c["name"]:28s} params {p["measured"] / p["analytic"]:.4f}  '
      f'FLOPs {c["measured"] / c["analytic"]:.4f}  '
      f'bytes {c["bytes_ratio"]:.2f}'
    )
  lines.append('local train steps (validation, not fitted):')
  for c in result['local_cases']:
    lines.append(
      f'  {c["name"]:28s} measured {c["measured"] * 1e3:8.2f} ms  predicted '
      f'{c["predicted"] * 1e3:8.2f} ms  {c["rel_error"]:+.1%}  '
      f'({c["bottleneck"]})'
    )
  return lines


def _public_lines(result: dict) -> list[str]:
  """The public cases and the fitted parameters."""
  lines = [
    'public cases C1-C19 (stack and GPU numbers fitted leave-one-case-out):'
  ]
  for c in result['public_cases']:
    lines.append(
      f'  {c["name"]:8s} {c["stack"]:14s} measured '
      f'{c["measured"] * 1e3:7.2f} ms predicted '
      f'{c["predicted"] * 1e3:7.2f} ms {c["rel_error"]:+7.1%} (priors '
      f'{c["rel_error_prior"]:+7.1%}) limited by {c["bottleneck"]}'
    )
  for name, f in result['public_fit']['parameters'].items():
    bound = f' AT ITS {f["at_bound"].upper()} BOUND' if f['at_bound'] else ''
    lines.append(
      f'  {name:28s} {f["value"]:.4g} (folds {f["loco_min"]:.4g}-'
      f'{f["loco_max"]:.4g}; prior {f["prior"]:.4g}){bound}'
    )
  band = result['public_fit'].get('band')
  if band and band['cases']:
    lines.append(
      f"band (each case's made without it): holds {band['covered']} of "
      f"{band['cases']} cases' errors, median half-width "
      f'{band["median_half_width"]:.1%}'
    )
  return lines


CSV_HEADER = [
  'name',
  'measured_step_s',
  'predicted_step_s',
  'rel_error',
  'bottleneck',
]


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """The main table, one row per local validation case: measured and
  predicted step time (s), relative error, the model's bottleneck."""
  rows = [
    [c['name'], c['measured'], c['predicted'], c['rel_error'], c['bottleneck']]
    for c in result['local_cases']
  ]
  return list(CSV_HEADER), rows
