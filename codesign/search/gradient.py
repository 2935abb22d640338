"""Gradient-based hardware search and snapping to parts.

The problem (`Problem`): a design space (`codesign.search.design_space`), a
workload, an objective and the buyer's limits. Objectives (`OBJECTIVES`):
`throughput` (samples/s), `throughput_per_usd`, `throughput_per_watt`,
`throughput_per_tco` (per USD of capex plus energy,
`Problem.energy_usd_per_w`; maximized) and `time_to_train` (seconds for
`samples` samples, minimized); the search minimizes a log-scale loss of
each, so gradients are scale free. Constraints (`CONSTRAINTS`, each a
relative violation g, feasible when g <= 0): capex budget, power budget,
HBM and DDR capacity
(the cost model's memory required over available), and the buildability
rules that are inequalities on the number axes (`buildability.TRACED`:
the CPU's maximum sockets and DDR per socket, its minimum sockets, the
accelerator's fabric domain, PCIe devices per root port with switches,
the NIC's line rate within its x16 slot and the NIC bandwidth per
accelerator within its x16 link).
The node limit is the upper end of the nodes axis (an exact box bound).
What the buyer asks (the objective, the capex and power limits, the
samples of `time_to_train`, the energy price of `throughput_per_tco`:
`QUESTION`) is an argument of the compiled
programs, not a constant in them: every program is compiled once per
design space, workload and stack (`program_key`), whatever the question.
Technology couplings are built into the design space (parts carry their
numbers and prices).

Method (`gradient_search`):
1. Continuous phase: many starts z in [0, 1]^D (uniform from the seed),
   all run at once, sharded over devices (`codesign.search.batching`). Each
   start minimizes the augmented Lagrangian of the loss under the
   constraints with Adam (`codesign.search.constrained`, the loop every search
   shares).
2. Snapping: the `snap_top` best starts (feasible first, then loss) are
   rounded down and up on every hardware axis (2^H neighbours each, the
   distinct ones once: `snapping.distinct`); all
   are evaluated in one batch as buildable platforms with every
   constraint checked exactly; designs that break a buildability rule
   (`buildability.violations`, the concrete check) are rejected, and
   `Result.rejected` counts them per rule. With searched sharding
   (`plan_space.SEARCH`) each rounding's sharding weights snap to one-hot
   per table, and every rounding is also evaluated with each uniform
   sharding.
3. Plan polish (plan mode `optimize` only): the best buildable platforms
   that meet the hardware constraints (budget, power, buildability rows;
   memory is the plan's job) keep their hardware, and the plan is
   re-optimized by the same continuous phase with the hardware
   coordinates frozen; the plans are snapped to `snapping.PLAN_STEP` and every
   constraint is checked again. This repairs plans whose tables no longer
   fit after rounding.

Baselines over the same discrete space are in `codesign.search.baselines`.
Every function counts cost-model evaluations: a value counts 1, a value
and gradient 2.

Reproducibility: the same flags on the same number of devices give the
same bits, and any N >= 2 devices give identical bits (`propose`
defaults on 2 and 4 host devices: byte-identical result.json and
metrics.jsonl). One device differs in the last bits: XLA compiles a
single-device program without the SPMD partitioner and its simplifier
then rewrites some divisions of the backward pass as multiplications by
a reciprocal. Adam carries those bits along and a long run amplifies
them: after 30 steps the continuous phase agrees to about 1e-8 and the
buildable result is the same (tests/search/gradient_test.py, 1 and 4
devices), but after `propose`'s default 300 steps the continuous optimum
moved from 22.05 (1 device) to 22.72 (2 devices) samples/s per $, and
the proposal kept its parts, counts, throughput, capex and power to the
bit while its plan did not (HBM fractions 1.0 against 0.9999 and the CPU
lookup share 0.05 against 0.43, where every lookup is served from HBM
and no figure depends on them). Compare runs on the same number of
devices.

The library does no file I/O; `progress(step, metrics)` reports progress.
"""

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from codesign.core import memory
from codesign.core.errors import InputError
from codesign.model import cost_model, terms, whole_system
from codesign.search import (
  batching,
  buildability,
  constrained,
  plan_space,
  snapping,
)
from codesign.search import design_space as ds
from codesign.spec import whole_system as whole_system_spec
from codesign.spec import workload as wl
from codesign.spec.stack import Stack

