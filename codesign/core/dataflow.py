"""Which inputs a function's outputs read, from its traced program.

`arguments_read(fn, *args)` traces `fn` (no compile, no run) and follows
the data from each positional argument through the equations of its
jaxpr: an equation's outputs read every argument that any of its inputs
reads; nested jitted programs and loops (`scan`, `while`) are followed
inside (another nested program, a conditional, counts whole, so the
answer may name an argument the outputs do not really need, never the
reverse). A search uses it to find the axes of a design that its plan
depends on (`codesign.search.design_space.plan_axes`), so that designs
differing only elsewhere share one plan.
"""

import jax
from jax.extend import core as jcore


def arguments_read(fn, *args) -> frozenset:
  """Positions of the arguments of `fn(*args)` that its outputs depend
  on (conservatively: see the module docstring)."""
  jaxpr = jax.make_jaxpr(fn)(*args).jaxpr
  flat = [jax.tree.leaves(a) for a in args]
  owner = [{i} for i, leaves in enumerate(flat) for _ in leaves]
  return frozenset(set().union(*_outputs_read(jaxpr, owner)))


def _outputs_read(jaxpr, inputs: list[set]) -> list[set]:
  """What each output of `jaxpr` reads, given what each input reads. A
  nested jitted program (`jit`) and a loop are followed inside, output
  by output, so that a jitted term handed a whole platform reads only
  the fields it uses; other nested programs count whole."""
  reads = dict(zip(jaxpr.invars, inputs, strict=True))

  def read(v):
    return reads.get(v, set()) if isinstance(v, jcore.Var) else set()

  for eqn in jaxpr.eqns:
    ins = [read(v) for v in eqn.invars]
    name = eqn.primitive.name
    if name == 'jit':
      outs = _outputs_read(eqn.params['jaxpr'].jaxpr, ins)
    elif name in _LOOPS:
      outs = _LOOPS[name](eqn.params, ins)
    else:
      outs = [set().union(*ins)] * len(eqn.outvars)
    for v, found in zip(eqn.outvars, outs, strict=True):
      reads[v] = found
  return [read(v) for v in jaxpr.outvars]


def _carried(body, fixed: list[set], carry: list[set], after: list[set]):
  """What a loop's carry reads after any number of steps (a fixed point:
  each step's carry reads what the body's carry outputs read, and what
  it read before), and what the body's other outputs then read. The
  body's inputs are `fixed` + carry + `after`."""
  while True:
    out = _outputs_read(body, fixed + carry + after)
    grown = [a | b for a, b in zip(carry, out, strict=False)]
    if grown == carry:
      return carry, out[len(carry) :]
    carry = grown


def _while_read(params, ins):
  nc, nb = params['cond_nconsts'], params['body_nconsts']
  cond, body = params['cond_jaxpr'].jaxpr, params['body_jaxpr'].jaxpr
  carry, _ = _carried(body, ins[nc : nc + nb], ins[nc + nb :], [])
  # How many steps run reads what the condition reads.
  steps = set().union(*_outputs_read(cond, ins[:nc] + carry))
  return [c | steps for c in carry]


def _scan_read(params, ins):
  nc, nk = params['num_consts'], params['num_carry']
  carry, ys = _carried(
    params['jaxpr'].jaxpr, ins[:nc], ins[nc : nc + nk], ins[nc + nk :]
  )
  return carry + ys


_LOOPS = {'while': _while_read, 'scan': _scan_read}
