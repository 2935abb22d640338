"""Baseline searches over the same discrete space as `codesign.search.gradient`.

`random_search` (uniform buildable designs), `exhaustive` (every one, in
sharded batches) and `cma_es` (evosax CMA-ES on the relaxed hardware
coordinates, each candidate rounded to the nearest buildable design).
They enumerate platforms, so they need plan mode `auto` (one plan per
platform). In a space that searches the sharding per table
(`plan_space.SEARCH`), random search draws each table's sharding
uniformly and CMA-ES also moves the sharding weights (each candidate
takes every table's heaviest sharding); enumeration is then impossible
(4^T shardings per platform). Every function counts cost-model
evaluations and returns a `search.Result`. As in the gradient search's
snapping, a design whose board is not sold (`snapping.board_ok`: the
accelerator count, host sockets and CPU of no board of the part) is not
feasible.
"""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core.errors import InputError
from codesign.model import terms
from codesign.search import (
  batching,
  buildability,
  gradient,
  plan_space,
  snapping,
)
from codesign.search import design_space as ds


def random_search(
  problem: gradient.Problem,
  evaluations: int,
  seed: int = 0,
  chunk: int = 4096,
  devices=None,
) -> gradient.Result:
  """Uniform samples of buildable designs (auto plan mode)."""
  _require_auto(problem)
  space = problem.space
  rng = np.random.default_rng(seed)
  sizes = np.array(space.sizes)
  n = int(evaluations)
  index = rng.integers(0, sizes, size=(n, len(sizes)))
  plan_z = np.zeros((n, space.num_plan))
  if space.sharding == plan_space.SEARCH:
    k = len(plan_space.CHOICES)
    choice = rng.integers(0, k, size=(n, space.num_tables))
    plan_z = np.eye(k)[choice].reshape(n, -1)
  ev = _sold(
    problem,
    index,
    gradient.evaluate_indices(
      problem, index, plan_z, chunk, batching.make_mesh(devices)
    ),
  )
  return _result_from('random', index, ev, evaluations, plan_z)


def _sold(problem, index, ev: dict) -> dict:
  """`ev` with designs whose board is not sold marked infeasible."""
  ok = snapping.board_ok(problem.space, index)
  return {**ev, 'feasible': ev['feasible'] & ok}


def exhaustive(
  problem: gradient.Problem,
  chunk: int = 65536,
  devices=None,
  progress: Callable | None = None,
) -> gradient.Result:
  """Every buildable design (auto plan mode, one sharding for every
  table), in sharded batches. Designs that `screened` rules out are not
  costed (they cannot be feasible); where no costed design is feasible
  the whole space is costed again, so that the least violation is the
  space's, as without the screen. Counts every design as evaluated."""
  _require_auto(problem)
  if problem.space.num_plan:
    raise InputError(
      'exhaustive enumeration needs one plan per platform; a space that '
      'searches the sharding per table has 4^T plans per platform'
    )
  mesh = batching.make_mesh(devices)
  best = _enumerate(problem, chunk, mesh, progress, screen=True)
  if best is None or not best[0]:
    best = _enumerate(problem, chunk, mesh, progress, screen=False)
  _, _, index_b, ev, b = best
  return _result_from(
    'exhaustive', index_b[None], _slice(ev, b), problem.space.size
  )


def _enumerate(problem, chunk: int, mesh, progress, screen: bool):
  """The best (feasible, value, index, ev, position) over the space, in
  flat order (the first of equals wins); with `screen`, only designs
  that pass `screened` are costed, gathered into batches of `chunk`."""
  sizes, total = problem.space.sizes, problem.space.size
  best, pending = None, np.zeros((0, len(sizes)), np.int64)

  def cost(index):
    ev = _sold(
      problem,
      index,
      gradient.evaluate_indices(problem, index, None, chunk, mesh),
    )
    b = gradient.best_position(ev['loss'], ev['g'], ev['feasible'])
    cand = (bool(ev['feasible'][b]), -float(ev['loss'][b]), index[b], ev, b)
    return cand if best is None or _better(cand, best) else best

  for s in range(0, total, chunk):
    flat = np.arange(s, min(s + chunk, total))
    index = np.stack(np.unravel_index(flat, sizes), axis=1)
    if screen:  # cost whole batches of survivors, in flat order
      pending = np.concatenate([pending, index[screened(problem, index)]])
      full = len(pending) >= chunk
      index, pending = pending[: chunk * full], pending[chunk * full :]
    if len(index):
      best = cost(index)
    if progress is not None:
      progress(min(s + chunk, total), {'done': min(s + chunk, total)})
  if len(pending):
    best = cost(pending)
  return best


# `screened` rules a design out only where its capex, power or a
# buildability rule exceeds the limit by more than this share: the same
# functions as the cost model's, compiled apart, may round the last bits
# otherwise.
SCREEN_MARGIN = 1e-9


