"""The search behind a proposal: one design space per trainer, the best.

`studies.proposal.run` asks this module for the best buildable design:
`search_trainers` builds the design space of each trainer the user
allows (`accelerator`: catalog accelerators with CPU hosts; `cpu`: CPU
sockets that train alone, as the paper's CPU-only baseline), with the
user's parts and prices, runs `search.gradient_search` on each and keeps
the best feasible design (the objective, feasible first); each trainer
with its own stack (`trainer_stacks`), its parts kept to the makers the
stack runs on (`vendor_parts`). Then `cheapest_within` (throughput
objectives: the cheapest design within the tolerance of the best found,
then down to the knee, where a third more money buys the tolerance)
and `least_ddr` (the least legal DDR that holds what the plan keeps
there). `explain_infeasible` says in one sentence why nothing was
feasible. No I/O.
"""

import dataclasses
import itertools
from collections.abc import Callable

import jax
import numpy as np

from codesign.core import interrupts
from codesign.core.errors import InputError
from codesign.model import planner, report
from codesign.model import terms as ct
from codesign.search import (
  design_space,
  gradient,
  part_tables,
  plan_space,
  snapping,
)
from codesign.spec import catalog
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import TRAINERS
from codesign.spec.stack import Stack
from codesign.studies import shared


@dataclasses.dataclass(frozen=True)
class Found:
  """The best design of each trainer's search and the winner.

  problem, result: the winning space's search problem and result.
  per_space: space label (`space_label`) -> its trainer, best objective
  value (None when infeasible), evaluations and design space size.
  searches: (problem, result) of every space, in order.
  judged: (index, plan_z) of the designs the trim judged beside the
  proposal (`cheapest_within`), which the ranking judges too.
  """

  problem: gradient.Problem
  result: gradient.Result
  per_space: dict
  searches: tuple
  judged: tuple = ()


def check_trainers(trainers: tuple[str, ...]) -> tuple[str, ...]:
  """The trainers, checked (one sentence for an unknown one)."""
  if not trainers:
    raise InputError('--trainers needs at least one of: ' + ', '.join(TRAINERS))
  for t in trainers:
    if t not in TRAINERS:
      raise InputError(
        f'unknown trainer {t!r}; valid choices: ' + ', '.join(TRAINERS)
      )
  return tuple(dict.fromkeys(trainers))


def trainer_stacks(stack: Stack, cpu_stack: Stack) -> dict:
  """trainer -> the stack that trains it: `stack` the accelerators,
  `cpu_stack` the CPU trainer; one sentence when one cannot."""
  stacks = {'accelerator': stack, 'cpu': cpu_stack}
  for trainer, s in stacks.items():
    why = stack_lib.mismatch(s, trainer, None)
    if why is not None:
      flag = '--stack' if trainer == 'accelerator' else '--cpu_stack'
      raise InputError(f'{why}; pass another {flag}')
  return stacks


def vendor_parts(
  space_args: dict, trainer: str, s: Stack, system: str = 'board'
) -> dict:
  """`space_args` with the part axis that trains (accelerators, or the
  CPUs of a CPU trainer) kept to the makers stack `s` runs on (the
  default parts of `system` where `space_args` names none)."""
  acc, cpu = part_tables.default_parts('board' if system == 'cpu' else system)
  key = 'cpus' if trainer == 'cpu' else 'accelerators'
  names = space_args.get(key) or (cpu if trainer == 'cpu' else acc)
  kept = tuple(n for n in names if catalog.vendor(n) in (None, *s.vendors))
  if kept == tuple(names) and key not in space_args:
    return space_args  # nothing dropped: the default space as it was
  if not kept:
    raise InputError(
      f'stack {s.name!r} runs on none of the {key} left to search (it runs '
      'on: ' + ', '.join(s.vendors) + ')'
    )
  return {**space_args, key: kept * (2 if len(kept) == 1 else 1)}


def space_label(space) -> str:
  """The name of a design space in a result: its system class (`board`,
  `superchip`, `pcie`) or `cpu` for the CPU trainer's."""
  return space.system


def spaces_of(trainers, systems, space_args: dict) -> list[tuple]:
  """(trainer, system, make_space arguments) of every space to search:
  the accelerator trainer's in each of `systems` whose parts the user
  left (`space_args['parts']`: system -> (accelerators, CPUs), absent:
  every system's defaults), and the CPU trainer's."""
  parts = space_args.get('parts')
  base = {k: v for k, v in space_args.items() if k != 'parts'}
  out = []
  for trainer in check_trainers(trainers):
    for system in systems if trainer == 'accelerator' else ('cpu',):
      if parts is not None and system not in parts:
        continue
      args = dict(base)
      if parts is not None:
        args['accelerators'], args['cpus'] = parts[system]
      out.append((trainer, system, args))
  if not out:
    raise InputError('no design space is left to search')
  return out


