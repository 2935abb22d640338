r"""The throughput frontier against capex and against power.

  python -m experiments.pareto
  python -m experiments.pareto --workload=mlperf_dlrm_v1 --budgets=12 \
      --starts=16 --steps=300

Runs many budget-constrained hardware searches at once: --budgets capex
limits (log-spaced from --min_budget_usd to --max_budget_usd) and as many
power limits, each with --starts starts, all in one vmapped
augmented-Lagrangian Adam loop over the search's design space
(`codesign.design_space`, auto plan, --sharding for every table; the
method and settings of `codesign.search`), maximizing throughput. The best
starts of each search are snapped to buildable platforms. The frontier is
the set of found buildable designs that no other found design beats on
both throughput and cost (capex, or power). The platform presets are
evaluated on the same workload (auto plan with the same sharding, fitted
into HBM) and placed against it.

Writes to --workdir: config.json, env.json, result.json, metrics.jsonl (per
Adam step, each search's best feasible throughput so far among its starts)
and frontier.png: left, throughput against capex; right, against power
(log-log). Blue dots joined by a line are the frontier; labelled squares
are the presets (a preset below the line costs more than a searched design
of the same throughput; an infeasible preset is labelled so).
"""

import jax
import numpy as np
from absl import flags

from experiments import common

flags.DEFINE_integer('max_nodes', 16, 'Largest node count of the space.')
common.define_sharding_flag('searched designs')
flags.DEFINE_float('min_budget_usd', 1e5, 'Smallest capex limit, USD.')
flags.DEFINE_float('max_budget_usd', 1e7, 'Largest capex limit, USD.')
flags.DEFINE_float('min_power_w', 5e3, 'Smallest power limit, W.')
flags.DEFINE_float('max_power_w', 5e5, 'Largest power limit, W.')
flags.DEFINE_integer(
  'budgets', 8, 'Limits per kind (capex and power), log-spaced (>= 2).'
)
flags.DEFINE_integer('starts', 8, 'Starts per search (>= 1).')
flags.DEFINE_integer('steps', 150, 'Adam steps per search (>= 1).')
flags.DEFINE_integer(
  'snap_top', 4, 'Best starts per search whose roundings are evaluated.'
)
flags.DEFINE_list(
  'presets',
  ['cpu_2s', 'big_basin', 'zion', 'zionex', 'dgx_a100_80gb', 'dgx_h100'],
  'Platform presets drawn against the frontier (may be empty).',
)
common.define_input_flags(
  workload='zion_scale',
  override='workload,stack',
)
common.define_run_flags(
  'pareto',
  x64_help='Search in float64.',
  seed_help='Seed of the uniform starts.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _check_flags():
  from codesign.errors import InputError

  for lo, hi in (
    ('min_budget_usd', 'max_budget_usd'),
    ('min_power_w', 'max_power_w'),
  ):
    if not 0 < FLAGS[lo].value < FLAGS[hi].value:
      raise InputError(
        f'--{lo} and --{hi} need 0 < min < max, got {FLAGS[lo].value:g} '
        f'and {FLAGS[hi].value:g}'
      )
  if FLAGS.budgets < 2:
    raise InputError(f'--budgets must be at least 2, got {FLAGS.budgets}')
  for key in ('starts', 'steps', 'snap_top'):
    if FLAGS[key].value < 1:
      raise InputError(f'--{key} must be at least 1, got {FLAGS[key].value}')


def frontier(cost: np.ndarray, value: np.ndarray, ok: np.ndarray) -> list:
  """Indices of the feasible points no other feasible point dominates
  (cost no higher and value no lower, one strictly), by increasing cost."""
  idx = [i for i in np.argsort(cost, kind='stable') if ok[i]]
  out, best = [], -np.inf
  for i in idx:
    if value[i] > best:
      if out and cost[out[-1]] == cost[i]:
        out.pop()
      out.append(int(i))
      best = value[i]
  return out


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import (
    cost_model,
    hardware,
    inputs,
    multi_search,
    planner,
    plotting,
    results,
    schema,
    search,
    sweeps,
  )
  from codesign import design_space as ds

  _check_flags()
  w = common.load_workload()
  stack = common.load_stack()
  presets = {n: inputs.load_platform(n) for n in FLAGS.presets}
  space = ds.make_space(
    w, max_nodes=FLAGS.max_nodes, plan_mode='auto', sharding=FLAGS.sharding
  )
  workdir = results.make_workdir('pareto', FLAGS.workdir)
  k = FLAGS.budgets
  limits = np.concatenate(
    [
      sweeps.log_space(FLAGS.min_budget_usd, FLAGS.max_budget_usd, k),
      sweeps.log_space(FLAGS.min_power_w, FLAGS.max_power_w, k),
    ]
  )
  kinds = np.repeat([0, 1], k)
  config = search.Config(
    starts=FLAGS.starts, steps=FLAGS.steps, seed=FLAGS.seed
  )
  found = multi_search.search_tasks(
    multi_search.Tasks(space, (w,), stack),
    np.ones((2 * k, 1)),
    limits,
    kinds,
    starts=FLAGS.starts,
    config=config,
    snap_top=FLAGS.snap_top,
  )
  thr = np.exp(found['logs'][:, 0])
  searches = []
  for t in range(2 * k):
    searches.append(
      {
        'limit_kind': multi_search.LIMIT_KINDS[kinds[t]],
        'limit': limits[t],
        'feasible': bool(found['feasible'][t]),
        'throughput_samples_per_s': thr[t],
        'capex_usd': found['capex'][t],
        'power_w': found['power'][t],
        'design': ds.describe_index(space, found['index'][t]),
        'relaxed_throughput_samples_per_s': float(
          np.exp(found['relaxed_logs'][t, 0])
        ),
        'relaxed_feasible': bool(found['relaxed_feasible'][t]),
      }
    )
  ok = found['feasible']
  fronts = {}
  for key, cost in (('capex', found['capex']), ('power', found['power'])):
    fr = frontier(cost, thr, ok)
    fronts[key] = [
      {
        'cost': cost[i],
        'throughput_samples_per_s': thr[i],
        'search': i,
        'design': searches[i]['design'],
      }
      for i in fr
    ]

  def envelope(key, x):
    """Best frontier throughput at cost <= x (None below the frontier)."""
    vals = [
      f['throughput_samples_per_s'] for f in fronts[key] if f['cost'] <= x
    ]
    return max(vals) if vals else None

  points, lines = {}, []
  for n, p in presets.items():
    # The same sharding as the searched designs.
    plan = planner.make(w, p, stack, sharding=FLAGS.sharding)
    r = cost_model.evaluate(hardware.as_arrays(p), w, plan, stack)
    row = {
      'throughput_samples_per_s': float(r.throughput),
      'capex_usd': float(r.capex),
      'power_w': float(r.power),
      'feasible': bool(r.feasible),
    }
    for key, cost in (('capex', row['capex_usd']), ('power', row['power_w'])):
      best = envelope(key, cost)
      row[f'frontier_at_same_{key}'] = best
      row[f'share_of_frontier_at_same_{key}'] = (
        None if best is None else row['throughput_samples_per_s'] / best
      )
    points[n] = row
    share = row['share_of_frontier_at_same_capex']
    lines.append(
      f'{n}: {row["throughput_samples_per_s"]:,.0f} samples/s for '
      f'${row["capex_usd"]:,.0f}'
      + ('' if row['feasible'] else ' (infeasible: tables do not fit)')
      + (
        '; no searched design costs as little'
        if share is None
        else f'; {share:.0%} of the frontier at that capex'
      )
      + '.'
    )
  for key, unit in (('capex', 'USD'), ('power', 'W')):
    f = fronts[key]
    if f:
      lines.append(
        f'{key} frontier: {len(f)} designs from {f[0]["cost"]:,.0f} {unit} '
        f'({f[0]["throughput_samples_per_s"]:,.0f} samples/s) to '
        f'{f[-1]["cost"]:,.0f} {unit} '
        f'({f[-1]["throughput_samples_per_s"]:,.0f} samples/s).'
      )
    else:
      lines.append(f'{key} frontier: no search found a feasible design.')
  result = {
    'workload': w.name,
    'objective': 'throughput',
    'searches': searches,
    'frontier': fronts,
    'presets': points,
    'evaluations': found['evaluations'],
    'summary': lines,
  }
  labels = [
    f'{multi_search.LIMIT_KINDS[kinds[t]]}_{limits[t]:.4g}'
    for t in range(2 * k)
  ]
  metrics = multi_search.history_rows(
    found['history'], labels, 'best_feasible_throughput'
  )
  config_out = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(w),
    'stack': schema.stack_to_json(stack),
    'presets': {n: schema.platform_to_json(p) for n, p in presets.items()},
  }
  results.write_run(workdir, config_out, result, metrics, seed=FLAGS.seed)

  panels = []
  for key, xlabel, pkey in (
    ('capex', 'capex (USD)', 'capex_usd'),
    ('power', 'power at TDP (W)', 'power_w'),
  ):
    f = fronts[key]
    panels.append(
      {
        'x': np.array([e['cost'] for e in f]),
        'y': np.array([e['throughput_samples_per_s'] for e in f]),
        'xlabel': xlabel,
        'ylabel': 'throughput (samples/s)',
        'points': {
          (n if v['feasible'] else n + ' (infeasible)'): (
            v[pkey],
            v['throughput_samples_per_s'],
          )
          for n, v in points.items()
        },
      }
    )
  plotting.frontier(
    workdir / 'frontier.png',
    panels,
    f'{w.name}: best buildable throughput found per limit '
    f'({FLAGS.sharding}, up to {FLAGS.max_nodes} nodes)',
  )
  print('\n'.join(lines))


if __name__ == '__main__':
  common.run(main)
