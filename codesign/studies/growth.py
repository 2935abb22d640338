"""Design for where the model is going, not where it is.

The library part of `experiments.growth`, with no file I/O and no
printing. The workload is grown by each of `factors` in embedding size
(every table's rows) and in dense compute (hidden MLP widths, so that
dense FLOPs per sample grow by the same factor; `codesign.studies.sweeps.grow`).
Under one capex budget, searches run at once (`codesign.search.multi_search`:
one vmapped augmented-Lagrangian Adam loop over the search's design
space, auto plan, the settings of `codesign.search.gradient`):
  - one per factor, maximizing that grown workload's throughput alone (the
    first factor's design is the one tuned for today);
  - the horizon design, maximizing the mean log-throughput over all
    factors and required to hold every grown workload.
Every found design is then evaluated on every grown workload. The regret
of a design at a factor is log(best throughput found for that factor) -
log(its throughput); a design that cannot hold a grown workload has
infinite regret there.

Units: USD, W, samples/s; regrets in natural log of throughput.
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from codesign.core.errors import InputError
from codesign.model import report
from codesign.search import design_space as ds
from codesign.search import gradient, multi_search
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.studies import shared, sweeps

# Keys of `run`'s result that are not part of result.json: what the table
# prints beside the numbers (reasons, short design names).
EXTRA_KEYS = ('display',)


# Log-throughput regret under which a tuned design counts as the best of
# the run on its own factor (numerical ties between snapped designs).
CONVERGED_LOG = 1e-9


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to search (the flags of `experiments.growth`, same names).

  Attributes:
    workload: today's workload (a `Workload`, a preset name or a workload
      JSON file); its tables and MLPs grow by `factors`.
    stack: a `Stack`, a preset name or a stack JSON file.
    factors: growth factors (dimensionless), strictly increasing, the
      first 1 (today), at most 1000.
    budget_usd: capex limit of every design (whole cluster), USD, > 0.
    max_nodes: largest node count of the design space.
    sharding: one of `plan.SHARDINGS`, for every table of every design.
    starts: starts per search (>= 1).
    steps: Adam steps per search (>= 1).
    snap_top: best starts per search whose roundings are evaluated (>= 1).
    seed: seed of the uniform starts.
  """

  workload: str | wl.Workload = 'zion_scale'
  stack: str | stack_lib.Stack = 'torchrec'
  factors: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
  budget_usd: float = 1e6
  max_nodes: int = 16
  sharding: str = 'table_wise'
  starts: int = 8
  steps: int = 150
  snap_top: int = 4
  seed: int = 0


def check(settings: Settings) -> None:
  """Raises InputError (one sentence naming the flag) on a bad setting."""
  f = [float(x) for x in settings.factors]
  if len(f) < 2 or f[0] != 1.0:
    raise InputError('--factors needs at least two values, the first 1')
  if any(b <= a for a, b in zip(f, f[1:], strict=False)):
    raise InputError('--factors must be strictly increasing')
  if f[-1] > 1000:
    raise InputError(f'--factors may not exceed 1000, got {f[-1]:g}')
  if not settings.budget_usd > 0:
    raise InputError(
      f'--budget_usd must be positive, got {settings.budget_usd}'
    )
  shared.at_least(settings, 1, 'starts', 'steps', 'snap_top')


def percent_below(regret_log: float) -> float:
  """How far below the best a throughput is, in percent of the best,
  given its regret log(best) - log(throughput): 100 * (1 - exp(-regret)).
  A regret of log 2 (half the best) is 50%."""
  return 100.0 * -np.expm1(-regret_log)


