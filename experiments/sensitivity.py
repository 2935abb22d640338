r"""What to upgrade next: elasticities of throughput and perf per dollar.

  python -m experiments.sensitivity
  python -m experiments.sensitivity --workload=criteo_kaggle \
      --platform=big_basin --override=workload.global_batch=8192

For one workload on one platform, one reverse-mode pass gives
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

Writes to --workdir: config.json, env.json, result.json and
elasticities.png (bars of the largest elasticities, throughput and perf per
USD side by side: a bar of +0.5 means 1% more of that field gives 0.5% more
of the metric).
"""

import jax
import numpy as np
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
flags.DEFINE_integer('show', 20, 'Fields drawn in the bar plot.')
common.define_run_flags('sensitivity')
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _check_flags(num_fields: int):
  from codesign.errors import InputError

  if not 1 <= FLAGS.check_top <= num_fields:
    raise InputError(
      f'--check_top must be between 1 and {num_fields}, got {FLAGS.check_top}'
    )
  if not 0 < FLAGS.fd_rel_step < 0.1:
    raise InputError(
      f'--fd_rel_step must lie in (0, 0.1), got {FLAGS.fd_rel_step}'
    )
  if not FLAGS.fd_tolerance > 0:
    raise InputError(
      f'--fd_tolerance must be positive, got {FLAGS.fd_tolerance}'
    )
  if FLAGS.show < 1:
    raise InputError(f'--show must be at least 1, got {FLAGS.show}')


def _boundary_key(path: str) -> str:
  """'accelerator.hbm_capacity' -> 'accelerator.hbm_capacity_gb'."""
  import dataclasses

  from codesign import hardware

  cls = hardware.Platform
  parts = path.split('.')
  for part in parts[:-1]:
    cls = {f.name: f.type for f in dataclasses.fields(cls)}[part]
  field = {f.name: f for f in dataclasses.fields(cls)}[parts[-1]]
  unit = field.metadata.get('unit')
  return path + (f'_{unit}' if unit else '')


def _rank(paths, values, e, row: int, limit: int) -> list[dict]:
  order = np.argsort(-np.abs(e[row]), kind='stable')
  out = []
  for i in order[:limit]:
    if e[row, i] == 0:
      break
    out.append(
      {
        'field': _boundary_key(paths[i]),
        'value_si': values[i],
        'elasticity': e[row, i],
        'direction': 'raise' if e[row, i] > 0 else 'lower',
      }
    )
  return out


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import (
    cost_model,
    hardware,
    inputs,
    plotting,
    report,
    results,
    schema,
    sweeps,
  )

  w, p, plan, stack = inputs.resolve(
    FLAGS.workload,
    FLAGS.platform,
    FLAGS.plan,
    FLAGS.override,
    device_profile=FLAGS.device_profile,
    stack=FLAGS.stack,
  )
  _check_flags(len(hardware.leaf_paths(p)))
  workdir = results.make_workdir('sensitivity', FLAGS.workdir)
  paths, values, e = sweeps.elasticities(p, w, stack, plan, replan=FLAGS.replan)
  top = list(np.argsort(-np.abs(e[0]), kind='stable')[: FLAGS.check_top])
  fd = sweeps.finite_difference(
    p,
    w,
    stack,
    plan,
    [paths[i] for i in top],
    replan=FLAGS.replan,
    rel_step=FLAGS.fd_rel_step,
  )
  checks = []
  for j, i in enumerate(top):
    for row, metric in ((0, 'throughput'), (1, 'perf_per_usd')):
      ad, num = float(e[row, i]), float(fd[row, j])
      gap = abs(ad - num) / max(abs(num), 1e-12)
      checks.append(
        {
          'field': _boundary_key(paths[i]),
          'metric': metric,
          'autodiff': ad,
          'finite_difference': num,
          'relative_gap': gap,
          'ok': gap <= FLAGS.fd_tolerance,
        }
      )
  base = report.to_result(
    cost_model.evaluate(hardware.as_arrays(p), w, plan, stack)
  )
  result = {
    'workload': w.name,
    'platform': p.name,
    'stack': stack.name,
    'design': base,
    # The plan's HBM fraction, not the fit factor: a --from_config replay
    # reads the fitted plan from config.json and must give the same bytes.
    'hbm_fraction': float(np.mean(plan.hbm_fraction)),
    'replan_applied': bool(FLAGS.replan and sweeps.replan_applies(p, plan)),
    'elasticities': {
      _boundary_key(k): {
        'value_si': values[i],
        'throughput': e[0, i],
        'perf_per_usd': e[1, i],
      }
      for i, k in enumerate(paths)
    },
    'upgrade_for_throughput': _rank(paths, values, e, 0, len(paths)),
    'upgrade_for_perf_per_usd': _rank(paths, values, e, 1, len(paths)),
    'finite_difference_check': checks,
    'finite_difference_ok': all(c['ok'] for c in checks),
  }
  config = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(w),
    'platform': schema.platform_to_json(p),
    'plan': schema.plan_to_json(plan),
    'stack': schema.stack_to_json(stack),
  }
  results.write_run(workdir, config, result, seed=FLAGS.seed)
  shown = list(np.argsort(-np.abs(e[0]), kind='stable')[: FLAGS.show])
  plotting.ranked_bars(
    workdir / 'elasticities.png',
    [_boundary_key(paths[i]) for i in shown],
    {
      'throughput': e[0, shown],
      'perf per USD': e[1, shown],
    },
    f'{w.name} on {p.name}: % change per 1% change of a field',
    'elasticity d log(metric) / d log(field)',
  )
  print(
    f'{w.name} on {p.name}: {base["throughput_samples_per_s"]:,.0f} '
    f'samples/s, feasible: {base["feasible"]}, bottleneck '
    f'{base["bottleneck"]}'
  )
  print(
    f'{"what to upgrade next":44s} {"d log thr":>10s} {"d log perf/$":>12s}'
  )
  for row in result['upgrade_for_throughput'][:15]:
    k = row['field']
    print(
      f'{row["direction"]:5s} {k:38s} {row["elasticity"]:+10.4f} '
      f'{result["elasticities"][k]["perf_per_usd"]:+12.4f}'
    )
  for c in checks:
    print(
      f'check {c["field"]} ({c["metric"]}): autodiff {c["autodiff"]:+.6f}, '
      f'finite difference {c["finite_difference"]:+.6f}, gap '
      f'{100 * c["relative_gap"]:.4f}%'
    )


if __name__ == '__main__':
  common.run(main)
