"""A platform's wiring as numbers (`terms.structure`): the terms that read
it give, with a `Structure`, what they give from the platform's static
fields, for every wiring the presets and the design spaces build; the
NVLS option of a platform without NVLink SHARP weighs exactly nothing;
and `evaluate_design` costs every accelerator preset of a workload in
one program, with the figures of a program compiled for each preset's
own wiring."""

import jax
import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.model import terms as ct
from codesign.model.terms import collectives as co
from codesign.model.terms import structure
from codesign.spec import hardware, platform_presets, stack_presets
from tests.model.fixtures import arrays, tiny_workload

# One accelerator preset per wiring the presets build: NVSwitch with and
# without NVLink SHARP, full mesh (MI300X), hybrid cube mesh (Big
# Basin), bridged pairs (H100 PCIe), NVLink-C2C superchips (GH200 on a
# full mesh, GB200 on a switch), NICs on the sockets (Zion).
PRESETS = (
  'dgx_a100_80gb',
  'dgx_h100',
  'mi300x_8',
  'big_basin',
  'h100_pcie_8',
  'gh200',
  'gb200_nvl72',
  'zion',
)
STACK = stack_presets.get('torchrec')
# Compared against a program of their own wiring (a compile each): NVLink
# SHARP, bridged pairs, a C2C superchip on a full mesh, NICs on sockets.
OWN = ('dgx_h100', 'h100_pcie_8', 'gh200', 'zion')


def _wirings():
  out = {}
  for name in PRESETS:
    p = platform_presets.get(name)
    out[name] = (
      p.fabric.topology,
      p.fabric.in_switch_reduction,
      p.host_link.kind,
      p.nic.attach,
    )
  return out


def test_the_presets_cover_each_wiring_once():
  wirings = _wirings()
  assert len(set(wirings.values())) == len(PRESETS)
  topologies = {w[0] for w in wirings.values()}
  assert {'switch', 'fully_connected', 'bridged_pairs'} <= topologies
  assert {w[2] for w in wirings.values()} == {'pcie', 'c2c'}
  assert {w[3] for w in wirings.values()} == {'accelerator', 'socket'}


def _fields(fab):
  return {
    f: getattr(fab, f)
    for f in ('direct', 'direct_share', 'relay', 'allreduce', 'alpha', 'nic')
  }


@pytest.mark.parametrize('name', PRESETS)
def test_terms_with_a_structure_equal_the_static_ones(name):
  p = platform_presets.get(name)
  w = tiny_workload()
  wiring = structure.of(p)
  static = arrays(p)
  traced = arrays(structure.canonical(p))
  st = ct.setup(static, w, STACK)
  st_k = ct.setup(traced, w, STACK, wiring)
  assert float(ct.host_link_rate(traced, wiring)) == float(
    ct.host_link_rate(static)
  )
  assert float(co.nic_rate(traced, False, wiring)) == float(
    co.nic_rate(static, False)
  )
  a, b = ct.fabric(static, STACK, st), ct.fabric(traced, STACK, st_k)
  for key, value in _fields(a).items():
    assert float(getattr(b, key)) == float(value), key
  # The NVLS option is always there with a Structure: at full weight
  # where the switch reduces, at NVLS_ABSENT where it does not.
  assert b.nvls == 1.0
  if a.nvls:
    assert a.nvls_share is None and float(b.nvls_share) == 1.0
  else:
    assert float(b.nvls_share) == co.NVLS_ABSENT


def test_an_absent_nvls_option_weighs_exactly_nothing():
  p = arrays(platform_presets.get('dgx_a100_80gb'))  # no NVLink SHARP
  w = tiny_workload()
  fab = ct.fabric(p, STACK, ct.setup(p, w, STACK))
  absent = fab._replace(nvls=1.0, nvls_share=co.NVLS_ABSENT)
  st = ct.setup(p, w, STACK)
  for size in (1e3, 1e6, 1e9):
    plain = co.pick_fastest(co.allreduce_algorithms(size, st, fab))
    with_it = co.pick_fastest(co.allreduce_algorithms(size, st, absent))
    assert [float(x) for x in with_it] == [float(x) for x in plain]


def test_one_program_costs_every_accelerator_preset_as_its_own_would():
  w = tiny_workload()
  keys = set()
  for name in PRESETS:
    p = platform_presets.get(name)
    plan = planner.make(w, p, STACK)
    got = cost_model.evaluate_design(p, w, plan, STACK)
    keys.add(cost_model.design_key(p, w, plan))
    if name not in OWN:
      continue
    own = jax.jit(cost_model.evaluate, static_argnums=1)
    want = own(hardware.as_arrays(p), w, plan, STACK)
    np.testing.assert_allclose(
      float(got.step_time), float(want.step_time), rtol=1e-13
    )
    for key, value in want.breakdown.items():
      np.testing.assert_allclose(
        float(got.breakdown[key]), float(value), rtol=1e-13, atol=1e-18
      )
  # The presets share one program.
  assert len(keys) == 1
