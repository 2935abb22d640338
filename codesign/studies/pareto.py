"""The throughput frontier against capex and against power.

The library part of `experiments.pareto`, with no file I/O and no
printing: `budgets` capex limits (log-spaced from `min_budget_usd` to
`max_budget_usd`) and as many power limits, each searched with `starts`
starts, all in one vmapped augmented-Lagrangian Adam loop over the
search's design space (`codesign.search.multi_search`: auto plan, one sharding
for every table, the loop of `codesign.search.constrained` with the settings of
a `search.Config`), maximizing throughput. The best starts of each search
are snapped to buildable platforms. The frontier is the set of found
buildable designs that no other found design beats on both throughput
and cost (capex, or power). The platform presets are evaluated on the
same workload (auto plan with the same sharding, fitted into HBM) and
placed against it.

Units: USD, W, samples/s.
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from codesign.boundary import inputs
from codesign.core.errors import InputError
from codesign.model import cost_model, planner, report
from codesign.search import design_space as ds
from codesign.search import gradient, multi_search
from codesign.spec import hardware
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.studies import shared, sweeps

PRESETS = ('cpu_2s', 'big_basin', 'zion', 'zionex', 'dgx_a100_80gb', 'dgx_h100')
# Keys of `run`'s result that are not part of result.json: what the table
# and the plot print beside the numbers (reasons, short design names).
EXTRA_KEYS = ('display',)


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to search (the flags of `experiments.pareto`, same names).

  Attributes:
    workload: a `Workload`, a preset name or a workload JSON file.
    stack: a `Stack`, a preset name or a stack JSON file.
    max_nodes: largest node count of the design space.
    sharding: one of `plan.SHARDINGS`, for every table of every design.
    min_budget_usd, max_budget_usd: the smallest and largest capex limit
      of the whole cluster, USD (0 < min < max).
    min_power_w, max_power_w: the smallest and largest power limit at the wall,
      W (0 < min < max).
    budgets: limits per kind (capex and power), log-spaced, >= 2; the
      searches number 2 * budgets.
    starts: starts per search (>= 1).
    steps: Adam steps per search (>= 1).
    snap_top: best starts per search whose roundings are evaluated (>= 1).
    seed: seed of the uniform starts.
    presets: platform presets (names or JSON files) placed against the
      frontier; may be empty.
    cpu_stack: the stack of the CPU-trainer presets (`stack` trains the
      others and the searched designs), as propose's --cpu_stack: each
      preset is trained by the stack evaluate gives its trainer.
  """

  workload: str | wl.Workload = 'zion_scale'
  stack: str | stack_lib.Stack = 'torchrec'
  max_nodes: int = 16
  sharding: str = 'table_wise'
  min_budget_usd: float = 1e5
  max_budget_usd: float = 1e7
  min_power_w: float = 5e3
  max_power_w: float = 5e5
  budgets: int = 8
  starts: int = 8
  steps: int = 150
  snap_top: int = 4
  seed: int = 0
  presets: tuple[str, ...] = PRESETS
  cpu_stack: str | stack_lib.Stack = 'ipex_cpu'


def check(settings: Settings) -> None:
  """Raises InputError (one sentence naming the flag) on a bad setting."""
  for lo, hi in (
    ('min_budget_usd', 'max_budget_usd'),
    ('min_power_w', 'max_power_w'),
  ):
    a, b = getattr(settings, lo), getattr(settings, hi)
    if not 0 < a < b:
      raise InputError(
        f'--{lo} and --{hi} need 0 < min < max, got {a:g} and {b:g}'
      )
  shared.at_least(settings, 2, 'budgets')
  shared.at_least(settings, 1, 'starts', 'steps', 'snap_top')


