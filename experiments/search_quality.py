r"""How good is the gradient search? Baselines on a space exhaustively known.

  python -m experiments.search_quality
  python -m experiments.search_quality --objective=throughput \
      --budget_usd=1e6 --workloads=zion_scale,rm2

Over the discrete space of buildable platforms (`codesign.design_space`,
plan mode `auto`: one plan per platform, so the space can be enumerated;
over 5 million platforms with 16 nodes), for each workload:
- exhaustive enumeration gives the true optimum;
- gradient search optimizes the continuous relaxation of the same space,
  then snaps to it (`codesign.search.gradient_search`);
- random search and CMA-ES (evosax) get as many evaluations as the
  gradient search used (a value and gradient counts as 2).
Writes result.json (per workload: the optimum, each method's best, its
evaluations and gap in percent; and a summary), metrics.jsonl (the
gradient search's per-step metrics), timing.json (wall seconds per method;
kept out of result.json so it is reproducible), config.json, env.json.
"""

import time

import jax
from absl import flags

from codesign.errors import InputError
from experiments import common

flags.DEFINE_list(
  'workloads',
  [
    'zion_scale',
    'mlperf_dlrm_dcnv2',
    'criteo_terabyte',
    'nv_dlrm_large',
    'rm2',
  ],
  'Workload presets (comma separated).',
)
flags.DEFINE_enum(
  'objective',
  'throughput_per_usd',
  ['throughput', 'throughput_per_usd', 'throughput_per_watt', 'time_to_train'],
  'What to optimize.',
)
flags.DEFINE_float('budget_usd', 1e6, 'Capex limit in USD (0: none).')
flags.DEFINE_float('power_w', 0.0, 'Power limit in W (0: none).')
flags.DEFINE_integer('max_nodes', 16, 'Largest number of nodes.')
flags.DEFINE_integer('starts', 64, 'Gradient search starts.')
flags.DEFINE_integer('steps', 200, 'Gradient search Adam steps.')
flags.DEFINE_integer('population', 32, 'CMA-ES population.')
flags.DEFINE_integer('exhaustive_chunk', 65536, 'Designs per batch.')
common.define_run_flags(
  'search_quality',
  seed_help='Seed of every method.',
)
flags.adopt_module_key_flags(common)
FLAGS = flags.FLAGS


def _gap(problem, optimum, found):
  """Percent by which `found` is worse than `optimum` (None: nothing
  feasible found)."""
  from codesign import search

  if found is None:
    return None
  if search.maximized(problem.objective):
    return 100.0 * (optimum - found) / optimum
  return 100.0 * (found - optimum) / optimum


def _entry(problem, res, optimum):
  from codesign import design_space

  value = res.best_value if res.best_feasible else None
  out = {
    'value': value,
    'feasible': res.best_feasible,
    'evaluations': res.evaluations,
    'gap_pct': _gap(problem, optimum, value) if optimum else None,
    'platform': design_space.describe_index(problem.space, res.best_index),
  }
  if res.continuous_value is not None:
    out['continuous_value'] = res.continuous_value
  return out


def _run_workload(w, stack, config, t0):
  """All four methods on one workload: (entry, gradient history, times)."""
  from codesign import baselines, design_space, search

  space = design_space.make_space(w, FLAGS.max_nodes, plan_mode='auto')
  problem = search.check_problem(
    search.Problem(
      space,
      w,
      stack,
      FLAGS.objective,
      budget_usd=FLAGS.budget_usd or None,
      power_w=FLAGS.power_w or None,
    )
  )
  t = {}

  def clock(name, fn):
    s = time.perf_counter()
    out = fn()
    t[name] = time.perf_counter() - s
    print(
      f'[{time.perf_counter() - t0:6.1f} s] {w.name:18s} {name:10s} '
      f'best {out.best_value:.6g} (feasible {out.best_feasible}) with '
      f'{out.evaluations:,} evaluations in {t[name]:.1f} s',
      flush=True,
    )
    return out

  grad = clock('gradient', lambda: search.gradient_search(problem, config))
  budget = grad.evaluations
  rand = clock(
    'random', lambda: baselines.random_search(problem, budget, seed=FLAGS.seed)
  )
  cma = clock(
    'cma_es',
    lambda: baselines.cma_es(
      problem, budget, population=FLAGS.population, seed=FLAGS.seed
    ),
  )
  exh = clock(
    'exhaustive',
    lambda: baselines.exhaustive(problem, chunk=FLAGS.exhaustive_chunk),
  )
  optimum = exh.best_value if exh.best_feasible else None
  entry = {
    'design_space_size': space.size,
    'exhaustive': _entry(problem, exh, optimum),
    'gradient': _entry(problem, grad, optimum),
    'random': _entry(problem, rand, optimum),
    'cma_es': _entry(problem, cma, optimum),
    'gradient_eval_fraction': grad.evaluations / space.size,
  }
  return entry, grad.history, t


