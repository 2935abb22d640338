"""The plan half of a design vector: what a search chooses about the
plan, and how a relaxed choice becomes a written plan.

A design space (`codesign.search.design_space.DesignSpace`) fixes how its plan
is chosen:
- plan mode `optimize`: the HBM fraction of every table (T), the CPU
  lookup share (1) and, optionally, the overlap (1) are coordinates in
  [0, 1]; plan mode `auto`: the HBM fractions follow the planner's one
  rule for the platform (`planner.fit_hbm_traced`), so a discrete design
  maps to one plan;
- sharding: one of `plan.SHARDINGS` for every table (static), or
  `SEARCH`: each table's sharding is a choice among
  `terms.SEARCHED_SHARDINGS` (the auto planner's candidates), relaxed
  like a part axis to per-table mixture weights (T x K coordinates, the
  last of the plan vector) that the cost model reads as
  `sharding_weights`; a one-hot row is exactly that sharding.

Plan vector layout: [HBM fractions (T), CPU lookup share (1), overlap
(0 or 1)] in `optimize` mode, nothing in `auto` mode, then the sharding
weights (T x K) when the sharding is searched.
"""

import jax
import jax.numpy as jnp
import numpy as np

from codesign.model import planner, terms
from codesign.search import part_tables as pt
from codesign.spec import plan as plan_lib
from codesign.spec import workload as wl
from codesign.spec.stack import Stack

# The sharding value of a space whose per-table sharding is searched.
SEARCH = 'search'
CHOICES = terms.SEARCHED_SHARDINGS


def leaf_count(space) -> int:
  """Plan coordinates before the sharding weights."""
  if space.plan_mode == 'auto':
    return 0
  return space.num_tables + 1 + int(space.optimize_overlap)


def sharding_count(space) -> int:
  """Sharding coordinates: T x K when searched, else 0."""
  return space.num_tables * len(CHOICES) if space.sharding == SEARCH else 0


def size(space) -> int:
  """Length of the plan vector."""
  return leaf_count(space) + sharding_count(space)


def sharding_weights(space, plan_z):
  """Per-table weights (T, K) from the plan vector, or None when the
  space's sharding is fixed."""
  if space.sharding != SEARCH:
    return None
  return _weights(space, _pieces(space, plan_z)['sharding'])


def _weights(space, z):
  if space.sharding != SEARCH:
    return None
  return pt.weights(z.reshape(space.num_tables, len(CHOICES)))


def _pieces(space, plan_z) -> dict:
  """The plan vector cut into its parts by one `split` (`frac`,
  `cpu_lookup`, `overlap`, `sharding`; the absent ones empty): its
  gradient is then one concatenation of the parts' gradients, where
  slices make a pad and an add per part."""
  t, lead = space.num_tables, leaf_count(space)
  sizes = {
    'frac': t if lead else 0,
    'cpu_lookup': 1 if lead else 0,
    'overlap': lead - t - 1 if lead else 0,
    'sharding': sharding_count(space),
  }
  parts = split(plan_z, tuple(sizes.values()))
  return dict(zip(sizes, parts, strict=True))


def split(z, sizes: tuple) -> list:
  """`z` (..., D) cut along its last axis into parts of `sizes` (they
  sum to D) by one `lax.split`: the same values as slices, and a
  gradient assembled by one concatenation."""
  return jax.lax.split(jnp.asarray(z), sizes, axis=-1)


def auto_fractions(space, workload: wl.Workload, stack: Stack, p, plan_z):
  """The HBM fractions (T,) of the `auto` plan mode: the planner's rule
  (`planner.fit_hbm_traced`) for platform p and the sharding of its plan
  coordinates."""
  return _fit(space, workload, stack, p, sharding_weights(space, plan_z))


def _fit(space, workload: wl.Workload, stack: Stack, p, weights):
  """`auto_fractions` from the sharding weights (None: the space's
  sharding) already read from the plan coordinates."""
  rule = (space.sharding,) * space.num_tables if weights is None else weights
  return planner.fit_hbm_traced(workload, p, stack, rule)


