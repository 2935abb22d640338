"""Which inputs a function's outputs read, from its traced program.

`arguments_read(fn, *args)` traces `fn` (no compile, no run) and follows
the data from each positional argument through the equations of its
jaxpr: an equation's outputs read every argument that any of its inputs
reads (a loop or a nested program counts whole, so the answer may name
an argument the outputs do not really need, never the reverse). A
search uses it to find the axes of a design that its plan depends on
(`codesign.search.design_space.plan_axes`), so that designs differing only
elsewhere share one plan.
"""

import jax
from jax.extend import core as jcore


def arguments_read(fn, *args) -> frozenset:
  """Positions of the arguments of `fn(*args)` that its outputs depend
  on (conservatively: see the module docstring)."""
  jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
  flat = [jax.tree.leaves(a) for a in args]
  owner = [i for i, leaves in enumerate(flat) for _ in leaves]
  reads = {v: {owner[k]} for k, v in enumerate(jaxpr.invars)}

  def read(v):
    return reads.get(v, set()) if isinstance(v, jcore.Var) else set()

  for eqn in jaxpr.eqns:
    found = set().union(*(read(v) for v in eqn.invars))
    for v in eqn.outvars:
      reads[v] = found
  return frozenset(set().union(*(read(v) for v in jaxpr.outvars)))