def main():
  jax.config.update('jax_enable_x64', FLAGS.x64)
  from codesign import results, search, workload_presets

  for key in ('budget_usd', 'power_w'):
    if getattr(FLAGS, key) < 0:
      raise InputError(f'--{key} must not be negative')
  workloads = [workload_presets.get(n) for n in FLAGS.workloads]
  config = search.check_config(
    search.Config(starts=FLAGS.starts, steps=FLAGS.steps, seed=FLAGS.seed)
  )
  stack = common.load_stack()
  per, metrics, timing = {}, [], {}
  t0 = time.perf_counter()
  for w in workloads:
    per[w.name], hist, timing[w.name] = _run_workload(w, stack, config, t0)
    metrics += [{'workload': w.name, **row} for row in hist]

  def count(fn):
    return sum(1 for v in per.values() if fn(v))

  def gap(v, m):
    return v[m]['gap_pct'] if v[m]['gap_pct'] is not None else float('inf')

  summary = {
    'workloads': len(per),
    'gradient_within_1pct': count(lambda v: gap(v, 'gradient') <= 1.0),
    'random_within_1pct': count(lambda v: gap(v, 'random') <= 1.0),
    'cma_es_within_1pct': count(lambda v: gap(v, 'cma_es') <= 1.0),
    'gradient_better_than_random': count(
      lambda v: gap(v, 'gradient') < gap(v, 'random')
    ),
    'gradient_at_least_random': count(
      lambda v: gap(v, 'gradient') <= gap(v, 'random')
    ),
    'max_gradient_eval_fraction': max(
      v['gradient_eval_fraction'] for v in per.values()
    ),
  }
  result = {
    'stack': stack.name,
    'objective': FLAGS.objective,
    'limits': {
      'budget_usd': FLAGS.budget_usd or None,
      'power_w': FLAGS.power_w or None,
      'max_nodes': FLAGS.max_nodes,
    },
    'search': {
      'starts': config.starts,
      'steps': config.steps,
      'snap_top': config.snap_top,
      'cma_es_population': FLAGS.population,
      'seed': FLAGS.seed,
      'wall_s': 'in timing.json (kept out so result.json is reproducible)',
    },
    'per_workload': per,
    'summary': summary,
  }
  workdir = results.make_workdir('search_quality', FLAGS.workdir)
  results.write_run(
    workdir,
    {'flags': common.flag_values()},
    result,
    metrics=metrics,
    seed=FLAGS.seed,
  )
  results.write_json(workdir / 'timing.json', timing)
  print()
  print(
    f'{"workload":18s} {"optimum":>12s} {"gradient %":>11s} '
    f'{"random %":>9s} {"cma_es %":>9s} {"evals":>8s} {"of space":>9s}'
  )
  for name, v in per.items():

    def fmt(m, v=v):
      g = v[m]['gap_pct']
      return f'{g:9.3f}' if g is not None else '     none'

    opt = v['exhaustive']['value']
    print(
      f'{name:18s} {opt if opt is not None else float("nan"):12.6g} '
      f'{fmt("gradient"):>11s} {fmt("random")} {fmt("cma_es")} '
      f'{v["gradient"]["evaluations"]:8,d} '
      f'{100 * v["gradient_eval_fraction"]:8.3f}%'
    )
  print(summary)


if __name__ == '__main__':
  common.run(main)
