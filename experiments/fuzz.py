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
"""

import jax
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
common.define_run_flags(
  'fuzz',
  x64_help='Fuzz in float64 (--nox64: float32).',
  seed_help='Seed of the random designs.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign.boundary import fuzzing
  from codesign.core import results

  progress = common.progress_printer()
  workdir = results.make_workdir('fuzz', FLAGS.workdir)
  configs = fuzzing.SCALE_CONFIGS
  per = -(-FLAGS.designs // len(configs))
  rows = []
  for i, config in enumerate(configs):
    progress(f'{per:,} designs of {"/".join(config)}')
    rows.append(
      fuzzing.count_nonfinite(config, per, FLAGS.seed + i, FLAGS.chunk)
    )
  progress('every input field: edges, inside and outside values')
  boundary = fuzzing.boundary_counts(inside_per_field=FLAGS.inside_per_field)
  total = {k: sum(r[k] for r in rows) for k in rows[0] if k != 'config'}
  result = {'designs': rows, 'total': total, 'boundary': boundary}
  results.write_run(workdir, {'flags': common.flag_values()}, result)
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
  c = boundary['counts']
  print(
    f'input fields: {c["finite"]} accepted and finite, {c["refused"]} '
    f'refused in one sentence, {c["not finite"]} not finite; '
    f'{len(boundary["broken"])} broke the rule'
  )


if __name__ == '__main__':
  common.run(main)
