"""How good is the gradient search? Baselines on a space exhaustively known.

The library part of `experiments.search_quality`, with no file I/O and no
printing. Over the discrete space of buildable platforms
(`codesign.design_space`, plan mode `auto`: one plan per platform, so the
space can be enumerated; over 5 million platforms with 16 nodes), for each
workload:
- exhaustive enumeration gives the true optimum;
- gradient search optimizes the continuous relaxation of the same space,
  then snaps to it (`codesign.search.gradient_search`);
- random search and CMA-ES (evosax) get as many evaluations as the
  gradient search used (a value and gradient counts as 2).

Units: objective values in `shared.OBJECTIVE_UNITS[objective]`; gaps in
percent of the optimum; USD, W.
"""

import dataclasses
import time
from collections.abc import Callable

from codesign import baselines, design_space, search
from codesign import stack as stack_lib
from codesign.errors import InputError
from codesign.studies import shared

WORKLOADS = (
  'zion_scale',
  'mlperf_dlrm_dcnv2',
  'criteo_terabyte',
  'nv_dlrm_large',
  'rm2',
)
# Keys of `run`'s result that are not part of result.json (wall seconds:
# result.json stays reproducible).
EXTRA_KEYS = ('timing',)
METHODS = ('gradient', 'random', 'cma_es')


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to compare (the flags of `experiments.search_quality`, same
  names).

  Attributes:
    workloads: workloads (`Workload`s, preset names or JSON files).
    objective: one of `search.OBJECTIVES`: `throughput` (samples/s),
      `throughput_per_usd` (samples/s per USD of capex),
      `throughput_per_watt` (samples/s per W at TDP), `time_to_train` (s).
    budget_usd: capex limit of the whole cluster, USD; 0 or None: none.
    power_w: power limit of the whole cluster at TDP, W; 0 or None: none.
    max_nodes: largest number of nodes.
    starts: gradient search starts.
    steps: gradient search Adam steps.
    population: CMA-ES population.
    exhaustive_chunk: designs per batch of the exhaustive enumeration.
    seed: seed of every method.
    stack: a `Stack`, a preset name or a stack JSON file.
  """

  workloads: tuple = WORKLOADS
  objective: str = 'throughput_per_usd'
  budget_usd: float | None = 1e6
  power_w: float | None = 0.0
  max_nodes: int = 16
  starts: int = 64
  steps: int = 200
  population: int = 32
  exhaustive_chunk: int = 65536
  seed: int = 0
  stack: str | stack_lib.Stack = 'torchrec'


def _gap(problem, optimum, found):
  """Percent by which `found` is worse than `optimum` (None: nothing
  feasible found)."""
  if found is None:
    return None
  if search.maximized(problem.objective):
    return 100.0 * (optimum - found) / optimum
  return 100.0 * (found - optimum) / optimum


def _entry(problem, res, optimum):
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


def _run_workload(settings, w, stack, config, progress):
  """All four methods on one workload: (entry, gradient history, times)."""
  space = design_space.make_space(w, settings.max_nodes, plan_mode='auto')
  problem = search.check_problem(
    search.Problem(
      space,
      w,
      stack,
      settings.objective,
      budget_usd=settings.budget_usd or None,
      power_w=settings.power_w or None,
    )
  )
  t = {}

  def clock(name, what, fn):
    progress(f'{w.name}: {name} ({what})')
    s = time.perf_counter()
    out = fn()
    t[name] = time.perf_counter() - s
    return out

  grad = clock(
    'gradient',
    f'{config.starts} starts x {config.steps} Adam steps',
    lambda: search.gradient_search(problem, config),
  )
  budget = grad.evaluations
  rand = clock(
    'random',
    f'{budget:,} evaluations',
    lambda: baselines.random_search(problem, budget, seed=settings.seed),
  )
  cma = clock(
    'cma_es',
    f'{budget:,} evaluations, population {settings.population}',
    lambda: baselines.cma_es(
      problem, budget, population=settings.population, seed=settings.seed
    ),
  )
  exh = clock(
    'exhaustive',
    f'{space.size:,} designs',
    lambda: baselines.exhaustive(problem, chunk=settings.exhaustive_chunk),
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


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Runs the four methods on every workload.

  Args:
    settings: what to compare.
    progress: called with one line at the start of each method on each
      workload.

  Returns:
    (result, metrics). result: `stack`, `objective`, `limits`, `search`
    (settings), `per_workload` (name -> design space size, then per
    method (`exhaustive`, `gradient`, `random`, `cma_es`): best value,
    feasibility, evaluations, gap in percent of the optimum, platform;
    and the gradient search's evaluations as a fraction of the space),
    `summary` (counts over workloads), and `timing` (not in result.json:
    wall seconds per workload and method, compile included). metrics:
    the gradient search's per-step rows, with `workload`.

  Raises:
    InputError: a bad setting or input.
  """
  progress = progress or (lambda line: None)
  for key in ('budget_usd', 'power_w'):
    value = getattr(settings, key)
    if value is not None and value < 0:
      raise InputError(f'--{key} must not be negative')
  workloads = [shared.load_workload(x) for x in settings.workloads]
  config = search.check_config(
    search.Config(
      starts=settings.starts, steps=settings.steps, seed=settings.seed
    )
  )
  stack = shared.load_stack(settings.stack)
  per, metrics, timing = {}, [], {}
  for w in workloads:
    per[w.name], hist, timing[w.name] = _run_workload(
      settings, w, stack, config, progress
    )
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
    'objective': settings.objective,
    'limits': {
      'budget_usd': settings.budget_usd or None,
      'power_w': settings.power_w or None,
      'max_nodes': settings.max_nodes,
    },
    'search': {
      'starts': config.starts,
      'steps': config.steps,
      'snap_top': config.snap_top,
      'cma_es_population': settings.population,
      'seed': settings.seed,
      'wall_s': 'in timing.json (kept out so result.json is reproducible)',
    },
    'per_workload': per,
    'summary': summary,
    'timing': timing,
  }
  return result, metrics


