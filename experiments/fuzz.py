r"""Fuzz the cost model and its input boundary at scale (not run in CI).

  python -m experiments.fuzz                       # 1e6 designs, float64
  python -m experiments.fuzz --nox64               # the same in float32

Draws --designs random designs inside `hardware.BOUNDS` and `stack.BOUNDS`
(a quarter of the leaves exactly on a bound, plan fractions in [0, 1]),
spread over the configurations of `codesign.boundary.fuzzing.SCALE_CONFIGS`
(every trainer and stack preset), and counts the designs whose values (step
time, throughput, capex, power, breakdown) or gradients (of log
throughput with respect to every platform and stack leaf) are not finite.
Then every numeric input field through the scripts' own resolution: its
edges and values inside must cost finite numbers, and values outside
(below, above, far, NaN, infinities, the wrong type, not a count) must be
refused in one sentence. Writes config.json, env.json and result.json
(counts per configuration, every case that broke the rule) and prints the
counts.

  python -m experiments.fuzz --parts=misuse,sigint    # the careless user
  python -m experiments.fuzz --parts=misuse --checkout=/work/base

`--parts=misuse` runs the attempts of a careless or unlucky user against
the scripts and the API of a checkout (`codesign.boundary.fuzz_misuse`,
`codesign.boundary.fuzz_calls`: --overwrite onto what is not a run, two
runs into one workdir, JSON that cannot be held, hostile names, config files,
wrong API arguments, a failing stdout) and counts per class the attempts
that printed a traceback, lost data, lost a finished run, printed raw
control characters, left files behind or were accepted when wrong;
`--parts=sigint` interrupts propose, compare_platforms and search_quality
at random moments and measures the exit. `--parts=faults` runs the
machine's faults (`codesign.boundary.fuzz_faults`): single-bit flips and
swaps of the compile cache's entries and kept programs
(--fault_trials each), closed and broken stdout and stderr, bad JAX, XLA
and matplotlib variables, and `ulimit -v` from 600 MB to 16 GB; each
attempt must give the clean run's result.json bytes or one sentence and
a non-zero exit with nothing lost, within a minute, with no native
abort. `--checkout` measures another checkout (an older commit: before
and after).
"""

from absl import flags

from experiments import common