def make_problems(
  w: wl.Workload,
  stacks: dict,
  problem_args: dict,
  space_args: dict,
  trainers: tuple[str, ...],
  systems: tuple[str, ...] = ('board',),
) -> list:
  """The search problem of each design space (`search_trainers`'
  arguments, `spaces_of`): an accelerator space of a system class whose
  parts the stack runs on none of is left out (the board's is refused)."""
  problems = []
  for trainer, system, args in spaces_of(trainers, systems, space_args):
    s = stacks[trainer]
    try:
      args = vendor_parts(args, trainer, s, system)
    except InputError:
      if system != 'board' and trainer == 'accelerator':
        continue  # the stack runs on none of this class's parts
      raise
    space = design_space.make_space(w, trainer=trainer, system=system, **args)
    problems.append(
      gradient.check_problem(gradient.Problem(space, w, s, **problem_args))
    )
  return problems


def search_trainers(
  w: wl.Workload,
  stacks: dict,
  problem_args: dict,
  space_args: dict,
  trainers: tuple[str, ...],
  config: gradient.Config,
  progress: Callable[[str], None],
  on_step_of: Callable,
  systems: tuple[str, ...] = ('board',),
) -> Found:
  """Runs the gradient search on each design space: the accelerator
  trainer's in each system class of `systems`, and the CPU trainer's.

  Args:
    w, stacks: the workload, and trainer -> the stack that trains it
      (`trainer_stacks`); each space's parts are kept to its stack's
      vendors (`vendor_parts`).
    problem_args: `search.Problem` fields besides space, workload and stack
      (objective, budget_usd, power_w, samples).
    space_args: `design_space.make_space` arguments besides the workload,
      the trainer and the system; `parts`: system -> (accelerators, CPUs)
      the user left (`spaces_of`).
    trainers: `hardware.TRAINERS` to search.
    config: the search settings.
    progress: called with a line per search before they start.
    on_step_of: objective -> per-chunk callback of the search (or None);
      its metrics get the search's `trainer` (its space's label).
    systems: the accelerator trainer's system classes
      (`design_space.SYSTEMS`).

  Returns:
    `Found`: the best feasible design over the spaces (a search with no
    feasible design loses to one with; among infeasible ones the first).
  """
  problems = make_problems(
    w, stacks, problem_args, space_args, trainers, systems
  )
  gradient.check_memory(problems, config)  # the searches run side by side
  for problem in problems:
    space = problem.space
    progress(
      f'searching {space.size:,} buildable {_what(space)} platforms (and '
      f'their plans) for {w.name} with {problem.stack.name}, objective '
      f'{problem.objective}, '
      f'{space_config(config, space).starts} starts x {config.steps} steps on '
      f'{len(jax.devices())} device(s)'
    )

  def run(problem):
    report = labelled(on_step_of(problem.objective), problem)
    own = space_config(config, problem.space)
    return gradient.gradient_search(problem, own, progress=report)

  # The searches run in threads: most of a search is XLA compiling, which
  # runs outside Python's lock, so two searches compile on two cores at
  # once. Each search is deterministic, so the result does not depend on
  # the interleaving.
  results = interrupts.thread_map(run, problems, workers=len(problems))
  best, per = None, {}
  for problem, res in zip(problems, results, strict=True):
    per[space_label(problem.space)] = {
      'trainer': problem.space.trainer,
      'objective_value': res.best_value if res.best_feasible else None,
      'evaluations': res.evaluations,
      'design_space_size': problem.space.size,
    }
    if best is None or _better(problem, res, best[1]):
      best = (problem, res)
  return Found(best[0], best[1], per, tuple(zip(problems, results)))


# The starts of the superchip and PCIe-card spaces, a share of the
# board space's: theirs are smaller (38,880 and 1.9 million designs
# against 5.4 million at 36 nodes) and their parts fewer (2 and 4
# against 9), so fewer starts cover them.
SMALL_SPACE_STARTS = 0.25


