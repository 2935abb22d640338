r"""How fast is the cost model? Evaluations per second, jitted and not.

  python -m experiments.benchmark
  python -m experiments.benchmark --workload=zion_scale --platform=zion

Measures, on the local JAX backend: evaluations per second of the jitted,
vmapped cost model (the full `CostReport`) for batches of 1, 1e3 and 1e5
designs, passed as one matrix and returned as one (and at 1e3 also as pytrees,
an array per leaf: pytree_evals_per_s); value-and-gradient evaluations per
second; compile time; FLOPs per evaluation from XLA's cost analysis; and the
same model called one design at a time without jit, as a naive user would.
Designs are the platform preset with every continuous field scaled by a random
factor in [0.5, 2] (clipped to hardware.BOUNDS). The study is
`codesign.studies.benchmark.run`; this script parses the flags, runs it,
prints its table (progress on stderr) and writes result.json (keys
evals_per_s, grads_per_s, eager_evals_per_s, compile_s, ...), benchmark.csv
(one row per design batch), config.json and env.json. A benchmark script:
timings vary with machine load, so it prints them; tests do not assert them.
"""

from absl import flags

from codesign.core.errors import InputError
from experiments import common

common.define_input_flags(
  workload='criteo_kaggle',
  platform='dgx_a100_80gb',
  plan=True,
  override='workload,platform,plan,stack',
  device_profile=True,
)
flags.DEFINE_list(
  'batches', ['1', '1000', '100000'], 'Design batch sizes to time.'
)
flags.DEFINE_integer(
  'grad_batch',
  100000,
  'Batch size for value-and-gradient timing.',
  lower_bound=1,
)
flags.DEFINE_integer(
  'block',
  2000,
  'A batch of more designs runs as lax.map over vmapped blocks of this '
  'many, the way the search runs its batches (the intermediates of a block '
  'stay in cache).',
  lower_bound=1,
)
flags.DEFINE_integer(
  'eager_designs',
  5,
  'Designs evaluated one at a time without jit.',
  lower_bound=1,
)
flags.DEFINE_float(
  'min_time_s', 1.0, 'Repeat each timed call until this much time has passed.'
)
flags.DEFINE_bool(
  'job',
  True,
  "Also time the search's work on propose's design space "
  '(codesign.studies.job_benchmark): relaxed designs (steps of the '
  "search's continuous phase, in propose's plan mode and in the "
  'auto-plan space) and buildable '
  'designs with their auto plan per second, and the exhaustive '
  'enumeration of the auto-plan space at $1M.',
)
flags.DEFINE_bool(
  'propose_runs',
  True,
  'Also run `experiments.propose` (defaults) twice in a fresh compilation '
  'cache, cold then warm, and record the wall seconds of each and of its '
  'search phase.',
)
common.define_run_flags(
  'benchmark',
  x64=False,
  x64_help='Benchmark in float64 instead of float32.',
  seed_help='Seed of the random designs.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.studies import benchmark

  try:
    batches = tuple(int(b) for b in FLAGS.batches)
  except ValueError:
    raise InputError('--batches must be integers, e.g. 1,1000') from None
  w, p, plan, stack = common.resolve_inputs()
  settings = benchmark.Settings(
    workload=w,
    platform=p,
    plan=plan,
    stack=stack,
    batches=batches,
    grad_batch=FLAGS.grad_batch,
    block=FLAGS.block,
    eager_designs=FLAGS.eager_designs,
    min_time_s=FLAGS.min_time_s,
    x64=FLAGS.x64,
    seed=FLAGS.seed,
  )
  progress = common.progress_printer()
  result, _ = benchmark.run(settings, progress=progress)
  if FLAGS.job:
    from codesign.studies import job_benchmark

    result.update(job_benchmark.run(job_benchmark.Settings(), progress))
  if FLAGS.propose_runs:
    result.update(_propose_runs(progress))
  workdir = results.make_workdir('benchmark', FLAGS.workdir)
  results.write_csv(workdir / 'benchmark.csv', *benchmark.csv_table(result))
  config = {'flags': common.flag_values()}
  results.write_run(workdir, config, result, seed=FLAGS.seed)
  print(benchmark.table(result))


def _propose_runs(progress) -> dict:
  """Wall seconds of `experiments.propose` with its defaults, in a fresh
  compilation cache (cold) and again (warm), and of their search
  phases (the run's timing.json)."""
  import json
  import os
  import subprocess
  import sys
  import tempfile
  import time

  out = {}
  with tempfile.TemporaryDirectory(prefix='codesign-bench-') as tmp:
    env = dict(os.environ, CODESIGN_COMPILE_CACHE=os.path.join(tmp, 'cache'))
    for kind in ('cold', 'warm'):
      progress(f'propose with defaults, {kind} compilation cache ...')
      workdir = os.path.join(tmp, kind)
      start = time.perf_counter()
      proc = subprocess.run(
        [sys.executable, '-m', 'experiments.propose', f'--workdir={workdir}'],
        env=env,
        capture_output=True,
        text=True,
      )
      out[f'propose_{kind}_s'] = time.perf_counter() - start
      if proc.returncode != 0:
        raise InputError(f'propose failed: {proc.stderr.strip()[-300:]}')
      timing = json.loads(open(os.path.join(workdir, 'timing.json')).read())
      out[f'propose_{kind}_search_s'] = timing['search_wall_s']
  return out


if __name__ == '__main__':
  common.run(main)