def table(result: dict) -> str:
  """Per workload: the optimum and each method's gap to it, as plain
  text, then the summary counts."""
  unit = shared.OBJECTIVE_UNITS[result['objective']]
  lines = [
    f'objective {result["objective"]} ({unit}); gaps in % of the optimum '
    '(none: nothing feasible found)',
    f'{"workload":18s} {"optimum":>12s} {"gradient %":>11s} '
    f'{"random %":>9s} {"cma_es %":>9s} {"evals":>8s} {"of space":>9s}',
  ]
  for name, v in result['per_workload'].items():

    def fmt(m, v=v):
      g = v[m]['gap_pct']
      return f'{g:9.3f}' if g is not None else '     none'

    opt = v['exhaustive']['value']
    lines.append(
      f'{name:18s} {opt if opt is not None else float("nan"):12.6g} '
      f'{fmt("gradient"):>11s} {fmt("random")} {fmt("cma_es")} '
      f'{v["gradient"]["evaluations"]:8,d} '
      f'{100 * v["gradient_eval_fraction"]:8.3f}%'
    )
  s = result['summary']
  lines.append(
    f'within 1% of the optimum: gradient {s["gradient_within_1pct"]}, '
    f'random {s["random_within_1pct"]}, CMA-ES {s["cma_es_within_1pct"]} '
    f'of {s["workloads"]} workloads; gradient better than random on '
    f'{s["gradient_better_than_random"]}, at least as good on '
    f'{s["gradient_at_least_random"]}'
  )
  return '\n'.join(lines)


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows): one row per workload: the optimum (in the
  objective's unit, named in the column), each method's best value and
  gap in percent, the gradient search's evaluations and share of the
  space."""
  unit = shared.OBJECTIVE_COLUMN_UNITS[result['objective']]
  header = ['workload', 'design_space_size', f'optimum_{unit}']
  for m in METHODS:
    header += [f'{m}_{unit}', f'{m}_gap_pct']
  header += ['gradient_evaluations', 'gradient_eval_fraction_pct']
  rows = []
  for name, v in result['per_workload'].items():
    row = [name, v['design_space_size'], v['exhaustive']['value']]
    for m in METHODS:
      row += [v[m]['value'], v[m]['gap_pct']]
    row += [v['gradient']['evaluations'], 100 * v['gradient_eval_fraction']]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows
