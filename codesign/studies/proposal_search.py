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
import functools
import itertools
from collections.abc import Callable

import jax
import numpy as np

from codesign.core import interrupts
from codesign.core.errors import InputError
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

  problem, result: the winning trainer's search problem and result.
  per_trainer: trainer -> its best objective value (None when
  infeasible), evaluations and design space size.
  searches: (problem, result) of every trainer, in order.
  """

  problem: gradient.Problem
  result: gradient.Result
  per_trainer: dict
  searches: tuple


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


def vendor_parts(space_args: dict, trainer: str, s: Stack) -> dict:
  """`space_args` with the part axis that trains (accelerators, or the
  CPUs of a CPU trainer) kept to the makers stack `s` runs on."""
  acc, cpu = part_tables.default_parts()
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
  return {**space_args, key: kept}


def make_problems(
  w: wl.Workload,
  stacks: dict,
  problem_args: dict,
  space_args: dict,
  trainers: tuple[str, ...],
) -> list:
  """The search problem of each trainer (`search_trainers`' arguments)."""
  problems = []
  for trainer in check_trainers(trainers):
    s = stacks[trainer]
    space = design_space.make_space(
      w, trainer=trainer, **vendor_parts(space_args, trainer, s)
    )
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
) -> Found:
  """Runs the gradient search on each trainer's design space.

  Args:
    w, stacks: the workload, and trainer -> the stack that trains it
      (`trainer_stacks`); each trainer's parts are kept to its stack's
      vendors (`vendor_parts`).
    problem_args: `search.Problem` fields besides space, workload and stack
      (objective, budget_usd, power_w, samples).
    space_args: `design_space.make_space` arguments besides the workload
      and the trainer.
    trainers: `hardware.TRAINERS` to search.
    config: the search settings.
    progress: called with a line per search before they start.
    on_step_of: objective -> per-chunk callback of the search (or None);
      its metrics get the search's `trainer`.

  Returns:
    `Found`: the best feasible design over the trainers (a search with no
    feasible design loses to one with; among infeasible ones the first).
  """
  problems = make_problems(w, stacks, problem_args, space_args, trainers)
  gradient.check_memory(problems, config)  # the searches run side by side
  for problem in problems:
    progress(
      f'searching {problem.space.size:,} buildable {problem.space.trainer}'
      f'-trainer platforms (and their plans) for {w.name} with '
      f'{problem.stack.name}, objective {problem.objective}, '
      f'{config.starts} starts x {config.steps} steps on '
      f'{len(jax.devices())} device(s)'
    )

  def run(problem):
    report = on_step_of(problem.objective)
    if report is not None:
      trainer = problem.space.trainer

      def report(step, m, inner=report):
        inner(step, {**m, 'trainer': trainer})

    return gradient.gradient_search(problem, config, progress=report)

  # The searches run in threads: most of a search is XLA compiling, which
  # runs outside Python's lock, so two searches compile on two cores at
  # once. Each search is deterministic, so the result does not depend on
  # the interleaving.
  results = interrupts.thread_map(run, problems, workers=len(problems))
  best, per = None, {}
  for problem, res in zip(problems, results, strict=True):
    per[problem.space.trainer] = {
      'objective_value': res.best_value if res.best_feasible else None,
      'evaluations': res.evaluations,
      'design_space_size': problem.space.size,
    }
    if best is None or _better(problem, res, best[1]):
      best = (problem, res)
  return Found(best[0], best[1], per, tuple(zip(problems, results)))


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
      low = gradient.gradient_search(free, config, progress=on_step(worst))
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
# third more money is over-spending.
TOLERANCE = 0.02
# ... and then the cheapest design of at most this share of its price
# within the tolerance of it, again, until none is (the knee): where the
# throughput rises slowly all the way to the largest design (a per-rank
# host cost shrinking with the ranks), the tolerance of the best found
# alone would still buy a third more money for less than the tolerance.
KNEE_PRICE = 0.75
# Axes shrunk to find a cheaper design of about the same throughput, and
# the axis grown with them: fewer nodes may hold their tables with more
# DDR (the least DDR that holds them is bought afterwards, `least_ddr`).
_SHRUNK_AXES = ('nodes', 'accelerators_per_node')
_GROWN_AXES = ('ddr_per_channel',)
_TRIM_BASES = 4  # the proposal and up to this many other found designs


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
  cheapest buildable design whose throughput is within `tolerance` of the
  best found, then the cheapest of at most `KNEE_PRICE` of its price
  within `tolerance` of it, repeated while there is one (the knee), among
  the search's best designs and their variants with
  fewer nodes or accelerators per node and as much DDR or more (every
  constraint still met), each with its own plan (`own_plans`: a design
  with fewer nodes holds its tables differently). Other objectives
  already weigh the price: `res` unchanged.

  Returns:
    (result with that design as `best_*`, the `tolerance` entry of
    result.json: tolerance, best found throughput and capex, the
    proposal's throughput, capex and share of the best, candidates
    evaluated), or (res, None) for other objectives.
  """
  if problem.objective not in ('throughput', 'time_to_train'):
    return res, None
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
  rows = np.flatnonzero(feasible)
  best = rows[np.argmax(thr[rows])]
  write = functools.partial(_first_written, problem, index, plan_z, ev)
  near = _cheapest_near(rows, thr, capex, (1.0 - tolerance) * thr[best])
  pick, pz, check = _down_to_knee(
    write, rows, thr, capex, tolerance, write(near)
  )
  out = dataclasses.replace(
    res,
    best_index=index[pick],
    best_plan_z=pz,
    best_value=float(check['value'][0]),
    best_feasible=True,
    best_g=check['g'][0],
  )
  return out, {
    'tolerance': tolerance,
    'best_found_samples_per_s': float(thr[best]),
    'best_found_capex_usd': float(capex[best]),
    'proposal_samples_per_s': float(_throughput(problem, out.best_value)),
    'proposal_capex_usd': float(capex[pick]),
    'proposal_share_of_best': float(
      _throughput(problem, out.best_value) / thr[best]
    ),
    'candidates_evaluated': int(len(index)),
    'rule': 'the cheapest design within the tolerance of the best found '
    '(throughput objectives), then, while one of at most '
    f'{KNEE_PRICE:g} of its price is within the tolerance of it, the '
    'cheapest such (a third more money must buy more than the '
    'tolerance), among the best designs and their variants '
    'with fewer nodes or accelerators per node (and as much DDR or more), '
    'each with its own plan '
    '(the plan it was found with, or the auto HBM rule under its own or '
    'one uniform sharding)',
  }


def _cheapest_near(rows, thr, capex, level, price=np.inf):
  """`rows` with throughput `thr` at least `level` and capex at most
  `price`, cheapest first (then the faster)."""
  near = rows[(thr[rows] >= level) & (capex[rows] <= price)]
  return near[np.lexsort((-thr[near], capex[near]))]


def _down_to_knee(write, rows, thr, capex, tolerance, chosen):
  """`chosen` (row, plan, evaluation), or, while a design of at most
  `KNEE_PRICE` of its price is within `tolerance` of it, the cheapest
  such that stays feasible with its plan written out (`write`:
  `_first_written` over an order of rows)."""
  while True:
    pick = chosen[0]
    order = _cheapest_near(
      rows, thr, capex, (1.0 - tolerance) * thr[pick], KNEE_PRICE * capex[pick]
    )
    if not len(order):
      return chosen
    found = write(order)
    if found[0] not in order:  # none stays feasible: `write`'s fallback
      return chosen
    chosen = found


def _first_written(problem, index, plan_z, ev, order):
  """(row, plan coordinates, its evaluation) of the first design in
  `order` that stays feasible with its plan written in `problem`'s own
  space (an auto plan written out is evaluated again there); the first
  design (the search's best, feasible) with the plan it came with when
  none does."""
  for row in order:
    pz = _written(problem, index, plan_z, ev, row)
    check = gradient.evaluate_indices(problem, index[row][None], pz[None])
    if check['feasible'][0]:
      return int(row), pz, check
  pz = np.asarray(plan_z[0], dtype=np.float64)
  return 0, pz, gradient.evaluate_indices(problem, index[:1], pz[None])


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