OBJECTIVES = (
  'throughput',
  'throughput_per_usd',
  'throughput_per_watt',
  'time_to_train',
  'throughput_per_tco',
)
# Internal objectives (minimized): the cheapest platform that holds the
# tables, used to explain infeasible requests.
_MIN_OBJECTIVES = ('capex', 'power')
# `rack`: one node's wall power (or a scale-up domain's, whose hosts one
# rack holds) within a rack's; the rack's W is part of the question.
# `rack_space`: the same unit's rack units within what a rack of its
# class holds (`terms.rack_unit_space`, `usable_rack_units`), where
# there is a rack rule.
CONSTRAINTS = (
  'capex',
  'power',
  'hbm',
  'ddr',
  'rack',
  'rack_space',
) + buildability.TRACED
FEASIBLE_TOL = 1e-3  # relative violation accepted for relaxed designs
# Relative violation of a buildable design that is rounding, not excess:
# an auto plan fills the HBM to the capacity by construction (the fit's
# bisection), and the cost model's requirement of it, computed in another
# fusion, lands an ulp or two either side (1e-12 of 80 GB is 0.08 bytes).
ROUNDING_TOL = 1e-12
# Constraints a plan cannot change.
HARDWARE_CONSTRAINTS = (
  'capex',
  'power',
  'rack',
  'rack_space',
) + buildability.TRACED
HARDWARE_COLUMNS = tuple(CONSTRAINTS.index(c) for c in HARDWARE_CONSTRAINTS)


@dataclasses.dataclass(frozen=True)
class Problem:
  """What to search for. Hashable (a static argument of `jit`).

  Attributes:
    space: the design space.
    workload: the DLRM.
    stack: the software stack that trains it.
    objective: one of OBJECTIVES.
    budget_usd: capex limit of the whole cluster, or None.
    power_w: power limit of the whole cluster at the wall, or None.
    samples: samples to train, for `time_to_train`.
    energy_usd_per_w: USD of energy per W of the cluster's power over its
      life, for `throughput_per_tco` (`terms.energy_usd_per_w`).
    rack_w: W one rack supplies, or None: a node (or a domain's hosts) at
      the wall above it is infeasible (`terms.rack_unit_power`).
    system: the system around the trainers (`whole_system.WholeSystem`:
      readers, storage, failures), or None: the step alone. Its
      throughput, capex and power are what every objective and limit
      sees (`model.whole_system.apply`).
  """

  space: ds.DesignSpace
  workload: wl.Workload
  stack: Stack
  objective: str = 'throughput_per_usd'
  budget_usd: float | None = None
  power_w: float | None = None
  samples: float = 1e9
  energy_usd_per_w: float = 0.0
  rack_w: float | None = None
  system: object = None


def check_problem(problem: Problem) -> Problem:
  """Raises `InputError` with one sentence for a bad problem."""
  if problem.objective not in OBJECTIVES + _MIN_OBJECTIVES:
    raise InputError(
      f'unknown objective {problem.objective!r}; valid choices: '
      + ', '.join(OBJECTIVES)
    )
  for key in ('budget_usd', 'power_w', 'rack_w'):
    v = getattr(problem, key)
    if v is not None and not (math.isfinite(v) and v > 0):
      raise InputError(f'{key} must be a positive number, got {v}')
  if not (math.isfinite(problem.samples) and problem.samples > 0):
    raise InputError(f'samples must be positive, got {problem.samples}')
  if problem.system is not None:
    whole_system_spec.check(problem.system)
  return problem


@dataclasses.dataclass(frozen=True)
class Config:
  """Settings of the gradient search.

  Attributes:
    starts: number of starts run at once.
    steps: Adam steps of the continuous phase (and of the plan polish).
    learning_rate: initial Adam step (z is in [0, 1]).
    final_lr_fraction: cosine schedule end, as a fraction of the start.
    al_every: steps between multiplier updates.
    mu_init: initial penalty weight.
    mu_growth: penalty growth per multiplier update.
    mu_max: cap on the penalty weight.
    snap_top: starts whose neighbouring roundings are evaluated (None:
      `SNAP_TOP` by the space's plan mode).
    polish: re-optimize the plan of the best buildable platforms (plan
      mode `optimize` only).
    chunk: steps per jitted call (progress is reported between calls).
    block: starts per vmapped block (fixed, so that results do not depend
      on the number of devices).
    eval_chunk: designs per jitted batch evaluation (default: the plan
      mode's `CHUNK`).
    seed: random seed of the starts.
  """

  starts: int = 64
  steps: int = 300
  learning_rate: float = 0.05
  final_lr_fraction: float = 0.05
  al_every: int = 25
  mu_init: float = 10.0
  mu_growth: float = 2.0
  mu_max: float = 1e4
  snap_top: int | None = None
  polish: bool = True
  chunk: int = 50
  block: int = 8
  eval_chunk: int | None = None
  seed: int = 0


# Starts whose roundings are evaluated, by plan mode. With the auto plan
# the roundings of nearby starts coincide, so more starts cost little:
# measured (search_quality, rm2, 64 starts), the 8 best all sat in one
# corner no sold board reaches (one MI300X) and missed the optimum by
# 21%; the 32 best found it with 56 more evaluations (25,728 against
# 25,672). With searched plans each start's plan is its own (no rounding
# coincides: 32 cost propose's four searches 56,000 more evaluations,
# warm 13.6 -> 31.9 s), and the polish re-optimizes the plans of the
# best buildable designs from every start.
SNAP_TOP = {'auto': 32, 'optimize': 8}


