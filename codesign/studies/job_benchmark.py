"""How fast are the jobs people run? The search's work, not the model's.

`experiments.benchmark` times the bare cost model; an architect waits
for `propose`, whose search evaluates relaxed designs (value and
gradient of the augmented Lagrangian of its objective and constraints,
as `constrained.step` computes them) and whose exhaustive checks
evaluate buildable designs with their auto plan (the planner's HBM fit
and sharding choice, traced). `run(settings)` measures both rates on
the default job's design space (the workload, 16 nodes), with the
seconds of each one's first call (compile included):
- relaxed: a chunk of the search's own continuous phase (its program:
  value and gradient, Adam, multipliers, metrics) from propose's 64
  starts, the sharding searched per table; in propose's plan mode
  (optimize: the HBM fractions are variables) and in the auto-plan
  space that `search_quality` searches (the HBM fit's bisection in every
  evaluation);
- planned: plan mode auto, one sharding for every table;
- the exhaustive enumeration of the planned space at the job's $1M
  budget (`baselines.exhaustive`, as `search_quality` runs it): every
  design is judged, most without the cost model (`baselines.screened`),
  so its designs per second are the job's, not the costing rate of
  `planned_designs_per_s`.
The wall time of `propose` itself, cold and warm, is the launcher's
(`experiments.benchmark --propose_runs`): it runs the script.

Times are wall-clock seconds, rates per second; they vary with load,
so tests assert none of them.
"""

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from codesign.core.errors import InputError
from codesign.search import baselines, batching, design_space, gradient
from codesign.spec import stack_presets, workload_presets
from codesign.studies import benchmark


@dataclasses.dataclass(frozen=True)
class Settings:
  """The job to time (propose's defaults unless said).

  Attributes:
    workload: workload preset name.
    stack: stack preset name.
    max_nodes: largest node count of the design space.
    relaxed_designs: starts of the timed chunk of the search (propose's
      64).
    planned_designs: buildable designs per planned-evaluation call.
    min_time_s: each timed call repeats until this many seconds passed.
    seed: seed of the random designs.
  """

  workload: str = 'zion_scale'
  stack: str = 'torchrec'
  max_nodes: int = 16
  relaxed_designs: int = 64
  planned_designs: int = 16384
  min_time_s: float = 1.0
  seed: int = 0


def _problem(settings: Settings, **space_args) -> gradient.Problem:
  w = workload_presets.get(settings.workload)
  space = design_space.make_space(w, settings.max_nodes, **space_args)
  stack = stack_presets.get(settings.stack)
  return gradient.check_problem(
    gradient.Problem(space, w, stack, budget_usd=1e6)
  )


def _first_then_timed(run: Callable, min_time_s: float) -> tuple:
  """(seconds of the first call of `run()`, mostly compiling; seconds per
  call after it, `benchmark.seconds_per_call`)."""
  start = time.perf_counter()
  run()
  first_s = time.perf_counter() - start
  return first_s, benchmark.seconds_per_call(run, min_time_s=min_time_s)


def relaxed_rate(
  settings: Settings, plan_mode: str = 'optimize'
) -> tuple[float, float]:
  """(relaxed designs/s, seconds of the first call, mostly compiling): the
  search's own continuous phase (`gradient.continuous_phase`: value and
  gradient of the augmented Lagrangian, Adam, the multipliers, the
  metrics) over one chunk of steps from `relaxed_designs` random starts
  of propose's space, in the search's blocks of starts; a design is one
  start's step. `plan_mode` 'optimize' is propose's search (the plan's
  HBM fractions are variables); 'auto' is the auto-plan space that
  `search_quality` searches, where every evaluation runs the HBM fit's
  bisection (`planner.fit_hbm_traced`)."""
  problem = _problem(settings, plan_mode=plan_mode, sharding='search')
  chunk = gradient.Config().chunk
  config = gradient.check_config(
    gradient.Config(
      starts=settings.relaxed_designs, steps=chunk, seed=settings.seed
    )
  )
  z0 = gradient.initial_starts(problem, config.starts, config.seed)
  mask = np.ones(problem.space.dim)
  mesh = batching.make_mesh()

  def run():
    return gradient.continuous_phase(problem, config, z0, mask, mesh)

  first_s, sec = _first_then_timed(run, settings.min_time_s)
  return config.starts * config.steps / sec, first_s