def decode(space, workload: wl.Workload, stack: Stack, p, plan_z, frac=None):
  """(plan, sharding weights or None) for platform p from its plan
  coordinates (shape (size(space),)). With searched sharding the plan's
  `sharding` names are the placeholder `table_wise`; the weights are what
  the cost model and the HBM rule read. In `auto` mode, `frac` (T,) is
  `auto_fractions` of the same platform and coordinates when the caller
  has it already (designs that share their plan share one fit)."""
  t = space.num_tables
  part = _pieces(space, plan_z)
  weights = _weights(space, part['sharding'])
  if space.plan_mode == 'auto':
    if frac is None:
      frac = _fit(space, workload, stack, p, weights)
    cpu_lookup = jnp.ones(())
    ov = jnp.asarray(space.overlap)
  else:
    frac = part['frac']
    cpu_lookup = part['cpu_lookup'][0]
    ov = part['overlap'][0] if space.optimize_overlap else space.overlap
    ov = jnp.asarray(ov)
  plan = plan_lib.Plan(
    hbm_fraction=frac,
    cpu_lookup_fraction=cpu_lookup,
    overlap=ov,
    sharding=((CHOICES[0] if weights is not None else space.sharding),) * t,
    column_shards=4,
    comm_precision=space.comm_precision,
  )
  return plan, weights


def concrete(plan: plan_lib.Plan, weights=None) -> plan_lib.Plan:
  """`plan` with numpy leaves (for JSON and the unjitted cost model); with
  sharding weights, each table takes its heaviest sharding."""
  names = plan.sharding if weights is None else terms.sharding_names(weights)
  return plan_lib.Plan(
    hbm_fraction=np.asarray(plan.hbm_fraction, dtype=np.float64),
    cpu_lookup_fraction=float(np.asarray(plan.cpu_lookup_fraction)),
    overlap=float(np.asarray(plan.overlap)),
    sharding=tuple(names),
    column_shards=plan.column_shards,
    comm_precision=plan.comm_precision,
  )


def snap_sharding(space, plan_z: np.ndarray) -> np.ndarray:
  """The plan vector with every table's sharding weights one-hot at the
  heaviest (unchanged when the sharding is fixed)."""
  out = np.array(plan_z, dtype=np.float64)
  if space.sharding != SEARCH:
    return out
  k = len(CHOICES)
  lead = leaf_count(space)
  z = out[lead:].reshape(space.num_tables, k)
  out[lead:] = np.eye(k)[np.argmax(z, axis=1)].reshape(-1)
  return out


def uniform_sharding(space, plan_z: np.ndarray, choice: int) -> np.ndarray:
  """The plan vector (P,), or vectors (N, P), with every table's sharding
  one-hot at `choice` (an index into CHOICES)."""
  out = np.array(plan_z, dtype=np.float64)
  k = len(CHOICES)
  out[..., leaf_count(space) :] = np.tile(np.eye(k)[choice], space.num_tables)
  return out


def sharding_of_names(space, names: tuple[str, ...]) -> np.ndarray:
  """Sharding coordinates (T x K,) of per-table sharding names."""
  return terms.one_hot_sharding(names).reshape(-1)


def seed_uniform_shardings(space, z: np.ndarray) -> np.ndarray:
  """Starts z (S, D) where K of every K + 1 begin with one sharding for
  every table (each of CHOICES in turn), so that a search over the
  sharding starts from every uniform sharding a fixed-sharding search
  would use; unchanged when the sharding is fixed."""
  if space.sharding != SEARCH:
    return z
  hc, k = space.num_hw_coords, len(CHOICES)
  out = np.array(z, dtype=np.float64)
  for i in range(len(out)):
    if i % (k + 1) < k:
      out[i, hc:] = uniform_sharding(space, out[i, hc:], i % (k + 1))
  return out


def vector_of(space, plan: plan_lib.Plan) -> np.ndarray:
  """The plan coordinates (size(space),) of a concrete plan whose
  shardings are among CHOICES (a searched space) or the space's own."""
  out = []
  if space.plan_mode == 'optimize':
    out += [np.asarray(plan.hbm_fraction, dtype=np.float64)]
    out += [np.array([plan.cpu_lookup_fraction])]
    if space.optimize_overlap:
      out += [np.array([plan.overlap])]
  if space.sharding == SEARCH:
    out += [sharding_of_names(space, plan.sharding)]
  return np.concatenate(out) if out else np.zeros(0)
