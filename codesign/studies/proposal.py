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

from codesign.boundary import inputs
from codesign.calibration import coverage
from codesign.core import interrupts
from codesign.core.errors import InputError
from codesign.model import convergence, planner, report, terms, whole_system
from codesign.search import (
  batching,
  buildability,
  design_space,
  gradient,
  part_tables,
  plan_space,
)
from codesign.spec import catalog, hardware, schema, user_parts
from codesign.spec import plan as plan_lib
from codesign.spec import platform_presets as presets_lib
from codesign.spec import stack as stack_lib
from codesign.spec import whole_system as whole_system_spec
from codesign.spec import workload as wl
from codesign.studies import (
  batch_choice,
  proposal_search,
  robustness,
  shared,
)

# Platform presets evaluated beside the proposal by default: today's
# systems of every class the search reaches (superchips and NVLink
# domains across hosts, HGX and OAM boards, PCIe cards) beside the
# classics the Zion paper compared (their twins, p4d beside
# dgx_a100_40gb or dgx1_v100 beside big_basin, on --presets).
PRESETS = (
  'gb200_nvl72',
  'gh200',
  'dgx_b200',
  'mi300x_8',
  'dgx_h200',
  'dgx_h100',
  'h100_pcie_8',
  'zion',
  'zionex',
  'dgx_a100_80gb',
  'big_basin',
  'cpu_2s',
)
# Unit of each objective (and of the minimum capex and power searched to
# explain an infeasible request).
OBJECTIVE_UNITS = shared.OBJECTIVE_UNITS
# Keys of `run`'s result that are not part of result.json.
EXTRA_KEYS = ('proposal_json', 'timing')
# The most one rack may draw: a liquid-cooled rack's (`terms.LIQUID_RACK_W`,
# its source there); a rack unit above an air-cooled rack's 40.8 kW
# (`terms.AIR_RACK_W`) pays its liquid cooling (`terms.cooling_capex`).
# A facility of air-cooled racks only sets --rack_kw=40.8 (many data
# centers allow 10-15 kW a rack: unanswered.io/guide/nvidia-h100-gpu-
# density-per-node-rack).
RACK_KW = terms.LIQUID_RACK_W / 1e3
# The share of usable HBM a proposal keeps free beyond the stack's own
# reserve (assumption: a few percent for what the model does not count,
# allocator fragmentation above all; --memory_headroom).
MEMORY_HEADROOM = 0.03
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
    memory_headroom: the share of each accelerator's usable HBM every
      candidate keeps free (`with_headroom`), in [0, 0.3].
    systems: the accelerator trainer's system classes, each a design
      space of its own (`design_space.SYSTEMS`: `board` SXM and OAM
      boards, `superchip` GH200 and GB200 with NVLink domains across
      hosts, `pcie` PCIe cards).
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
    catalog: a user's parts file (or its dict) joined to the catalog for
      this run (`codesign.spec.user_parts`); None: the shipped parts.
    readers: `local` (the data already on the trainers: the step alone),
      `auto` (reader nodes sized to feed the trainers, billed apart) or
      a count of reader nodes (`whole_system.WholeSystem`).
    with_failures: `true`, `false` or `auto` (counted above 64
      accelerators): the throughput is the goodput and the bill holds
      the checkpoints' storage.
    checkpoint: `full` or `incremental` (Check-N-Run).
    convergence: for `time_to_train`, the samples to the accuracy target
      from the workload's samples-to-target curve at its batch
      (`model.convergence`) in place of `samples`, where it has one.
  """

  workload: str | wl.Workload = 'zion_scale'
  objective: str = 'throughput_per_usd'
  budget_usd: float | None = 1e6
  power_w: float | None = None
  max_nodes: int = 36
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
  systems: tuple[str, ...] = design_space.SYSTEMS
  tolerance: float = proposal_search.TOLERANCE
  memory_headroom: float = MEMORY_HEADROOM
  rack_kw: float | None = RACK_KW
  life_years: float = LIFE_YEARS
  usd_per_kwh: float = USD_PER_KWH
  pue: float = PUE
  catalog: str | dict | None = None
  readers: str = 'auto'
  with_failures: str = 'auto'
  checkpoint: str = 'full'
  convergence: bool = True


def within_limits(fig: dict, limits: dict) -> bool:
  """Whether figures `fig` are feasible and within `limits` (a result's
  `limits`: budget_usd, power_w and rack_w, None for no limit; rack_w
  bounds what one rack holds whole, `rack_unit_w`, and with it the rack
  units of that unit, `rack_unit_u`, are within its rack's,
  `rack_space_u`)."""
  ok = fig['feasible']
  if limits['budget_usd']:
    ok = ok and fig['capex_usd'] <= limits['budget_usd']
  if limits['power_w']:
    ok = ok and fig['power_w'] <= limits['power_w']
  if limits.get('rack_w'):
    ok = ok and fig['rack_unit_w'] <= limits['rack_w']
    ok = ok and fig['rack_unit_u'] <= fig['rack_space_u']
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


# `--stack=any`: the accelerator stacks the published cases calibrate.
ANY_STACKS = ('torchrec', 'nvidia_pytorch', 'hugectr')


def stack_names(stack) -> tuple[str, ...]:
  """The stacks a `stack` setting names: one (a `Stack`, a preset or a
  file), `any` (`ANY_STACKS`) or a comma-separated list of them."""
  if not isinstance(stack, str):
    return (stack,)
  if stack == 'any':
    return ANY_STACKS
  names = tuple(x.strip() for x in stack.split(','))
  if len(names) > 1 and not all(names):
    raise InputError(f'--stack has an empty name: {stack!r}')
  return names


def run(
  settings: Settings,
  progress: Callable[[str], None] | None = None,
  on_step: Callable[[int, dict], None] | None = None,
) -> tuple[dict, list[dict]]:
  """The proposal for `settings` (`run_one`); with several stacks
  (`--stack=any` or a list: `stack_names`) one search per stack, the
  proposal the best of their proposals by the proposal rule
  (`shared.decide`), and `per_stack` beside it: each stack's proposal,
  its figures and the calibration cases behind them."""
  names = stack_names(settings.stack)
  if len(names) == 1:
    return run_one(settings, progress, on_step)
  progress = progress or (lambda line: None)
  runs = []
  for name in names:
    one = dataclasses.replace(settings, stack=name)
    runs.append(
      run_one(one, lambda line, n=name: progress(f'{n}: {line}'), on_step)
    )
  return best_stack(settings, names, runs)


def best_stack(settings: Settings, names, runs) -> tuple[dict, list[dict]]:
  """The result of the stack whose proposal wins by the proposal rule,
  with `per_stack` (every stack's proposal) and the metrics of all,
  each row with its `stack`."""
  props = [r['proposal'] for r, _ in runs]
  values = [p['objective_value'] if p['within_limits'] else None for p in props]
  order = shared.decide(
    values,
    [p['capex_usd'] for p in props],
    settings.objective,
    settings.tolerance
    if settings.objective in shared.THROUGHPUT_OBJECTIVES
    else None,
  )
  k = order[0] if order else 0
  result = dict(runs[k][0])
  result['per_stack'] = [
    {
      'stack': name,
      'hardware': _hw(p['platform']),
      'throughput_samples_per_s': p['throughput_samples_per_s'],
      'capex_usd': p['capex_usd'],
      'objective_value': p['objective_value'],
      'within_limits': p['within_limits'],
      'calibration': p['calibration'],
      'chosen': i == k,
    }
    for i, (name, p) in enumerate(zip(names, props, strict=True))
  ]
  metrics = [
    {**row, 'stack': name}
    for name, (_, rows) in zip(names, runs, strict=True)
    for row in rows
  ]
  return result, metrics


def stacks_table(result: dict) -> list[str]:
  """The best design per stack, one line each, and the stack the
  proposal needs."""
  rows = result.get('per_stack')
  if not rows:
    return []
  out = [
    f'{"stack":16s} {"hardware":34s} {"samples/s":>12s} {"capex $":>12s} '
    f'{result["objective_unit"]:>10s}  calibration'
  ]
  for r in rows:
    flags = '; '.join(r['calibration']['flags']) or 'covered'
    mark = ' <- proposal' if r['chosen'] else ''
    out.append(
      f'{r["stack"]:16s} {r["hardware"]:34s} '
      f'{r["throughput_samples_per_s"]:>12,.0f} {r["capex_usd"]:>12,.0f} '
      f'{r["objective_value"]:>10.4g}  {flags}{mark}'
    )
  chosen = next(r for r in rows if r['chosen'])
  out.append(
    f'stacks: the proposal needs {chosen["stack"]}: its best design wins by '
    'the proposal rule among the best design of each stack'
  )
  return out


def run_one(
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
  parts = inputs.load_catalog(settings.catalog)
  with catalog.using(parts):  # the user's parts, for this run only
    result, history = _run(settings, progress, on_step)
  if parts:
    result['user_parts'] = user_parts.as_json(parts)
  return result, history


def _run(settings, progress, on_step) -> tuple[dict, list[dict]]:
  """`run` with the user's parts in the catalog."""
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
  # A candidate the run evaluated (a preset, another design) that wins by
  # the proposal's own rule is the proposal.
  proposal, candidates = _decided(
    request, found, proposal, _candidates(request, found, proposal, presets)
  )
  ranking = _ranking(request, found, candidates, progress)
  t_total = time.perf_counter() - t_start
  result = _result(request, found, proposal, continuous, presets, ranking)
  result = {
    **result,
    **trims,
    'board_violations': _boards(proposal),
    'memory_headroom': settings.memory_headroom,
    'convergence': _convergence(request),
  }
  if settings.objective == 'time_to_train':
    result['batch'] = batch_choice.choose(
      proposal.p,
      request.w,
      _stack(request, found, proposal),
      request.system,
      lambda f: _score(found.problem, proposal.limits, f),
    )
  timing = {'search_wall_s': t_search, 'total_wall_s': t_total}
  return {**result, 'timing': timing}, found.result.history


def _convergence(request) -> dict | None:
  """result.json's `convergence`: for `time_to_train` with the setting
  on, what the workload's samples-to-target curve says at its batch
  (`convergence.point`); None otherwise."""
  settings, w = request.settings, request.w
  if settings.objective != 'time_to_train' or not settings.convergence:
    return None
  return convergence.point(w.name, w.global_batch)


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
    system: the system around the trainers (`whole_system.WholeSystem`),
      or None where it changes nothing (the step alone).
    samples: the samples `time_to_train` counts (`settings.samples`, or
      the samples to the target from the workload's curve).
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
  system: object = None
  samples: float = 1e9

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
  if not 0.0 <= settings.memory_headroom <= 0.3:
    raise InputError(
      f'memory_headroom must lie in [0, 0.3], got {settings.memory_headroom}'
    )
  stacks = proposal_search.trainer_stacks(
    *(
      with_headroom(shared.load_stack(x), settings.memory_headroom)
      for x in (settings.stack, settings.cpu_stack)
    )
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
  parts = _parts(settings)
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
    system_of(settings),
    samples_of(settings, w),
  )


def system_of(settings: Settings):
  """The `WholeSystem` of the settings, or None where it changes
  nothing (the data local and failures not counted)."""
  s = whole_system_spec.from_settings(
    settings.readers,
    settings.with_failures,
    settings.checkpoint,
    settings.samples,
  )
  return s if s.active else None


def samples_of(settings: Settings, w: wl.Workload) -> float:
  """The samples `time_to_train` counts: for that objective the samples
  to the accuracy target at the workload's batch from its curve
  (`convergence`, where it has one and the setting is on), else
  `settings.samples`."""
  point = convergence.point(w.name, w.global_batch)
  timed = settings.objective == 'time_to_train'
  if timed and settings.convergence and point is not None:
    return point['samples_to_target']
  return float(settings.samples)


def with_headroom(s: stack_lib.Stack, headroom: float) -> stack_lib.Stack:
  """Stack `s` keeping `headroom` more of each accelerator's HBM free
  than it does (`hbm_reserve`: the CUDA context's), so that a proposal's
  plan leaves a margin for what the model does not count (fragmentation,
  a larger batch, other processes); the search, its plans and the
  presets beside it see the same stack. A CPU trainer's stack is as
  given (it holds no HBM)."""
  if not headroom or tuple(s.trainers or ()) == ('cpu',):
    return s
  reserve = 1.0 - (1.0 - float(s.hbm_reserve)) * (1.0 - headroom)
  why = (
    f'{dict(s.sources).get("hbm_reserve", "the stack")}; and '
    f'{100 * headroom:g}% more kept free as a margin (--memory_headroom)'
  )
  sources = tuple((k, why if k == 'hbm_reserve' else v) for k, v in s.sources)
  return stack_lib.validate(
    dataclasses.replace(s, hbm_reserve=reserve, sources=sources)
  )


def _parts(settings: Settings) -> dict:
  """The search's part selection (`proposal_search.spaces_of`'s `parts`:
  space -> (accelerators, CPUs), and `nic_rates`), or {} for every
  modelled part."""
  for system in settings.systems:
    if system not in design_space.SYSTEMS:
      raise InputError(
        f'unknown system class {system!r}; valid choices: '
        + ', '.join(design_space.SYSTEMS)
      )
  choice = (
    tuple(settings.exclude_parts),
    tuple(settings.only_parts),
    settings.available_by,
  )
  if not any(choice):
    return {}
  trainers = proposal_search.check_trainers(tuple(settings.trainers))
  chosen = {}
  if 'accelerator' in trainers:
    chosen = part_tables.system_parts(tuple(settings.systems), *choice)
  if 'cpu' in trainers:
    chosen['cpu'] = part_tables.cpu_trainer_parts(*choice)
  parts = {'parts': chosen}
  if settings.available_by:
    parts['nic_rates'] = part_tables.nic_rates(settings.available_by)
  return parts


def _stack(request: _Request, found, proposal=None) -> stack_lib.Stack:
  """The stack of the proposal's trainer (of the search's best, without
  a proposal)."""
  if proposal is not None:
    return request.stacks[proposal.p.trainer]
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
  designs = trim.pop('designs') if trim else []
  res, ddr_trim = proposal_search.least_ddr(problem, res)
  found = dataclasses.replace(found, result=res, judged=tuple(designs))
  return found, {'tolerance': trim, 'ddr': ddr_trim}


def _search_args(request: _Request) -> tuple[dict, dict]:
  """(problem_args, space_args) of `proposal_search.search_trainers`."""
  settings = request.settings
  return (
    {
      'objective': settings.objective,
      'budget_usd': float(settings.budget_usd) if settings.budget_usd else None,
      'power_w': float(settings.power_w) if settings.power_w else None,
      'samples': request.samples,
      'system': request.system,
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
    tuple(request.settings.systems),
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
    tuple(request.settings.systems),
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
  source: str = 'search'


def _adopted(proposal: _Proposal, c: robustness.Candidate) -> _Proposal:
  """A candidate (a preset, or another design the search found) as the
  proposal, where it beats the search's best by the proposal rule; its
  constraint values are its figures' (capex, power, memory, rack; the
  buildability rows, which a concrete design states in
  `board_violations`, are not traced for it: NaN)."""
  fig, limits = c.figures, proposal.limits
  g = np.full(len(gradient.CONSTRAINTS), np.nan)
  for row, (used, limit) in enumerate(
    (
      (fig['capex_usd'], limits['budget_usd']),
      (fig['power_w'], limits['power_w']),
      _memory(fig, 'hbm'),
      _memory(fig, 'ddr'),
      (fig['rack_unit_w'], limits.get('rack_w')),
      (fig['rack_unit_u'], fig['rack_space_u'] if limits.get('rack_w') else 0),
    )
  ):
    g[row] = used / limit - 1.0 if limit else -1.0
  return _Proposal(
    limits,
    c.platform,
    c.plan,
    schema.platform_to_json(c.platform),
    schema.plan_to_json(c.plan),
    fig,
    fig,
    'auto' if c.kind == 'preset' else proposal.plan_source,
    g,
    f'{c.kind} {c.name}',
  )


def _memory(fig: dict, tier: str) -> tuple[float, float]:
  m = fig['memory'][tier]
  return m['required_bytes'], max(m['available_bytes'], 1.0)


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
  system = problem.system
  fig = report.design_figures(p_back, w, plan_back, stack, system)
  auto_plan = planner.make(w, p_back, stack)
  auto_fig = report.design_figures(p_back, w, auto_plan, stack, system)
  plan_z = res.best_plan_z
  plan_source = 'search'
  if _auto_plan_wins(problem, auto_fig, fig, limits):
    # The search's plan is never kept where the planner's auto plan (the
    # fastest of its candidate shardings) does better on the same hardware.
    plan_source = 'auto'
    plj = schema.plan_to_json(auto_plan)
    plan_back = schema.plan_from_json(plj, w)
    fig = report.design_figures(p_back, w, plan_back, stack, system)
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
  out = _Proposal(
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
  return out


def _continuous(request: _Request, found) -> tuple:
  """(platform, plan, figures) of the search's continuous optimum."""
  pc, planc = gradient.relaxed(found.problem, found.result.continuous_z)
  return (
    pc,
    planc,
    report.design_figures(
      pc, request.w, planc, _stack(request, found), found.problem.system
    ),
  )


def _presets(request: _Request, progress) -> list:
  """(name, platform, auto plan, figures) of every preset, priced as the
  proposal, in the presets' order."""
  w = request.w

  progress(f'evaluating {len(request.preset_names)} presets beside the search')

  def preset(name):
    interrupts.check()  # the search beside it failed or was stopped
    pp = part_tables.priced(presets_lib.get(name), request.prices)
    pplan, fig = shared.preset_figures(
      w, pp, request.stacks[pp.trainer], request.system
    )
    progress(f'evaluated preset {name}')
    return name, pp, pplan, fig

  # Two threads: most of a preset's evaluation is XLA compiling (outside
  # Python's lock); each is deterministic, so the order of work does not
  # change the rows, which keep the presets' order.
  return interrupts.thread_map(preset, request.preset_names, workers=2)


def _allowed(request: _Request, p: hardware.Platform) -> bool:
  """Whether a preset's parts are among those the user left to the search
  (--only_parts, --exclude_parts, --available_by): a preset of other
  parts is printed beside the proposal but does not compete with it."""
  chosen = request.parts.get('parts')
  if not chosen:
    return True
  acc = {n for a, _ in chosen.values() for n in a}
  cpu = {n for _, c in chosen.values() for n in c}
  if p.trainer == 'cpu':
    return p.cpu.name in cpu
  return p.accelerator.name in acc and p.cpu.name in cpu


def _judged(found, score) -> list[robustness.Candidate]:
  """The designs the trim judged beside the proposal (`Found.judged`:
  the knee's path and neighbours), with their final figures, where
  within the limits: so that the ranking applies the proposal rule to
  the designs it was applied to."""
  out, seen = [], set()
  for index, plan_z in found.judged:
    p, plan, fig = proposal_search.final_design(found.problem, index, plan_z)
    d = design_space.describe_index(found.problem.space, index)
    name = f'{shared.design_name(d)} ${fig["capex_usd"] / 1e6:.2f}M'
    if score(fig) is not None and name not in seen:
      seen.add(name)
      out.append(robustness.Candidate(name, 'found', p, plan, fig))
  return out


def _other_spaces(found, score) -> list[robustness.Candidate]:
  """The best design of every other space searched (another system class,
  or the CPU trainer), with its final figures, where within the limits:
  the search ranks spaces by their own evaluation, the proposal rule by
  the figures the run prints."""
  out = []
  for problem, res in found.searches:
    if problem is found.problem or not res.best_feasible:
      continue
    p, plan, fig = proposal_search.final_design(
      problem, res.best_index, res.best_plan_z
    )
    if score(fig) is None:
      continue
    d = design_space.describe_index(problem.space, res.best_index)
    name = f'{shared.design_name(d)} ({problem.space.system})'
    out.append(robustness.Candidate(name, 'found', p, plan, fig))
  return out


def _candidates(request, found, proposal: _Proposal, presets) -> list:
  """The candidates the proposal is judged against, the proposal first:
  other designs the search found, the designs the trim judged, each
  other space's best and the presets within the limits (of the user's
  parts)."""
  problem = found.problem

  def score(f):
    return _score(problem, proposal.limits, f)

  candidates = [
    robustness.Candidate(
      'proposal', 'proposal', proposal.p, proposal.plan, proposal.fig
    ),
    *robustness.found_designs(problem, found.result, score),
    *_judged(found, score),
    *_other_spaces(found, score),
  ]
  for name, pp, pplan, f in presets:
    if score(f) is not None and _allowed(request, pp):
      candidates.append(robustness.Candidate(name, 'preset', pp, pplan, f))
  return candidates


def _decided(request, found, proposal: _Proposal, candidates) -> tuple:
  """(proposal, candidates): where the proposal rule prefers another
  candidate over the search's proposal at the nominal numbers, that one
  is the proposal (first, named `proposal`) and the search's own stays a
  candidate (`search's best ...`), so that the ranking judges the same
  set."""
  problem = found.problem
  values = [_score(problem, proposal.limits, c.figures) for c in candidates]
  capex = [c.figures['capex_usd'] for c in candidates]
  order = shared.decide(
    values, capex, problem.objective, request.settings.tolerance
  )
  if not order or order[0] == 0:
    return proposal, candidates
  won = candidates[order[0]]
  old = candidates[0]
  d = design_space.describe_index(problem.space, found.result.best_index)
  rest = [c for i, c in enumerate(candidates) if i not in (0, order[0])]
  return _adopted(proposal, won), [
    dataclasses.replace(won, name='proposal', kind='proposal'),
    *rest,
    dataclasses.replace(
      old, name=f"search's best {shared.design_name(d)}", kind='found'
    ),
  ]


def _ranking(request, found, candidates, progress) -> dict:
  """`robustness.check` of the candidates (the proposal first) under
  perturbed prices and skew, with the perturbations it left out
  (`left_out`)."""
  problem = found.problem
  limits = _limits(problem, request.max_nodes)

  def score(f):
    return _score(problem, limits, f)

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
    problem.objective,
    request.prices,
    request.settings.tolerance,
    request.system,
  )
  return {**rob, 'left_out': left_out}


def _result(request, found, proposal, continuous, presets, ranking) -> dict:
  """`run`'s result without `timing`: the keys of result.json and
  `proposal_json`."""
  w, stack, pj = request.w, _stack(request, found, proposal), proposal.pj
  problem, limits = found.problem, proposal.limits
  wj, sj = schema.workload_to_json(w), schema.stack_to_json(stack)
  return {
    'workload': w.name,
    'stack': stack.name,
    # The stack each trainer was searched (and its presets evaluated) with.
    'stacks': {
      t: request.stacks[t].name
      for t in dict.fromkeys(v['trainer'] for v in found.per_space.values())
    },
    'objective': problem.objective,
    'objective_unit': OBJECTIVE_UNITS[problem.objective],
    'limits': limits,
    'proposal': _proposal_section(
      problem, proposal, request.settings, stack.name
    ),
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


def _coverage(proposal: _Proposal, stack_name: str) -> dict:
  p = proposal.p
  part = p.accelerator.name if p.trainer == 'accelerator' else p.cpu.name
  return coverage.coverage(stack_name, part, p.trainer, float(p.nodes))


def _proposal_section(
  problem, proposal: _Proposal, settings, stack_name: str
) -> dict:
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
    # `search`, or the candidate of the run that beat the search's best
    # by the proposal rule (`preset NAME`, `found SHAPE`).
    'source': proposal.source,
    'rule': shared.rule_sentence(
      problem.objective,
      settings.tolerance
      if problem.objective in shared.THROUGHPUT_OBJECTIVES
      else None,
    ),
    'constraint_violations': {
      k: None if np.isnan(v) else v
      for k, v in zip(gradient.CONSTRAINTS, proposal.g_best.tolist())
    },
    'with_auto_plan': proposal.auto_fig,
    **proposal.fig,
    # The published cases behind the proposal's figures, and what it lies
    # outside of (`calibration.coverage`).
    'calibration': _coverage(proposal, stack_name),
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
    'snap_top': gradient.snap_top_of(config, space),
    'evaluations': res.evaluations,
    # Snapped designs the concrete buildability check rejected, per rule.
    'rejected_unbuildable': dict(sorted(res.rejected.items())),
    'design_space_size': space.size,
    'trainer': space.trainer,
    'system': space.system,
    # Each space's own search (a system class of the accelerator trainer,
    # or the CPU trainer): its trainer, best objective value (None when
    # nothing was feasible), evaluations and design space size.
    'per_space': found.per_space,
    'seed': config.seed,
    'wall_s': 'in timing.json (kept out so result.json is reproducible)',
  }


def _hw(pj: dict) -> str:
  """The shape of a platform (JSON) in a few characters, with its DDR
  and NICs (`shared.design_name`)."""
  design = shared.platform_design(pj)
  if pj['name'] == 'continuous_optimum':  # a mixture: "w1 part1 + w2 part2"
    design['accelerator'] = '+'.join(
      f'{t.split()[1].split("-")[0]}:{float(t.split()[0]):.2f}'
      for t in pj['accelerator']['name'].split(' + ')[:2]
    )
    return shared.design_name(design, short=False)
  design['accelerator'] = design['accelerator'].split(' ')[0]
  return shared.design_name(design, short=False)


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
  result; with its `timing`, the search's wall time too; its parts read
  with the user's it records)."""
  with catalog.using(user_parts.from_json(result.get('user_parts'))):
    return _table(result)


def _table(result: dict) -> str:
  lines = [*stacks_table(result), *_figure_lines(result)]
  pj = result['proposal']['platform']
  lines.append(proposal_line(result))
  if 'capex_breakdown' in result['proposal']:
    bill = result['proposal']['capex_breakdown']
    lines.append(report.capex_line(bill))
    if 'racks' in bill:
      lines.append(report.racks_line(bill['racks']))
  if 'system' in result['proposal']:
    lines.extend(whole_system.lines(result['proposal']['system']))
  if result.get('convergence'):
    lines.append(convergence.sentence(result['convergence']))
  if result.get('batch'):
    lines.append(result['batch']['sentence'])
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


def proposal_line(result: dict) -> str:
  """What the proposal is, one line: its system class, parts, memory,
  scale-up domain and NICs."""
  pj = result['proposal']['platform']
  system = shared.system_of(pj)
  source = result['proposal'].get('source', 'search')
  head = 'proposal' + (f' ({source})' if source != 'search' else '') + ': '
  if pj['trainer'] != 'accelerator':
    head += 'a CPU trainer (no accelerators), '
  else:
    what = {'board': 'board', 'superchip': 'superchip', 'pcie': 'PCIe-card'}
    head += f'{what.get(system, "accelerator")} system, '
    head += f'{pj["accelerator"]["name"]}, '
  cpu = pj['cpu']
  memory = 'LPDDR5X soldered' if cpu.get('memory') == 'soldered' else 'DDR'
  fab = pj['fabric']
  hosts = fab.get('hosts_per_domain', 1.0)
  domain = ''
  if pj['trainer'] == 'accelerator':
    gpus = hosts * pj['accelerators_per_node']
    domain = (
      f', scale-up domain of {gpus:g} accelerators on {fab["topology"]}'
      + (f' across {hosts:g} hosts' if hosts > 1 else ' in one node')
    )
  return (
    head + f'{cpu["name"]}, {memory} {cpu["ddr_capacity_gb"]:.0f} GB/socket'
    f'{domain}, {pj["nic"]["count"]:.0f} x '
    f'{pj["nic"]["bandwidth_gbit_per_s"]:.0f} Gb/s NICs per node'
  )


# A plan that leaves less of the usable HBM free than this is flagged.
ZERO_MARGIN = 0.005


def hbm_margin_line(hbm: dict, headroom: float) -> str:
  """The proposal's HBM per accelerator against what its stack leaves
  usable (its reserve and the headroom kept), one line; ZERO MARGIN where
  the plan fills it."""
  req, avail = hbm['required_bytes'], hbm['available_bytes']
  free = 1.0 - req / avail
  head = 'HBM: ZERO MARGIN: ' if free < ZERO_MARGIN else 'HBM: '
  return (
    f'{head}{req / 1e9:,.1f} of {avail / 1e9:,.1f} GB usable per '
    f'accelerator ({100 * free:.1f}% free; {100 * headroom:g}% of it kept '
    'free beyond the stack reserve by --memory_headroom)'
  )


def _win_margin(result: dict) -> tuple[float, str] | None:
  """(relative margin, name) by which the proposal's objective beats the
  next candidate of its ranking, or None without one."""
  rob = result.get('robustness')
  if not rob:
    return None
  rows = [c for c in rob['candidates'] if c['objective_value'] is not None]
  if len(rows) < 2 or rows[0]['name'] != 'proposal':
    return None
  up = gradient.maximized(result['objective'])
  best = rows[0]['objective_value']
  other = (max if up else min)(rows[1:], key=lambda c: c['objective_value'])
  v = other['objective_value']
  return (best / v - 1.0 if up else v / best - 1.0), other['name']


def _figure_lines(result: dict) -> list[str]:
  """The limits in words, then a row per design: hardware, samples/s,
  time to train, capex, power, objective, within the limits (why not)
  and bottleneck."""
  objective, limits = result['objective'], result['limits']

  def row(name, pj, fig):
    value = objective_of(
      fig, objective, limits['samples'], limits.get('energy_usd_per_w', 0.0)
    )
    ok = 'yes' if within_limits(fig, limits) else 'NO'
    reason = '' if ok == 'yes' else f' ({why_not(fig, limits)})'
    thr = fig['throughput_samples_per_s']
    return (
      f'{name:22s} {_hw(pj):46s} {thr:>12,.0f} '
      f'{report.time_to_train_text(thr, limits["samples"]):>9s} '
      f'{fig["capex_usd"]:>12,.0f} {fig["power_w"]:>9,.0f} '
      f'{value:>10.4g} {ok:>5s}  {fig["bottleneck"]}{reason}'
    )

  return [
    f'{result["workload"]}: objective {objective}; '
    + shared.limits_words(limits),
    f'{"platform":22s} {"hardware":46s} {"samples/s":>12s} '
    f'{"to train":>9s} {"capex $":>12s} {"power W":>9s} '
    f'{result["objective_unit"]:>10s} {"ok":>5s}  bottleneck',
    *(row(*r) for r in _rows(result)),
    shared.time_to_train_note(limits['samples'], flag=True)
    + '; presets with the auto plan, as evaluate',
  ]


def _honesty_lines(result: dict) -> list[str]:
  """What caps the proposal: the stack's ceiling (and whether it binds),
  and for throughput objectives how it compares with the best found."""
  out = []
  if 'ceiling' in result['proposal']:
    out.append(
      'ceiling: ' + report.ceiling_sentence(result['proposal']['ceiling'])
    )
  if 'calibration' in result['proposal']:
    prop = result['proposal']
    out.append(
      coverage.sentence(prop['calibration'], prop['throughput_samples_per_s'])
    )
    margin = _win_margin(result)
    half = prop['calibration'].get('band')
    if margin and half is not None and half > margin[0]:
      out.append(
        f'band: the band (+-{100 * half:.0f}%) is wider than the margin the '
        f'proposal wins by ({100 * margin[0]:.1f}% over {margin[1]}): the '
        'model cannot tell them apart'
      )
  trim = result.get('tolerance')
  if trim:
    prop = result['proposal']
    share = prop['throughput_samples_per_s'] / trim['best_found_samples_per_s']
    out.append(
      f'rule: {trim["rule"]}; the proposal gives {100 * share:.1f}% of the '
      f'fastest design judged ({trim["best_found_samples_per_s"]:,.0f} '
      f'samples/s for ${trim["best_found_capex_usd"]:,.0f}) for '
      f'${prop["capex_usd"]:,.0f}'
    )
  for sentence in result.get('board_violations', []):
    out.append(f'NOT SOLD: {sentence}')
  hbm = result['proposal'].get('memory', {}).get('hbm')
  if hbm and hbm['available_bytes'] > 0:
    out.append(hbm_margin_line(hbm, result.get('memory_headroom', 0.0)))
  ddr = result['proposal'].get('memory', {}).get('ddr')
  soldered = result['proposal']['platform']['cpu'].get('memory') == 'soldered'
  if ddr and soldered:
    out.append(
      f'memory: {ddr["available_bytes"] / 1e9:,.0f} GB of LPDDR5X per node, '
      'soldered beside each Grace (no DIMMs to choose); the plan keeps '
      f'{ddr["required_bytes"] / 1e9:,.1f} GB there'
    )
  elif ddr and result.get('ddr'):
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