def frontier(cost: np.ndarray, value: np.ndarray, ok: np.ndarray) -> list:
  """Indices of the feasible points no other feasible point dominates
  (cost no higher and value no lower, one strictly), by increasing cost.

  Args:
    cost, value, ok: (N,) costs, values and feasibility of N points.
  """
  idx = [i for i in np.argsort(cost, kind='stable') if ok[i]]
  out, best = [], -np.inf
  for i in idx:
    if value[i] > best:
      if out and cost[out[-1]] == cost[i]:
        out.pop()
      out.append(int(i))
      best = value[i]
  return out


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Searches the frontier and places the presets against it.

  Args:
    settings: what to search.
    progress: called with one line at the start of each long phase.

  Returns:
    (result, metrics). result: `workload`, `objective`, `searches` (per
    search: limit kind and limit, its best buildable design with
    feasibility, throughput, capex, power, and the best relaxed start's),
    `frontier` ({'capex', 'power'}: frontier points by increasing cost,
    each with `cost`, throughput, the index of its search and its
    design), `presets` (name -> throughput, capex, power, feasibility and
    the frontier's best throughput at the same capex and power, and the
    preset's share of it), `evaluations`, `summary` (sentences), and
    `display` (not in result.json: short design names of the searches,
    the reason beside each infeasible search or preset, the sharding and
    max_nodes). metrics: per Adam step, each search's best feasible
    throughput so far and least violation (metrics.jsonl).

  Raises:
    InputError: a bad setting or input.
  """
  progress = progress or (lambda line: None)
  request = _request(settings)  # settings checked, limits laid out
  found = _search(request, progress)  # every limit in one compiled loop
  searches, adopted = _searches(request, found)  # each judged on every limit
  fronts = _frontiers(found, searches)
  presets, preset_reasons = _presets(request, fronts, progress)
  summary = _summary(request, presets, adopted, fronts)
  result = {
    'workload': request.w.name,
    'objective': 'throughput',
    'searches': searches,
    'frontier': fronts,
    'presets': presets,
    'evaluations': found['evaluations'],
    'summary': summary,
    'display': _display(request, found, searches, preset_reasons),
  }
  return result, _metrics(request, found)


@dataclasses.dataclass(frozen=True)
class _Request:
  """The settings read and checked: what every phase of `run` starts from.

  Attributes:
    settings: the settings.
    w, stack: the workload and stack loaded.
    cpu_stack: the stack of the CPU-trainer presets, loaded.
    presets: preset name -> platform.
    space: the design space (auto plans, the settings' sharding).
    limits: (2k,) the searches' limits: k capex (USD), then k power (W).
    kinds: (2k,) each limit's index in `multi_search.LIMIT_KINDS`.
    tasks: the searches' task (the space, the workload, the stack).
  """

  settings: Settings
  w: wl.Workload
  stack: stack_lib.Stack
  cpu_stack: stack_lib.Stack
  presets: dict[str, hardware.Platform]
  space: ds.DesignSpace
  limits: np.ndarray
  kinds: np.ndarray
  tasks: multi_search.Tasks


def _request(settings: Settings) -> _Request:
  """The `_Request` of `settings`; raises `InputError` for a bad one."""
  check(settings)
  w = shared.load_workload(settings.workload)
  stack = shared.load_stack(settings.stack)
  presets = {n: inputs.load_platform(n) for n in settings.presets}
  space = ds.make_space(
    w,
    max_nodes=settings.max_nodes,
    plan_mode='auto',
    sharding=settings.sharding,
  )
  k = settings.budgets
  limits = np.concatenate(
    [
      sweeps.log_space(settings.min_budget_usd, settings.max_budget_usd, k),
      sweeps.log_space(settings.min_power_w, settings.max_power_w, k),
    ]
  )
  kinds = np.repeat([0, 1], k)
  tasks = multi_search.Tasks(space, (w,), stack)
  cpu_stack = shared.load_stack(settings.cpu_stack)
  return _Request(
    settings, w, stack, cpu_stack, presets, space, limits, kinds, tasks
  )


def _search(request: _Request, progress) -> dict:
  """`multi_search.search_tasks` of one search per limit (throughput
  within it)."""
  settings, n = request.settings, len(request.limits)
  config = gradient.Config(
    starts=settings.starts, steps=settings.steps, seed=settings.seed
  )
  progress(
    f'pareto: {n} searches (capex and power limits) x {settings.starts}'
    f' starts x {settings.steps} Adam steps in one compiled loop, over '
    f'{request.space.size:,} buildable designs'
  )
  return multi_search.search_tasks(
    request.tasks,
    np.ones((n, 1)),
    request.limits,
    request.kinds,
    starts=settings.starts,
    config=config,
    snap_top=settings.snap_top,
  )


def _throughput(found: dict) -> np.ndarray:
  """(searches,) each search's best buildable throughput, samples/s."""
  return np.exp(found['logs'][:, 0])


def _searches(request: _Request, found: dict) -> tuple[list[dict], list]:
  """(searches, adopted): result.json's `searches`, each row taking a
  better design another search found within its limit (`cross_check`,
  which also edits found['index']), and one phrase per adopted design."""
  thr = _throughput(found)
  searches = []
  for i, limit in enumerate(request.limits):
    searches.append(
      {
        'limit_kind': multi_search.LIMIT_KINDS[request.kinds[i]],
        'limit': limit,
        'feasible': bool(found['feasible'][i]),
        'throughput_samples_per_s': thr[i],
        'capex_usd': found['capex'][i],
        'power_w': found['power'][i],
        'design': ds.describe_index(request.space, found['index'][i]),
        'relaxed_throughput_samples_per_s': float(
          np.exp(found['relaxed_logs'][i, 0])
        ),
        'relaxed_feasible': bool(found['relaxed_feasible'][i]),
      }
    )
  return searches, cross_check(searches, found['index'])


def _frontiers(found: dict, searches: list[dict]) -> dict:
  """result.json's `frontier`: per cost ('capex', 'power'), the frontier
  points by increasing cost with their search and design."""
  thr, fronts = _throughput(found), {}
  for key, cost in (('capex', found['capex']), ('power', found['power'])):
    fronts[key] = [
      {
        'cost': cost[i],
        'throughput_samples_per_s': thr[i],
        'search': i,
        'design': searches[i]['design'],
      }
      for i in frontier(cost, thr, found['feasible'])
    ]
  return fronts


def _envelope(front: list[dict], x: float) -> float | None:
  """Best throughput of frontier points `front` at cost <= x (None below
  the frontier)."""
  vals = [f['throughput_samples_per_s'] for f in front if f['cost'] <= x]
  return max(vals) if vals else None


def _presets(request: _Request, fronts: dict, progress):
  """(points, reasons): per preset its `preset_point` with its share of
  the frontier at the same capex and power; and why it is infeasible (''
  where not)."""
  progress(
    f'pareto: evaluating {len(request.presets)} presets and the found designs'
  )
  points, reasons = {}, {}
  for n, p in request.presets.items():
    stack = request.stack if p.trainer == 'accelerator' else request.cpu_stack
    row, reasons[n] = preset_point(
      request.w, p, stack, request.settings.sharding
    )
    for key, cost in (('capex', row['capex_usd']), ('power', row['power_w'])):
      best = _envelope(fronts[key], cost)
      row[f'frontier_at_same_{key}'] = best
      row[f'share_of_frontier_at_same_{key}'] = (
        None if best is None else row['throughput_samples_per_s'] / best
      )
    points[n] = row
  return points, reasons


def preset_point(w, p, stack, sharding: str) -> tuple[dict, str]:
  """(figures, why not) of a preset as the frontier is judged: the
  searched designs' plan (`sharding` for every table, HBM fractions
  fitted); beside them its throughput with evaluate's auto plan (the
  planner's fastest sharding per table, `shared.preset_figures`)."""
  plan = planner.make(w, p, stack, sharding=sharding)
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, stack)
  _, auto = shared.preset_figures(w, p, stack)
  row = {
    'throughput_samples_per_s': float(r.throughput),
    'capex_usd': float(r.capex),
    'power_w': float(r.power),
    'feasible': bool(r.feasible),
    'stack': stack.name,
    'plan': f'{sharding} (every table)',
    'auto_plan_throughput_samples_per_s': auto['throughput_samples_per_s'],
  }
  return row, shared.why_not(report.to_result(r))


def _summary(request, points: dict, adopted: list, fronts: dict) -> list:
  """result.json's `summary`: a sentence per preset, on the searches that
  did not converge, and on each frontier."""
  lines = []
  for n, row in points.items():
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
  if adopted:
    lines.append(
      f'{len(adopted)} of {len(request.limits)} searches did not converge: '
      'a design found by another search of this run is within their limit '
      'and faster, and is reported instead (' + '; '.join(adopted) + ').'
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
  return lines


def _display(request, found, searches, preset_reasons) -> dict:
  """`run`'s `display` (not in result.json): the searches' short design
  names, why each search and preset is infeasible, sharding, max_nodes."""
  # Why a search found nothing feasible: its best design's constraint rows
  # (the same batch shape as the snapping, so no new compile).
  g = multi_search.evaluate_buildable(
    request.tasks,
    found['index'],
    np.ones((len(request.limits), 1)),
    request.limits,
    request.kinds.astype(np.int32),
  )['g']
  return {
    'design_names': [shared.design_name(s['design']) for s in searches],
    'search_reasons': [
      shared.why_not_rows(
        g[i], s['limit_kind'], s['limit'], s['capex_usd'], s['power_w']
      )
      for i, s in enumerate(searches)
    ],
    'preset_reasons': preset_reasons,
    'sharding': request.settings.sharding,
    'max_nodes': request.settings.max_nodes,
  }


def _metrics(request: _Request, found: dict) -> list[dict]:
  """metrics.jsonl: per Adam step, each search's best feasible throughput
  so far, labelled by its limit."""
  labels = [
    f'{multi_search.LIMIT_KINDS[kind]}_{limit:.4g}'
    for kind, limit in zip(request.kinds, request.limits, strict=True)
  ]
  return multi_search.history_rows(
    found['history'], labels, 'best_feasible_throughput'
  )


def cross_check(searches: list[dict], index: np.ndarray) -> list[str]:
  """Every found design judged on every search's limit (the workload is
  the same, so a design's throughput, capex and power do not depend on
  the search): where another search's design is within a search's limit
  and faster, the search did not converge, and its row takes the better
  design (`design_from_search`: the search that found it; its own result
  stays under `own_throughput_samples_per_s`). Edits `searches` in
  place; returns one phrase per adopted design."""
  own = [dict(s) for s in searches]
  notes = []
  for t, s in enumerate(searches):
    s['design_from_search'] = t
    key = 'capex_usd' if s['limit_kind'] == 'capex' else 'power_w'
    best = t if s['feasible'] else None
    for u, o in enumerate(own):
      if not o['feasible'] or o[key] > s['limit'] * (1 + 1e-9):
        continue
      if best is None or (
        o['throughput_samples_per_s']
        > own[best]['throughput_samples_per_s'] * (1 + 1e-9)
      ):
        best = u
    if best is None or best == t:
      continue
    s['own_throughput_samples_per_s'] = (
      own[t]['throughput_samples_per_s'] if own[t]['feasible'] else None
    )
    for field in (
      'feasible',
      'throughput_samples_per_s',
      'capex_usd',
      'power_w',
      'design',
    ):
      s[field] = own[best][field]
    s['design_from_search'] = best
    index[t] = index[best]
    notes.append(
      f'{_limit_text(own[t])}: the design of {_limit_text(own[best])}'
    )
  return notes


def _limit_text(s: dict) -> str:
  if s['limit_kind'] == 'capex':
    return f'capex <= ${s["limit"]:,.0f}'
  return f'power <= {s["limit"]:,.0f} W'


def table(result: dict) -> str:
  """Every search's best design (with the reason beside a NO), then the
  presets against the frontier (the plan they use, and evaluate's auto
  plan beside it), then the summary, as plain text."""
  return '\n'.join(
    [*_search_lines(result), *_preset_lines(result), '', *result['summary']]
  )


def _search_lines(result: dict) -> list[str]:
  display, samples = result['display'], report.DEFAULT_TRAIN_SAMPLES
  on = {
    key: {f['search'] for f in result['frontier'][key]}
    for key in ('capex', 'power')
  }
  lines = [
    f'{result["workload"]}: best buildable throughput found per limit',
    f'{"limit":22s} {"design":36s} {"samples/s":>12s} {"to train":>9s} '
    f'{"capex $":>12s} {"power W":>9s} {"frontier":>11s} {"ok":>3s}',
  ]
  for t, s in enumerate(result['searches']):
    front = ','.join(k for k in ('capex', 'power') if t in on[k]) or '-'
    ok = 'yes' if s['feasible'] else 'NO'
    reason = display['search_reasons'][t]
    thr = s['throughput_samples_per_s']
    lines.append(
      f'{_limit_text(s):22s} {display["design_names"][t]:36s} '
      f'{thr:>12,.0f} {report.time_to_train_text(thr, samples):>9s} '
      f'{s["capex_usd"]:>12,.0f} {s["power_w"]:>9,.0f} {front:>11s} {ok:>3s}'
      + (f'  {reason}' if ok == 'NO' and reason else '')
    )
  return [*lines, shared.time_to_train_note(samples, flag=False)]


def _preset_lines(result: dict) -> list[str]:
  if not result['presets']:
    return []
  samples = report.DEFAULT_TRAIN_SAMPLES
  lines = [
    '',
    f'{"preset":16s} {"plan":22s} {"samples/s":>12s} {"to train":>9s} '
    f'{"capex $":>12s} {"power W":>9s} {"% frontier@capex":>16s} '
    f'{"% frontier@power":>16s} {"ok":>3s}  auto plan samples/s',
  ]

  def pct(x):
    return f'{100 * x:16.0f}' if x is not None else f'{"none cheaper":>16s}'

  for n, v in result['presets'].items():
    ok = 'yes' if v['feasible'] else 'NO'
    reason = result['display']['preset_reasons'][n]
    thr = v['throughput_samples_per_s']
    auto = v.get('auto_plan_throughput_samples_per_s')
    lines.append(
      f'{n:16s} {v.get("plan", ""):22s} {thr:>12,.0f} '
      f'{report.time_to_train_text(thr, samples):>9s} '
      f'{v["capex_usd"]:>12,.0f} {v["power_w"]:>9,.0f} '
      f'{pct(v["share_of_frontier_at_same_capex"])} '
      f'{pct(v["share_of_frontier_at_same_power"])} {ok:>3s}  '
      + (f'{auto:,.0f}' if auto is not None else '-')
      + (f'  {reason}' if ok == 'NO' and reason else '')
    )
  return [
    *lines,
    "% frontier@capex: the preset's throughput in % of the best searched "
    'design costing no more ("none cheaper": no searched design does).',
    "plan: the presets use the searched designs' plan (one sharding for "
    'every table, --sharding; HBM fractions fitted), so that they are '
    "judged as the frontier is; evaluate and propose use the planner's "
    'auto plan (its fastest sharding per table): the last column.',
  ]


CSV_HEADER = [
  'limit_kind',
  'capex_limit_usd',
  'power_limit_w',
  'feasible',
  'throughput_samples_per_s',
  'capex_usd',
  'power_w',
  'on_capex_frontier',
  'on_power_frontier',
  'design',
  'accelerator',
  'cpu',
  'nodes',
  'sockets_per_node',
  'accelerators_per_node',
  'ddr_per_socket_gb',
  'nic_count',
  'nic_bandwidth_gbit_per_s',
  'relaxed_throughput_samples_per_s',
  'relaxed_feasible',
]


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows): one row per search (per capex or power limit), its
  best buildable design and whether it is on either frontier."""
  on = {
    key: {f['search'] for f in result['frontier'][key]}
    for key in ('capex', 'power')
  }
  rows = []
  for t, s in enumerate(result['searches']):
    d = s['design']
    capex_kind = s['limit_kind'] == 'capex'
    row = [
      s['limit_kind'],
      s['limit'] if capex_kind else None,
      None if capex_kind else s['limit'],
      s['feasible'],
      s['throughput_samples_per_s'],
      s['capex_usd'],
      s['power_w'],
      t in on['capex'],
      t in on['power'],
      result['display']['design_names'][t],
      d['accelerator'],
      d['cpu'],
      d['nodes'],
      d['sockets_per_node'],
      d['accelerators_per_node'],
      d['ddr_per_socket_gb'],
      d['nic_count'],
      d['nic_bandwidth_gbit_per_s'],
      s['relaxed_throughput_samples_per_s'],
      s['relaxed_feasible'],
    ]
    rows.append([shared.csv_value(x) for x in row])
  return CSV_HEADER, rows


def plot_panels(result: dict) -> list[dict]:
  """The panels of `plotting.frontier`: throughput against capex and
  against power, frontier points labelled with their short design names,
  presets as reference points (feasible or not)."""
  names = result['display']['design_names']
  panels = []
  for key, xlabel, pkey in (
    ('capex', 'capex (USD)', 'capex_usd'),
    ('power', 'power at TDP (W)', 'power_w'),
  ):
    f = result['frontier'][key]
    panels.append(
      {
        'x': np.array([e['cost'] for e in f]),
        'y': np.array([e['throughput_samples_per_s'] for e in f]),
        'labels': [names[e['search']] for e in f],
        'xlabel': xlabel,
        'ylabel': 'throughput (samples/s)',
        'points': {
          n: (v[pkey], v['throughput_samples_per_s'])
          for n, v in result['presets'].items()
        },
        'infeasible': {
          n for n, v in result['presets'].items() if not v['feasible']
        },
      }
    )
  return panels


def plot_title(result: dict) -> str:
  d = result['display']
  return (
    f'{result["workload"]}: best buildable throughput found per limit '
    f'({d["sharding"]}, up to {d["max_nodes"]} nodes)'
  )