def _describe(name: str, d: dict) -> str:
  if d['mean_regret_log'] is None:
    return (
      f'{name}: cannot train the workload grown '
      + ', '.join(f'x{f:g}' for f in d['factors_it_cannot_train'])
      + f' (capex ${d["capex_usd"]:,.0f})'
    )
  # The mean regret is a mean of logs: exp(-mean) is the geometric mean
  # of throughput / best over the factors.
  return (
    f'{name}: mean regret {d["mean_regret_log"]:.3f} in log throughput '
    f'(throughput {percent_below(d["mean_regret_log"]):.1f}% below the best '
    f'found, geometric mean over the factors; capex ${d["capex_usd"]:,.0f})'
  )


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Searches the per-factor and horizon designs and their regrets.

  Args:
    settings: what to search.
    progress: called with one line at the start of each long phase.

  Returns:
    (result, metrics). result: `workload`, `factors`, `budget_usd`,
    `grown_workloads` (per factor: name, embedding GB, dense FLOPs per
    sample, MLP widths), `designs` (`tuned_x<factor>` per factor and
    `horizon`: its design, capex USD, power W, whether it is within the
    budget and holds each factor, its throughput (samples/s, None where
    it cannot train), regret per factor and mean regret (log), the
    factors it cannot train), `best_found_throughput_samples_per_s` per
    factor, `not_converged` (each tuned design that another design of the
    run beats on its own factor, with the winner), `evaluations`,
    `summary` (sentences), and `display` (not in
    result.json: short design names and, per design and factor, why it
    cannot train there, '' where it can). metrics: per Adam step, each
    search's best feasible geometric-mean throughput so far
    (metrics.jsonl).

  Raises:
    InputError: a bad setting or input.
  """
  progress = progress or (lambda line: None)
  request = _request(settings)  # settings checked, workloads grown
  found = _search(request, progress)  # one compiled loop, every search
  scores = _scores(request, found, progress)  # every design, every factor
  designs, reasons = _designs(request, found, scores)
  not_converged = _not_converged(request, designs, scores)
  result = _result(request, found, scores, designs, reasons, not_converged)
  metrics = multi_search.history_rows(
    found['history'], request.names, 'best_feasible_geomean_throughput'
  )
  return result, metrics


@dataclasses.dataclass(frozen=True)
class _Request:
  """The settings read and checked: what every phase of `run` starts from.

  Attributes:
    settings: the settings.
    factors: the growth factors (floats).
    budget: the capex limit, USD.
    w0: today's workload; grown: it grown by each factor.
    space: the design space (auto plans, sized for today's workload).
    tasks: the searches' tasks (the space, the grown workloads, the stack).
    names: `tuned_x<factor>` per factor, then `horizon`.
  """

  settings: Settings
  factors: list[float]
  budget: float
  w0: wl.Workload
  grown: tuple[wl.Workload, ...]
  space: ds.DesignSpace
  tasks: multi_search.Tasks
  names: list[str]


def _request(settings: Settings) -> _Request:
  """The `_Request` of `settings`; raises `InputError` for a bad one."""
  check(settings)
  factors = [float(x) for x in settings.factors]
  w0 = shared.load_workload(settings.workload)
  grown = tuple(sweeps.grow(w0, f) for f in factors)
  space = ds.make_space(
    w0,
    max_nodes=settings.max_nodes,
    plan_mode='auto',
    sharding=settings.sharding,
  )
  stack = shared.load_stack(settings.stack)
  return _Request(
    settings,
    factors,
    float(settings.budget_usd),
    w0,
    grown,
    space,
    multi_search.Tasks(space, grown, stack),
    [f'tuned_x{f:g}' for f in factors] + ['horizon'],
  )


def _search(request: _Request, progress) -> dict:
  """`multi_search.search_tasks` of one search per factor (that factor
  alone) and the horizon (the mean over factors), under the budget."""
  settings, n = request.settings, len(request.factors)
  # Tasks 0..n-1: one factor alone (0 is today); task n: the horizon.
  weights = np.concatenate([np.eye(n), np.full((1, n), 1.0 / n)])
  config = gradient.Config(
    starts=settings.starts, steps=settings.steps, seed=settings.seed
  )
  progress(
    f'growth: {n + 1} searches (one per factor, and the horizon) x '
    f'{settings.starts} starts x {settings.steps} Adam steps in one '
    f'compiled loop, each design costed on {n} grown workloads'
  )
  return multi_search.search_tasks(
    request.tasks,
    weights,
    np.full(n + 1, request.budget),
    np.zeros(n + 1, dtype=np.int32),
    starts=settings.starts,
    config=config,
    snap_top=settings.snap_top,
  )


@dataclasses.dataclass(frozen=True)
class _Scores:
  """Every found design on every grown workload.

  Attributes:
    ev: `multi_search.evaluate_buildable`'s dict (g, logs, capex, power).
    in_budget: (designs,) within the budget.
    holds: (designs, factors) whether it holds that factor's workload.
    ok: (designs, factors) both.
    logs: (designs, factors) log throughput, -inf where not ok.
    best: (factors,) the best found log throughput.
    regret: (designs, factors) best minus its log throughput, inf where
      not ok.
  """

  ev: dict
  in_budget: np.ndarray
  holds: np.ndarray
  ok: np.ndarray
  logs: np.ndarray
  best: np.ndarray
  regret: np.ndarray


def _scores(request: _Request, found: dict, progress) -> _Scores:
  """The `_Scores` of every found design (all workloads active)."""
  n = len(request.factors)
  progress('growth: evaluating every design on every grown workload')
  ev = multi_search.evaluate_buildable(
    request.tasks,
    found['index'],
    np.ones((n + 1, n)),
    np.full(n + 1, request.budget),
    np.zeros(n + 1, dtype=np.int32),
  )
  g = ev['g']
  in_budget = g[:, 0] <= 0.0
  holds = np.stack(
    [np.all(g[:, _rows(j)] <= 0.0, axis=1) for j in range(n)],
    axis=1,
  )  # (designs, factors)
  ok = holds & in_budget[:, None]
  logs = np.where(ok, ev['logs'], -np.inf)
  best = logs.max(axis=0)  # best found log throughput per factor
  regret = np.where(ok, best[None, :] - ev['logs'], np.inf)
  return _Scores(ev, in_budget, holds, ok, logs, best, regret)


def _designs(request: _Request, found: dict, scores: _Scores):
  """(designs, reasons): result.json's `designs` by name, and per design
  and factor why it cannot train there ('' where it can)."""
  factors, n, ev = request.factors, len(request.factors), scores.ev
  designs, reasons = {}, {}
  for d, name in enumerate(request.names):
    finite = np.isfinite(scores.regret[d])
    designs[name] = {
      'design': ds.describe_index(request.space, found['index'][d]),
      'capex_usd': ev['capex'][d],
      'power_w': ev['power'][d],
      'within_budget': bool(scores.in_budget[d]),
      'holds_factor': [bool(x) for x in scores.holds[d]],
      'throughput_samples_per_s': [
        float(np.exp(x)) if o else None
        for x, o in zip(ev['logs'][d], scores.ok[d], strict=True)
      ],
      'regret_log': [
        float(r) if np.isfinite(r) else None for r in scores.regret[d]
      ],
      'mean_regret_log': (
        float(np.mean(scores.regret[d])) if finite.all() else None
      ),
      'factors_it_cannot_train': [
        factors[j] for j in range(n) if not finite[j]
      ],
    }
    # Per factor: the budget row and that factor's memory and CPU rows.
    reasons[name] = [
      shared.why_not_rows(
        np.concatenate([ev['g'][d, :1], ev['g'][d, _rows(j)]]),
        'capex',
        request.budget,
        ev['capex'][d],
        ev['power'][d],
      )
      for j in range(n)
    ]
  return designs, reasons


def _horizon_summary(today: dict, horizon: dict) -> list[str]:
  """The summary's sentences on the design tuned for today against the
  horizon design."""
  summary = [
    _describe('design tuned for today', today),
    _describe('horizon design', horizon),
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
  return summary


def _not_converged(request: _Request, designs: dict, scores: _Scores):
  """(rows, sentences): each tuned design that another design of the run
  beats on its own factor, with the winner, and the summary's sentence
  for each.

  A search tuned for one factor must not be beaten on that factor by a
  design another search of this run found: that is a search that did not
  converge, reported as such rather than as a finding."""
  factors, names, logs = request.factors, request.names, scores.logs
  rows, sentences = [], []
  for j in range(len(factors)):
    if (
      np.isfinite(scores.regret[j, j]) and scores.regret[j, j] <= CONVERGED_LOG
    ):
      continue
    winner = int(np.argmax(logs[:, j]))
    if not np.isfinite(logs[winner, j]):
      continue  # nothing found trains this factor
    own = designs[names[j]]['throughput_samples_per_s'][j]
    rows.append(
      {
        'design': names[j],
        'factor': factors[j],
        'beaten_by': names[winner],
        'throughput_samples_per_s': own,
        'best_throughput_samples_per_s': float(np.exp(logs[winner, j])),
      }
    )
    own_text = 'cannot train it' if own is None else f'{own:,.0f} samples/s'
    sentences.append(
      f'The search tuned for x{factors[j]:g} did not converge: '
      f'{names[winner]}, found in the same run, trains x{factors[j]:g} at '
      f'{np.exp(logs[winner, j]):,.0f} samples/s where it {own_text}; '
      'read its regrets as upper bounds of what tuning for that factor '
      'loses.'
    )
  return rows, sentences


def _result(request, found, scores, designs, reasons, not_converged) -> dict:
  """`run`'s result: the keys of result.json and `display`."""
  rows, sentences = not_converged
  today, horizon = designs[request.names[0]], designs['horizon']
  return {
    'workload': request.w0.name,
    'factors': request.factors,
    'not_converged': rows,
    'budget_usd': request.budget,
    'grown_workloads': [
      {
        'name': gw.name,
        'embedding_gb': wl.embedding_bytes(gw) / 1e9,
        'dense_flops_per_sample': wl.dense_flops_per_sample(gw),
        'bottom_mlp': list(gw.bottom_mlp),
        'top_mlp': list(gw.top_mlp),
      }
      for gw in request.grown
    ],
    'designs': designs,
    'best_found_throughput_samples_per_s': [
      float(np.exp(b)) if np.isfinite(b) else None for b in scores.best
    ],
    'evaluations': found['evaluations'],
    'summary': _horizon_summary(today, horizon) + sentences,
    'display': {
      'design_names': {
        k: shared.design_name(v['design']) for k, v in designs.items()
      },
      'reasons': reasons,
    },
  }


def table(result: dict) -> str:
  """Each design's throughput per growth factor (the reason beside a
  NO), its regret, then the summary, as plain text."""
  factors, display = result['factors'], result['display']
  head = ''.join(f'{"x" + format(f, "g"):>12s}' for f in factors)
  lines = [
    f'{result["workload"]} grown in embeddings and compute; capex <= '
    f'${result["budget_usd"]:,.0f}; throughput in samples/s per factor',
    f'{"design":12s} {"hardware":36s} {"capex $":>12s}{head} '
    f'{"to train x1":>12s} {"mean regret":>11s} {"% below best":>12s}',
  ]
  samples = report.DEFAULT_TRAIN_SAMPLES
  rows = [*result['designs'].items()]
  best = {
    'throughput_samples_per_s': result['best_found_throughput_samples_per_s']
  }
  for name, d in [*rows, ('best found', best)]:
    thr = ''.join(
      f'{v:>12,.0f}' if v is not None else f'{"NO":>12s}'
      for v in d['throughput_samples_per_s']
    )
    regret = d.get('mean_regret_log')
    tail = (
      f' {regret:11.3f} {percent_below(regret):11.1f}%'
      if regret is not None
      else ''
    )
    hw = display['design_names'].get(name, '')
    capex = f'{d["capex_usd"]:>12,.0f}' if 'capex_usd' in d else f'{"":>12s}'
    first = d['throughput_samples_per_s'][0]
    ttt = report.time_to_train_text(first, samples) if first else '-'
    lines.append(f'{name:12s} {hw:36s} {capex}{thr} {ttt:>12s}{tail}')
  for name, d in rows:
    for j, why in enumerate(display['reasons'][name]):
      if d['throughput_samples_per_s'][j] is None:
        lines.append(f'  {name} NO at x{factors[j]:g}: {why or "infeasible"}')
  lines.append(
    '% below best: the geometric mean over the factors of how far the '
    "design's throughput is below the best found, in % of the best."
  )
  lines.append(shared.time_to_train_note(samples, flag=False) + ', at x1')
  return '\n'.join([*lines, '', *result['summary']])


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows): one row per growth factor: the grown workload, the
  best throughput found for it, and every design's throughput (samples/s,
  empty where it cannot train) and regret (log) there."""
  names = list(result['designs'])
  header = [
    'factor',
    'workload',
    'embedding_gb',
    'dense_flops_per_sample',
    'best_found_throughput_samples_per_s',
  ]
  for name in names:
    header += [f'{name}_throughput_samples_per_s', f'{name}_regret_log']
  rows = []
  for j, (f, gw) in enumerate(
    zip(result['factors'], result['grown_workloads'], strict=True)
  ):
    row = [
      f,
      gw['name'],
      gw['embedding_gb'],
      gw['dense_flops_per_sample'],
      result['best_found_throughput_samples_per_s'][j],
    ]
    for name in names:
      d = result['designs'][name]
      row += [d['throughput_samples_per_s'][j], d['regret_log'][j]]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows


def plot_curves(result: dict) -> dict:
  """{label: (F,) throughput in samples/s per factor, NaN where the
  design cannot train}: tuned for today, the horizon design, the best
  found per factor (for `plotting.lines`)."""

  def curve(values):
    return np.array([np.nan if v is None else v for v in values])

  d = result['designs']
  today = d[next(iter(d))]
  return {
    'tuned for today': curve(today['throughput_samples_per_s']),
    'horizon design': curve(d['horizon']['throughput_samples_per_s']),
    'best found per factor': curve(
      result['best_found_throughput_samples_per_s']
    ),
  }


def _rows(j: int) -> slice:
  """The constraint rows of workload j in a multi-task g (after the limit
  row): its memory and buildability rows (`search.violations` less capex
  and power)."""
  m = len(gradient.CONSTRAINTS) - 2
  return slice(1 + m * j, 1 + m * (j + 1))
