"""From relaxed search results to buildable designs: which distinct
platforms to keep, and the plan at the granularity a plan is written in.

Used by `codesign.search.gradient` after the continuous phase: the best starts
are rounded to grid neighbours, evaluated, and the distinct best platforms
polished and snapped; `buildable` keeps only designs that pass the
concrete buildability check.
"""

import numpy as np

from codesign.search import buildability, plan_space
from codesign.search import design_space as ds

# Granularity of a written plan's fractions.
PLAN_STEP = 1e-4


def distinct_best(index, ev, limit: int, hardware=None) -> list[int]:
  """Positions of up to `limit` distinct platforms, best first.

  index: (N, H) grid indices of evaluated designs; ev: their `loss` (N,),
  constraint values `g` (N, C) (<= 0 holds) and `feasible` (N,). With
  `hardware` (the columns of g that are hardware constraints: budget,
  power and the buildability rows), the other (memory) constraints are
  ignored, as a new plan can make the tables fit, and platforms that break
  a hardware constraint are left out.
  """
  g = ev['g']
  if hardware is not None:
    ok = np.all(g[:, list(hardware)] <= 0.0, axis=1) & np.isfinite(ev['loss'])
    key = np.where(ok, ev['loss'], np.inf)
  else:
    viol = np.max(np.maximum(g, 0.0), axis=1)
    key = np.where(ev['feasible'], ev['loss'], 1e200 + viol)
  order = np.argsort(key, kind='stable')
  seen, out = set(), []
  for k in order:
    if not np.isfinite(key[k]):
      break
    t = tuple(int(x) for x in index[k])
    if t in seen:
      continue
    seen.add(t)
    out.append(int(k))
    if len(out) == limit:
      break
  return out or [int(order[0])]


def snap_plan(space: ds.DesignSpace, plan_z: np.ndarray) -> np.ndarray:
  """A plan vector (P,) at the granularity a plan is written in:
  fractions in steps of PLAN_STEP; HBM fractions round down (never
  overfilling HBM); searched sharding weights one-hot at the heaviest."""
  plan_z = plan_space.snap_sharding(space, plan_z)
  lead = plan_space.leaf_count(space)
  if lead == 0:
    return plan_z
  t = space.num_tables
  out = np.array(plan_z)
  out[:lead] = np.rint(plan_z[:lead] / PLAN_STEP) * PLAN_STEP
  out[:t] = np.floor(plan_z[:t] / PLAN_STEP + 1e-6) * PLAN_STEP
  return np.clip(out, 0.0, 1.0)


def buildable(space: ds.DesignSpace, index) -> tuple[np.ndarray, dict]:
  """Whether each snapped design (N, H) passes the concrete buildability
  check of a proposal (`buildability.violations(..., proposal=True)` on
  `design_space.build`), and per rule how many distinct designs it
  rejected."""
  verdict, rejected = {}, {}
  ok = np.ones(len(index), dtype=bool)
  for k, row in enumerate(np.asarray(index)):
    key = tuple(int(x) for x in row)
    if key not in verdict:
      p = ds.build(space, key)
      found = buildability.violations(p, proposal=True)
      # Rules the relaxation does not see yet are reported, not enforced:
      # the search's roundings rarely reach a legal board by themselves.
      verdict[key] = {
        r for r, _ in found if r not in buildability.CONCRETE_ONLY
      }
      for rule in sorted(verdict[key]):
        rejected[rule] = rejected.get(rule, 0) + 1
    ok[k] = not verdict[key]
  return ok, rejected


def roundings(space: ds.DesignSpace, z: np.ndarray):
  """Every rounding of relaxed designs z (S, D): per start its 2^H grid
  neighbours (`design_space.neighbour_indices`, canonical per
  `buildability.canonical_index`) with the start's plan snapped
  (`snap_plan`); where the sharding is searched, every rounding also with
  each uniform sharding, so that a platform the search reaches is never
  judged by a worse per-table mix than one sharding for every table.

  Returns:
    (index (N, H), plan_z (N, P)).
  """
  hc = space.num_hw_coords
  index = np.concatenate([ds.neighbour_indices(space, x[:hc]) for x in z])
  index = buildability.canonical_index(space, index)
  per = index.shape[0] // len(z)
  plan_z = np.concatenate(
    [np.repeat(snap_plan(space, x[hc:])[None], per, axis=0) for x in z]
  )
  if space.sharding == plan_space.SEARCH:
    k = len(plan_space.CHOICES)
    uniform = [
      np.stack([plan_space.uniform_sharding(space, x, c) for x in plan_z])
      for c in range(k)
    ]
    index = np.concatenate([index] * (k + 1))
    plan_z = np.concatenate([plan_z, *uniform])
  return index, plan_z
