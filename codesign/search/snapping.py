"""From relaxed search results to buildable designs: which distinct
platforms to keep, and the plan at the granularity a plan is written in.

Used by `codesign.search.gradient` after the continuous phase: the best starts
are rounded to grid neighbours, evaluated, and the distinct best platforms
polished and snapped; `buildable` keeps only designs that pass the
concrete buildability check. The relaxation does not see the board rule
(`buildability.BOARDS`: a part's accelerator counts, host sockets and
CPUs as sold), so every rounding whose board is not sold also brings its
nearest sold board (`with_boards`), and the checks keep only those.
"""

import functools

import numpy as np

from codesign.search import buildability, plan_space
from codesign.search import design_space as ds
from codesign.spec import catalog

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
  rows = np.asarray(index).astype(np.int64).tolist()  # ints, at C speed
  seen, out = set(), []
  for k in order:
    if not np.isfinite(key[k]):
      break
    t = tuple(rows[k])
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
  `design_space.build`, the board rule included), and per rule how many
  distinct designs it rejected."""
  verdict, rejected = {}, {}
  ok = np.ones(len(index), dtype=bool)
  parts = catalog.user_parts()
  for k, row in enumerate(np.asarray(index).astype(np.int64).tolist()):
    key = tuple(row)
    if key not in verdict:
      verdict[key] = broken_rules(space, parts, key)
      for rule in sorted(verdict[key]):
        rejected[rule] = rejected.get(rule, 0) + 1
    ok[k] = not verdict[key]
  return ok, rejected


@functools.lru_cache(maxsize=1 << 16)
def broken_rules(space: ds.DesignSpace, parts, key: tuple) -> frozenset:
  """The rules design `key` of `space` breaks as a proposal, with the
  user's `parts` in effect (`catalog.user_parts()`, which the rules
  read). Kept: a search snaps the same designs in every phase and every
  question asked of a space, and building one in Python takes about
  0.5 ms (9,010 builds were half of six small proposals' time)."""
  p = ds.build(space, key)
  return frozenset(r for r, _ in buildability.violations(p, proposal=True))


# Grid-index axes of a board: host CPU, sockets, accelerators per node.
_BOARD_AXES = (1, 3, 4)


@functools.lru_cache(maxsize=32)
def board_table(space: ds.DesignSpace) -> np.ndarray:
  """(A, C, S, N) bools over the space's accelerators, CPUs, sockets and
  accelerators per node: a board that is sold
  (`buildability.board_allows`) on sockets the CPU scales to (its
  `min_sockets` to `max_sockets`). All True for a CPU trainer (no
  board)."""
  sockets, accels = space.grids[1], space.grids[2]
  shape = (len(space.accelerators), len(space.cpus), len(sockets), len(accels))
  if space.trainer == 'cpu':
    return np.ones(shape, dtype=bool)
  facts = buildability.catalog_facts()
  out = np.zeros(shape, dtype=bool)
  for a, acc in enumerate(space.accelerators):
    for c, cpu in enumerate(space.cpus):
      lo = facts.get(cpu, {}).get('min_sockets', 1)
      hi = facts.get(cpu, {}).get('max_sockets', max(sockets))
      for i, s in enumerate(sockets):
        for j, n in enumerate(accels):
          out[a, c, i, j] = lo <= s <= hi and buildability.board_allows(
            acc, cpu, float(n), float(s)
          )
  return out


def board_ok(space: ds.DesignSpace, index) -> np.ndarray:
  """(N,) whether each design (N, H)'s board is sold (`board_table`)."""
  index = np.asarray(index)
  c, s, n = (index[:, a] for a in _BOARD_AXES)
  return board_table(space)[index[:, 0], c, s, n]


def _nearest_boards(table_a: np.ndarray, row) -> list[tuple]:
  """The sold (cpu, sockets, accelerators) grid indices nearest to
  `row`'s: fewest steps on the sockets and accelerator axes (log-spaced
  grids) plus one for another CPU; every tie."""
  legal = np.argwhere(table_a)
  if not len(legal):
    return []
  own = np.array([row[a] for a in _BOARD_AXES])
  dist = (legal[:, 0] != own[0]) + np.abs(legal[:, 1:] - own[1:]).sum(axis=1)
  return [tuple(x) for x in legal[dist == dist.min()]]


def _same_total(space: ds.DesignSpace, row, new) -> list[np.ndarray]:
  """`new` (a board moved from `row`) and, where its accelerators per node
  changed, the same design on the node counts next to the one that keeps
  `row`'s accelerators in all (its grid neighbours below and above), so
  that a board of more accelerators per node need not cost more."""
  nodes, accels = np.asarray(space.grids[0]), np.asarray(space.grids[2])
  if new[4] == row[4]:
    return [new]
  want = nodes[row[2]] * accels[row[4]] / accels[new[4]]
  below = np.flatnonzero(nodes <= want)
  above = np.flatnonzero(nodes >= want)
  low = int(below[-1]) if len(below) else 0
  high = int(above[0]) if len(above) else len(nodes) - 1
  out = [new]
  for i in sorted({low, high}):
    other = np.array(new)
    other[2] = i
    out.append(other)
  return list(buildability.canonical_index(space, np.stack(out)))


def with_boards(space: ds.DesignSpace, index, group=None):
  """`index` (N, H) followed by, for each row whose board is not sold
  (`board_ok`), the same design on its nearest sold boards
  (`_nearest_boards`: the host CPU, sockets and accelerators per node
  moved, the rest kept; with the accelerators in all kept too,
  `_same_total`), distinct within each `group` (N,) (default one group)
  and new there.

  Returns:
    (index (M, H), source (M,)): the rows and the input row each came
    from (so its plan or owner can follow it).
  """
  index = np.asarray(index)
  group = np.zeros(len(index), int) if group is None else np.asarray(group)
  table = board_table(space)
  seen = {(int(g), tuple(r.tolist())) for g, r in zip(group, index)}
  rows, source = [], []
  for k in np.flatnonzero(~board_ok(space, index)):
    for fix in _nearest_boards(table[index[k, 0]], index[k]):
      moved = np.array(index[k])
      moved[list(_BOARD_AXES)] = fix
      for new in _same_total(space, index[k], moved):
        key = (int(group[k]), tuple(new.astype(np.int64).tolist()))
        if key not in seen:
          seen.add(key)
          rows.append(new)
          source.append(k)
  if not rows:
    return index, np.arange(len(index))
  out = np.concatenate([index, np.stack(rows).astype(index.dtype)])
  return out, np.concatenate([np.arange(len(index)), source])


def distinct(space: ds.DesignSpace, index, plan_z) -> tuple:
  """(index, plan_z) without repeated designs, in the order of their
  first appearance: a part that stands twice on its axis (a space of one
  CPU, the CPU trainer's unused accelerator) is its first position, and
  roundings that land on one design (an axis on a grid step, a single
  node's NICs) are one row, evaluated once."""
  index = np.array(index, dtype=np.int64, copy=True)
  for axis, names in ((0, space.accelerators), (1, space.cpus)):
    first = np.array([names.index(n) for n in names])
    index[:, axis] = first[index[:, axis]]
  plan_z = np.asarray(plan_z)
  keep = first_rows(np.concatenate([index, plan_z], axis=1))
  return index[keep], plan_z[keep]


def first_rows(keys: np.ndarray) -> np.ndarray:
  """Positions (ascending) of the first of each distinct row of `keys`
  (N, K): `np.unique(keys, axis=0, return_index=True)`'s, sorted. Rows
  are compared by their bytes (-0.0 made 0.0 first, so that equal values
  are equal bytes): a dict of a few thousand rows of hundreds of plan
  coordinates, where `np.unique` sorts them as records (0.68 s against
  0.10 s for 24,000 rows of 339)."""
  rows = np.ascontiguousarray(keys, dtype=np.float64) + 0.0
  first = {}
  for k, row in enumerate(map(bytes, rows)):
    first.setdefault(row, k)
  return np.fromiter(first.values(), dtype=np.intp, count=len(first))


def roundings(space: ds.DesignSpace, z: np.ndarray):
  """Every rounding of relaxed designs z (S, D): per start its distinct
  grid neighbours (`design_space.neighbour_indices`, canonical per
  `buildability.canonical_index`) with the start's plan snapped
  (`snap_plan`), and the nearest sold board of each rounding whose board
  is not sold (`with_boards`); where the sharding is searched, every
  rounding also with each uniform sharding, so that a platform the
  search reaches is never judged by a worse per-table mix than one
  sharding for every table.

  Returns:
    (index (N, H), plan_z (N, P)).
  """
  hc = space.num_hw_coords
  rows = [ds.neighbour_indices(space, x[:hc]) for x in z]
  index = buildability.canonical_index(space, np.concatenate(rows))
  start = np.repeat(np.arange(len(z)), [len(r) for r in rows])
  plans = np.stack([snap_plan(space, x[hc:]) for x in z])
  index, source = with_boards(space, index, start)
  plan_z = plans[start[source]]
  if space.sharding == plan_space.SEARCH:
    k = len(plan_space.CHOICES)
    uniform = [plan_space.uniform_sharding(space, plan_z, c) for c in range(k)]
    index = np.concatenate([index] * (k + 1))
    plan_z = np.concatenate([plan_z, *uniform])
  return index, plan_z