def snap_top_of(config: Config, space) -> int:
  """The starts whose roundings a search of `space` evaluates."""
  return config.snap_top or SNAP_TOP[space.plan_mode]


def check_config(config: Config) -> Config:
  for key in ('starts', 'steps', 'al_every', 'snap_top', 'chunk', 'block'):
    if getattr(config, key) is None:
      continue
    if int(getattr(config, key)) < 1:
      raise InputError(f'{key} must be at least 1, got {getattr(config, key)}')
  if not config.learning_rate > 0:
    raise InputError('learning_rate must be positive')
  return config


# Host memory per start and coordinate of a search, all phases: the
# starts, Adam's moments, multipliers, the best points, the polish's
# candidates. Measured: propose's two searches on zion_scale (343 and 336
# coordinates), 8,192 to 32,768 starts: peak RSS +1.32 GB, 79 bytes;
# rounded up.
BYTES_PER_START_COORDINATE = 100
# With the plan searched (HBM fractions, shardings: traced), the packing
# bound (`embedding.busiest_rank`, loads ranked without a sort) compares
# every table with every other, per design of a block, in the value and
# its gradient. Measured: propose, one trainer, 8 starts, searched
# shardings with 500 and 1,000 tables: peak RSS 2.47 and 7.50 GB (2,000
# tables: RESOURCE_EXHAUSTED with 16.6 GB free), 840 bytes per pair and
# design beyond the base; table-wise with 1,000 tables: 6.87 GB; rounded
# up.
BYTES_PER_TABLE_PAIR = 1000
# The history: a row of metrics per chunk of steps, twice (the continuous
# phase and the polish), kept and written to metrics.jsonl.
BYTES_PER_CHUNK = 4096