def space_config(config: gradient.Config, space) -> gradient.Config:
  """`config` for `space`: the superchip and PCIe-card spaces with
  `SMALL_SPACE_STARTS` of the starts, whole blocks, at least one."""
  if space.system not in ('superchip', 'pcie'):
    return config
  blocks = max(1, round(config.starts * SMALL_SPACE_STARTS / config.block))
  starts = min(config.starts, blocks * config.block)
  return dataclasses.replace(config, starts=starts)


def labelled(report, problem):
  """A search's per-chunk callback `report` (or None) whose metrics carry
  the label of `problem`'s space as `trainer`."""
  if report is None:
    return None
  label = space_label(problem.space)
  return lambda step, m: report(step, {**m, 'trainer': label})


# How a progress line names each space's platforms.
_WHAT = {
  'board': 'SXM/OAM-board',
  'superchip': 'superchip (GH200/GB200, NVLink domains across hosts)',
  'pcie': 'PCIe-card',
  'cpu': 'CPU-trainer',
}


def _what(space) -> str:
  return _WHAT[space.system]


def _better(problem, res, other) -> bool:
  if res.best_feasible != other.best_feasible:
    return res.best_feasible
  if not res.best_feasible:
    return False
  if gradient.maximized(problem.objective):
    return res.best_value > other.best_value
  return res.best_value < other.best_value


def explain_infeasible(found: Found, config, max_nodes, on_step, progress):
  """One sentence: which constraint no buildable platform of any trainer
  meets, by how much (a budget: the cheapest or leanest platform that
  holds the tables, searched over every trainer without the budget)."""
  g = found.result.best_g
  problem = found.problem
  worst = gradient.CONSTRAINTS[int(g.argmax())]
  if worst in ('capex', 'power'):
    # The cheapest (or leanest) platform that holds the tables, found by the
    # same searches without the budget.
    progress(f'no feasible platform; searching the minimum {worst}')
    need = None
    for p, _ in found.searches:
      free = dataclasses.replace(
        p, objective=worst, budget_usd=None, power_w=None
      )
      report = labelled(on_step(worst), free)
      low = gradient.gradient_search(free, config, progress=report)
      if low.best_feasible and (need is None or low.best_value < need):
        need = low.best_value
    if need is not None:
      if worst == 'capex':
        limit = problem.budget_usd
        return (
          f'the capex budget of ${limit:,.0f} cannot be met: the cheapest '
          f'buildable platform found that holds the tables costs '
          f'${need:,.0f}, ${need - limit:,.0f} ({100 * (need / limit - 1):.0f}'
          '%) over the budget'
        )
      limit = problem.power_w
      return (
        f'the power budget of {limit:,.0f} W cannot be met: the leanest '
        f'buildable platform found that holds the tables draws {need:,.0f} '
        f'W, {need - limit:,.0f} W ({100 * (need / limit - 1):.0f}%) over '
        'the budget'
      )
  return (
    'no buildable platform within the limits was found: '
    + shared.violation_sentence(problem, g)
    + f' at best (max_nodes={max_nodes})'
  )


# A throughput proposal is the cheapest design within this share of the
# best found (--tolerance): a design that buys 1% more throughput for a
# third more money is over-spending; then down to the knee
# (`shared.KNEE_PRICE`, `shared.decide`).
TOLERANCE = 0.02
# Axes shrunk to find a cheaper design of about the same throughput, and
# the axis grown with them: fewer nodes may hold their tables with more
# DDR (the least DDR that holds them is bought afterwards, `least_ddr`).
_SHRUNK_AXES = ('nodes', 'accelerators_per_node')
_GROWN_AXES = ('ddr_per_channel',)
_TRIM_BASES = 4  # the proposal and up to this many other found designs
# Designs of the trim's cost-throughput frontier judged with their final
# plans (the concrete platform, the better of its searched and auto plans)
# beside the rule's choice on the screened figures: those nearest it in
# price.
FRONTIER = 12


def _throughput(problem, value):
  if problem.objective == 'time_to_train':
    return problem.samples / np.asarray(value)
  return np.asarray(value)


def shrunk_designs(problem, res) -> tuple[np.ndarray, np.ndarray]:
  """(index, plan_z) of the best found designs (the proposal first) and
  every variant with fewer nodes or accelerators per node (grid values at
  or below each design's own) and as much DDR per channel or more,
  distinct."""
  bases = [(res.best_index, res.best_plan_z)]
  if res.top_index is not None:
    ok = np.flatnonzero(res.top_feasible)[:_TRIM_BASES]
    bases += [(res.top_index[k], res.top_plan_z[k]) for k in ok]
  axes = [design_space.HW_AXES.index(a) for a in _SHRUNK_AXES + _GROWN_AXES]
  sizes = problem.space.sizes
  seen, index, plan_z = set(), [], []
  for idx, pz in bases:
    ranges = [range(int(idx[a]) + 1) for a in axes[: len(_SHRUNK_AXES)]]
    ranges += [range(int(idx[a]), sizes[a]) for a in axes[len(_SHRUNK_AXES) :]]
    for values in itertools.product(*ranges):
      new = np.array(idx, dtype=np.int32)
      new[axes] = values
      key = (*new.tolist(), *np.round(np.asarray(pz), 12).tolist())
      if key not in seen:
        seen.add(key)
        index.append(new)
        plan_z.append(np.asarray(pz, dtype=np.float64))
  return np.stack(index), np.stack(plan_z)


def auto_twin(problem):
  """`problem` in plan mode `auto`: the HBM fractions follow the planner's
  rule for each platform (`planner.fit_hbm_traced`), the sharding stays
  the problem's (fixed, or per table as the plan vector's weights)."""
  space = dataclasses.replace(problem.space, plan_mode='auto')
  return dataclasses.replace(problem, space=space)


def _sharding_variants(problem, plan_z: np.ndarray) -> np.ndarray:
  """(N, V, S) the sharding coordinates each design is tried with under
  the auto HBM rule: its own (searched) sharding and one sharding for
  every table, each of `plan_space.CHOICES` (V = 1 + K); (N, 1, 0) when
  the sharding is fixed."""
  space = problem.space
  n = len(plan_z)
  if space.sharding != plan_space.SEARCH:
    return np.zeros((n, 1, 0))
  own = np.asarray(plan_z)[:, plan_space.leaf_count(space) :]
  k = len(plan_space.CHOICES)
  uniform = np.tile(np.eye(k), (1, space.num_tables))  # (K, T*K)
  return np.concatenate(
    [own[:, None], np.broadcast_to(uniform, (n, *uniform.shape))], axis=1
  )


def own_plans(problem, index, plan_z) -> dict:
  """Every design (N, H) evaluated with its own plan, not one copied from
  another design: the plan it comes with (`plan_z`) and the planner's HBM
  rule for its platform (`auto_twin`) under its own sharding and under
  each uniform sharding (`_sharding_variants`); per design the best of
  them (feasible first, then the objective's loss).

  Returns:
    dict of `gradient.evaluate_indices`' keys (N,) for that plan, and
    `variant` (N,): -1 for the plan it came with, else v, the auto plan
    with sharding `shardings[:, v]`; `shardings` (N, V, S).
  """
  own = gradient.evaluate_indices(problem, index, plan_z)
  twin = auto_twin(problem)
  shardings = _sharding_variants(problem, plan_z)
  n, v = shardings.shape[:2]
  auto = gradient.evaluate_indices(
    twin, np.repeat(np.asarray(index), v, axis=0), shardings.reshape(n * v, -1)
  )
  keys = ('loss', 'g', 'value', 'feasible')
  every = {  # (N, 1 + V, ...): the plan it came with first
    k: np.concatenate(
      [own[k][:, None], auto[k].reshape(n, v, *auto[k].shape[1:])], axis=1
    )
    for k in keys
  }
  rank = np.where(every['feasible'], every['loss'], np.inf)
  pick = np.argmin(rank, axis=1)  # the first when none is feasible
  out = {k: every[k][np.arange(n), pick] for k in keys}
  out['variant'] = pick - 1
  out['shardings'] = shardings
  return out


def _written(problem, index, plan_z, ev, row) -> np.ndarray:
  """The plan coordinates of design `row` in `problem`'s own space: its
  plan_z, or its auto plan written out (HBM fractions and shardings)."""
  v = int(ev['variant'][row])
  if v < 0:
    return np.asarray(plan_z[row], dtype=np.float64)
  _, plan = gradient.buildable(
    auto_twin(problem), index[row], ev['shardings'][row, v]
  )
  return plan_space.vector_of(problem.space, plan)


