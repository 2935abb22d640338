"""How good is the gradient search? Baselines on a space exhaustively
known, and on one 4^T times larger (T tables: 4.5e15 and more for the
default workloads), which cannot be enumerated.

The library part of `experiments.search_quality`, with no file I/O and no
printing. Two comparisons per workload (`Settings.spaces`):

The small space: the discrete space of buildable platforms
(`codesign.search.design_space`, plan mode `auto`, one sharding for every table:
one plan per platform, so the space can be enumerated; millions of
platforms with 16 nodes):
- exhaustive enumeration gives the true optimum;
- gradient search optimizes the continuous relaxation of the same space,
  then snaps to it (`codesign.search.gradient.gradient_search`);
- random search and CMA-ES (evosax) get as many evaluations as the
  gradient search used (a value and gradient counts as 2).

The large space: the same platforms with each table's sharding searched
among `plan_space.CHOICES` (`plan_space.SEARCH`): platforms x 4^T
designs (T tables), 4^T times the small space, far too many to
enumerate. Gradient search, random search and CMA-ES run there at the
gradient search's evaluation count; the reference is the best design
any of them found, or the small space's exhaustive optimum (one sharding
for every table, so a point of the large space, evaluated there) when
the small comparison ran. Gaps are to that reference, so they are lower
bounds of the gaps to the large space's unknown optimum.

Units: objective values in `shared.OBJECTIVE_UNITS[objective]`; gaps in
percent of the optimum (small space) or the reference (large space);
USD, W.
"""

import dataclasses
import time
from collections.abc import Callable

from codesign.core.errors import InputError
from codesign.search import baselines, design_space, gradient, plan_space
from codesign.spec import stack as stack_lib
from codesign.studies import search_quality_large as sq_large
from codesign.studies import shared

WORKLOADS = (
  'zion_scale',
  'mlperf_dlrm_dcnv2',
  'criteo_terabyte',
  'nv_dlrm_large',
  'rm2',
)
SPACES = ('small', 'large')
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
      `throughput_per_watt` (samples/s per W at the wall), `time_to_train` (s).
    budget_usd: capex limit of the whole cluster, USD; 0 or None: none.
    power_w: power limit of the whole cluster at the wall, W; 0 or None: none.
    max_nodes: largest number of nodes.
    starts: gradient search starts.
    steps: gradient search Adam steps.
    population: CMA-ES population.
    exhaustive_chunk: designs per batch of the exhaustive enumeration.
    seed: seed of every method.
    stack: a `Stack`, a preset name or a stack JSON file.
    spaces: which comparisons to run, a non-empty subset of SPACES:
      `small` (one sharding, exhaustive optimum), `large` (sharding
      searched per table).
    large_systems: the system classes whose spaces the large comparison
      runs on (`design_space.SYSTEMS`): `board` (the small space's, with
      the small space's optimum as an entry) and `superchip` (its hosts
      per NVLink domain a further axis), each judged against the best
      its own entries found; a superchip space's results are keyed
      `<workload> (superchip)`.
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
  spaces: tuple = SPACES
  large_systems: tuple = ('board', 'superchip')


def _entry(problem, res, optimum):
  value = res.best_value if res.best_feasible else None
  out = {
    'value': value,
    'feasible': res.best_feasible,
    'evaluations': res.evaluations,
    'gap_pct': sq_large.gap_pct(problem, optimum, value) if optimum else None,
    'platform': design_space.describe_index(problem.space, res.best_index),
  }
  if res.continuous_value is not None:
    out['continuous_value'] = res.continuous_value
  return out


