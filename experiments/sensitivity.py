r"""What to upgrade next: elasticities of throughput and perf per dollar.

  python -m experiments.sensitivity
  python -m experiments.sensitivity --workload=criteo_kaggle \
      --platform=big_basin --override=workload.global_batch=8192

Parses the flags and runs `codesign.studies.sensitivity.run`: for one
workload on one platform, one reverse-mode pass gives
d log(metric) / d log(field) for every continuous platform field (the %
change of throughput, and of samples/s per USD, per 1% change of the
field; counts such as nodes and accelerators are relaxed to reals). The
fields are ranked by the size of their throughput elasticity into a "what
to upgrade next" table (direction: raise a positive one, lower a negative
one), and the top --check_top are checked against central finite
differences in log space.

With --replan (default) a plan that spills tables to DDR re-derives its HBM
fractions by the planner's rule as the platform changes (more free HBM
holds more rows; `planner.fit_hbm_traced`), so HBM capacity shows its
worth; without it the plan is frozen.

Prints the design's figures (feasibility with the tier that overflows),
the ranking and the checks. Writes to --workdir: config.json, env.json,
result.json, sensitivity.csv (every field ranked: value in SI units and
both elasticities) and elasticities.png (bars of the largest elasticities,
throughput and perf per USD side by side: a bar of +0.5 means 1% more of
that field gives 0.5% more of the metric).
"""

import dataclasses

from absl import flags

from experiments import common

common.define_input_flags(
  workload='zion_scale',
  platform='zion',
  plan=True,
  override='workload,platform,plan,stack',
  device_profile=True,
)
flags.DEFINE_bool(
  'replan',
  True,
  'Re-derive a spilling plan as the platform changes (HBM capacity then '
  'counts); False freezes the plan.',
)
flags.DEFINE_integer(
  'check_top',
  3,
  'How many of the largest throughput elasticities to check by finite '
  'differences.',
  lower_bound=1,
)
flags.DEFINE_float(
  'fd_rel_step',
  1e-4,
  'Relative step h of the finite differences: field x exp(+-h).',
)
flags.DEFINE_float(
  'fd_tolerance',
  0.02,
  'Largest accepted relative gap between autodiff and finite differences.',
)
flags.DEFINE_integer('show', 20, 'Fields drawn in the bar plot.', lower_bound=1)
common.define_run_flags('sensitivity')
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _plot(path, result, study):
  """elasticities.png: the --show largest, both metrics side by side."""
  from codesign.studies import plotting

  shown = study.ranked_fields(result, FLAGS.show)
  e = result['elasticities']
  plotting.ranked_bars(
    path,
    shown,
    {
      'throughput': [float(e[k]['throughput']) for k in shown],
      'perf per USD': [float(e[k]['perf_per_usd']) for k in shown],
    },
    f'{result["workload"]} on {result["platform"]}: % change per 1% '
    'change of a field',
    'elasticity d log(metric) / d log(field) (% per %)',
  )


def main():
  common.enable_x64(FLAGS.x64)
  from codesign.core import results
  from codesign.core.errors import InputError
  from codesign.spec import schema
  from codesign.studies import sensitivity as study

  # Checked before the inputs load (an auto plan costs seconds); the names
  # are replaced by the resolved inputs below.
  settings = study.Settings(
    replan=FLAGS.replan,
    check_top=FLAGS.check_top,
    fd_rel_step=FLAGS.fd_rel_step,
    fd_tolerance=FLAGS.fd_tolerance,
  )
  if FLAGS.show < 1:  # only the plot uses it
    raise InputError(f'--show must be at least 1, got {FLAGS.show}')
  w, p, plan, stack = common.resolve_inputs()
  settings = dataclasses.replace(
    settings, workload=w, platform=p, plan=plan, stack=stack
  )
  result, _ = study.run(settings, progress=common.progress_printer())
  workdir = results.make_workdir('sensitivity', FLAGS.workdir)
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(w),
    'platform': schema.platform_to_json(p),
    'plan': schema.plan_to_json(plan),
    'stack': schema.stack_to_json(stack),
  }
  results.write_run(workdir, config, result, seed=FLAGS.seed)
  results.write_csv(workdir / 'sensitivity.csv', *study.csv_table(result))
  _plot(workdir / 'elasticities.png', result, study)
  print(study.table(result))


if __name__ == '__main__':
  common.run(main)