def cheapest_within(problem, res, tolerance: float = TOLERANCE):
  """For a throughput objective (`throughput`, `time_to_train`): the
  proposal rule (`shared.decide`: the cheapest design within `tolerance`
  of the fastest, then down to the knee) among the search's best designs
  and their variants with fewer nodes or accelerators per node and as
  much DDR or more (`shrunk_designs`), judged as the proposal is: the
  variants are screened by the search's own evaluation with their own
  plans (`own_plans`), and those on the cost-throughput frontier
  (`FRONTIER` of them) are judged by their final figures (`final_figures`:
  the concrete platform with the better of its plan and the auto plan),
  within the limits. Other objectives already weigh the price: `res`
  unchanged.

  Returns:
    (result with that design as `best_*`, the `tolerance` entry of
    result.json: tolerance, the rule, the best judged throughput and its
    capex, the proposal's throughput, capex and share of the best,
    candidates screened and judged), or (res, None) for other
    objectives.
  """
  if problem.objective not in shared.THROUGHPUT_OBJECTIVES:
    return res, None
  index, plan_z, ev, rows = _screened(problem, res, tolerance)
  judged = []
  for row in rows:
    pz = _written(problem, index, plan_z, ev, row)
    judged.append((pz, final_figures(problem, index[row], pz)))
  values = [_score(problem, f) for _, f in judged]
  capexes = [f['capex_usd'] for _, f in judged]
  order = shared.decide(values, capexes, problem.objective, tolerance)
  k = order[0] if order else rows.index(0)
  pick, pz = rows[k], judged[k][0]
  check = gradient.evaluate_indices(problem, index[pick][None], pz[None])
  out = dataclasses.replace(
    res,
    best_index=index[pick],
    best_plan_z=pz,
    best_value=float(check['value'][0]),
    best_feasible=True,
    best_g=check['g'][0],
  )
  thr_of = [_fig_throughput(f) for _, f in judged]
  within = [t if v is not None else -1.0 for t, v in zip(thr_of, values)]
  best = int(np.argmax(within))
  return out, {
    'tolerance': tolerance,
    'rule': shared.rule_sentence(problem.objective, tolerance),
    'best_found_samples_per_s': thr_of[best],
    'best_found_capex_usd': capexes[best],
    'proposal_samples_per_s': thr_of[k],
    'proposal_capex_usd': capexes[k],
    'proposal_share_of_best': thr_of[k] / thr_of[best],
    'candidates_evaluated': int(len(index)),
    # The judged designs themselves, for the ranking (not in result.json).
    'designs': [
      (index[r], judged[i][0])
      for i, r in enumerate(rows)
      if values[i] is not None and i != k
    ],
    # The designs judged by their final figures (the cost-throughput
    # frontier of the screened variants), as the rule saw them.
    'judged': [
      {
        'samples_per_s': t,
        'capex_usd': c,
        'within_limits': v is not None,
      }
      for t, c, v in zip(thr_of, capexes, values, strict=True)
    ],
  }


def _screened(problem, res, tolerance):
  """The screening stage: the search's best and its shrunk variants
  (`shrunk_designs`) evaluated with their own plans, and the rows of the
  cost-throughput frontier to judge by their final figures
  (`_judged_rows`). Returns (index, plan_z, evaluation, rows)."""
  index, plan_z = shrunk_designs(problem, res)
  ev = own_plans(problem, index, plan_z)
  ok, _ = snapping.buildable(problem.space, index)
  feasible = ev['feasible'] & ok
  feasible[0] = feasible[0] or res.best_feasible
  thr = _throughput(problem, ev['value'])
  capex = np.array(
    [
      float(ct.capex_and_power(design_space.build(problem.space, i))[0])
      for i in index
    ]
  )
  rows = _judged_rows(
    _frontier(np.flatnonzero(feasible), thr, capex), thr, capex, tolerance
  )
  return index, plan_z, ev, rows


def _judged_rows(rows, thr, capex, tolerance) -> list[int]:
  """The frontier designs (fastest first) judged by their final figures:
  the rule's choice on the screened figures and the `FRONTIER` nearest it
  in price (the knee's neighbours); on the way from the fastest down to
  it, at every `shared.KNEE_PRICE` of the price the fastest design that
  costs no more (the steps the rule can take); the fastest, and the
  search's best (row 0)."""
  if not rows:
    return [0]
  pick = rows[shared.decide(thr[rows], capex[rows], 'throughput', tolerance)[0]]
  near = sorted(rows, key=lambda r: abs(np.log(capex[r] / capex[pick])))
  steps, level = [], capex[rows[0]]
  while level > capex[pick]:
    under = [r for r in rows if capex[r] <= level]  # fastest first
    steps.append(under[0])
    level *= shared.KNEE_PRICE
  return list(dict.fromkeys([pick, *near[:FRONTIER], *steps, rows[0], 0]))


