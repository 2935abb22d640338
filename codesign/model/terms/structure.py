"""A platform's wiring choices as numbers, so that one compiled program
costs every accelerator platform of a workload.

The choices that are strings on a platform (`Fabric.topology`,
`Fabric.in_switch_reduction`, `HostLink.kind`, `Nic.attach`) are static:
each combination is a program of its own. `evaluate_design` passes them
instead as a `Structure` of numbers (`of`), with the platform's own
fields set to one combination (`canonical`), and every term that reads
one of them asks here (`topology_is`, `c2c`, `nic_on_accelerator`,
`in_switch_reduction`): a Python bool from the platform where no
`Structure` is given (every other caller: the search, the planner, the
tests), else a traced 0 or 1 from the `Structure`. `pick` then takes one
branch (static) or selects between both (traced: `jnp.where`, exact).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core.pytree import replace
from codesign.spec import hardware
from codesign.spec.hardware import Platform

# The fields `canonical` gives every platform it costs with a Structure
# (the model reads none of them then; `cpu.memory` no term reads).
CANONICAL = {
  'topology': 'switch',
  'in_switch_reduction': True,
  'kind': 'pcie',
  'attach': 'accelerator',
  'memory': 'dimm',
}


class Structure(NamedTuple):
  """A platform's wiring as numbers (1.0 yes, 0.0 no).

  topology: (len(hardware.TOPOLOGIES),) one-hot of `Fabric.topology`;
  in_switch_reduction: `Fabric.in_switch_reduction`; c2c: the host link
  is NVLink-C2C (`HostLink.kind`); nic_on_accelerator: the NICs attach
  to the accelerators (`Nic.attach`, GPUDirect).
  """

  topology: object
  in_switch_reduction: object
  c2c: object
  nic_on_accelerator: object


def of(p: Platform) -> Structure:
  """The `Structure` of a concrete platform (numpy float64)."""
  one_hot = np.zeros(len(hardware.TOPOLOGIES))
  one_hot[hardware.TOPOLOGIES.index(p.fabric.topology)] = 1.0
  return Structure(
    topology=one_hot,
    in_switch_reduction=np.float64(p.fabric.in_switch_reduction),
    c2c=np.float64(p.host_link.kind == 'c2c'),
    nic_on_accelerator=np.float64(p.nic.attach == 'accelerator'),
  )


def canonical(p: Platform) -> Platform:
  """`p` with the wiring fields a `Structure` carries (and the socket's
  memory kind, which no term reads) set to `CANONICAL`: platforms that
  differ only there share one program."""
  c = CANONICAL
  return replace(
    p,
    fabric=replace(
      p.fabric,
      topology=c['topology'],
      in_switch_reduction=c['in_switch_reduction'],
    ),
    host_link=replace(p.host_link, kind=c['kind']),
    nic=replace(p.nic, attach=c['attach']),
    cpu=replace(p.cpu, memory=c['memory']),
  )


def topology_is(p: Platform, structure, *names: str):
  """Whether the fabric's topology is one of `names`."""
  if structure is None:
    return p.fabric.topology in names
  return sum(structure.topology[hardware.TOPOLOGIES.index(n)] for n in names)


def c2c(p: Platform, structure):
  """Whether the host link is NVLink-C2C."""
  if structure is None:
    return p.host_link.kind == 'c2c'
  return structure.c2c


def nic_on_accelerator(p: Platform, structure):
  """Whether the NICs attach to the accelerators (GPUDirect)."""
  if structure is None:
    return p.nic.attach == 'accelerator'
  return structure.nic_on_accelerator


def in_switch_reduction(p: Platform, structure):
  """Whether the accelerators' switch reduces (NVLink SHARP)."""
  if structure is None:
    return p.fabric.in_switch_reduction
  return structure.in_switch_reduction


def no(flag):
  """Not `flag` (a Python bool, or a traced 0 or 1)."""
  if isinstance(flag, bool | np.bool_):
    return not flag
  return 1.0 - flag


def all_of(*flags):
  """Every one of `flags` (Python bools, or traced 0s and 1s)."""
  if all(isinstance(f, bool | np.bool_) for f in flags):
    return all(flags)
  out = 1.0
  for f in flags:
    out = out * f
  return out


def pick(flag, yes, no):
  """`yes()` where `flag`, else `no()`: one branch for a Python bool, both
  and an exact select for a traced 0 or 1 (pytrees alike)."""
  if isinstance(flag, bool | np.bool_):
    return yes() if flag else no()
  return _select(flag, yes(), no())


def by_topology(p: Platform, structure, terms):
  """`terms(name)` for the fabric's topology: called once with the
  platform's static topology, or for every topology and selected by the
  `Structure`'s one-hot (a tuple of arrays)."""
  if structure is None:
    return terms(p.fabric.topology)
  first, *others = hardware.TOPOLOGIES
  out = terms(first)
  for i, name in enumerate(others, start=1):
    out = _select(structure.topology[i], terms(name), out)
  return out


def _select(flag, yes, no):
  """`yes` where the traced 0 or 1 `flag` is 1, else `no`, leaf by leaf
  (`jnp.where`: exact)."""
  on = flag > 0.5
  return jax.tree.map(lambda a, b: jnp.where(on, a, b), yes, no)
