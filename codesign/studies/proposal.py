"""Propose the platform to build for a DLRM, under the buyer's limits.

The library part of `experiments.propose`, with no file I/O and no printing:
`run(settings)` builds the design space and the search problem, runs
`codesign.search.gradient.gradient_search` (augmented-Lagrangian Adam over a
relaxation of catalog parts and counts, then snapping to buildable
platforms), turns the best buildable design into platform and plan JSON,
evaluates its figures (with its searched plan and with the auto plan), the
continuous optimum's and those of the platform presets on the same
workload, and returns them as the dict `experiments.propose` writes to
result.json, with the history of the search, the workload assumptions
that decide the proposal and whether it stays the best candidate when
uncertain prices and the popularity skew move
(`codesign.studies.robustness`). Part prices the user sets (--price) are
passed explicitly: the search, the proposal and the presets all see them
(`part_tables.priced`). A request no buildable
platform meets raises `InputError` with one sentence naming the constraint
and by how much.

Units are those of the JSON schema (`codesign.spec.schema`): USD, W,
samples/s, seconds; figures are `codesign.model.report.to_result` dicts.
"""

import dataclasses
import time
from collections.abc import Callable

import jax
import numpy as np

from codesign.core import interrupts
from codesign.core.errors import InputError
from codesign.model import planner, report, terms
from codesign.search import (
  batching,
  buildability,
  design_space,
  gradient,
  part_tables,
  plan_space,
)
from codesign.spec import catalog, hardware, schema
from codesign.spec import plan as plan_lib
from codesign.spec import platform_presets as presets_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.studies import proposal_search, robustness, shared

