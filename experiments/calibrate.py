r"""Ground the cost model: a real Flax DLRM, XLA's counts, measured steps.

  python -m experiments.calibrate --quick           # < 2 minutes, 2 cores
  python -m experiments.calibrate                   # fuller sweep
  python -m experiments.calibrate \
      --device_profile=codesign/data/profiles/local_cpu.json

Steps (JAX picks the backend; nothing here is CPU-specific):
1. `param_check`: parameters of the Flax DLRM (`jax.eval_shape` of its
   init, so preset-sized tables cost no memory) against
   `workload.param_count`.
2. `flops_check`: FLOPs of the compiled dense part of a train step
   (forward, backward, Optax update) from XLA's `cost_analysis()` against
   `workload.dense_flops_per_sample * batch`; bytes accessed beside the
   cost model's dense bytes.
3. The device profile: microbenchmarks of the local device (GEMMs,
   embedding-bag gathers and scatters, streaming, call chains) and the
   efficiency fields fitted to them through the cost model
   (`codesign.device_profile`), or the profile given by --device_profile.
   FITTING DATA: the microbenchmarks only. They are timed in the same
   interleaved rounds as the validation steps of 4, so that both see the
   same machine (`microbenchmarks.time_interleaved`).
4. `local_cases`: real jitted train steps of the Flax DLRM on synthetic
   data for configurations that differ in batch, tables, dims, pooling,
   MLP widths and interaction, against the cost model's step time on a
   one-device platform built from the profile. VALIDATION DATA: none of
   these steps is used in the fit.
5. `public_cases`: the published DLRM training throughputs C1-C9
   (`calibration_cases.json`: NVIDIA PyTorch, HugeCTR, TorchRec, Intel
   CPU) against the cost model with the stack each case names. The few
   physical numbers the cases share (`public_cases.FIT_PARAMETERS`: host
   time per eager operator, per-step floors, fused embedding efficiency,
   GPU GEMM efficiency and tile size) are fitted with Adam through the
   cost model; each case is predicted with the values fitted on the
   other cases only (leave-one-case-out); the prediction from the
   sourced priors is reported beside it.

Writes config.json, env.json, device_profile.json, result.json,
calibration.png and stack_fit.json (the values fitted on every public
case, with provenance: copy it to codesign/data/stack_fit.json to ship
it as the stack presets' defaults) to --workdir. Measured times vary
from run to run (and with other load on the machine); with the same
--device_profile the predictions, checks and public cases are
reproducible.
"""

import os

from absl import flags

from experiments import common

