"""Many constrained searches at once.

`codesign.search.gradient` runs one problem per compile: its budget and workload
are static. The Pareto and growth studies need many budgets (or
weightings of several workloads) at once, so here the limit and the
weights are traced per task and the search's own loop
(`codesign.search.constrained`, with the settings of a `search.Config`) solves
every (task, start) pair in one vmapped compile. Designs come from the
search's design space (`design_space.decode` / `decode_index`) and the
constraints from `search.violations`; the best starts of each task are
snapped to buildable platforms as the search does (every rounding and
the nearest sold board of one whose board is not sold,
`snapping.with_boards`, evaluated exactly, and only those that pass the
concrete buildability check, unless none of a task's does).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core import program_cache
from codesign.core.errors import InputError
from codesign.model import cost_model
from codesign.search import buildability, constrained, gradient, snapping
from codesign.search import design_space as ds
from codesign.spec.stack import Stack

# Buildable designs are evaluated in batches of 8 x CHUNK (one compile).
CHUNK = 32


LIMIT_KINDS = ('capex', 'power')


@dataclasses.dataclass(frozen=True)
class Tasks:
  """Static part of a multi-task search. Hashable.

  Attributes:
    space: the design space (plan mode `auto` and one sharding for every
      table: no plan coordinates, so one buildable design serves
      workloads of different table counts).
    workloads: J workloads; a task's objective is the weighted mean of
      their log throughputs, and it must hold every workload of positive
      weight.
    stack: the software stack that trains them.
  """

  space: object
  workloads: tuple
  stack: Stack

  def __post_init__(self):
    if self.space.num_plan:
      raise InputError(
        'a multi-task search needs plan mode auto and one sharding for '
        f'every table (got {self.space.plan_mode!r}, {self.space.sharding!r})'
      )


def _assess_tasks(tasks: Tasks, decode, weights, limit, kind):
  """(loss, g, log throughputs (J,), capex, power) of one design.

  `decode(workload)` gives (platform, plan, aux). g stacks the limit row
  (capex or power over `limit`, minus 1, chosen by `kind`) and, per
  workload of positive weight, the search's memory and CPU coupling rows
  (others are -1, inactive).
  """
  logs, rows = [], []
  capex = power = None
  for j, w in enumerate(tasks.workloads):
    p, plan, aux = decode(w)
    r = cost_model.evaluate(
      p, w, plan, tasks.stack, nvls_share=aux.get('nvls_share')
    )
    prob = gradient.Problem(tasks.space, w, tasks.stack, 'throughput')
    g = gradient.violations(prob, p, r, aux)[2:]  # memory and buildability
    rows.append(jnp.where(weights[j] > 0, g, -1.0))
    logs.append(jnp.log(jnp.maximum(r.throughput, 1e-300)))
    if j == 0:
      capex, power = r.capex, r.power
  logs = jnp.stack(logs)
  used = jnp.where(kind == 0, capex, power)
  g = jnp.concatenate([(used / limit - 1.0)[None], jnp.concatenate(rows)])
  loss = -jnp.sum(weights * logs) / jnp.sum(weights)
  return loss, g, logs, capex, power


def _relaxed_decode(tasks, z):
  return lambda w: ds.decode(tasks.space, w, tasks.stack, z)


def _index_decode(tasks, index):
  empty = jnp.zeros((0,))
  return lambda w: ds.decode_index(tasks.space, w, tasks.stack, index, empty)


def _run_tasks(tasks: Tasks, config, z0, weights, limit, kind):
  """The continuous phase for N (task, start) rows at once: the search's
  own loop (`constrained.step`), with each row's weights and limit, and
  each row's assessment where its steps end
  (`constrained.steps_then_assess`: one copy of the forward model).

  Args:
    z0: (N, D) starts; weights (N, J); limit (N,); kind (N,) int.

  Returns:
    (z (N, D), per-step metrics of shape (steps, N): loss, violation;
    the assessment at z: loss (N,), g (N, C), logs (N, J), capex (N,),
    power (N,)).
  """
  constraints = 1 + (len(gradient.CONSTRAINTS) - 2) * len(tasks.workloads)
  steps = config.steps

  def one(z, wt, lim, kd):
    def assess(z):
      loss, *rest = _assess_tasks(tasks, _relaxed_decode(tasks, z), wt, lim, kd)
      return loss, rest[0], tuple(rest)

    state = constrained.init(config, z, jnp.ones_like(z), constraints)
    state, m = constrained.steps_then_assess(assess, config, state, steps)
    end = (m['loss'][steps], *(x[steps] for x in m['aux']))
    return state.z, m['loss'][:steps], m['violation'][:steps], end

  z, loss, viol, end = jax.vmap(one)(z0, weights, limit, kind)
  return z, {'loss': loss.T, 'violation': viol.T}, end


def _assess_buildable(tasks: Tasks, index, weights, limit, kind):
  def one(i, wt, lim, kd):
    return _assess_tasks(tasks, _index_decode(tasks, i), wt, lim, kd)

  return jax.vmap(one)(index, weights, limit, kind)


_PROGRAMS = {
  'run': _run_tasks,
  'buildable': _assess_buildable,
}


@functools.cache
def _program(name: str, tasks: Tasks, *static):
  """The jitted program `name` of `_PROGRAMS` for these tasks (and
  static settings), kept on disk as the search's are
  (`codesign.core.program_cache`): traced once, read back by later
  runs."""
  fn = functools.partial(_PROGRAMS[name], tasks, *static)
  key = [
    gradient.step_settings(x) if isinstance(x, gradient.Config) else x
    for x in static
  ]  # a search's seed and starts do not make another program
  return program_cache.exported(fn, ('multi_search', name, tasks, *key))


def _feasible(g) -> np.ndarray:
  return np.all(np.asarray(g) <= 0.0, axis=-1)


def evaluate_buildable(tasks: Tasks, index, weights, limit, kind) -> dict:
  """Buildable designs (M, H) under per-row task settings, in batches of
  `CHUNK * 8` (one compile). Returns numpy loss, g, logs, capex, power and
  feasible (M,)."""
  n = len(index)
  size = 8 * CHUNK
  pad = -n % size
  rows = [
    np.concatenate([np.asarray(a), np.repeat(np.asarray(a)[-1:], pad, 0)])
    for a in (index, weights, limit, kind)
  ]
  outs = []
  for s in range(0, n + pad, size):
    out = _program('buildable', tasks)(*(r[s : s + size] for r in rows))
    outs.append([np.asarray(o) for o in out])
  keys = ('loss', 'g', 'logs', 'capex', 'power')
  res = {
    k: np.concatenate([o[i] for o in outs])[:n] for i, k in enumerate(keys)
  }
  res['feasible'] = _feasible(res['g']) & np.isfinite(res['loss'])
  return res


def search_tasks(
  tasks: Tasks,
  weights: np.ndarray,
  limits: np.ndarray,
  kinds: np.ndarray,
  *,
  starts: int,
  config,
  snap_top: int = 4,
) -> dict:
  """Many constrained searches at once, snapped to buildable platforms.

  Args:
    tasks: the design space and workloads (static).
    weights: (K, J) non-negative weights of each task's log throughputs.
    limits: (K,) the capex (USD) or power (W) limit of each task.
    kinds: (K,) 0 for a capex limit, 1 for a power limit.
    starts: starts per task (uniform in [0, 1]^D from `config.seed`).
    config: a `search.Config` (steps, learning rate, multiplier schedule).
    snap_top: best starts per task whose roundings are evaluated.

  Returns:
    dict with, per task (leading axis K): `index` (K, H) best buildable
    design, `feasible`, `logs` (K, J) its log throughputs, `capex`,
    `power`, `objective` (weighted mean log throughput); `relaxed_*` the
    same for the best continuous start (no index); and `history`: per
    step (steps, K) the best feasible loss over the task's starts (NaN if
    none) and the least violation.
  """
  k = len(limits)
  probe = gradient.Problem(
    tasks.space, tasks.workloads[0], tasks.stack, 'throughput'
  )
  run_config = dataclasses.replace(config, starts=starts)
  gradient.check_memory([probe], run_config, tasks=k)
  z0 = gradient.initial_starts(probe, k * starts, config.seed)
  rows = _per_start(np.repeat(np.arange(k), starts), weights, limits, kinds)
  z, hist, end = _program('run', tasks, config)(z0, *rows)
  z = np.asarray(z)
  relaxed, cand, owner = _best_starts(tasks, z, end, k, starts, snap_top)
  ev, ok, best = _best_buildable(tasks, cand, owner, weights, limits, kinds)
  return {
    'index': cand[best],
    'feasible': ev['feasible'][best] & ok[best],
    'logs': ev['logs'][best],
    'capex': ev['capex'][best],
    'power': ev['power'][best],
    'objective': -ev['loss'][best],
    'relaxed_logs': np.stack(relaxed['logs']),
    'relaxed_capex': np.array(relaxed['capex']),
    'relaxed_power': np.array(relaxed['power']),
    'relaxed_feasible': np.array(relaxed['feasible']),
    'relaxed_objective': -np.array(relaxed['loss']),
    'history': _history(hist, k, starts),
    'evaluations': int(k * starts * (2 * config.steps + 1) + len(cand)),
  }


def _per_start(owner: np.ndarray, weights, limits, kinds) -> tuple:
  """(weights, limits, kinds) of each row's task `owner`, as float64,
  float64 and int32 arrays."""
  return (
    np.asarray(weights, dtype=np.float64)[owner],
    np.asarray(limits, dtype=np.float64)[owner],
    np.asarray(kinds, dtype=np.int32)[owner],
  )


def _history(hist: dict, k: int, starts: int) -> dict:
  """Per step (steps, K): the best feasible loss over each task's starts
  (NaN if none) and the least violation."""
  hl = np.asarray(hist['loss']).reshape(-1, k, starts)
  hv = np.asarray(hist['violation']).reshape(-1, k, starts)
  feas_h = hv <= gradient.FEASIBLE_TOL
  best_h = np.where(feas_h, hl, np.inf).min(axis=2)
  return {
    'best_feasible_loss': np.where(np.isfinite(best_h), best_h, np.nan),
    'least_violation': hv.min(axis=2),
  }


def _best_starts(tasks: Tasks, z, end, k: int, starts: int, snap_top: int):
  """(relaxed, cand, owner): per task its best relaxed start's logs,
  capex, power, feasibility and loss (lists over tasks), from `end`, the
  starts' assessment at z; the canonical buildable neighbours of its
  `snap_top` best starts, and the task of each."""
  loss, g, logs, capex, power = (np.asarray(x) for x in end)
  ok = _feasible(g - gradient.FEASIBLE_TOL)
  viol = np.max(np.maximum(g, 0.0), axis=1)
  key = np.where(ok, loss, 1e200 + viol)
  hc = tasks.space.num_hw_coords
  cand, owner = [], []
  relaxed = {'logs': [], 'capex': [], 'power': [], 'feasible': [], 'loss': []}
  for task in range(k):
    mine = np.arange(task * starts, (task + 1) * starts)
    order = mine[np.argsort(key[mine], kind='stable')]
    b = order[0]
    relaxed['logs'].append(logs[b])
    relaxed['capex'].append(capex[b])
    relaxed['power'].append(power[b])
    relaxed['feasible'].append(bool(ok[b]))
    relaxed['loss'].append(loss[b])
    for i in order[:snap_top]:
      nb = buildability.canonical_index(
        tasks.space, ds.neighbour_indices(tasks.space, z[i, :hc])
      )
      nb, _ = snapping.with_boards(tasks.space, nb)
      cand.append(nb)
      owner.append(np.full(len(nb), task))
  return relaxed, np.concatenate(cand), np.concatenate(owner)


def _best_buildable(tasks: Tasks, cand, owner, weights, limits, kinds):
  """(ev, ok, best): every candidate evaluated on its task, whether it is
  buildable, and per task the row of its best candidate (buildable ones
  first, then feasible, then least loss or violation)."""
  ev = evaluate_buildable(
    tasks, cand, *_per_start(owner, weights, limits, kinds)
  )
  ok, _ = snapping.buildable(tasks.space, cand)
  best = []
  for task in range(len(limits)):
    mine = np.flatnonzero(owner == task)
    mine = mine[ok[mine]] if ok[mine].any() else mine
    v = np.max(np.maximum(ev['g'][mine], 0.0), axis=1)
    kk = np.where(ev['feasible'][mine], ev['loss'][mine], 1e200 + v)
    best.append(mine[int(np.argmin(kk))])
  return ev, ok, np.array(best)


def history_rows(history: dict, labels: list[str], value_name: str):
  """metrics.jsonl rows of a batched search's per-step history.

  One row per step with, for each search t labelled `labels[t]`, the best
  feasible throughput so far (exp of minus the best feasible loss; None
  before any design was feasible) under `<label>/<value_name>`, and the
  least constraint violation under `<label>/least_violation`.
  """
  rows = []
  for s in range(history['best_feasible_loss'].shape[0]):
    row = {'step': s}
    for t, label in enumerate(labels):
      b = history['best_feasible_loss'][s, t]
      row[f'{label}/{value_name}'] = None if np.isnan(b) else float(np.exp(-b))
      row[f'{label}/least_violation'] = history['least_violation'][s, t]
    rows.append(row)
  return rows