def _cma_block(settings) -> int:
  """Designs per vmapped block of CMA-ES's evaluations: half the
  population, so that a generation is one padded batch of about its size
  rather than of 2 x 256 rows (the same values bit for bit, 10x faster)."""
  return max(1, -(-settings.population // 2))


def _problem(settings, space, w, stack):
  return gradient.check_problem(
    gradient.Problem(
      space,
      w,
      stack,
      settings.objective,
      budget_usd=settings.budget_usd or None,
      power_w=settings.power_w or None,
    )
  )


def _clock(times, progress, label):
  """clock(name, what, fn): runs fn after a progress line, its wall
  seconds into times[name]."""

  def clock(name, what, fn):
    progress(f'{label}: {name} ({what})')
    s = time.perf_counter()
    out = fn()
    times[name] = time.perf_counter() - s
    return out

  return clock


def _searches(settings, problem, config, clock, progress, label):
  """Gradient search, then random search and CMA-ES at its evaluation
  count: {method: `search.Result`}."""

  def steps(step, row):
    progress(f'{label}: gradient {row["phase"]} step {step}/{config.steps}')

  grad = clock(
    'gradient',
    f'{config.starts} starts x {config.steps} Adam steps',
    lambda: gradient.gradient_search(problem, config, progress=steps),
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
      problem,
      budget,
      population=settings.population,
      seed=settings.seed,
      block=_cma_block(settings),
    ),
  )
  return {'gradient': grad, 'random': rand, 'cma_es': cma}


def _quarters(label, total, progress):
  """A progress(done, metrics) that prints a line as `done` passes each
  quarter of `total` (not at the end)."""
  mark = [1]

  def report(done, metrics):
    del metrics
    if done < total and 4 * done >= mark[0] * total:
      progress(f'{label} {done:,}/{total:,} designs')
      mark[0] = 4 * done // total + 1

  return report


def _run_small(settings, w, stack, config, progress):
  """All four methods on one workload's small space: (entry, gradient
  history, times, (problem, exhaustive result))."""
  space = design_space.make_space(w, settings.max_nodes, plan_mode='auto')
  problem = _problem(settings, space, w, stack)
  t = {}
  clock = _clock(t, progress, w.name)
  found = _searches(settings, problem, config, clock, progress, w.name)
  exh = clock(
    'exhaustive',
    f'{space.size:,} designs',
    lambda: baselines.exhaustive(
      problem,
      chunk=settings.exhaustive_chunk,
      progress=_quarters(f'{w.name}: exhaustive', space.size, progress),
    ),
  )
  optimum = exh.best_value if exh.best_feasible else None
  entry = {
    'design_space_size': space.size,
    'exhaustive': _entry(problem, exh, optimum),
    **{m: _entry(problem, found[m], optimum) for m in METHODS},
    'gradient_eval_fraction': found['gradient'].evaluations / space.size,
  }
  return entry, found['gradient'].history, t, (problem, exh)


def _run_large(settings, w, stack, config, progress, small, system='board'):
  """Gradient, random and CMA-ES on one workload's large space of a system
  class (sharding searched per table), judged against the best of them
  and of the small space's optimum (`small`: (problem, exhaustive result)
  or None): (entry, gradient history, times)."""
  space = design_space.make_space(
    w,
    settings.max_nodes,
    plan_mode='auto',
    sharding=plan_space.SEARCH,
    system=system,
  )
  problem = _problem(settings, space, w, stack)
  t = {}
  label = f'{w.name} (large {system} space)'
  clock = _clock(t, progress, label)
  found = _searches(settings, problem, config, clock, progress, label)
  entries = {m: sq_large.entry(problem, found[m]) for m in METHODS}
  if small is not None:
    entries['small_space_optimum'] = sq_large.optimum_in_large(
      problem, *small, block=_cma_block(settings)
    )
  entry = {
    **sq_large.size(space),
    **sq_large.judge(problem, entries),
    **entries,
  }
  return entry, found['gradient'].history, t


def _small_summary(per: dict) -> dict:
  def count(fn):
    return sum(1 for v in per.values() if fn(v))

  def gap(v, m):
    return v[m]['gap_pct'] if v[m]['gap_pct'] is not None else float('inf')

  return {
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


def _check(settings):
  for key in ('budget_usd', 'power_w'):
    value = getattr(settings, key)
    if value is not None and value < 0:
      raise InputError(f'--{key} must not be negative')
  spaces = tuple(settings.spaces)
  bad = [s for s in spaces if s not in SPACES]
  if bad or not spaces or len(set(spaces)) != len(spaces):
    raise InputError(
      f'--spaces must name each of {", ".join(SPACES)} at most once and at '
      f'least one of them, got {",".join(spaces)!r}'
    )


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Runs the comparisons of `settings.spaces` on every workload.

  Args:
    settings: what to compare.
    progress: called with one line at the start of each method on each
      workload and space, and after each chunk of gradient steps.

  Returns:
    (result, metrics). result: `stack`, `objective`, `limits`, `search`
    (settings, `spaces`); with the small space: `per_workload` (name ->
    design space size, then per method (`exhaustive`, `gradient`,
    `random`, `cma_es`): best value, feasibility, evaluations, gap in
    percent of the optimum, platform; and the gradient search's
    evaluations as a fraction of the space) and `summary` (counts over
    workloads); with the large space: `large_space` (`per_workload`:
    name -> size (float, log10, platforms, tables, factor over the
    small space), `reference`, `best` (the entries that reach it),
    `margin_pct`, and per entry of LARGE_ENTRIES: value, feasibility,
    evaluations, gap in percent of the reference, platform, tables per
    sharding; the small space's optimum also with its value there and
    the relative difference; `summary`: wins, median and largest gaps,
    the workloads where the gradient search is not best); `timing` (not
    in result.json: wall seconds per space, workload and method,
    compile included, and `total_s`). metrics: the gradient searches'
    per-step rows, with `workload` and `space`.

  Raises:
    InputError: a bad setting or input.
  """
  start = time.perf_counter()
  progress = progress or (lambda line: None)
  _check(settings)
  workloads = [shared.load_workload(x) for x in settings.workloads]
  config = gradient.check_config(
    gradient.Config(
      starts=settings.starts, steps=settings.steps, seed=settings.seed
    )
  )
  stack = shared.load_stack(settings.stack)
  small_per, large_per, metrics, timing = _compare(
    settings, workloads, stack, config, progress
  )
  result = {
    'stack': stack.name,
    'objective': settings.objective,
    'limits': {
      'budget_usd': settings.budget_usd or None,
      'power_w': settings.power_w or None,
      'max_nodes': settings.max_nodes,
    },
    'search': _search_section(settings, config),
  }
  if small_per:
    result['per_workload'] = small_per
    result['summary'] = _small_summary(small_per)
  if large_per:
    result['large_space'] = _large_section(large_per, bool(small_per))
  result['timing'] = {**timing, 'total_s': time.perf_counter() - start}
  return result, metrics


def _compare(settings, workloads, stack, config, progress):
  """(small_per, large_per, metrics, timing): every workload's results
  in each space of `settings.spaces` (the small space's optimum carried
  to the large one), the gradient searches' per-step rows and the wall
  seconds per space and workload."""
  small_per, large_per, metrics = {}, {}, []
  timing = {'small_space': {}, 'large_space': {}}
  for w in workloads:
    optimum = None
    if 'small' in settings.spaces:
      small_per[w.name], hist, wall_s, optimum = _run_small(
        settings, w, stack, config, progress
      )
      timing['small_space'][w.name] = wall_s
      metrics += [{'workload': w.name, 'space': 'small', **r} for r in hist]
    if 'large' not in settings.spaces:
      continue
    for system in settings.large_systems:
      key = w.name if system == 'board' else f'{w.name} ({system})'
      small = optimum if system == 'board' else None
      large_per[key], hist, timing['large_space'][key] = _run_large(
        settings, w, stack, config, progress, small, system
      )
      metrics += [
        {'workload': w.name, 'space': 'large', 'system': system, **r}
        for r in hist
      ]
  return small_per, large_per, metrics, timing


def _search_section(settings, config) -> dict:
  """result.json's `search`: the gradient search's and CMA-ES's settings,
  the seed and the spaces run."""
  return {
    'starts': config.starts,
    'steps': config.steps,
    'snap_top': config.snap_top or dict(gradient.SNAP_TOP),
    'cma_es_population': settings.population,
    'seed': settings.seed,
    'spaces': [s for s in SPACES if s in settings.spaces],
    'wall_s': 'in timing.json (kept out so result.json is reproducible)',
  }


def _large_section(large_per: dict, small_run: bool) -> dict:
  """result.json's `large_space`: the sharding choices, what the
  reference is, the per-workload results and their summary."""
  return {
    'sharding_choices': list(plan_space.CHOICES),
    'reference': 'the best design any method found in the large space, '
    + (
      "or the small space's exhaustive optimum evaluated there"
      if small_run
      else '(the small space was not run)'
    ),
    'per_workload': large_per,
    'summary': sq_large.summary(large_per),
  }


def _small_table(result: dict) -> list[str]:
  fmt = sq_large.fmt
  unit = shared.OBJECTIVE_UNITS[result['objective']]
  lines = [
    f'small space (one sharding for every table): objective '
    f'{result["objective"]} ({unit}); gaps in % of the exhaustive optimum '
    '(none: nothing feasible found)',
    f'{"workload":18s} {"optimum":>12s} {"gradient %":>11s} '
    f'{"random %":>9s} {"cma_es %":>9s} {"evals":>8s} {"of space":>9s}',
  ]
  for name, v in result['per_workload'].items():
    opt = v['exhaustive']['value']
    lines.append(
      f'{name:18s} {opt if opt is not None else float("nan"):12.6g} '
      f'{fmt(v["gradient"]["gap_pct"], 11)} '
      f'{fmt(v["random"]["gap_pct"])} {fmt(v["cma_es"]["gap_pct"])} '
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
  return lines


def table(result: dict) -> str:
  """Per workload and space: the optimum or reference and each method's
  gap to it, as plain text, then the summaries."""
  lines = []
  if 'per_workload' in result:
    lines += _small_table(result)
  if 'large_space' in result:
    lines += ([''] if lines else []) + sq_large.table_lines(result)
  return '\n'.join(lines)


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows) of the small space: one row per workload: the
  optimum (in the objective's unit, named in the column), each method's
  best value and gap in percent, the gradient search's evaluations and
  share of the space."""
  unit = shared.OBJECTIVE_COLUMN_UNITS[result['objective']]
  header = ['workload', 'design_space_size', f'optimum_{unit}']
  for m in METHODS:
    header += [f'{m}_{unit}', f'{m}_gap_pct']
  header += ['gradient_evaluations', 'gradient_eval_fraction_pct']
  rows = []
  for name, v in result.get('per_workload', {}).items():
    row = [name, v['design_space_size'], v['exhaustive']['value']]
    for m in METHODS:
      row += [v[m]['value'], v[m]['gap_pct']]
    row += [v['gradient']['evaluations'], 100 * v['gradient_eval_fraction']]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows
