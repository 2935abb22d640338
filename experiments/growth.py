r"""Design for where the model is going, not where it is.

  python -m experiments.growth
  python -m experiments.growth --factors=1,3,9 --budget_usd=3e6

Recommendation models grow fast (about 3x compute a year). The workload is
grown by each of --factors in embedding size (every table's rows) and in
dense compute (hidden MLP widths, so that dense FLOPs per sample grow by
the same factor; `codesign.sweeps.grow`). Under one capex budget, searches
run at once (one vmapped augmented-Lagrangian Adam loop over the search's
design space, auto plan, the settings of `codesign.search`):
  - one per factor, maximizing that grown workload's throughput alone (the
    first factor's design is the one tuned for today);
  - the horizon design, maximizing the mean log-throughput over all
    factors and required to hold every grown workload.
Every found design is then evaluated on every grown workload. The regret
of a design at a factor is log(best throughput found for that factor) -
log(its throughput); a design that cannot hold a grown workload has
infinite regret there. The summary compares the mean regret of the
horizon design with that of the design tuned for today.

Writes to --workdir: config.json, env.json, result.json, metrics.jsonl (per
Adam step, each search's best feasible objective so far) and growth.png
(throughput of the today-tuned and the horizon design, and the best found
per factor, against the growth factor; a missing point is a design that
cannot hold that workload).
"""

import jax
import numpy as np
from absl import flags

from experiments import common

flags.DEFINE_list(
  'factors',
  ['1', '2', '4', '8'],
  'Growth factors, increasing, starting at 1 (today).',
)
flags.DEFINE_float('budget_usd', 1e6, 'Capex limit of every design, USD.')
flags.DEFINE_integer('max_nodes', 16, 'Largest node count of the space.')
common.define_sharding_flag('searched designs')
flags.DEFINE_integer('starts', 8, 'Starts per search (>= 1).')
flags.DEFINE_integer('steps', 150, 'Adam steps per search (>= 1).')
flags.DEFINE_integer(
  'snap_top', 4, 'Best starts per search whose roundings are evaluated.'
)
common.define_input_flags(
  workload='zion_scale',
  override='workload,stack',
  workload_help="Today's workload; its tables grow by --factors.",
)
common.define_run_flags(
  'growth',
  x64_help='Search in float64.',
  seed_help='Seed of the uniform starts.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _factors() -> list[float]:
  from codesign.errors import InputError

  try:
    f = [float(x) for x in FLAGS.factors]
  except ValueError:
    raise InputError(
      f'--factors must be numbers, got {",".join(FLAGS.factors)}'
    ) from None
  if len(f) < 2 or f[0] != 1.0:
    raise InputError('--factors needs at least two values, the first 1')
  if any(b <= a for a, b in zip(f, f[1:], strict=False)):
    raise InputError('--factors must be strictly increasing')
  if f[-1] > 1000:
    raise InputError(f'--factors may not exceed 1000, got {f[-1]:g}')
  return f


def _check_flags():
  from codesign.errors import InputError

  if not FLAGS.budget_usd > 0:
    raise InputError(f'--budget_usd must be positive, got {FLAGS.budget_usd}')
  for key in ('starts', 'steps', 'snap_top'):
    if FLAGS[key].value < 1:
      raise InputError(f'--{key} must be at least 1, got {FLAGS[key].value}')


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import design_space as ds
  from codesign import (
    multi_search,
    plotting,
    results,
    schema,
    search,
    sweeps,
  )
  from codesign import workload as wl

  factors = _factors()
  _check_flags()
  w0 = common.load_workload()
  grown = tuple(sweeps.grow(w0, f) for f in factors)
  space = ds.make_space(
    w0, max_nodes=FLAGS.max_nodes, plan_mode='auto', sharding=FLAGS.sharding
  )
  stack = common.load_stack()
  tasks = multi_search.Tasks(space, grown, stack)
  workdir = results.make_workdir('growth', FLAGS.workdir)
  n = len(factors)
  # Tasks 0..n-1: one factor alone (0 is today); task n: the horizon.
  weights = np.concatenate([np.eye(n), np.full((1, n), 1.0 / n)])
  names = [f'tuned_x{f:g}' for f in factors] + ['horizon']
  config = search.Config(
    starts=FLAGS.starts, steps=FLAGS.steps, seed=FLAGS.seed
  )
  found = multi_search.search_tasks(
    tasks,
    weights,
    np.full(n + 1, FLAGS.budget_usd),
    np.zeros(n + 1, dtype=np.int32),
    starts=FLAGS.starts,
    config=config,
    snap_top=FLAGS.snap_top,
  )
  # Every found design on every grown workload (all workloads active).
  ev = multi_search.evaluate_buildable(
    tasks,
    found['index'],
    np.ones((n + 1, n)),
    np.full(n + 1, FLAGS.budget_usd),
    np.zeros(n + 1, dtype=np.int32),
  )
  g = ev['g']
  in_budget = g[:, 0] <= 0.0
  holds = np.stack(
    [np.all(g[:, 1 + 4 * j : 5 + 4 * j] <= 0.0, axis=1) for j in range(n)],
    axis=1,
  )  # (designs, factors)
  ok = holds & in_budget[:, None]
  logs = np.where(ok, ev['logs'], -np.inf)
  best = logs.max(axis=0)  # best found log throughput per factor
  regret = np.where(ok, best[None, :] - ev['logs'], np.inf)

  designs = {}
  for d, name in enumerate(names):
    finite = np.isfinite(regret[d])
    designs[name] = {
      'design': ds.describe_index(space, found['index'][d]),
      'capex_usd': ev['capex'][d],
      'power_w': ev['power'][d],
      'within_budget': bool(in_budget[d]),
      'holds_factor': [bool(x) for x in holds[d]],
      'throughput_samples_per_s': [
        float(np.exp(x)) if o else None
        for x, o in zip(ev['logs'][d], ok[d], strict=True)
      ],
      'regret_log': [float(r) if np.isfinite(r) else None for r in regret[d]],
      'mean_regret_log': float(np.mean(regret[d])) if finite.all() else None,
      'factors_it_cannot_train': [
        factors[j] for j in range(n) if not finite[j]
      ],
    }
  today, horizon = designs[names[0]], designs['horizon']

  def describe(name, d):
    if d['mean_regret_log'] is None:
      return (
        f'{name}: cannot train the workload grown '
        + ', '.join(f'x{f:g}' for f in d['factors_it_cannot_train'])
        + f' (capex ${d["capex_usd"]:,.0f})'
      )
    return (
      f'{name}: mean regret {d["mean_regret_log"]:.3f} in log throughput '
      f'({100 * (np.exp(d["mean_regret_log"]) - 1):.1f}% below the best '
      f'found, geometric mean; capex ${d["capex_usd"]:,.0f})'
    )

  summary = [
    describe('design tuned for today', today),
    describe('horizon design', horizon),
  ]
  if (
    today['mean_regret_log'] is None and horizon['mean_regret_log'] is not None
  ):
    summary.append(
      'The design tuned for today does not last: designing for the horizon '
      'is required to train the grown models at all.'
    )
  elif None not in (today['mean_regret_log'], horizon['mean_regret_log']):
    gap = today['mean_regret_log'] - horizon['mean_regret_log']
    summary.append(
      f'Designing for the horizon lowers the mean regret by {gap:.3f} '
      f'({"better" if gap > 0 else "not better"} than tuning for today).'
    )
  result = {
    'workload': w0.name,
    'factors': factors,
    'budget_usd': FLAGS.budget_usd,
    'grown_workloads': [
      {
        'name': gw.name,
        'embedding_gb': wl.embedding_bytes(gw) / 1e9,
        'dense_flops_per_sample': wl.dense_flops_per_sample(gw),
        'bottom_mlp': list(gw.bottom_mlp),
        'top_mlp': list(gw.top_mlp),
      }
      for gw in grown
    ],
    'designs': designs,
    'best_found_throughput_samples_per_s': [
      float(np.exp(b)) if np.isfinite(b) else None for b in best
    ],
    'evaluations': found['evaluations'],
    'summary': summary,
  }
  metrics = multi_search.history_rows(
    found['history'], names, 'best_feasible_geomean_throughput'
  )
  config_out = {
    'flags': common.flag_values(),
    'workload': schema.workload_to_json(w0),
    'stack': schema.stack_to_json(stack),
  }
  results.write_run(workdir, config_out, result, metrics, seed=FLAGS.seed)

  def curve(d):
    return np.array(
      [np.nan if v is None else v for v in d['throughput_samples_per_s']]
    )

  plotting.lines(
    workdir / 'growth.png',
    np.array(factors),
    {
      'tuned for today': curve(today),
      'horizon design': curve(horizon),
      'best found per factor': np.array(
        [
          np.nan if v is None else v
          for v in result['best_found_throughput_samples_per_s']
        ]
      ),
    },
    f'{w0.name} grown in embeddings and compute, capex <= '
    f'${FLAGS.budget_usd:,.0f}',
    'growth factor',
    'throughput (samples/s)',
    logx=True,
    logy=True,
  )
  print('\n'.join(summary))


if __name__ == '__main__':
  common.run(main)
