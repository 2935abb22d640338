"""Random designs inside `hardware.BOUNDS`, shared by the property and
gradient tests."""

import jax
import numpy as np

from codesign import cost_model, hardware, plan, platform_presets
from codesign import workload_presets as presets
from codesign.plan import SHARDINGS
from codesign.pytree import replace

PATHS = hardware.leaf_paths(platform_presets.get('big_basin'))
LO = np.array([hardware.BOUNDS[k][0] for k in PATHS])
HI = np.array([hardware.BOUNDS[k][1] for k in PATHS])


def design(u):
  """Leaf values in pytree order from unit numbers u in [0, 1]:
  log-uniform where the lower bound is positive, uniform on [0, hi] where
  it is 0."""
  u = np.asarray(u, dtype=np.float64)
  log = LO * (HI / np.where(LO > 0, LO, 1.0)) ** u
  return np.where(LO > 0, np.clip(log, LO, HI), HI * u)


def configure(wname, pname, topology, sharding):
  """(workload, platform, plan template) of a test configuration.

  `sharding` is a plan sharding, `auto`, or `mixed` (all the shardings in
  turn over the tables, with bf16 communication)."""
  w = presets.get(wname)
  p = platform_presets.get(pname)
  if topology:
    p = replace(p, fabric=replace(p.fabric, topology=topology))
  if sharding == 'mixed':
    template = plan.make(w, p)
    shardings = tuple(
      SHARDINGS[i % len(SHARDINGS)] for i in range(w.num_tables)
    )
    template = replace(template, sharding=shardings, comm_precision='bf16')
  else:
    template = plan.make(w, p, sharding=sharding)
  return w, p, template


def evaluator(w, p, template):
  """report(leaves, frac, c, o): the cost report of a design given as the
  platform's leaves in pytree order (structure of `p`) and the plan's
  continuous leaves (hbm_fraction, cpu_lookup_fraction, overlap)."""
  treedef = jax.tree.structure(p)

  def report(leaves, frac, c, o):
    platform = jax.tree.unflatten(
      treedef, [leaves[i] for i in range(len(PATHS))]
    )
    pl = replace(template, hbm_fraction=frac, cpu_lookup_fraction=c, overlap=o)
    return cost_model.evaluate(platform, w, pl)

  return report