# Platform presets evaluated beside the proposal by default.
PRESETS = (
  'zion',
  'zionex',
  'dgx_h100',
  'dgx_h200',
  'dgx_a100_80gb',
  'dgx_a100_40gb',
  'p4d',
  'dgx2_v100',
  'dgx1_v100',
  'big_basin',
  'cpu_2s',
)
# Unit of each objective (and of the minimum capex and power searched to
# explain an infeasible request).
OBJECTIVE_UNITS = shared.OBJECTIVE_UNITS
# Keys of `run`'s result that are not part of result.json.
EXTRA_KEYS = ('proposal_json', 'timing')
# NVIDIA's DGX SuperPOD data-center design puts four DGX H100 in a rack,
# 40.8 kW at their 10.2 kW maxima (https://unanswered.io/guide/nvidia-h100-
# gpu-density-per-node-rack, citing docs.nvidia.com/dgx-superpod/design-
# guides/dgx-superpod-data-center-design-h100; medium). Many data centers
# allow 10-15 kW a rack (same page): --rack_kw sets it.
RACK_KW = 40.8
# The TCO printed beside a proposal (`terms.tco`), each a flag:
# - 5 years of service (assumption: servers are commonly depreciated over
#   5-6 years; low);
LIFE_YEARS = 5.0
# - 0.08 USD/kWh (assumption: the US average industrial electricity price
#   was about 8 cents/kWh in 2023, EIA Electric Power Monthly, as recalled,
#   not retrieved; low);
USD_PER_KWH = 0.08
# - PUE 1.58 (assumption: the Uptime Institute's 2023 survey average, as
#   recalled, not retrieved; low).
PUE = 1.58


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to propose (the flags of `experiments.propose`).

  Attributes:
    workload: a `Workload`, a preset name or a workload JSON file.
    objective: one of `search.OBJECTIVES`: `throughput` (samples/s),
      `throughput_per_usd` (samples/s per USD of capex),
      `throughput_per_watt` (samples/s per W at the wall),
      `time_to_train` (seconds to train `samples`) or
      `throughput_per_tco` (samples/s per USD of capex plus energy over
      `life_years`, `terms.tco`).
    budget_usd: capex limit of the whole cluster in USD; None or 0: none.
    power_w: power limit of the whole cluster at the wall in W; None or 0: none.
    max_nodes: largest number of nodes.
    samples: samples to train, for `time_to_train`.
    starts: search starts run at once.
    steps: Adam steps per phase (continuous, then plan polish).
    seed: random seed of the starts.
    sharding: `search` (each table's sharding searched with the hardware,
      `codesign.search.plan_space`), or one of `plan.SHARDINGS` for every table.
    presets: platform preset names evaluated beside the proposal.
    stack: a `Stack`, a preset name or a stack JSON file: the stack of
      the accelerator trainer (and its presets).
    cpu_stack: the same, of the CPU trainer (and CPU presets).
    exclude_parts, only_parts, available_by: the catalog parts the search
      may use (`part_tables.select_parts`: names or their beginnings; a
      year, which also keeps the NIC line rates sold by then,
      `part_tables.nic_rates`). Empty and None: every modelled part.
    price: 'PART=USD' strings: the price of one catalog part (a name or
      the beginning of one; an accelerator with its HBM) in place of the
      catalog's (`part_tables.parse_prices`).
    trainers: the kinds of platform searched, each in its own design space
      (`accelerator`, `cpu`: CPU sockets that train alone); the best is
      proposed (`proposal_search`).
    tolerance: for throughput objectives, the proposal is the cheapest
      design within this share of the best found
      (`proposal_search.cheapest_within`), in [0, 1).
    rack_kw: power of one rack in kW: the search refuses a node that
      (or a scale-up domain whose hosts share a rack) draws more at the
      wall (`terms.rack_unit_power`), and the bill
      counts the racks the nodes need (`terms.racks`); None or 0: no rack
      rule and no racks counted.
    life_years, usd_per_kwh, pue: the TCO printed beside the proposal
      (`terms.tco`): capex plus the energy of its maximum power over
      `life_years` at `usd_per_kwh`, times the facility's `pue`.
  """

  workload: str | wl.Workload = 'zion_scale'
  objective: str = 'throughput_per_usd'
  budget_usd: float | None = 1e6
  power_w: float | None = None
  max_nodes: int = 16
  samples: float = 1e9
  starts: int = 64
  steps: int = 300
  seed: int = 0
  sharding: str = plan_space.SEARCH
  presets: tuple[str, ...] = PRESETS
  stack: str | stack_lib.Stack = 'torchrec'
  cpu_stack: str | stack_lib.Stack = 'ipex_cpu'
  exclude_parts: tuple[str, ...] = ()
  only_parts: tuple[str, ...] = ()
  available_by: int | None = None
  price: tuple[str, ...] = ()
  trainers: tuple[str, ...] = ('accelerator', 'cpu')
  tolerance: float = proposal_search.TOLERANCE
  rack_kw: float | None = RACK_KW
  life_years: float = LIFE_YEARS
  usd_per_kwh: float = USD_PER_KWH
  pue: float = PUE


def within_limits(fig: dict, limits: dict) -> bool:
  """Whether figures `fig` are feasible and within `limits` (a result's
  `limits`: budget_usd, power_w and rack_w, None for no limit; rack_w
  bounds what one rack holds whole, `rack_unit_w`)."""
  ok = fig['feasible']
  if limits['budget_usd']:
    ok = ok and fig['capex_usd'] <= limits['budget_usd']
  if limits['power_w']:
    ok = ok and fig['power_w'] <= limits['power_w']
  if limits.get('rack_w'):
    ok = ok and fig['rack_unit_w'] <= limits['rack_w']
  return bool(ok)


def objective_of(
  fig: dict, objective: str, samples: float, energy_usd_per_w: float = 0.0
) -> float:
  """The objective value of figures `fig`, in `OBJECTIVE_UNITS[objective]`
  (`throughput_per_tco`: samples/s per USD of capex plus the energy of
  the power at `energy_usd_per_w`, `terms.tco`)."""
  throughput = fig['throughput_samples_per_s']
  if objective == 'throughput_per_tco':
    return throughput / (fig['capex_usd'] + fig['power_w'] * energy_usd_per_w)
  return {
    'throughput': throughput,
    'throughput_per_usd': fig['perf_per_usd'],
    'throughput_per_watt': fig['perf_per_watt'],
    'time_to_train': samples / throughput,
  }[objective]


def _auto_plan_wins(problem, auto_fig, fig, limits) -> bool:
  """Whether the auto plan's figures beat the searched plan's on the
  objective (within the limits), where the space searches the sharding
  (a fixed --sharding is the user's choice and stays)."""
  if problem.space.sharding != plan_space.SEARCH:
    return False
  if not within_limits(auto_fig, limits):
    return False
  a = _objective(problem, auto_fig)
  b = _objective(problem, fig)
  return a > b if gradient.maximized(problem.objective) else a < b


def _limits(problem, max_nodes) -> dict:
  return {
    'budget_usd': problem.budget_usd,
    'power_w': problem.power_w,
    'rack_w': problem.rack_w,
    'max_nodes': max_nodes,
    'samples': problem.samples,
    'energy_usd_per_w': problem.energy_usd_per_w,
  }


def run(
  settings: Settings,
  progress: Callable[[str], None] | None = None,
  on_step: Callable[[int, dict], None] | None = None,
) -> tuple[dict, list[dict]]:
  """Searches the platform to build and evaluates it beside the presets.

  Args:
    settings: what to propose.
    progress: called with one line at the start of each phase (the
      search, compile included; the search of the minimum capex or power
      that explains an infeasible request; the evaluations; the ranking
      check).
    on_step: called as on_step(step, metrics) after every chunk of Adam
      steps (for `codesign.api.propose`); metrics is the search's history
      row (`phase`, `step`, `objective`: best feasible value so far or
      None, `violation_min`, `violation_max`, `feasible_starts`) plus
      `searching`: the objective of the running search (the requested
      one, or `capex` or `power` while the minimum is searched to explain
      an infeasible request).

  Returns:
    (result, metrics). result: the dict `experiments.propose` writes to
    result.json (workload, stack, objective, objective_unit, limits,
    proposal, continuous_optimum, presets, prices (set by --price; the
    proposal's parts, `part_tables.price_info`), assumptions and
    robustness (`codesign.studies.robustness`), search; `stacks`: the
    stack of each trainer; `tolerance` and `ddr`: what
    `proposal_search.cheapest_within` and `least_ddr` did; each figures
    dict's `ceiling`), plus `proposal_json`
    (the workload, platform, plan and stack sections of proposal.json,
    which `experiments.evaluate` reads back) and `timing` (wall-clock
    seconds, compile included: search_wall_s, total_wall_s). metrics: one
    dict per Adam step (both phases), as in metrics.jsonl.

  Raises:
    InputError: bad settings, or no buildable platform meets the limits
      (the sentence names the constraint and by how much).
  """
  progress = progress or (lambda line: None)
  t_start = time.perf_counter()
  request = _request(settings, on_step)  # inputs loaded, limits checked
  _check_memory(request)  # before the presets' compiles start beside it

  # The presets do not depend on the search: evaluated beside it, in the
  # time its compiles leave (each deterministic: the same rows).
  def search():
    found = _search(request, progress)  # raises the one-sentence NO
    return found, time.perf_counter() - t_start

  (found, t_search), presets = interrupts.thread_map(
    lambda phase: phase(),
    (search, lambda: _presets(request, progress)),
    workers=2,
  )
  found, trims = _trim(found, request)  # no spending for nothing
  proposal = _proposal(request, found, progress)  # auto plan kept where it wins
  continuous = _continuous(request, found)
  ranking = _ranking(request, found, proposal, presets, progress)
  t_total = time.perf_counter() - t_start
  result = _result(request, found, proposal, continuous, presets, ranking)
  result = {**result, **trims, 'board_violations': _boards(proposal)}
  timing = {'search_wall_s': t_search, 'total_wall_s': t_total}
  return {**result, 'timing': timing}, found.result.history


@dataclasses.dataclass(frozen=True)
class _Request:
  """The settings read and checked: what every phase of `run` starts from.

  Attributes:
    settings: the settings.
    w: the workload loaded.
    stacks: trainer -> the stack that trains it (`--stack`, `--cpu_stack`).
    preset_names: the presets evaluated beside the proposal (each known).
    max_nodes: largest number of nodes.
    prices: the prices set by --price (`part_tables.Prices`).
    parts: the search's part selection (`accelerators`, `cpus`), or {}.
    config: the gradient search's configuration, checked.
    on_step: the caller's per-chunk callback, or None.
  """

  settings: Settings
  w: wl.Workload
  stacks: dict[str, stack_lib.Stack]
  preset_names: tuple[str, ...]
  max_nodes: int
  prices: part_tables.Prices
  parts: dict
  config: gradient.Config
  on_step: Callable[[int, dict], None] | None

  def on_step_of(self, objective: str):
    """The search's per-chunk callback that reports `objective` as the
    one being searched, or None when the caller gave none."""
    if self.on_step is None:
      return None
    on_step = self.on_step

    def report_step(step, m):
      on_step(step, {**m, 'searching': objective})

    return report_step


def _request(settings: Settings, on_step) -> _Request:
  """The `_Request` of `settings`; raises `InputError` for an unknown
  preset, a negative limit or a bad search configuration, before any
  search."""
  w = shared.load_workload(settings.workload)
  stacks = proposal_search.trainer_stacks(
    shared.load_stack(settings.stack), shared.load_stack(settings.cpu_stack)
  )
  preset_names = tuple(settings.presets)
  for name in preset_names:
    presets_lib.get(name)  # an unknown name fails before the search
  for key in ('budget_usd', 'power_w', 'rack_kw', 'life_years', 'usd_per_kwh'):
    value = getattr(settings, key)
    if value is not None and value < 0:
      raise InputError(f'{key} must not be negative')
  if not settings.pue >= 1.0:
    raise InputError(f'pue must be at least 1, got {settings.pue}')
  if not 0.0 <= settings.tolerance < 1.0:
    raise InputError(f'tolerance must lie in [0, 1), got {settings.tolerance}')
  prices = part_tables.parse_prices(tuple(settings.price))
  parts = {}
  if settings.exclude_parts or settings.only_parts or settings.available_by:
    acc, cpu = part_tables.select_parts(
      tuple(settings.exclude_parts),
      tuple(settings.only_parts),
      settings.available_by,
    )
    parts = {'accelerators': acc, 'cpus': cpu}
    if settings.available_by:
      parts['nic_rates'] = part_tables.nic_rates(settings.available_by)
  config = gradient.check_config(
    gradient.Config(
      starts=int(settings.starts),
      steps=int(settings.steps),
      seed=int(settings.seed),
    )
  )
  return _Request(
    settings,
    w,
    stacks,
    preset_names,
    int(settings.max_nodes),
    prices,
    parts,
    config,
    on_step,
  )


def _stack(request: _Request, found) -> stack_lib.Stack:
  """The stack of the proposal's trainer."""
  return request.stacks[found.problem.space.trainer]


def _boards(proposal) -> list[str]:
  """Boards no vendor sells: the proposal's breaks of the rules the
  relaxation does not see (`buildability.CONCRETE_ONLY`), which the
  snapping enforces (`snapping.buildable`); empty unless that failed."""
  return [
    sentence
    for rule, sentence in buildability.violations(proposal.p, proposal=True)
    if rule in buildability.CONCRETE_ONLY
  ]


def _trim(found, request: _Request) -> tuple:
  """(found with its best design trimmed, result keys `tolerance` and
  `ddr`): for throughput objectives the cheapest design within the
  tolerance of the best found, down to the knee (`proposal_search.
  cheapest_within`), then only the DDR its plan keeps there (up to a
  legal DIMM population)."""
  problem = found.problem
  res, trim = proposal_search.cheapest_within(
    problem, found.result, request.settings.tolerance
  )
  res, ddr_trim = proposal_search.least_ddr(problem, res)
  found = dataclasses.replace(found, result=res)
  return found, {'tolerance': trim, 'ddr': ddr_trim}


def _search_args(request: _Request) -> tuple[dict, dict]:
  """(problem_args, space_args) of `proposal_search.search_trainers`."""
  settings = request.settings
  return (
    {
      'objective': settings.objective,
      'budget_usd': float(settings.budget_usd) if settings.budget_usd else None,
      'power_w': float(settings.power_w) if settings.power_w else None,
      'samples': float(settings.samples),
      'energy_usd_per_w': terms.energy_usd_per_w(
        settings.life_years, settings.usd_per_kwh, settings.pue
      ),
      'rack_w': float(settings.rack_kw) * 1e3 if settings.rack_kw else None,
    },
    {
      'max_nodes': request.max_nodes,
      'sharding': settings.sharding,
      'prices': request.prices,
      **request.parts,
    },
  )


def _check_memory(request: _Request) -> None:
  """Refuses, before any compile, searches beyond this machine's memory."""
  problems = proposal_search.make_problems(
    request.w,
    request.stacks,
    *_search_args(request),
    tuple(request.settings.trainers),
  )
  gradient.check_memory(problems, request.config)


def _search(request: _Request, progress) -> proposal_search.Found:
  """Every trainer's search (`proposal_search.search_trainers`); raises
  `InputError` naming the constraint and by how much when nothing
  buildable meets the limits."""
  found = proposal_search.search_trainers(
    request.w,
    request.stacks,
    *_search_args(request),
    tuple(request.settings.trainers),
    request.config,
    progress,
    request.on_step_of,
  )
  if not found.result.best_feasible:
    raise InputError(
      proposal_search.explain_infeasible(
        found, request.config, request.max_nodes, request.on_step_of, progress
      )
    )
  return found


@dataclasses.dataclass(frozen=True)
class _Proposal:
  """The best buildable design as the evaluate CLI reads it back, and the
  continuous optimum.

  Attributes:
    limits: the result's `limits`.
    p, plan: the proposed platform and searched plan, read back from JSON.
    pj, plj: their JSON (plj: the auto plan's where it wins).
    fig, auto_fig: figures with the kept plan and with the auto plan.
    plan_source: `search` or `auto`.
    g_best: the kept design's constraint values.
  """

  limits: dict
  p: hardware.Platform
  plan: plan_lib.Plan
  pj: dict
  plj: dict
  fig: dict
  auto_fig: dict
  plan_source: str
  g_best: np.ndarray


def _objective(problem, fig: dict) -> float:
  """The problem's objective value of figures `fig`."""
  return objective_of(
    fig, problem.objective, problem.samples, problem.energy_usd_per_w
  )


def _score(problem, limits: dict, fig: dict) -> float | None:
  """The objective value of `fig`, or None outside `limits`."""
  return _objective(problem, fig) if within_limits(fig, limits) else None


def _proposal(request: _Request, found, progress) -> _Proposal:
  """The `_Proposal` of the search: its best design through JSON and back,
  the auto plan kept where it beats the searched one, the constraint
  values recomputed op by op."""
  w, stack = request.w, _stack(request, found)
  problem, res = found.problem, found.result
  limits = _limits(problem, request.max_nodes)
  progress('evaluating the proposal and the continuous optimum')
  # The proposal as the evaluate CLI would read it back.
  p, plan = gradient.buildable(problem, res.best_index, res.best_plan_z)
  pj, plj = schema.platform_to_json(p), schema.plan_to_json(plan)
  p_back = schema.platform_from_json(pj)
  plan_back = schema.plan_from_json(plj, w)
  fig = report.design_figures(p_back, w, plan_back, stack)
  auto_plan = planner.make(w, p_back, stack)
  auto_fig = report.design_figures(p_back, w, auto_plan, stack)
  plan_z = res.best_plan_z
  plan_source = 'search'
  if _auto_plan_wins(problem, auto_fig, fig, limits):
    # The search's plan is never kept where the planner's auto plan (the
    # fastest of its candidate shardings) does better on the same hardware.
    plan_source = 'auto'
    plj = schema.plan_to_json(auto_plan)
    fig = report.design_figures(p_back, w, schema.plan_from_json(plj, w), stack)
    plan_z = plan_space.vector_of(problem.space, auto_plan)
  # Recomputed on one device, so that the result does not depend on the
  # devices the batched search ran on; in the search's own program (its
  # rows padded), compiled already where the search ran on one device.
  g_best = gradient.evaluate_indices(
    problem,
    np.asarray(res.best_index)[None],
    np.asarray(plan_z)[None],
    mesh=batching.make_mesh(jax.local_devices()[:1]),
  )['g'][0]
  return _Proposal(
    limits,
    p_back,
    plan_back,
    pj,
    plj,
    fig,
    auto_fig,
    plan_source,
    np.asarray(g_best),
  )


def _continuous(request: _Request, found) -> tuple:
  """(platform, plan, figures) of the search's continuous optimum."""
  pc, planc = gradient.relaxed(found.problem, found.result.continuous_z)
  return (
    pc,
    planc,
    report.design_figures(pc, request.w, planc, _stack(request, found)),
  )


def _presets(request: _Request, progress) -> list:
  """(name, platform, auto plan, figures) of every preset, priced as the
  proposal, in the presets' order."""
  w = request.w

  progress(f'evaluating {len(request.preset_names)} presets beside the search')

  def preset(name):
    interrupts.check()  # the search beside it failed or was stopped
    pp = part_tables.priced(presets_lib.get(name), request.prices)
    pplan = planner.make(w, pp, request.stacks[pp.trainer])
    progress(f'evaluated preset {name}')
    return (
      name,
      pp,
      pplan,
      report.design_figures(pp, w, pplan, request.stacks[pp.trainer]),
    )

  # Two threads: most of a preset's evaluation is XLA compiling (outside
  # Python's lock); each is deterministic, so the order of work does not
  # change the rows, which keep the presets' order.
  return interrupts.thread_map(preset, request.preset_names, workers=2)


def _ranking(request, found, proposal: _Proposal, presets, progress) -> dict:
  """`robustness.check` of the proposal, the search's other designs and
  the presets within the limits, under perturbed prices and skew, with
  the candidates it left out (`left_out`)."""
  problem = found.problem

  def score(f):
    return _score(problem, proposal.limits, f)

  candidates = [
    robustness.Candidate(
      'proposal', 'proposal', proposal.p, proposal.plan, proposal.fig
    ),
    *robustness.found_designs(problem, found.result, score),
  ]
  for name, pp, pplan, f in presets:
    if score(f) is not None:
      candidates.append(robustness.Candidate(name, 'preset', pp, pplan, f))
  perts, left_out = robustness.perturbations(
    candidates, request.w, request.prices
  )
  progress(
    f'checking the ranking of {len(candidates)} candidates under '
    f'{len(perts)} perturbations of uncertain prices and popularity_skew'
  )
  rob = robustness.check(
    candidates,
    perts,
    request.w,
    request.stacks,
    score,
    gradient.maximized(problem.objective),
    request.prices,
    request.settings.tolerance if problem.objective == 'throughput' else None,
  )
  return {**rob, 'left_out': left_out}


def _result(request, found, proposal, continuous, presets, ranking) -> dict:
  """`run`'s result without `timing`: the keys of result.json and
  `proposal_json`."""
  w, stack, pj = request.w, _stack(request, found), proposal.pj
  problem, limits = found.problem, proposal.limits
  wj, sj = schema.workload_to_json(w), schema.stack_to_json(stack)
  return {
    'workload': w.name,
    'stack': stack.name,
    # The stack each trainer was searched (and its presets evaluated) with.
    'stacks': {t: request.stacks[t].name for t in found.per_trainer},
    'objective': problem.objective,
    'objective_unit': OBJECTIVE_UNITS[problem.objective],
    'limits': limits,
    'proposal': _proposal_section(problem, proposal, request.settings),
    'continuous_optimum': _continuous_section(found, continuous),
    'presets': [
      {
        'name': name,
        'plan': 'auto',
        'objective_value': _objective(problem, f),
        'within_limits': within_limits(f, limits),
        **f,
      }
      for name, _, _, f in presets
    ],
    'prices': {
      'set_by_flag_usd': dict(request.prices),
      'proposal_parts': [
        part_tables.price_info(n, request.prices)
        for n in (pj['accelerator']['name'], pj['cpu']['name'])
      ],
    },
    'assumptions': robustness.assumptions(w, proposal.p, proposal.plan),
    'robustness': ranking,
    'search': _search_section(request, found),
    'proposal_json': {
      'workload': wj,
      'platform': pj,
      'plan': proposal.plj,
      'stack': sj,
    },
  }


def _proposal_section(problem, proposal: _Proposal, settings) -> dict:
  """result.json's `proposal`: platform and plan JSON, objective, limits,
  plan source, constraint values, figures with the auto plan, figures,
  the bill (with its racks at `settings.rack_kw` kW per rack, if given)
  and its TCO (`terms.tco` at the settings' life, price and PUE)."""
  rack_w = settings.rack_kw * 1e3 if settings.rack_kw else None
  fig = proposal.fig
  return {
    'platform': proposal.pj,
    'plan': proposal.plj,
    'objective_value': _objective(problem, proposal.fig),
    'within_limits': within_limits(proposal.fig, proposal.limits),
    'plan_source': proposal.plan_source,
    'constraint_violations': dict(
      zip(gradient.CONSTRAINTS, proposal.g_best.tolist(), strict=True)
    ),
    'with_auto_plan': proposal.auto_fig,
    **proposal.fig,
    # The bill, the network apart from the nodes (model.report).
    'capex_breakdown': report.capex_breakdown(proposal.p, rack_w),
    'tco': terms.tco(
      fig['capex_usd'],
      fig['power_w'],
      settings.life_years,
      settings.usd_per_kwh,
      settings.pue,
    ),
  }


def tco_line(t: dict) -> str:
  """The TCO of a proposal (`terms.tco`), one line, with its settings."""
  return (
    f'TCO ${t["total_usd"]:,.0f} over {t["life_years"]:g} years '
    f'(--life_years): capex ${t["capex_usd"]:,.0f} + energy '
    f'${t["energy_usd"]:,.0f} ({t["energy_kwh"] / 1e3:,.0f} MWh at the '
    f'maximum power x PUE {t["pue"]:g} (--pue), ${t["usd_per_kwh"]:g}/kWh '
    '(--usd_per_kwh))'
  )


def _continuous_section(found, continuous: tuple) -> dict:
  """result.json's `continuous_optimum`: the relaxed design's platform and
  plan JSON, its relaxed axes, objective, constraint values and figures."""
  problem, res, space = found.problem, found.result, found.problem.space
  pc, planc, cfig = continuous
  return {
    'platform': schema.platform_to_json(pc),
    'plan': schema.plan_to_json(planc),
    'relaxed_axes': design_space.describe_relaxed(
      space, res.continuous_z[: space.num_hw_coords]
    ),
    'objective_value': _objective(problem, cfig),
    'constraint_violations': dict(
      zip(gradient.CONSTRAINTS, res.continuous_g.tolist(), strict=True)
    ),
    **cfig,
  }


def _search_section(request: _Request, found) -> dict:
  """result.json's `search`: the method, its configuration, evaluations,
  rejections, the design space and each trainer's own search."""
  config, res, space = request.config, found.result, found.problem.space
  return {
    'method': 'augmented-Lagrangian Adam over the relaxation, snapping '
    'to 2^H neighbouring roundings of the best starts, plan polish',
    'starts': config.starts,
    'steps': config.steps,
    'snap_top': config.snap_top,
    'evaluations': res.evaluations,
    # Snapped designs the concrete buildability check rejected, per rule.
    'rejected_unbuildable': dict(sorted(res.rejected.items())),
    'design_space_size': space.size,
    'trainer': space.trainer,
    # Each trainer's own search: its best objective value (None when
    # nothing was feasible), evaluations and design space size.
    'per_trainer': found.per_trainer,
    'seed': config.seed,
    'wall_s': 'in timing.json (kept out so result.json is reproducible)',
  }


def _hw(pj: dict) -> str:
  """The shape of a platform (JSON) in a few characters."""
  acc = pj['accelerator']['name'].split(' ')[0]
  if pj['name'] == 'continuous_optimum':  # a mixture: "w1 part1 + w2 part2"
    acc = '+'.join(
      f'{t.split()[1].split("-")[0]}:{float(t.split()[0]):.2f}'
      for t in pj['accelerator']['name'].split(' + ')[:2]
    )
  if pj['trainer'] == 'accelerator':
    return (
      f'{pj["nodes"]:.0f}x({pj["sockets_per_node"]:.0f}S+'
      f'{pj["accelerators_per_node"]:.0f} {acc})'
    )
  return f'{pj["nodes"]:.0f}x({pj["sockets_per_node"]:.0f}S CPU trainer)'


def why_not(fig: dict, limits: dict) -> str:
  """Why figures `fig` are not within `limits` (a result's `limits`):
  over the capex budget by how much, over the power limit, a node over a
  rack, tables that do not fit in HBM or DDR; '' when they are within
  them."""
  return shared.why_not(
    fig, limits['budget_usd'], limits['power_w'], limits.get('rack_w')
  )


def _rows(result: dict):
  """(name, platform JSON, figures) of every row of the table."""
  prop, cont = result['proposal'], result['continuous_optimum']
  rows = [
    ('PROPOSAL', prop['platform'], prop),
    ('  (auto plan)', prop['platform'], prop['with_auto_plan']),
    ('continuous optimum', cont['platform'], cont),
  ]
  for r in result['presets']:
    rows.append(
      (r['name'], schema.platform_to_json(presets_lib.get(r['name'])), r)
    )
  return rows


def price_words(info: dict) -> str:
  """A part's price and where it comes from, from its
  `part_tables.price_info`: '20,000 USD (set by --price; catalog 30,000,
  low confidence)'."""
  low = ', low confidence' if info['low_confidence'] else ''
  if info['set_by_flag']:
    why = f'set by --price; catalog {info["catalog_price_usd"]:,.0f}{low}'
  elif info['price_source'].startswith('catalog'):
    why = 'catalog' + low
  else:  # derived or assumed in codesign.catalog
    why = info['price_source'].split(':')[0] + low
  return f'{info["price_usd"]:,.0f} USD ({why})'


def parts_line(pj: dict, prices=()) -> str:
  """The proposal's parts with the assumptions that price them: price each
  (USD, an accelerator with its HBM; `prices` as the user set them,
  `part_tables.Prices`), power (W) and the catalog's confidence, which
  says how far to trust the price (`codesign/data/catalog.json`)."""
  raw = catalog.raw()
  acc, cpu = pj['accelerator']['name'], pj['cpu']['name']
  out = []
  if acc in raw['accelerators'] and pj['trainer'] == 'accelerator':
    a = catalog.accelerator(acc)
    info = part_tables.price_info(acc, prices)
    out.append(
      f'{acc} {price_words(info)}, {float(a.power):,.0f} W '
      f'(confidence: {info["confidence"]})'
    )
  if cpu in raw['cpus']:
    c = catalog.cpu(cpu, 64)
    info = part_tables.price_info(cpu, prices)
    out.append(
      f'{cpu} {price_words(info)}, {float(c.power):,.0f} W '
      f'(confidence: {info["confidence"]})'
    )
  return 'parts (price each, power, catalog confidence): ' + '; '.join(out)


def table(result: dict) -> str:
  """The proposal beside the continuous optimum and the presets, with the
  bottleneck of each and the reason beside a NO, as plain text (a `run`
  result; with its `timing`, the search's wall time too)."""
  objective, limits = result['objective'], result['limits']

  def row(name, pj, fig):
    value = objective_of(
      fig, objective, limits['samples'], limits.get('energy_usd_per_w', 0.0)
    )
    ok = 'yes' if within_limits(fig, limits) else 'NO'
    reason = '' if ok == 'yes' else f' ({why_not(fig, limits)})'
    return (
      f'{name:22s} {_hw(pj):34s} {fig["throughput_samples_per_s"]:>12,.0f} '
      f'{fig["capex_usd"]:>12,.0f} {fig["power_w"]:>9,.0f} '
      f'{value:>10.4g} {ok:>5s}  {fig["bottleneck"]}{reason}'
    )

  lines = [
    f'{result["workload"]}: objective {objective}; limits {limits}',
    f'{"platform":22s} {"hardware":34s} {"samples/s":>12s} '
    f'{"capex $":>12s} {"power W":>9s} '
    f'{result["objective_unit"]:>10s} {"ok":>5s}  bottleneck',
    *(row(*r) for r in _rows(result)),
  ]
  pj = result['proposal']['platform']
  lines.append(
    'proposal: '
    + (
      f'{pj["accelerator"]["name"]}, '
      if pj['trainer'] == 'accelerator'
      else 'a CPU trainer (no accelerators), '
    )
    + f'{pj["cpu"]["name"]}, DDR '
    f'{pj["cpu"]["ddr_capacity_gb"]:.0f} GB/socket, {pj["nic"]["count"]:.0f}'
    f' x {pj["nic"]["bandwidth_gbit_per_s"]:.0f} Gb/s NICs per node'
  )
  if 'capex_breakdown' in result['proposal']:
    bill = result['proposal']['capex_breakdown']
    lines.append(report.capex_line(bill))
    if 'racks' in bill:
      lines.append(report.racks_line(bill['racks']))
  if 'tco' in result['proposal']:
    lines.append(tco_line(result['proposal']['tco']))
  prices = result.get('prices', {}).get('set_by_flag_usd', {})
  lines.append(parts_line(pj, tuple(sorted(prices.items()))))
  lines.extend(_honesty_lines(result))
  if 'assumptions' in result:
    lines.append(robustness.assumptions_line(result['assumptions']))
  if 'robustness' in result:
    rob = result['robustness']
    left = ''.join(f'; {x}, left out' for x in rob['left_out'])
    lines.append(f'ranking: {rob["sentence"]}{left}')
  if 'timing' in result:
    t = result['timing']
    lines.append(
      f'search: {result["search"]["evaluations"]:,} evaluations in '
      f'{t["search_wall_s"]:.1f} s (compile included); total '
      f'{t["total_wall_s"]:.1f} s'
    )
  return '\n'.join(lines)


def _honesty_lines(result: dict) -> list[str]:
  """What caps the proposal: the stack's ceiling (and whether it binds),
  and for throughput objectives how it compares with the best found."""
  out = []
  if 'ceiling' in result['proposal']:
    out.append(
      'ceiling: ' + report.ceiling_sentence(result['proposal']['ceiling'])
    )
  trim = result.get('tolerance')
  if trim:
    prop = result['proposal']
    share = prop['throughput_samples_per_s'] / trim['best_found_samples_per_s']
    tol = f'{100 * trim["tolerance"]:g}%'
    out.append(
      f'tolerance: the cheapest design within {tol} of the best the search '
      f'found ({trim["best_found_samples_per_s"]:,.0f} samples/s for '
      f'${trim["best_found_capex_usd"]:,.0f}), then, while one of at most '
      f'{proposal_search.KNEE_PRICE:g} of its price is within {tol} of it, '
      f'that one: {100 * share:.1f}% of the best for ${prop["capex_usd"]:,.0f}'
    )
  for sentence in result.get('board_violations', []):
    out.append(f'NOT SOLD: {sentence}')
  ddr = result['proposal'].get('memory', {}).get('ddr')
  if ddr and result.get('ddr'):
    out.append(
      f'DDR: {ddr["available_bytes"] / 1e9:,.0f} GB per node bought (the '
      f'least legal DIMM population that holds it; the search had '
      f'{result["ddr"]["searched_bytes_per_node"] / 1e9:,.0f} GB), the plan '
      f'keeps {ddr["required_bytes"] / 1e9:,.1f} GB there'
    )
  return out


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows): the table's rows (the proposal, with the auto plan,
  the continuous optimum, each preset) with the objective in its unit,
  whether within the limits and why not."""
  objective, limits = result['objective'], result['limits']
  header = [
    'platform',
    'hardware',
    'throughput_samples_per_s',
    'capex_usd',
    'power_w',
    f'objective_{shared.OBJECTIVE_COLUMN_UNITS[objective]}',
    'within_limits',
    'why_not',
    'bottleneck',
  ]
  rows = [
    [
      {'  (auto plan)': 'proposal with auto plan'}.get(name, name.lower()),
      _hw(pj),
      fig['throughput_samples_per_s'],
      fig['capex_usd'],
      fig['power_w'],
      objective_of(
        fig, objective, limits['samples'], limits.get('energy_usd_per_w', 0.0)
      ),
      within_limits(fig, limits),
      why_not(fig, limits),
      fig['bottleneck'],
    ]
    for name, pj, fig in _rows(result)
  ]
  return header, rows
