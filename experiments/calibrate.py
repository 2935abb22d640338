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
   (`codesign.calibration.microbenchmarks`,
   `codesign.calibration.profile_fit`), or the profile given by
   --device_profile. FITTING DATA: the microbenchmarks only. They are timed in
   the same interleaved rounds as the validation steps of 4, so that both see
   the same machine (`microbenchmarks.time_interleaved`).
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

The study is `codesign.studies.calibration.run`; this script parses the
flags, runs it, prints its tables (progress on stderr) and writes to
--workdir: config.json, env.json, result.json, calibration.csv (per
local case: measured and predicted step time, error), calibration.png,
device_profile.json (when measured here, not given) and stack_fit.json
(the values fitted on every public case, with provenance: copy it to
codesign/data/stack_fit.json to ship it as the stack presets'
defaults). Measured times vary
from run to run (and with other load on the machine); with the same
--device_profile the predictions, checks and public cases are
reproducible.
"""

import os
import time

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
flags.DEFINE_integer(
  'fit_steps', 1500, 'Adam steps of the profile fit.', lower_bound=1
)
flags.DEFINE_bool(
  'public',
  True,
  'Fit and judge the public cases C1-C19 (about a minute on 2 cores) and '
  'write stack_fit.json; --nopublic calibrates the local device alone.',
)
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


def _single_thread() -> None:
  """--single_thread: one XLA CPU thread per op. XLA reads XLA_FLAGS when
  JAX creates its backend, so this runs before (`common.run`'s setup)."""
  xf = os.environ.get('XLA_FLAGS', '')
  if FLAGS.single_thread and 'xla_cpu_multi_thread_eigen' not in xf:
    from codesign.calibration.microbenchmarks import SINGLE_THREAD_XLA_FLAGS

    os.environ['XLA_FLAGS'] = (xf + ' ' + SINGLE_THREAD_XLA_FLAGS).strip()


def main():
  from codesign.calibration import device_profile
  from codesign.core import results
  from codesign.studies import calibration, plotting

  t_start = time.perf_counter()
  settings = calibration.Settings(
    quick=FLAGS.quick,
    smoke=FLAGS.smoke,
    device_profile=FLAGS.device_profile,
    fit_steps=FLAGS.fit_steps,
    public=FLAGS.public,
    seed=FLAGS.seed,
  )
  result, _ = calibration.run(settings, progress=common.progress_printer())
  stack_fit = result.pop('stack_fit')
  workdir = results.make_workdir('calibrate', FLAGS.workdir)
  if result['fit'] is not None:  # measured here: the profile to reuse
    device_profile.save(
      workdir / 'device_profile.json', result['device_profile']
    )
  plotting.calibration(
    workdir / 'calibration.png', result['local_cases'], result['public_cases']
  )
  if stack_fit is not None:
    results.write_json(workdir / 'stack_fit.json', stack_fit)
  results.write_csv(workdir / 'calibration.csv', *calibration.csv_table(result))
  config = {'flags': common.flag_values()}
  results.write_run(workdir, config, result, seed=FLAGS.seed)
  print(calibration.table(result))
  print(f'{time.perf_counter() - t_start:.0f} s')


if __name__ == '__main__':
  # The local device is measured as JAX runs a user's Flax model, with
  # XLA's defaults: the scripts' XLA options were chosen for the cost
  # model's programs, not for train steps and microbenchmarks.
  common.run(main, xla_flags=False, setup=_single_thread)