def memory_terms(problems, config: Config, tasks: int = 1) -> dict:
  """Bytes the searches of `problems` need at once (they run side by
  side) under `config` (`tasks` searches of `config.starts` each in one,
  `multi_search`), estimated before any compile, by what they grow with:
  `starts`, `tables`, `steps`."""
  terms = {'starts': 0.0, 'tables': 0.0, 'steps': 0.0}
  chunks = -(-config.steps // config.chunk)
  for problem in problems:
    t = len(problem.workload.tables)
    terms['starts'] += (
      BYTES_PER_START_COORDINATE * tasks * config.starts * problem.space.dim
    )
    if problem.space.num_plan:  # the plan searched
      terms['tables'] += BYTES_PER_TABLE_PAIR * config.block * t * t
    terms['steps'] += BYTES_PER_CHUNK * 2 * chunks
  return terms


def check_memory(problems, config: Config, tasks: int = 1) -> None:
  """Refuses, before compiling, searches that need more memory than this
  process may use (`codesign.core.memory.check`), naming what needs the
  most (the starts, the steps or the tables) and how many would fit.

  Raises:
    InputError: naming the request, what to lower and both amounts.
  """
  terms = memory_terms(problems, config, tasks)
  need = sum(terms.values())
  have, _ = memory.available()
  if need <= have:
    return
  most = max(terms, key=terms.get)
  rest = max(have - (need - terms[most]), 0.0)
  dims = ' and '.join(str(p.space.dim) for p in problems)
  tables = len(problems[0].workload.tables)
  what = (
    f'{config.starts:,} starts x {config.steps:,} steps of {dims} '
    f'coordinates over {tables:,} tables'
  )
  if tasks > 1:
    what = f'{tasks:,} searches of {what}'
  if most == 'tables':
    lower = 'the number of tables of the workload (the search pairs them)'
  else:
    fit = int(rest / terms[most] * getattr(config, most))
    lower = f'the {most} (--{most}, {most}=) to at most {fit:,}'
  memory.check(need, what, lower)


# ---- objective and constraints ---------------------------------------------


# What the buyer asks, passed to the compiled programs as numbers
# (`question_of`), not built into them: one compile serves every budget,
# power limit, sample count and objective.
QUESTION = (
  'budget_usd',
  'power_w',
  'samples',
  'objective',
  'energy_usd_per_w',
  'rack_w',
)
_CODES = OBJECTIVES + _MIN_OBJECTIVES  # objective -> its number


def question_of(problem: Problem) -> np.ndarray:
  """The problem's QUESTION as numbers: an absent limit is infinite (its
  row is then capex / inf - 1 = -1, inactive, as when it is left out);
  the objective is its position in OBJECTIVES + the internal ones."""
  return np.array(
    [
      problem.budget_usd or np.inf,
      problem.power_w or np.inf,
      problem.samples,
      _CODES.index(problem.objective),
      problem.energy_usd_per_w,
      problem.rack_w or np.inf,
    ],
    np.float64,
  )


def program_key(problem: Problem) -> Problem:
  """What a problem's compiled programs depend on: the problem without
  its QUESTION (a cache key)."""
  return dataclasses.replace(
    problem,
    objective=OBJECTIVES[0],
    budget_usd=None,
    power_w=None,
    samples=1.0,
    energy_usd_per_w=0.0,
    rack_w=None,
  )


def _objective_values(r: cost_model.CostReport, samples, energy) -> dict:
  """Every objective (and internal one) of a report, natural units;
  `energy`: USD of energy per W over the life (`throughput_per_tco`)."""
  return {
    'throughput': r.throughput,
    'throughput_per_usd': r.perf_per_usd,
    'throughput_per_watt': r.perf_per_watt,
    'time_to_train': samples / r.throughput,
    # samples/s per USD of capex plus the energy of the power (terms.tco).
    'throughput_per_tco': r.throughput / (r.capex + r.power * energy),
    'capex': r.capex,
    'power': r.power,
  }


def objective_value(problem: Problem, r: cost_model.CostReport, question=None):
  """The objective in natural units (samples/s, samples/s/USD,
  samples/s/W, seconds, USD or W): the problem's own, or the one
  `question` (QUESTION, maybe traced) names."""
  if question is None:
    values = _objective_values(r, problem.samples, problem.energy_usd_per_w)
    return values[problem.objective]
  values = _objective_values(r, question[2], question[4])
  stacked = jnp.stack([values[o] for o in _CODES])
  return stacked[jnp.asarray(question[3]).astype(jnp.int32)]


def maximized(objective: str) -> bool:
  return objective in (
    'throughput',
    'throughput_per_usd',
    'throughput_per_watt',
    'throughput_per_tco',
  )


def loss_of(problem: Problem, value, question=None):
  """Log-scale loss to minimize (the objective of `question` when
  given)."""
  logv = jnp.log(jnp.maximum(value, 1e-300))
  if question is not None:
    up = jnp.asarray([maximized(o) for o in _CODES])
    return jnp.where(
      up[jnp.asarray(question[3]).astype(jnp.int32)], -logv, logv
    )
  return -logv if maximized(problem.objective) else logv


def _rack_space_row(p, rack_w):
  """The `rack_space` row: a rack unit's rack units over what its rack
  holds, less 1; -1 (inactive) without a rack rule (`rack_w` infinite)."""
  used = terms.rack_unit_space(p) / terms.usable_rack_units(p) - 1.0
  return jnp.where(jnp.isinf(rack_w), -1.0, used)


def violations(
  problem: Problem, p, r: cost_model.CostReport, aux, question=None
):
  """Relative constraint violations g, shape (len(CONSTRAINTS),); <= 0 is
  feasible. The limits are the problem's own or `question`'s; absent
  limits give -1."""
  q = question_of(problem) if question is None else question
  budget, power = q[0], q[1]
  hbm_avail = r.memory_available['hbm']
  own = jnp.stack(
    [
      r.capex / budget - 1.0,
      r.power / power - 1.0,
      r.memory_required['hbm'] / jnp.maximum(hbm_avail, 1.0) - 1.0,
      r.memory_required['ddr'] / r.memory_available['ddr'] - 1.0,
      terms.rack_unit_power(p) / q[5] - 1.0,
      _rack_space_row(p, q[5]),
    ]
  )
  return jnp.concatenate([own, buildability.relative_violations(p, aux)])


def _judged(problem: Problem, p, plan, aux, question):
  r = cost_model.evaluate(
    p,
    problem.workload,
    plan,
    problem.stack,
    1.0,
    aux['sharding_weights'],
    nvls_share=aux.get('nvls_share'),
  )
  r, _ = whole_system.apply(r, p, problem.workload, problem.system)
  value = objective_value(problem, r, question)
  g = violations(problem, p, r, aux, question)
  return loss_of(problem, value, question), g, value


def assess(problem: Problem, z, question=None):
  """(loss, g, value) of a relaxed design z, shape (D,). Pure, unjitted;
  the objective and limits are the problem's own or `question`'s
  (QUESTION, maybe traced)."""
  p, plan, aux = ds.decode(problem.space, problem.workload, problem.stack, z)
  return _judged(problem, p, plan, aux, question)


def assess_index(problem: Problem, index, plan_z, question=None, frac=None):
  """(loss, g, value) of a buildable design. Pure, unjitted; `question`
  as `assess`; `frac` the auto plan's fractions when known
  (`ds.auto_fractions_index`)."""
  p, plan, aux = ds.decode_index(
    problem.space, problem.workload, problem.stack, index, plan_z, frac
  )
  return _judged(problem, p, plan, aux, question)


def _question_rows(problem: Problem, n: int) -> np.ndarray:
  """The problem's question once per row (every row of a batched program
  takes its own)."""
  return np.tile(question_of(problem), (n, 1))


# ---- batch evaluation of buildable designs ---------------------------------


def evaluate_indices(
  problem: Problem,
  index: np.ndarray,
  plan_z: np.ndarray | None = None,
  chunk: int | None = None,
  mesh: Mesh | None = None,
  block: int = 256,
) -> dict[str, np.ndarray]:
  """Evaluates buildable designs in sharded, blocked batches.

  Args:
    problem: the problem.
    index: int array (N, H) of grid indices.
    plan_z: (N, P) plan coordinates (P = 0 in `auto` plan mode).
    chunk: designs per jitted call, at most (fewer designs are padded to
      `batching.bucket_rows`, so that a few shapes serve every count);
      default `CHUNK` of the plan mode.
    mesh: the device mesh (default: all devices).
    block: designs per vmapped block.

  Returns:
    dict of numpy arrays: loss (N,), g (N, C), value (N,), feasible (N,).
  """
  mesh = mesh or batching.make_mesh()
  index = np.asarray(index, dtype=np.int32)
  n = index.shape[0]
  if plan_z is None:
    plan_z = np.zeros((n, problem.space.num_plan))
  plan_z = np.asarray(plan_z, dtype=np.float64)
  chunk = chunk or CHUNK[problem.space.plan_mode]
  chunk = batching.bucket_rows(n, block, mesh, chunk)
  out = {'loss': [], 'g': [], 'value': []}
  for s in range(0, n, chunk):
    idx, pz = index[s : s + chunk], plan_z[s : s + chunk]
    if problem.space.plan_mode == 'auto':
      loss, g, value = _assess_by_plan(problem, idx, pz, chunk, mesh, block)
    else:
      loss, g, value = _assess_rows(problem, idx, pz, chunk, mesh, block)
    out['loss'].append(loss)
    out['g'].append(g)
    out['value'].append(value)
  res = {k: np.concatenate(v) for k, v in out.items()}
  ok = np.all(res['g'] <= ROUNDING_TOL, axis=1)
  res['feasible'] = ok & np.isfinite(res['loss'])
  return res


# Designs per batch evaluation by plan mode. A design whose plan is a
# search variable is its own row, so every batch runs in one shape of 512
# rows (the snapping's thousands of roundings in a few calls): one
# compile per problem, where batches padded to 512 and to 4,096 rows were
# two (2.5-5 s each on 2 cores). Auto plans are fitted and costed in
# groups by plan (`_assess_by_plan`): a larger chunk shares more fits.
CHUNK = {'optimize': 512, 'auto': 4096}


def _assess_rows(problem: Problem, index, plan_z, rows: int, mesh, block):
  """(loss, g, value) of designs, each row its own program row (padded to
  `rows`)."""
  m = len(index)
  loss, g, value = batching.run_blocked(
    _assess_index_cached(program_key(problem)),
    block,
    mesh,
    batching.pad_rows(index, rows),
    batching.pad_rows(plan_z, rows),
    _question_rows(problem, rows),
  )
  return loss[:m], g[:m], value[:m]


# Rows per vmapped block of the HBM fit of distinct plans, at most (the
# costing's block if smaller): a few fits (a CMA-ES generation of 32
# designs) pad to 2 blocks, not to 2 of the costing's 256-design blocks
# (a fit is 50 bisection steps of the busiest rank's HBM need).
FIT_BLOCK = 32
# Designs per group of one plan (`batching.groups`), in batches of at
# least GROUPED_FROM designs (a smaller batch, a CMA-ES generation, costs
# each design as its own group: one program shape per batch size, as
# the per-design programs have, instead of one per count of plans).
GROUP = 32
GROUPED_FROM = 128


def _assess_by_plan(problem: Problem, index, plan_z, rows, mesh, block):
  """(loss, g, value) of designs in auto plan mode, grouped by their plan.

  Designs equal on the axes the plan reads (`ds.plan_axes`) and in their
  plan vector have one auto plan: it is fitted once (an exhaustive
  enumeration of the default space has a fit per accelerator, node count
  and accelerators per node, not per design), and the designs that share
  it are costed in groups (`assess_group`) whose plan-axis values,
  fractions and plan vector are one per group, so that every per-table
  term that depends on nothing else (hits, distinct rows, the packing
  bounds' order) is computed once per group, not per design (vmap leaves
  it unbatched). `rows`: the batch's rows when each design is its own
  group (`batching.bucket_rows` of the whole call)."""
  axes = ds.plan_axes(problem.space, problem.workload, problem.stack)
  key = np.concatenate([index[:, axes].astype(np.float64), plan_z], axis=1)
  size = GROUP if len(index) >= GROUPED_FROM else 1
  first, of_group, members, real = batching.groups(key, size)
  frac = _fit_rows(problem, index[first], plan_z[first], mesh, block)
  lead = first[of_group]
  per = max(1, block // members.shape[1])  # groups per vmapped block
  if members.shape[1] > 1:
    rows = batching.bucket_rows(len(of_group), per, mesh, len(index))
  args = (index[members], index[lead], plan_z[lead], frac[of_group])
  got = batching.run_blocked(
    _assess_group_cached(program_key(problem)),
    per,
    mesh,
    *(batching.pad_rows(a, rows) for a in args),
    _question_rows(problem, rows),
  )
  out = []
  for x in got:  # back to the designs' order
    o = np.empty((len(index),) + x.shape[2:], x.dtype)
    o[members[real]] = x[: len(of_group)][real]
    out.append(o)
  return tuple(out)


def _fit_rows(problem: Problem, index, plan_z, mesh, block):
  """The auto plan's HBM fractions (N, T) of designs, in one program
  (`ds.auto_fractions_index`) in blocks of at most `FIT_BLOCK` rows
  (`block` if fewer), padded to `batching.bucket_rows` (fine steps)."""
  block = min(block, FIT_BLOCK)
  # No cap: the fine steps, not a round-up to len(index), make the shapes.
  rows = batching.bucket_rows(len(index), block, mesh, 1 << 30, fine=True)
  frac = batching.run_blocked(
    _fit_index_cached(program_key(problem)),
    block,
    mesh,
    batching.pad_rows(index, rows),
    batching.pad_rows(plan_z, rows),
  )
  return frac[: len(index)]


def assess_group(problem: Problem, index, lead, plan_z, frac, question):
  """(loss, g, value) of designs `index` (M, H) that share the auto plan
  of `lead` (H,) with plan vector `plan_z` and fractions `frac` (T,):
  each design's plan axes are read from `lead`, its other axes from its
  own row, so that what depends on the plan alone is computed once."""
  axes = ds.plan_axes(problem.space, problem.workload, problem.stack)

  def one(row):
    mixed = [lead[i] if i in axes else row[i] for i in range(len(row))]
    return assess_index(problem, mixed, plan_z, question, frac)

  return jax.vmap(one)(index)


@functools.cache
def _assess_index_cached(problem):
  return _keyed(
    functools.partial(assess_index, problem), 'assess_index', problem
  )


@functools.cache
def _assess_group_cached(problem):
  return _keyed(
    functools.partial(assess_group, problem), 'assess_group', problem
  )


@functools.cache
def _fit_index_cached(problem):
  fit = functools.partial(
    ds.auto_fractions_index, problem.space, problem.workload, problem.stack
  )
  return _keyed(fit, 'auto_fractions_index', problem)


def best_position(loss, g, feasible):
  """Index of the best design: feasible first by loss, else least
  violation."""
  viol = np.max(np.maximum(g, 0.0), axis=1)
  key_loss = np.where(feasible, loss, np.inf)
  if np.any(feasible):
    return int(np.argmin(key_loss))
  return int(np.argmin(viol))


# ---- the continuous phase ----------------------------------------------------


def _chunk_fn(problem, config, length):
  """`length` steps of one start (a scan) answering its question
  (QUESTION), then (loss, g, value) where they end: (state, metrics of
  shape (length,), that assessment). The last chunk's assessment is the
  phase's, so no program of its own is compiled for it.

  The assessment where the steps end is the metrics of one step more
  whose move is dropped (`constrained.steps_then_assess`: one copy of the
  forward model in the program, not two; a sixth of its compile). Loss,
  value and the trajectory are bit for bit those of a separate
  assessment; g may differ in the last bits where a constraint is near
  zero (measured: 4e-17)."""

  def run(state, question):
    def with_g(z):  # the step's metrics carry g beside the value
      loss, g, value = assess(problem, z, question)
      return loss, g, (value, g)

    state, m = constrained.steps_then_assess(with_g, config, state, length)
    value, g = m['aux']
    metrics = {
      'loss': m['loss'][:length],
      'aux': value[:length],
      'violation': m['violation'][:length],
    }
    return state, metrics, (m['loss'][length], g[length], value[length])

  return run


# The settings a step reads (`constrained`): a chunk's program depends on
# these, not on the starts, seed, snapping or block (the arguments' shapes
# and `batching` key those), so a run with another seed reuses it.
STEP_SETTINGS = (
  'steps',
  'learning_rate',
  'final_lr_fraction',
  'al_every',
  'mu_init',
  'mu_growth',
  'mu_max',
)


def step_settings(config: Config) -> tuple:
  """(name, value) of the `STEP_SETTINGS` of `config`: a program key."""
  return tuple((k, getattr(config, k)) for k in STEP_SETTINGS)


@functools.cache
def chunk_program(problem, config, length):
  key = ('chunk', problem, step_settings(config), length)
  return _keyed(_chunk_fn(problem, config, length), *key)


def continuous_phase(
  problem: Problem,
  config: Config,
  z0: np.ndarray,
  mask: np.ndarray,
  mesh: Mesh,
  progress: Callable | None = None,
  phase: str = 'continuous',
):
  """Runs `config.steps` steps from every start z0 (S, D).

  Returns:
    (z (S, D), final dict of loss (S,), g (S, C), value (S,) at the last z,
    history: one dict per step with metrics over the S starts).
  """
  s = z0.shape[0]
  mask = np.broadcast_to(mask, z0.shape)
  state = jax.vmap(
    functools.partial(
      constrained.init, config, num_constraints=len(CONSTRAINTS)
    )
  )(jnp.asarray(z0), jnp.asarray(mask))
  state = jax.tree.map(np.asarray, state)
  history = []
  done = 0
  length = min(config.chunk, config.steps)
  run = chunk_program(program_key(problem), config, length)
  block = config.block
  question = _question_rows(problem, s)
  while done < config.steps:
    state, m, (loss, g, value) = batching.run_blocked(
      run, block, mesh, state, question, at_least=config.starts
    )
    for k in range(min(length, config.steps - done)):
      history.append(
        _history_row(
          problem, phase, done + k, m['aux'][:, k], m['violation'][:, k]
        )
      )
    done += length
    if progress is not None:
      progress(min(done, config.steps), history[-1])
  z = state.z
  assert z.shape[0] == s
  return z, {'loss': loss, 'g': g, 'value': value}, history


def _keyed(fn, *key):
  """fn with its static inputs as `program_key` (`batching.run_blocked`
  then keeps its program on disk)."""
  fn.program_key = key
  return fn


def _history_row(problem, phase, step, value, viol):
  ok = viol <= FEASIBLE_TOL
  best = None
  if np.any(ok):
    v = value[ok]
    best = float(np.max(v) if maximized(problem.objective) else np.min(v))
  return {
    'phase': phase,
    'step': int(step),
    'objective': best,
    'violation_min': float(np.min(viol)),
    'violation_max': float(np.max(viol)),
    'feasible_starts': int(np.sum(ok)),
  }


def _rank(final):
  """Start order: feasible (within FEASIBLE_TOL) by loss, then the rest by
  violation. Deterministic (stable sort)."""
  viol = np.max(np.maximum(final['g'], 0.0), axis=1)
  loss = np.where(np.isfinite(final['loss']), final['loss'], 1e300)
  ok = viol <= FEASIBLE_TOL
  key = np.where(ok, loss, 1e200 + viol)
  return np.argsort(key, kind='stable'), ok


# ---- the whole search --------------------------------------------------------


@dataclasses.dataclass
class Result:
  """What a search found (numpy values; no JAX arrays).

  Attributes:
    method: name of the method.
    best_index: (H,) grid indices of the best buildable design, or None.
    best_plan_z: (P,) its plan coordinates.
    best_value: its objective value (natural units), or None.
    best_feasible: whether every constraint holds.
    best_g: (C,) its constraint violations.
    continuous_z: (D,) best relaxed design (gradient search only).
    continuous_value: its objective value.
    continuous_g: (C,) its violations.
    evaluations: cost-model evaluations used (value and gradient = 2).
    history: per-step metric dicts.
    rejected: buildability rule -> distinct snapped designs it rejected.
    top_index, top_plan_z, top_feasible: every distinct buildable design
      evaluated, best first (`snapping.distinct_best`).
  """

  method: str
  best_index: np.ndarray | None
  best_plan_z: np.ndarray | None
  best_value: float | None
  best_feasible: bool
  best_g: np.ndarray | None
  continuous_z: np.ndarray | None = None
  continuous_value: float | None = None
  continuous_g: np.ndarray | None = None
  evaluations: int = 0
  history: list = dataclasses.field(default_factory=list)
  rejected: dict = dataclasses.field(default_factory=dict)
  top_index: np.ndarray | None = None
  top_plan_z: np.ndarray | None = None
  top_feasible: np.ndarray | None = None


def initial_starts(problem: Problem, starts: int, seed: int) -> np.ndarray:
  """Uniform starts in [0, 1]^D, shape (starts, D), with uniform
  shardings seeded (`plan_space.seed_uniform_shardings`)."""
  key = jax.random.key(seed)
  keys = jax.random.split(key, starts)
  space = problem.space
  d = space.dim
  # float64 where enabled, else float32 (what a float64 request truncates
  # to, without the warning).
  dtype = jnp.result_type(float)
  z = jax.vmap(lambda k: jax.random.uniform(k, (d,), dtype=dtype))(keys)
  return plan_space.seed_uniform_shardings(space, np.array(z, np.float64))


def gradient_search(
  problem: Problem,
  config: Config = Config(),
  devices=None,
  progress: Callable | None = None,
) -> Result:
  """Augmented-Lagrangian Adam over the relaxation, then snapping.

  Args:
    problem: what to search for.
    config: search settings.
    devices: devices to shard the starts over (default: all).
    progress: called as progress(step, metrics dict) between chunks.

  Returns:
    A `Result`; `best_*` is the best buildable design (feasible if any
    evaluated candidate was) and `continuous_*` the best relaxed start.
  """
  check_problem(problem)
  check_config(config)
  check_memory([problem], config)
  mesh = batching.make_mesh(devices)
  space = problem.space
  hc = space.num_hw_coords
  z0 = initial_starts(problem, config.starts, config.seed)
  z, final, history = continuous_phase(
    problem, config, z0, np.ones(space.dim), mesh, progress
  )
  evaluations = config.starts * (2 * config.steps + 1)
  order, _ = _rank(final)
  c = int(order[0])
  result = Result(
    method='gradient',
    best_index=None,
    best_plan_z=None,
    best_value=None,
    best_feasible=False,
    best_g=None,
    continuous_z=z[c],
    continuous_value=float(final['value'][c]),
    continuous_g=final['g'][c],
    history=history,
  )

  # Snap: every rounding of the best starts, in one batch.
  top = order[: min(snap_top_of(config, space), config.starts)]
  index, plan_z = snapping.distinct(space, *snapping.roundings(space, z[top]))
  ev = evaluate_indices(problem, index, plan_z, config.eval_chunk, mesh)
  evaluations += index.shape[0]

  if config.polish and space.num_plan > 0:
    # Re-optimize the plan of the best distinct buildable platforms, as many
    # as there are starts, with their hardware coordinates frozen.
    cand = snapping.distinct_best(
      index, ev, config.starts, hardware=HARDWARE_COLUMNS
    )
    zp = np.concatenate(
      [
        np.stack([ds.grid_z(space, index[k]) for k in cand]),
        plan_z[cand],
      ],
      axis=1,
    )
    mask = np.concatenate([np.zeros(hc), np.ones(space.num_plan)])
    zpol, _, hist2 = continuous_phase(
      problem, config, zp, mask, mesh, progress, phase='polish'
    )
    result.history = history + hist2
    evaluations += len(cand) * (2 * config.steps + 1)
    pidx = index[cand]
    ppz = np.stack([snapping.snap_plan(space, x) for x in zpol[:, hc:]])
    ev2 = evaluate_indices(problem, pidx, ppz, config.eval_chunk, mesh)
    evaluations += len(cand)
    index = np.concatenate([index, pidx])
    plan_z = np.concatenate([plan_z, ppz])
    ev = {k: np.concatenate([ev[k], ev2[k]]) for k in ev}

  # Only designs that pass the concrete buildability check (unless none).
  ok, result.rejected = snapping.buildable(space, index)
  ev['feasible'] = ev['feasible'] & ok
  rows = np.flatnonzero(ok) if ok.any() else np.arange(len(ok))
  b = rows[best_position(ev['loss'][rows], ev['g'][rows], ev['feasible'][rows])]
  result.best_index = index[b]
  result.best_plan_z = plan_z[b]
  result.best_value = float(ev['value'][b])
  result.best_feasible = bool(ev['feasible'][b])
  result.best_g = ev['g'][b]
  top = snapping.distinct_best(index, ev, len(index))
  result.top_index, result.top_plan_z = index[top], plan_z[top]
  result.top_feasible = ev['feasible'][top]
  result.evaluations = int(evaluations)
  return result


# ---- reading results ---------------------------------------------------------


def buildable(problem: Problem, index, plan_z):
  """The concrete (platform, plan) of a buildable design, numpy leaves."""
  space = problem.space
  p = ds.build(space, index)
  # The auto plan's HBM fit through the search's own program (the fit op
  # by op costs 0.3 s a design); with searched plans the plan is its
  # coordinates, and no platform is traced.
  frac = None
  if space.plan_mode == 'auto':
    rows = np.asarray(index)[None], np.asarray(plan_z)[None]
    mesh = batching.make_mesh(None)
    frac = jnp.asarray(_fit_rows(problem, *rows, mesh, Config.block)[0])
  plan, weights = plan_space.decode(
    space, problem.workload, problem.stack, None, jnp.asarray(plan_z), frac
  )
  return p, _settled(problem, plan_space.concrete(plan, weights))


def _settled(problem: Problem, plan):
  """`plan` with `cpu_lookup_fraction` at the auto plan's 1.0 where the
  stack caches tables through UVM, so that no term reads it: the search
  leaves a coordinate without a gradient wherever Adam's normalized steps
  on rounding noise took it, which differs between processes whose XLA
  flags differ (a script's and a notebook's), though every figure is the
  same."""
  if problem.stack.uvm_caching:
    return dataclasses.replace(plan, cpu_lookup_fraction=1.0)
  return plan


def relaxed(problem: Problem, z):
  """The (platform, plan) of a relaxed design z (D,), numpy leaves."""
  space = problem.space
  p, plan, aux = ds.decode(
    space, problem.workload, problem.stack, jnp.asarray(z)
  )
  p = jax.tree.map(lambda x: np.asarray(x, dtype=np.float64), p)
  axes = ds.describe_relaxed(space, np.asarray(z)[: space.num_hw_coords])

  def label(axis):
    w = axes[axis + '_weights']
    return ' + '.join(f'{v:.3f} {k}' for k, v in w.items())

  p = dataclasses.replace(
    p,
    name='continuous_optimum',
    accelerator=dataclasses.replace(p.accelerator, name=label('accelerator')),
    cpu=dataclasses.replace(p.cpu, name=label('cpu')),
  )
  return p, plan_space.concrete(plan, aux['sharding_weights'])