def _frontier(rows, thr, capex) -> list[int]:
  """`rows` on the cost-throughput frontier (none cheaper and as fast),
  fastest first."""
  out, cheapest = [], np.inf
  for r in sorted(rows, key=lambda r: (-thr[r], capex[r])):
    if capex[r] < cheapest:
      out.append(int(r))
      cheapest = capex[r]
  return out


def _fig_throughput(fig: dict) -> float:
  return float(fig['throughput_samples_per_s'])


def _within(problem, fig: dict) -> bool:
  """Whether figures `fig` are feasible and within the problem's limits
  (budget, power, rack)."""
  limits = (
    ('capex_usd', problem.budget_usd),
    ('power_w', problem.power_w),
    ('rack_unit_w', problem.rack_w),
  )
  space = not problem.rack_w or fig['rack_unit_u'] <= fig['rack_space_u']
  return (
    bool(fig['feasible'])
    and space
    and all(not limit or fig[key] <= limit for key, limit in limits)
  )


def _score(problem, fig: dict) -> float | None:
  """The objective value of `fig` (natural units), None outside the
  limits."""
  if not _within(problem, fig):
    return None
  thr = _fig_throughput(fig)
  energy = fig['power_w'] * problem.energy_usd_per_w
  return {
    'throughput': thr,
    'time_to_train': problem.samples / thr,
    'throughput_per_usd': thr / fig['capex_usd'],
    'throughput_per_watt': thr / fig['power_w'],
    'throughput_per_tco': thr / (fig['capex_usd'] + energy),
  }[problem.objective]


def final_figures(problem, index, plan_z) -> dict:
  """The figures a design is proposed with (`final_design`)."""
  return final_design(problem, index, plan_z)[2]


def final_design(problem, index, plan_z) -> tuple:
  """(platform, plan, figures) a design is proposed with: the concrete
  platform at `index` with the plan `plan_z` written out, or with the
  planner's auto plan where that does better within the limits and the
  space searches the sharding (as `studies.proposal` keeps it)."""
  w, stack = problem.workload, problem.stack
  p, plan = gradient.buildable(problem, index, plan_z)
  fig = report.design_figures(p, w, plan, stack, problem.system)
  if problem.space.sharding != plan_space.SEARCH:
    return p, plan, fig
  auto_plan = planner.make(w, p, stack)
  auto = report.design_figures(p, w, auto_plan, stack, problem.system)
  a, b = _score(problem, auto), _score(problem, fig)
  if a is None or (b is not None and not _beats(problem, a, b)):
    return p, plan, fig
  return p, auto_plan, auto


def _beats(problem, a: float, b: float) -> bool:
  return a > b if gradient.maximized(problem.objective) else a < b


def least_ddr(problem, res):
  """The best design with the least DDR its plan needs: every smaller
  DDR per channel of the design's grid (each a legal DIMM population,
  `buildability`) is evaluated with the same plan, and the smallest that
  meets every constraint is kept. DDR capacity costs money and power and
  changes no step time, so this never lowers throughput.

  Returns:
    (result with that design as `best_*`, the `ddr` entry of result.json:
    DDR per node before and after, bytes), or (res, None) when the best
    design is not feasible."""
  if not res.best_feasible:
    return res, None
  axis = design_space.HW_AXES.index('ddr_per_channel')
  own = int(res.best_index[axis])
  index = np.repeat(np.asarray(res.best_index, np.int32)[None], own + 1, 0)
  index[:, axis] = np.arange(own + 1)
  plan_z = np.repeat(np.asarray(res.best_plan_z)[None], own + 1, 0)
  ev = gradient.evaluate_indices(problem, index, plan_z)
  ok, _ = snapping.buildable(problem.space, index)
  feasible = ev['feasible'] & ok
  feasible[own] = True
  pick = int(np.flatnonzero(feasible)[0])

  def ddr_per_node(i):
    p = design_space.build(problem.space, index[i])
    return float(p.sockets_per_node * p.cpu.ddr_capacity)

  out = dataclasses.replace(
    res,
    best_index=index[pick],
    best_value=float(ev['value'][pick]),
    best_g=ev['g'][pick],
  )
  return out, {
    'searched_bytes_per_node': ddr_per_node(own),
    'bought_bytes_per_node': ddr_per_node(pick),
    'rule': 'the least DDR per channel (one or two DIMMs) whose design '
    'still holds what its plan keeps in DDR',
  }
