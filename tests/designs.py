"""Random designs inside `hardware.BOUNDS` and `stack.BOUNDS`, shared by the
property and gradient tests."""

import dataclasses

import jax
import numpy as np

from codesign.core.pytree import replace
from codesign.model import cost_model, planner
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import stack as stack_lib
from codesign.spec import workload_presets as presets
from codesign.spec.plan import SHARDINGS

PATHS = hardware.leaf_paths(platform_presets.get('big_basin'))
LO = np.array([hardware.BOUNDS[k][0] for k in PATHS])
HI = np.array([hardware.BOUNDS[k][1] for k in PATHS])
STACK_PATHS = stack_lib.leaf_paths(stack_presets.get(stack_presets.DEFAULT))
STACK_LO = np.array([stack_lib.BOUNDS[k][0] for k in STACK_PATHS])
STACK_HI = np.array([stack_lib.BOUNDS[k][1] for k in STACK_PATHS])


def _design(u, lo, hi):
  u = np.asarray(u, dtype=np.float64)
  log = lo * (hi / np.where(lo > 0, lo, 1.0)) ** u
  return np.where(lo > 0, np.clip(log, lo, hi), hi * u)


def design(u):
  """Platform leaf values in pytree order from unit numbers u in [0, 1]:
  log-uniform where the lower bound is positive, uniform on [0, hi] where
  it is 0."""
  return _design(u, LO, HI)


def stack_design(u):
  """Stack leaf values in pytree order from unit numbers u in [0, 1], by
  the same rule as `design`."""
  return _design(u, STACK_LO, STACK_HI)


def configure(wname, pname, topology, sharding, stack, changes=()):
  """(workload, platform, stack, plan template) of a test configuration.

  `sharding` is a plan sharding, `auto`, or `mixed` (all the shardings in
  turn over the tables, with bf16 communication). `stack` names a stack
  preset; `changes` are (field, value) pairs that replace its static
  choices."""
  w = presets.get(wname)
  p = platform_presets.get(pname)
  if topology:
    p = replace(p, fabric=replace(p.fabric, topology=topology))
  s = stack_lib.validate(
    dataclasses.replace(stack_presets.get(stack), **dict(changes))
  )
  if sharding == 'mixed':
    template = planner.make(w, p, s)
    shardings = tuple(
      SHARDINGS[i % len(SHARDINGS)] for i in range(w.num_tables)
    )
    template = replace(template, sharding=shardings, comm_precision='bf16')
  else:
    template = planner.make(w, p, s, sharding=sharding)
  return w, p, s, template


def evaluator(w, p, s, template):
  """report(leaves, stack_leaves, frac, c, o): the cost report of a design
  given as the platform's leaves in pytree order (structure of `p`), the
  stack's leaves in pytree order (structure of `s`) and the plan's
  continuous leaves (hbm_fraction, cpu_lookup_fraction, overlap)."""
  treedef = jax.tree.structure(p)
  stack_treedef = jax.tree.structure(s)

  def report(leaves, stack_leaves, frac, c, o):
    platform = jax.tree.unflatten(
      treedef, [leaves[i] for i in range(len(PATHS))]
    )
    stack = jax.tree.unflatten(
      stack_treedef, [stack_leaves[i] for i in range(len(STACK_PATHS))]
    )
    pl = replace(template, hbm_fraction=frac, cpu_lookup_fraction=c, overlap=o)
    return cost_model.evaluate(platform, w, pl, stack)

  return report


def stack_leaves(s) -> np.ndarray:
  """The stack's continuous leaves in pytree order."""
  return np.array([float(v) for v in jax.tree.leaves(s)])