def planned_rate(settings: Settings) -> tuple[float, float]:
  """(buildable designs with their auto plan per second, seconds of the
  first call, mostly compiling): as exhaustive enumeration evaluates
  them, one HBM fit per distinct plan (`gradient.evaluate_indices`). The
  designs are drawn at random, so they reach nearly every plan of the
  space (the default space has 720: accelerator x nodes x accelerators
  per node) and the rate pays a fit per about 23 designs, where an
  enumeration in flat order pays one per several hundred."""
  problem = _problem(settings, plan_mode='auto')
  rng = np.random.default_rng(settings.seed)
  sizes = np.asarray(problem.space.sizes)
  n = settings.planned_designs
  index = (rng.random((n, len(sizes))) * sizes).astype(np.int32)
  first_s, sec = _first_then_timed(
    lambda: gradient.evaluate_indices(problem, index, None, chunk=n),
    settings.min_time_s,
  )
  return n / sec, first_s


def exhaustive_rate(settings: Settings) -> dict:
  """`baselines.exhaustive` over the whole space of `planned_rate` at the
  job's budget, as `search_quality` enumerates it: designs that
  `baselines.screened` rules out (over the budget or power, a broken
  traced rule, an unsold board) are judged without the cost model, the
  rest are costed with their auto plan. Returns exhaustive_designs (the
  space's size), exhaustive_budget_usd, exhaustive_s (the second of two
  calls, which find the same best design), exhaustive_designs_per_s and
  exhaustive_first_call_s (mostly compiling)."""
  problem = _problem(settings, plan_mode='auto')
  start = time.perf_counter()
  first = baselines.exhaustive(problem)
  first_s = time.perf_counter() - start
  start = time.perf_counter()
  again = baselines.exhaustive(problem)
  seconds = time.perf_counter() - start
  assert np.array_equal(first.best_index, again.best_index)
  return {
    'exhaustive_designs': problem.space.size,
    'exhaustive_budget_usd': problem.budget_usd,
    'exhaustive_s': seconds,
    'exhaustive_designs_per_s': problem.space.size / seconds,
    'exhaustive_first_call_s': first_s,
  }


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> dict:
  """The job's rates (see the module docstring): relaxed_evals_per_s,
  relaxed_first_call_s (propose's search), relaxed_auto_evals_per_s,
  relaxed_auto_first_call_s (the auto-plan space), planned_designs_per_s,
  planned_first_call_s and the keys of `exhaustive_rate`."""
  progress = progress or (lambda line: None)
  if min(settings.relaxed_designs, settings.planned_designs) < 1:
    raise InputError('design counts must be positive integers')
  progress(
    f'{gradient.Config().chunk} steps of the search from '
    f'{settings.relaxed_designs} relaxed starts of propose '
    f'({settings.workload}) ...'
  )
  relaxed, relaxed_first = relaxed_rate(settings)
  progress('... and of the auto-plan space (the HBM fit in each) ...')
  relaxed_auto, relaxed_auto_first = relaxed_rate(settings, 'auto')
  progress(
    f'{settings.planned_designs} buildable designs with their auto plan ...'
  )
  planned, planned_first = planned_rate(settings)
  progress('exhaustive enumeration of the same space, twice ...')
  exhaustive = exhaustive_rate(settings)
  return {
    'job_workload': settings.workload,
    'relaxed_evals_per_s': relaxed,
    'relaxed_first_call_s': relaxed_first,
    'relaxed_auto_evals_per_s': relaxed_auto,
    'relaxed_auto_first_call_s': relaxed_auto_first,
    'planned_designs_per_s': planned,
    'planned_first_call_s': planned_first,
    **exhaustive,
  }