def screened(problem: gradient.Problem, index: np.ndarray) -> np.ndarray:
  """Which designs (N, H) may be feasible, without the cost model: a
  sold board (`snapping.board_ok`), capex and power within the problem's
  limits and every traced buildability rule
  (`buildability.relative_violations`), each up to `SCREEN_MARGIN`. A
  design ruled out here is infeasible in `gradient.violations` too."""
  ok = snapping.board_ok(problem.space, index)
  capex, power, rules = _screen_fn(problem.space)(jnp.asarray(index))
  budget, limit_w = gradient.question_of(problem)[:2]  # absent: inf
  ok &= np.asarray(capex) <= budget * (1.0 + SCREEN_MARGIN)
  ok &= np.asarray(power) <= limit_w * (1.0 + SCREEN_MARGIN)
  return ok & np.all(np.asarray(rules) <= SCREEN_MARGIN, axis=1)


@functools.cache
def _screen_fn(space):
  def one(index):
    p, aux = ds.platform_index(space, index)
    capex, power = terms.capex_and_power(p)
    return capex, power, buildability.relative_violations(p, aux)

  return jax.jit(jax.vmap(one))


def _better(a, b):
  if a[0] != b[0]:
    return a[0]
  if a[0]:
    return a[1] > b[1]
  va = np.max(np.maximum(a[3]['g'][a[4]], 0.0))
  vb = np.max(np.maximum(b[3]['g'][b[4]], 0.0))
  return va < vb


def _slice(ev, b):
  return {k: v[b : b + 1] for k, v in ev.items()}


def cma_es(
  problem: gradient.Problem,
  evaluations: int,
  population: int = 32,
  seed: int = 0,
  chunk: int = 4096,
  devices=None,
  block: int = 256,
) -> gradient.Result:
  """evosax CMA-ES on the relaxed hardware coordinates (part weights and
  number axes) and, where the sharding is searched, the sharding weights;
  each candidate is rounded to the nearest buildable design
  (`design_space.nearest_index`, every table's heaviest sharding) and
  scored there (infeasible ones by 1e3 plus their violation). `block`:
  designs per vmapped block of each generation's evaluation (a batch is
  padded to at least two blocks, so a block of half the population
  wastes no rows; the values do not depend on it)."""
  from evosax.algorithms import CMA_ES

  _require_auto(problem)
  mesh = batching.make_mesh(devices)
  space = problem.space
  hc = space.num_hw_coords
  h = space.dim
  es = CMA_ES(population_size=population, solution=jnp.zeros(h))
  params = es.default_params.replace(std_init=jnp.asarray(0.3))
  key = jax.random.key(seed)
  key, k0 = jax.random.split(key)
  state = es.init(k0, jnp.full((h,), 0.5), params)
  ask, tell = jax.jit(es.ask), jax.jit(es.tell)
  best_idx, best_pz, best_ev, used = None, None, None, 0
  while used + population <= evaluations:
    key, ka, kt = jax.random.split(key, 3)
    pop, state = ask(ka, state, params)
    zc = np.clip(np.asarray(pop), 0.0, 1.0)
    index = ds.nearest_index(space, zc[:, :hc])
    plan_z = np.stack([plan_space.snap_sharding(space, x) for x in zc[:, hc:]])
    ev = _sold(
      problem,
      index,
      gradient.evaluate_indices(problem, index, plan_z, chunk, mesh, block),
    )
    used += population
    viol = np.max(np.maximum(ev['g'], 0.0), axis=1)
    fit = np.where(ev['feasible'], ev['loss'], 1e3 + viol)
    # Out-of-box steps cost their distance, so the mean stays inside.
    fit = fit + np.sum((np.asarray(pop) - zc) ** 2, axis=1)
    state, _ = tell(kt, pop, jnp.asarray(fit), state, params)
    b = gradient.best_position(ev['loss'], ev['g'], ev['feasible'])
    cand = (bool(ev['feasible'][b]), -float(ev['loss'][b]))
    if best_ev is None or _better(
      (*cand, None, ev, b), (*best_ev[0], None, best_ev[1], best_ev[2])
    ):
      best_ev = (cand, ev, b)
      best_idx, best_pz = index[b], plan_z[b]
  _, ev, b = best_ev
  return _result_from(
    'cma_es', best_idx[None], _slice(ev, b), used, best_pz[None]
  )


def _result_from(
  method, index, ev, evaluations, plan_z=None
) -> gradient.Result:
  b = gradient.best_position(ev['loss'], ev['g'], ev['feasible'])
  return gradient.Result(
    method=method,
    best_index=np.asarray(index[b]),
    best_plan_z=np.zeros((0,)) if plan_z is None else np.asarray(plan_z[b]),
    best_value=float(ev['value'][b]),
    best_feasible=bool(ev['feasible'][b]),
    best_g=ev['g'][b],
    evaluations=int(evaluations),
  )


def _require_auto(problem: gradient.Problem):
  if problem.space.plan_mode != 'auto':
    raise InputError(
      'the baselines enumerate buildable platforms, so they need plan mode '
      "'auto' (one plan per platform)"
    )