flags.DEFINE_integer(
  'designs',
  1_000_000,
  'Random in-bounds designs, spread evenly over the configurations.',
  lower_bound=1,
)
flags.DEFINE_integer(
  'chunk', 20_000, 'Designs per vmapped batch.', lower_bound=1
)
flags.DEFINE_integer(
  'inside_per_field',
  3,
  'Values inside the range per input field (besides its two edges).',
  lower_bound=0,
)
flags.DEFINE_list(
  'parts',
  ['model', 'boundary'],
  'What to fuzz: model (random designs), boundary (every input field), '
  'misuse (the careless user, --misuse_classes), sigint (Ctrl-C), faults '
  '(the machine: caches, streams, environment, memory; --fault_classes).',
)
flags.DEFINE_list(
  'misuse_classes',
  ['overwrite', 'concurrent', 'json', 'names', 'from_config', 'api', 'output'],
  'Classes of careless-user attempts, for --parts=misuse.',
)
flags.DEFINE_integer(
  'sigint_trials', 10, 'SIGINT trials per script, for --parts=sigint.'
)
flags.DEFINE_list(
  'fault_classes',
  ['cache_flips', 'cache_swaps', 'streams', 'environment', 'memory'],
  'Classes of machine faults, for --parts=faults '
  '(codesign.boundary.fuzz_faults).',
)
flags.DEFINE_integer(
  'fault_trials',
  100,
  'Attempts of each cache class (bit flips, swaps), for --parts=faults.',
  lower_bound=1,
)
flags.DEFINE_string(
  'checkout',
  '',
  'The checkout whose scripts and API --parts=misuse,sigint run (default: '
  'this one).',
)
common.define_run_flags(
  'fuzz',
  x64_help='Fuzz in float64 (--nox64: float32).',
  seed_help='Seed of the random designs.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results

  progress = common.progress_printer()
  workdir = results.make_workdir('fuzz', FLAGS.workdir)
  result = {}
  if 'model' in FLAGS.parts or 'boundary' in FLAGS.parts:
    result.update(_model_and_boundary(progress))
  if 'misuse' in FLAGS.parts or 'sigint' in FLAGS.parts:
    result.update(_misuse(progress))
  if 'faults' in FLAGS.parts:
    result.update(_faults(progress))
  results.write_run(workdir, {'flags': common.flag_values()}, result)


def _model_and_boundary(progress) -> dict:
  from codesign.boundary import fuzzing

  result = {}
  if 'model' in FLAGS.parts:
    configs = fuzzing.SCALE_CONFIGS
    per = -(-FLAGS.designs // len(configs))
    rows = []
    for i, config in enumerate(configs):
      progress(f'{per:,} designs of {"/".join(config)}')
      rows.append(
        fuzzing.count_nonfinite(config, per, FLAGS.seed + i, FLAGS.chunk)
      )
    total = {k: sum(r[k] for r in rows) for k in rows[0] if k != 'config'}
    result.update(designs=rows, total=total)
    precision = 'float64' if FLAGS.x64 else 'float32'
    for r in rows:
      print(
        f'{"/".join(r["config"].values()):45s} {r["evaluations"]:>10,} '
        f'evaluations; not finite: {r["nonfinite_values"]} values, '
        f'{r["nonfinite_gradients"]} gradients'
      )
    print(
      f'total ({precision}): {total["evaluations"]:,} evaluations; not '
      f'finite: {total["nonfinite_values"]} values, '
      f'{total["nonfinite_gradients"]} gradients'
    )
  if 'boundary' in FLAGS.parts:
    progress('every input field: edges, inside and outside values')
    boundary = fuzzing.boundary_counts(inside_per_field=FLAGS.inside_per_field)
    result['boundary'] = boundary
    c = boundary['counts']
    print(
      f'input fields: {c["finite"]} accepted and finite, {c["refused"]} '
      f'refused in one sentence, {c["not finite"]} not finite; '
      f'{len(boundary["broken"])} broke the rule'
    )
  return result


def _misuse(progress) -> dict:
  import dataclasses
  import pathlib

  from codesign.boundary import fuzz_calls

  root = pathlib.Path(FLAGS.checkout or common.__file__).resolve()
  root = root if FLAGS.checkout else root.parent.parent
  result = {'checkout': str(root)}
  if 'misuse' in FLAGS.parts:
    outcomes = fuzz_calls.run_misuse(root, FLAGS.misuse_classes, progress)
    result['misuse'] = fuzz_calls.summarize(outcomes)
    result['misuse_attempts'] = [dataclasses.asdict(o) for o in outcomes]
    for cls, row in result['misuse'].items():
      rules = ', '.join(
        f'{k} {v}' for k, v in row.items() if k not in ('tried', 'failed') and v
      )
      print(
        f'{cls:12s} {row["tried"]:4d} tried {row["failed"]:4d} failed'
        + (f' ({rules})' if rules else '')
      )
  if 'sigint' in FLAGS.parts:
    trials = fuzz_calls.run_sigint(
      root, FLAGS.sigint_trials, FLAGS.seed, progress
    )
    result['sigint'] = fuzz_calls.sigint_summary(trials)
    result['sigint_trials'] = trials
    for script, row in result['sigint'].items():
      print(f'SIGINT {script:18s} {row}')
  return result


def _faults(progress) -> dict:
  import dataclasses
  import pathlib

  from codesign.boundary import fuzz_calls, fuzz_faults

  root = pathlib.Path(FLAGS.checkout or common.__file__).resolve()
  root = root if FLAGS.checkout else root.parent.parent
  outcomes = fuzz_faults.run_faults(
    root, FLAGS.fault_classes, FLAGS.fault_trials, FLAGS.seed, progress
  )
  summary = fuzz_calls.summarize(outcomes)
  for cls, row in summary.items():
    rules = ', '.join(
      f'{k} {v}' for k, v in row.items() if k not in ('tried', 'failed') and v
    )
    print(
      f'{cls:12s} {row["tried"]:4d} tried {row["failed"]:4d} failed'
      + (f' ({rules})' if rules else '')
    )
  return {
    'faults': summary,
    'fault_attempts': [dataclasses.asdict(o) for o in outcomes],
  }


if __name__ == '__main__':
  common.run(main)