flags.DEFINE_bool(
  'quick', False, 'Small sweep and 6 local configurations (< 2 minutes).'
)
flags.DEFINE_string(
  'device_profile',
  None,
  'Measured device profile JSON to use instead of measuring one (e.g. '
  'codesign/data/profiles/local_cpu.json).',
)
flags.DEFINE_bool(
  'smoke',
  False,
  'Tiny run for tests: 2 local configurations and 2 checks (not a '
  'calibration; combine with --device_profile to skip measuring).',
)
flags.DEFINE_integer('fit_steps', 1500, 'Adam steps of the profile fit.')
flags.DEFINE_bool(
  'single_thread',
  True,
  'Hold XLA CPU to one thread per op (set before JAX starts; no effect on '
  'accelerators), so that process CPU time measures the work.',
)
common.define_run_flags(
  'calibrate',
  x64=None,
  seed_help='Seed of parameters, data and benchmarks.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _local_configs(quick: bool, smoke: bool = False):
  """The validation configurations (never used in the fit)."""
  from codesign.workload import Table, Workload

  def w(name, batch, tables, dense, bottom, top, **kw):
    return Workload(
      name=name,
      tables=tuple(tables),
      num_dense=dense,
      bottom_mlp=bottom,
      top_mlp=top,
      global_batch=batch,
      source='experiments.calibrate local configuration',
      **kw,
    )

  out = [
    w(
      'L1_b512_t8_d32_p1',
      512,
      [Table(100_000, 32, 1)] * 8,
      13,
      (128, 32),
      (256, 128, 1),
    ),
    w(
      'L2_b2048_t4_d16_p8',
      2048,
      [Table(50_000, 16, 8)] * 4,
      13,
      (64, 16),
      (128, 64, 1),
    ),
    w(
      'L3_b256_t16_d64_p2',
      256,
      [Table(20_000, 64, 2)] * 16,
      32,
      (256, 64),
      (512, 256, 1),
    ),
    w(
      'L4_b1024_t6_d128_p1',
      1024,
      [Table(200_000, 128, 1)] * 6,
      13,
      (256, 128),
      (512, 1),
    ),
    w(
      'L5_b1024_t10_d32_p20_cat',
      1024,
      [Table(100_000, 32, 20)] * 10,
      16,
      (64, 32),
      (128, 64, 1),
      interaction='cat',
    ),
    w(
      'L6_b4096_t26_d16_p1',
      4096,
      [Table(50_000, 16, 1)] * 26,
      13,
      (256, 64, 16),
      (256, 128, 1),
    ),
  ]
  if smoke:
    return [out[0], out[4]]
  if not quick:
    out += [
      w(
        'L7_b512_t8_d32_p3_dcnv2',
        512,
        [Table(100_000, 32, 3)] * 8,
        13,
        (128, 32),
        (256, 1),
        interaction='dcnv2',
        dcn_layers=2,
        dcn_rank=64,
      ),
      w(
        'L8_b8192_t3_d64_p4',
        8192,
        [Table(300_000, 64, 4)] * 3,
        8,
        (64, 64),
        (64, 32, 1),
      ),
    ]
  return out


def _check_configs(quick: bool, smoke: bool = False):
  """Workloads for the parameter and FLOP checks (small batch)."""
  import dataclasses

  from codesign import workload_presets

  local = _local_configs(quick=True)
  if smoke:
    return [
      local[0],
      dataclasses.replace(
        workload_presets.get('mlperf_dlrm_dcnv2'), global_batch=64
      ),
    ]
  names = ['criteo_kaggle', 'mlperf_dlrm_dcnv2', 'nv_dlrm_small']
  if not quick:
    names += ['dlrm_benchmark', 'rm2', 'zion_scale']
  presets = [workload_presets.get(n) for n in names]
  # FLOP checks of presets at a batch that compiles fast; counts scale
  # linearly with the batch.
  presets = [dataclasses.replace(p, global_batch=512) for p in presets]
  return local + presets


def _cost_analysis(compiled) -> dict:
  a = compiled.cost_analysis()
  if isinstance(a, list | tuple):
    a = a[0]
  return dict(a or {})


def _analytic_dense_bytes(w) -> float:
  """The cost model's dense bytes of one step: each GEMM's activations
  and weights once forward and twice backward, plus the optimizer pass."""
  import numpy as np

  from codesign import terms
  from codesign import workload as wl

  g = terms.gemm_table(w)
  elem = wl.PRECISION_BYTES[w.dense_precision]
  per_pass = elem * (
    w.global_batch * float(np.sum(g['per_sample_elems']))
    + float(np.sum(g['fixed_elems']))
  )
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  opt = wl.dense_param_count(w) * (12.0 + 8.0 * state)
  return 3.0 * per_pass + opt


def param_and_flops_checks(quick: bool, seed: int, smoke: bool = False):
  import jax
  import jax.numpy as jnp

  from codesign import dlrm
  from codesign import workload as wl

  params_out, flops_out = [], []
  key = jax.random.PRNGKey(seed)
  for w in _check_configs(quick, smoke):
    shapes = jax.eval_shape(lambda k, w=w: dlrm.init(w, k), key)
    measured = dlrm.count_params(shapes)
    analytic = wl.param_count(w)
    params_out.append(
      {
        'name': w.name,
        'analytic': analytic,
        'measured': measured,
        'rel_error': measured / analytic - 1.0,
      }
    )
    b = w.global_batch
    dense_shapes, table_shapes = dlrm.split_params(w, shapes)
    opt = dlrm.dense_optimizer(w.optimizer, 0.01)
    opt_shapes = jax.eval_shape(opt.init, dense_shapes)
    pooled = tuple(
      jax.ShapeDtypeStruct((b, t.dim), jnp.float32) for t in w.tables
    )
    args = (
      dense_shapes,
      table_shapes,
      opt_shapes,
      jax.ShapeDtypeStruct((b, w.num_dense), jnp.float32),
      pooled,
      jax.ShapeDtypeStruct((b,), jnp.float32),
    )
    step = jax.jit(dlrm.make_dense_step(w, 0.01))
    ca = _cost_analysis(step.lower(*args).compile())
    analytic_flops = wl.dense_flops_per_sample(w) * b
    analytic_bytes = _analytic_dense_bytes(w)
    flops_out.append(
      {
        'name': w.name,
        'batch': b,
        'analytic': analytic_flops,
        'measured': float(ca.get('flops', float('nan'))),
        'rel_error': float(ca.get('flops', float('nan'))) / analytic_flops
        - 1.0,
        'analytic_bytes': analytic_bytes,
        'measured_bytes_accessed': float(ca.get('bytes accessed', 0.0)),
        'bytes_ratio': float(ca.get('bytes accessed', 0.0)) / analytic_bytes,
      }
    )
  return params_out, flops_out


def train_step_runner(w, seed: int):
  """A compiled, warmed-up `run()` doing one jitted train step of the Flax
  DLRM on synthetic data (cycling over 4 batches)."""
  import jax

  from codesign import dlrm, synthetic_data

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


def local_cases(profile: dict, configs, measured_s, log):
  """The validation cases: each configuration's measured step time
  (`measured_s`, seconds) against the cost model under `profile`."""
  import jax

  from codesign import cost_model, device_profile, hardware

  p = device_profile.local_platform(profile)
  s = device_profile.local_stack(profile)
  out = []
  for w, measured in zip(configs, measured_s, strict=True):
    plan = device_profile.local_plan(w, p)
    with jax.default_device(jax.devices('cpu')[0]):
      r = cost_model.evaluate(hardware.as_arrays(p), w, plan, s)
    pred = float(r.step_time)
    case = {
      'name': w.name,
      'measured': measured,
      'predicted': pred,
      'rel_error': pred / measured - 1.0,
      'bottleneck': r.bottleneck,
      'breakdown_s': {
        k: float(v) for k, v in r.breakdown.items() if float(v) > 0
      },
    }
    log(
      f'{w.name:28s} measured {measured * 1e3:8.2f} ms  predicted '
      f'{pred * 1e3:8.2f} ms  {case["rel_error"]:+.1%}  ({r.bottleneck})'
    )
    out.append(case)
  return out


def measure(sweep, configs, seed: int, with_microbenchmarks: bool, log):
  """Times the microbenchmarks (if asked) and the validation train steps,
  interleaved in the same rounds (`microbenchmarks.time_interleaved`), so
  that the fitting data and the validation data see the same spread of
  machine states.

  Returns:
    (microbenchmark records or None, step seconds per configuration).
  """
  from codesign import microbenchmarks

  items = (
    microbenchmarks.benchmarks(sweep, seed) if with_microbenchmarks else []
  )
  runners = [train_step_runner(w, seed) for w in configs]
  log(
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


def public_cases(log):
  """The published cases C1-C9, each predicted out of sample: with the
  stack and GPU numbers fitted on the OTHER cases only (leave-one-case-
  out, `codesign.public_cases`), and with the priors beside it. Returns
  (cases, per-stack fit report, stack_fit.json dict)."""
  import jax
  import numpy as np

  from codesign import public_cases as pc

  with jax.default_device(jax.devices('cpu')[0]):
    cases = pc.load()
    loco = pc.leave_one_case_out(cases)
    out = []
    for c in cases:
      fold = loco['folds'][c.case_id]
      r = pc.predict(c, fold['values'])
      prior = float(pc.predict(c).step_time)
      pred = float(r.step_time)
      w = c.workload
      used = pc.used_parameters(c)
      case = {
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
        'fitted_values': {k: fold['values'][k] for k in used},
        'measured_records_per_s': w.global_batch / c.measured,
        'predicted_records_per_s': w.global_batch / pred,
        'bottleneck': r.bottleneck,
        'breakdown_s': {
          k: float(v) for k, v in r.breakdown.items() if float(v) > 0
        },
        'notes': list(c.notes),
      }
      log(
        f'{case["name"]:8s} {c.stack.name:14s} measured '
        f'{c.measured * 1e3:7.2f} ms predicted {pred * 1e3:7.2f} ms '
        f'{case["rel_error"]:+7.1%} (priors {case["rel_error_prior"]:+7.1%}) '
        f'limited by {r.bottleneck}'
      )
      out.append(case)
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
    bound = (
      f' AT ITS {fit[param.name]["at_bound"].upper()} BOUND'
      if (fit[param.name]['at_bound'])
      else ''
    )
    log(
      f'  {param.name:28s} {value:.4g} (folds {np.min(folds):.4g}-'
      f'{np.max(folds):.4g}; prior {param.prior:.4g}){bound}'
    )
  spread = {k: (v['loco_min'], v['loco_max']) for k, v in fit.items()}
  shipped = pc.stack_fit_json(
    loco['all']['values'], loco['all']['fitted_on'], spread
  )
  report = {
    'parameters': fit,
    'prior_weight': pc.PRIOR_WEIGHT,
    'fit_loss_all': loco['all']['fit_loss'],
    'folds': loco['folds'],
  }
  return out, report, shipped


def plot(path, local, public):
  import matplotlib

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(5.5, 5.0))
  allv = []
  for cases, marker, label in (
    (local, 'o', 'local device (validation configs)'),
    (public, 's', 'public cases C1-C9, leave-one-case-out fit'),
  ):
    if not cases:
      continue
    m = [c['measured'] for c in cases]
    q = [c['predicted'] for c in cases]
    allv += m + q
    ax.scatter(m, q, marker=marker, label=label)
    if marker == 's':  # the priors, for comparison
      u = [c['predicted_prior'] for c in cases]
      allv += u
      ax.scatter(
        m,
        u,
        marker='s',
        facecolors='none',
        edgecolors='C1',
        label='public cases, sourced priors (no fit)',
      )
    for c in cases:
      short = c['name'].split('_')[0] if marker == 'o' else c['name']
      ax.annotate(
        short.replace('_', ' '),
        (c['measured'], c['predicted']),
        fontsize=7,
        xytext=(3, 3),
        textcoords='offset points',
      )
  lo, hi = min(allv) / 1.5, max(allv) * 1.5
  ax.plot([lo, hi], [lo, hi], 'k-', lw=1, label='identity')
  for f in (0.7, 1.3):
    ax.plot([lo, hi], [lo * f, hi * f], 'k:', lw=0.7)
  ax.set_xscale('log')
  ax.set_yscale('log')
  ax.set_xlim(lo, hi)
  ax.set_ylim(lo, hi)
  ax.set_xlabel('measured step time (s)')
  ax.set_ylabel('predicted step time (s)')
  ax.set_title('Cost model vs measurement (dotted: +-30%)')
  ax.legend(fontsize=7, loc='upper left')
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


FLOPS_NOTE = (
  'XLA counts every HLO op: besides the GEMMs and bias adds of the '
  'analytic count it adds the ReLUs and their masks, the loss, the '
  'dcnv2 Hadamard products and residual adds and the Optax update (a few '
  'FLOPs per parameter), which the analytic convention leaves out; so '
  'measured/analytic is slightly above 1.'
)
BYTES_NOTE = (
  'XLA bytes accessed sums operand and output bytes of every op after '
  'fusion: elementwise fusions (ReLU, bias, casts, loss), transposes and '
  'the optimizer pass each read and write whole activations or '
  'parameters, while the analytic count takes each GEMM input, output '
  'and weight once forward and twice backward; fused producers are not '
  'counted at all, so the ratio reflects op structure, not DRAM traffic.'
)


def main():
  import time

  import jax
  import numpy as np

  from codesign import device_profile, microbenchmarks, profile_fit, results

  t_start = time.time()
  quick = FLAGS.quick or FLAGS.smoke
  given = None
  if FLAGS.device_profile:  # bad input fails before anything is written
    given = device_profile.load(FLAGS.device_profile)
    missing = [k for k in device_profile.PEAK_KEYS if k not in given]
    if missing:
      from codesign.errors import InputError

      raise InputError(
        f'device profile {FLAGS.device_profile!r} lacks the measured '
        f'{missing[0]!r}, so it cannot describe the local device'
      )
  held = microbenchmarks.hold_freed_memory()
  workdir = results.make_workdir('calibrate', FLAGS.workdir)

  def log(msg):
    print(f'[{time.time() - t_start:5.0f} s] {msg}', flush=True)

  sweep = microbenchmarks.QUICK_SWEEP if quick else microbenchmarks.Sweep()
  configs = _local_configs(quick, FLAGS.smoke)
  records, step_times = measure(sweep, configs, FLAGS.seed, given is None, log)
  if given is not None:
    profile, fit_report = given, None
    log(f'device profile from {FLAGS.device_profile}')
  else:
    profile, fit_report = profile_fit.fit(records, steps=FLAGS.fit_steps)
    profile = {
      **profile,
      **device_profile.device_description(),
      'source': 'measured by experiments.calibrate (codesign.device_profile '
      'microbenchmarks, fitted through the cost model)',
    }
    device_profile.save(workdir / 'device_profile.json', profile)
    log(
      'fit: loss {:.3f} -> {:.3f}; '.format(
        fit_report['loss_initial'], fit_report['loss_final']
      )
      + ', '.join(
        f'{k} median {v["median_abs_rel_error"]:.0%}'
        for k, v in fit_report['per_kind'].items()
      )
    )
  log(
    'profile: '
    + ', '.join(
      f'{k}={profile[k]:.4g}'
      for k in (
        *device_profile.PEAK_KEYS,
        *device_profile.EFFICIENCY_KEYS,
        'step_overhead_us',
      )
      if k in profile
    )
  )
  log('parameter and FLOP checks ...')
  param_check, flops_check = param_and_flops_checks(
    quick, FLAGS.seed, FLAGS.smoke
  )
  for c in flops_check:
    log(
      f'  {c["name"]:28s} FLOPs XLA/analytic '
      f'{c["measured"] / c["analytic"]:.4f}'
      f'  bytes XLA/analytic {c["bytes_ratio"]:.2f}'
    )
  log('local train steps (validation, not fitted):')
  local = local_cases(profile, configs, step_times, log)
  log(
    'public cases C1-C9 (stack and GPU numbers fitted leave-one-case-out) ...'
  )
  public, public_fit, stack_fit = public_cases(log)

  def stats(cases):
    e = np.abs([c['rel_error'] for c in cases])
    return float(np.median(e)), float(np.max(e))

  med_l, max_l = stats(local)
  med_p, max_p = stats(public)
  med_u = float(np.median(np.abs([c['rel_error_prior'] for c in public])))
  result = {
    'backend': jax.default_backend(),
    'device_kind': jax.devices()[0].device_kind,
    'clock': microbenchmarks.default_clock().__name__,
    'freed_memory_held': held,
    'protocol': {
      'fitting_data': 'microbenchmarks only (gemm, gather, scatter, chain; '
      'stream and the fastest GEMM give bandwidth and peaks)',
      'validation_data': 'local_cases: full jitted DLRM train steps of '
      'configurations absent from the fit',
      'timing': 'wall clock; microbenchmarks and validation steps sampled '
      'in turn in the same rounds, each keeping its fastest sample',
      'rounds': sweep.rounds,
      'public_cases': 'published DLRM training throughputs C1-C9 (NVIDIA '
      'PyTorch, HugeCTR, TorchRec, Intel CPU) against the catalog parts '
      'and the stack each case names; the few physical numbers in '
      'codesign.public_cases.FIT_PARAMETERS are fitted with Adam through '
      'the cost model, and every case is predicted with the values fitted '
      'on the OTHER cases (leave-one-case-out, `fitted_on`). '
      '`predicted_prior` uses the sourced priors instead.',
    },
    'device_profile': profile,
    'fit': fit_report,
    'microbenchmarks': records,
    'param_check': param_check,
    'flops_check': flops_check,
    'flops_note': FLOPS_NOTE,
    'bytes_note': BYTES_NOTE,
    'max_abs_rel_error_flops': float(
      np.max(np.abs([c['rel_error'] for c in flops_check]))
    ),
    'local_cases': local,
    'public_cases': public,
    'public_fit': public_fit,
    'median_abs_rel_error_local': med_l,
    'max_abs_rel_error_local': max_l,
    'median_abs_rel_error_public': med_p,
    'max_abs_rel_error_public': max_p,
    'median_abs_rel_error_public_prior': med_u,
  }
  plot(workdir / 'calibration.png', local, public)
  results.write_json(workdir / 'stack_fit.json', stack_fit)
  config = {'flags': common.flag_values()}
  results.write_run(workdir, config, result, seed=FLAGS.seed)
  log(
    f'local: median |error| {med_l:.1%}, worst {max_l:.1%}; public: median '
    f'{med_p:.1%}, worst {max_p:.1%} (priors median {med_u:.1%}); '
    f'{time.time() - t_start:.0f} s'
  )
  log(f'wrote {workdir}')


def _main_with_threads():
  # Must run before JAX creates its backend (first device use).
  if FLAGS.single_thread:
    xf = os.environ.get('XLA_FLAGS', '')
    if 'xla_cpu_multi_thread_eigen' not in xf:
      from codesign.microbenchmarks import SINGLE_THREAD_XLA_FLAGS

      os.environ['XLA_FLAGS'] = (xf + ' ' + SINGLE_THREAD_XLA_FLAGS).strip()
  return main()


if __name__ == '__main__':
  common.run(_main_with_threads)
