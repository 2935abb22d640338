"""Buildability (codesign.buildability): known illegal designs are rejected
with the rule named, the presets pass (three fail for documented
reasons), a CPU trainer has no accelerator rules, PCIe switches cost what
they say, the traced rules agree with the concrete ones at grid points,
and a small search proposes only buildable designs."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core.units import GB
from codesign.model import cost_model, terms
from codesign.search import buildability as bd
from codesign.search import design_space as ds
from codesign.search import gradient, snapping
from codesign.spec import catalog, hardware, platform_presets, stack_presets
from codesign.spec import workload_presets as wp

STACK = stack_presets.get('torchrec')
SKYLAKE = platform_presets.SKYLAKE
ROME = platform_presets.ROME
SAPPHIRE = platform_presets.SAPPHIRE
COOPER = platform_presets.COOPER
GENOA = 'EPYC-9654 (Genoa)'


def _design(
  base='dgx_h100',
  part=None,
  topology=None,
  accels=None,
  cpu=None,
  sockets=None,
  ddr_gb=None,
  nics=None,
  nic_gbps=None,
  pcie_gen=None,
):
  """A preset with some choices changed (parts from the catalog)."""
  p = platform_presets.get(base)
  changes = {}
  if part or topology:
    name = part or p.accelerator.name
    changes['accelerator'] = catalog.accelerator(name)
    changes['fabric'] = platform_presets.accel_fabric(
      name, topology or p.fabric.topology
    )
  if accels is not None:
    changes['accelerators_per_node'] = float(accels)
  if cpu or ddr_gb:
    gb = ddr_gb or float(p.cpu.ddr_capacity) / GB
    changes['cpu'] = catalog.cpu(cpu or p.cpu.name, gb)
  if sockets is not None:
    changes['sockets_per_node'] = float(sockets)
  if nics or nic_gbps:
    changes['nic'] = platform_presets.nic(
      nics or int(p.nic.count),
      nic_gbps or float(p.nic.bandwidth) * 8 / 1e9,
      p.nic.attach,
    )
  if pcie_gen:
    changes['host_link'] = platform_presets.host_link(pcie_gen)
  return dataclasses.replace(p, **changes)


def _with_cpu(p, **changes):
  return dataclasses.replace(p, cpu=dataclasses.replace(p.cpu, **changes))


def _with_link(p, **changes):
  link = dataclasses.replace(p.host_link, **changes)
  return dataclasses.replace(p, host_link=link)


def _gb200_tray(accels=4):
  """A GB200 compute tray: 2 superchips, 2 Grace and 4 B200 on NVLink5."""
  part = 'GB200-B200-186GB'
  p = _design('gh200', part=part, topology='switch', accels=accels, sockets=2)
  return dataclasses.replace(p, host_link=platform_presets.c2c_host_link(part))


ILLEGAL = {
  # 16 MI300X on one Rome socket: an OAM full mesh is 8 modules.
  '16 MI300X on 1 Rome socket': (
    _design(
      'dgx_a100_40gb',
      part='MI300X-OAM',
      topology='fully_connected',
      accels=16,
      sockets=1,
    ),
    {'fabric_domain', 'board'},
  ),
  # 16 B200 and 8 NICs on one Skylake socket (3 x16 root ports, at most 12
  # devices behind switches), its Gen5 host link on a Gen3 CPU.
  '16 B200 on 1 Skylake socket': (
    _design(part='B200-HGX', accels=16, cpu=SKYLAKE, sockets=1, ddr_gb=768),
    {'fabric_domain', 'pcie_lanes', 'pcie_generation', 'board', 'nic_slot'},
  ),
  '8 sockets of Xeon 8480+': (_design(sockets=8), {'max_sockets'}),
  '2 sockets of Cooper Lake 8380H': (
    _design('zionex', sockets=2, pcie_gen=3),
    {'min_sockets', 'nic_slot'},
  ),
  '2 TB DDR on a Skylake 8180 socket': (
    _design('big_basin', ddr_gb=2048),
    {'dimm'},
  ),
  '1000 GB DDR on an 8-channel socket (125 GB a channel)': (
    _design(ddr_gb=1000),
    {'dimm'},
  ),
  'V100 x16 on the DGX-1 hybrid cube mesh': (
    _design('dgx1_v100', accels=16, ddr_gb=384),
    {'fabric_domain'},
  ),
  'A100 on a hybrid cube mesh': (
    _design('dgx_a100_40gb', topology='hybrid_cube_mesh'),
    {'topology'},
  ),
  'V100 fully connected with 6 links for 8': (
    _design('dgx2_v100', topology='fully_connected', accels=8),
    {'topology', 'fabric_domain'},
  ),
  '8 GPUs and 8 NICs on one Skylake socket': (
    _design('big_basin', sockets=1, nics=8),
    {'pcie_lanes', 'board'},
  ),
  'H100 host link at Gen5 on Cascade Lake (Gen3)': (
    _design(cpu=platform_presets.CASCADE, ddr_gb=768),
    {'pcie_generation', 'board', 'nic_slot'},
  ),
  # Boards no vendor sells (issue 21): MI300X ships on the 8-OAM board
  # only; SXM2 on 4-, 8- and 16-GPU boards; HGX-2's 16 V100 with two
  # Xeon sockets; a 2023 MI300X with a 2019 Rome socket.
  '4 MI300X': (
    _design(part='MI300X-OAM', accels=4, cpu=GENOA, ddr_gb=768, sockets=1),
    {'board', 'nic_slot'},
  ),
  '1 V100-SXM2': (
    _design('dgx1_v100', accels=1, ddr_gb=384),
    {'board', 'nic_slot'},
  ),
  '16 V100 on 1 socket': (
    _design('dgx2_v100', sockets=1),
    {'board', 'pcie_lanes'},
  ),
  'MI300X (2023) with EPYC Rome (2019)': (
    _design(part='MI300X-OAM', cpu=ROME, ddr_gb=1024, sockets=1),
    {'board', 'pcie_generation', 'nic_slot'},
  ),
  # PCIe cards (issue 21): never on a switch fabric (their NVLink bridges
  # join pairs, not the node), at most 8 in a server, on hosts they were
  # sold with, the host link at the lower PCIe generation of the two ends.
  'H100 PCIe on an NVSwitch fabric': (
    _design('h100_pcie_8', topology='switch'),
    {'topology'},
  ),
  # (The preset's 400 Gb/s NICs also exceed the L40S's Gen4 x16 link.)
  'L40S fully connected (no links: a mesh of 1)': (
    _design('h100_pcie_8', part='L40S', topology='fully_connected'),
    {'topology', 'fabric_domain', 'pcie_generation', 'nic_slot'},
  ),
  'L40S on bridged pairs (it has no NVLink)': (
    _design('h100_pcie_8', part='L40S', pcie_gen=4),
    {'topology', 'nic_slot'},
  ),
  '16 L40S in one PCIe server': (
    _design(
      'h100_pcie_8', part='L40S', topology='pcie_only', accels=16, pcie_gen=4
    ),
    {'fabric_domain', 'board', 'nic_slot'},
  ),
  '6 H200 NVL in one PCIe server': (
    _design('h100_pcie_8', part='H200-NVL-141GB', accels=6),
    {'board'},
  ),
  'H100 PCIe (Gen5) on EPYC Milan (Gen4) at Gen5': (
    _design('h100_pcie_8', cpu='EPYC-7763 (Milan)', ddr_gb=512),
    {'board', 'pcie_generation', 'nic_slot'},
  ),
  'L40S (Gen4) at Gen5 on Sapphire Rapids': (
    _design('h100_pcie_8', part='L40S', topology='pcie_only'),
    {'pcie_generation', 'nic_slot'},
  ),
  'A100 PCIe (2021) with Skylake (2017)': (
    _design(
      'h100_pcie_8', part='A100-PCIe-80GB', cpu=SKYLAKE, ddr_gb=768, pcie_gen=3
    ),
    {'board', 'nic_slot'},
  ),
  # Superchips (issue 21 item 6): Grace's LPDDR5X is soldered, one
  # capacity (480 GB); GH200 ships one GPU per Grace, 1, 2 or 4 a node,
  # on Grace only; GB200 4 B200 on 2 Grace; an NVLink-C2C host link joins
  # only a part that has one, at most at its rate.
  'Grace with 512 GB': (_design('gh200', ddr_gb=512), {'soldered'}),
  'Grace memory bought in DIMMs': (
    _with_cpu(platform_presets.get('gh200'), memory='dimm'),
    {'soldered'},
  ),
  'a Xeon socket labelled soldered': (
    _with_cpu(platform_presets.get('dgx_h100'), memory='soldered'),
    {'soldered'},
  ),
  '2 GH200 on 2 Sapphire Rapids sockets': (
    _design('gh200', cpu=SAPPHIRE, ddr_gb=1024, sockets=2, accels=2),
    {'board'},
  ),
  '8 GH200 on 4 Grace': (
    _design('gh200', accels=8),
    {'fabric_domain', 'board'},
  ),
  'NVLink-C2C on an H100 SXM5': (
    _with_link(platform_presets.get('dgx_h100'), kind='c2c'),
    {'pcie_generation'},
  ),
  'GH200 C2C at 900 GB/s a direction': (
    _with_link(platform_presets.get('gh200'), bandwidth=900e9),
    {'pcie_generation'},
  ),
  '8 B200 (GB200) on 2 Grace': (_gb200_tray(accels=8), {'board'}),
}


@pytest.mark.parametrize('name', list(ILLEGAL))
def test_known_illegal_designs_are_rejected_with_the_rule_named(name):
  p, rules = ILLEGAL[name]
  found = bd.violations(p)
  assert {r for r, _ in found} == rules, found
  for rule, sentence in found:
    assert rule in bd.RULES
    assert (
      sentence and '\n' not in sentence and any(c.isdigit() for c in sentence)
    )


def test_legal_boards_pass_the_board_rule():
  # The same parts on boards that are sold.
  for p in (
    _design(part='MI300X-OAM', accels=8, cpu=GENOA, ddr_gb=768, sockets=2),
    _design('dgx1_v100', accels=4, ddr_gb=384),
    _design('dgx2_v100'),
    _design(part='H100-SXM5-80GB', accels=4),
  ):
    assert 'board' not in {r for r, _ in bd.violations(p)}
  # PCIe servers of 1, 2, 4 and 8 cards on the hosts they are sold with,
  # the host link at the lower PCIe generation of the two ends.
  for part, cpu, n, gen in (
    ('H100-PCIe-80GB', SAPPHIRE, 8, 5),
    ('H100-NVL-94GB', GENOA, 2, 5),
    ('H200-NVL-141GB', SAPPHIRE, 4, 5),
    ('L40S', GENOA, 8, 4),
    ('L40S', 'EPYC-7763 (Milan)', 4, 4),
    ('A100-PCIe-80GB', ROME, 1, 4),
    ('A100-PCIe-80GB', platform_presets.CASCADE, 8, 3),
  ):
    ddr = {SAPPHIRE: 1024, GENOA: 768, ROME: 1024}.get(cpu, 768)
    # A PCIe card's domain is its server (8): PCIe, and NVLink bridges
    # on pairs where the card has them; never the design space's switch.
    topos = {'pcie_only'} | ({'bridged_pairs'} if part != 'L40S' else set())
    assert bd.FABRICS[part] == dict.fromkeys(topos, 8)
    assert not bd.in_design_space(part)
    for topo in topos:
      p = _design(
        'h100_pcie_8',
        part=part,
        topology=topo,
        cpu=cpu,
        accels=n,
        ddr_gb=ddr,
        pcie_gen=gen,
      )
      found = bd.violations(p)
      assert {r for r, _ in found} <= {'nic_slot'}, (part, cpu, found)
  # Every catalog accelerator the design space uses is on some board.
  for name in catalog.accelerator_names():
    assert bd.boards_of(name), name


def test_a_single_node_with_16_nics_is_not_a_proposal():
  """NICs only where there is more than one node: a product as sold (a
  DGX evaluated as one node) passes; a proposal must not buy them."""
  p = _design(nics=16, nic_gbps=100)
  assert bd.violations(p) == []  # 8 GPUs + 16 NICs fit 10 ports x 4
  rules = [r for r, _ in bd.violations(p, proposal=True)]
  assert rules == ['nics']
  two = dataclasses.replace(p, nodes=2.0)
  assert bd.violations(two, proposal=True) == []
  one = _design(nics=1, nic_gbps=100)
  assert bd.violations(one, proposal=True) == []


# Presets that fail a rule, and why (see buildability's docstring):
# - zionex, p4d: Gen3 CPUs (Cooper Lake, Cascade Lake) behind Gen4 A100s;
#   the presets' host link runs at Gen4, but host DDR is reached through
#   the CPUs' Gen3 root ports (their Gen4 PCIe switches carry GPU-NIC
#   traffic).
# - dgx1_v100: its CPU is a proxy (Skylake 8180, 6 channels) for the
#   E5-2698 v4 (4 channels): 256 GB per socket is no balanced population
#   of 6 channels.
# - zionex: likewise its 200 Gb/s NICs (25 GB/s) on the Gen3 x16 slot
#   (15.75 GB/s) that the lower generation of the two ends gives.
KNOWN = {
  'zionex': {'pcie_generation', 'nic_slot'},
  'p4d': {'pcie_generation'},
  'dgx1_v100': {'dimm'},
}


def test_presets_are_buildable_but_the_documented_ones():
  for name in platform_presets.PLATFORMS:
    found = {r for r, _ in bd.violations(platform_presets.get(name))}
    assert found == KNOWN.get(name, set()), (name, found)


def test_a_cpu_trainer_has_no_accelerator_rules():
  p = platform_presets.get('cpu_2s')
  assert p.trainer == 'cpu' and bd.violations(p, proposal=True) == []
  # Accelerator fields that would break every accelerator rule are unused.
  odd = dataclasses.replace(
    p,
    accelerators_per_node=0.0,
    fabric=platform_presets.accel_fabric('MI300X-OAM', 'hybrid_cube_mesh'),
    host_link=platform_presets.host_link(5),
  )
  assert bd.violations(odd) == []
  # Its NICs still need PCIe lanes: 2 Skylake sockets have 6 x16 ports.
  many = dataclasses.replace(odd, nic=platform_presets.nic(25, 100, 'socket'))
  assert [r for r, _ in bd.violations(many)] == ['pcie_lanes']


def test_parts_outside_the_catalog_get_facts_from_parts():
  p = platform_presets.get('zion')  # its OAM is not a catalog part
  assert bd.violations(p) == []
  facts = {
    p.accelerator.name: {
      'kind': 'accelerator',
      'pcie_gen': 3,
      'links': 7.0,
      'fabrics': {'fully_connected': 4},
    }
  }
  assert [r for r, _ in bd.violations(p, parts=facts)] == ['fabric_domain']


def _space(max_nodes=2):
  return ds.make_space(wp.get('criteo_kaggle'), max_nodes, plan_mode='auto')


def _index(
  space, acc, cpu, nodes, sockets, accels, ddr_ch_gb, nics, gbps, oversub=1
):
  values = (nodes, sockets, accels, ddr_ch_gb * GB, nics, gbps * 1e9 / 8)
  values += (oversub,)
  return [space.accelerators.index(acc), space.cpus.index(cpu)] + [
    list(g).index(float(v)) for g, v in zip(space.grids, values, strict=True)
  ]


def test_a_design_with_pcie_switches_is_legal_and_pays_for_them():
  """2 Skylake sockets (6 x16 root ports) with 8 V100 (an HGX-1 board)
  and 8 NICs of 100 Gb/s (200 would exceed a Gen3 x16 slot): 16 devices
  need ceil(10 / 3) = 4 switches; each costs
  SWITCH_USD and SWITCH_W, and the GPUs share the 6 uplinks."""
  space = _space()
  v100 = 'V100-SXM2-32GB'
  idx = _index(space, v100, SKYLAKE, 2, 2, 8, 64, 8, 100)
  p = ds.build(space, idx)
  assert bd.violations(p, proposal=True) == []
  assert bd.switches_needed(16, 6) == 4
  free = ds.NODE_BASE_USD + 8 * ds.NODE_USD_PER_ACCELERATOR
  free += 2 * ds.NODE_USD_PER_SOCKET
  assert float(p.node_price) - free == 4 * bd.SWITCH_USD
  watts = ds.NODE_BASE_W + 8 * ds.NODE_W_PER_ACCELERATOR
  watts += 2 * ds.NODE_W_PER_SOCKET
  assert float(p.node_power) - watts == 4 * bd.SWITCH_W
  gen3 = catalog.pcie_x16_bandwidth(3)
  assert float(p.host_link.bandwidth) == gen3 * 6 / 16
  # The same design without switches (one NIC per node: 9 devices still
  # exceed 6 ports, so compare with the switchless chassis directly).
  bare = dataclasses.replace(p, node_price=free, node_power=watts)
  a, b = (terms.capex_and_power(x) for x in (p, bare))
  np.testing.assert_allclose(a[0] - b[0], 2 * 4 * bd.SWITCH_USD, rtol=1e-12)
  # On Sapphire Rapids (10 ports) 16 devices need 2 switches.
  h100 = 'H100-SXM5-80GB'
  q = ds.build(space, _index(space, h100, SAPPHIRE, 2, 2, 8, 64, 8, 200))
  assert float(q.node_price) - free == 2 * bd.SWITCH_USD


def test_single_node_designs_have_one_lowest_rate_nic():
  space = _space()
  idx = _index(space, 'H100-SXM5-80GB', SAPPHIRE, 1, 2, 8, 64, 16, 800, 3)
  p = ds.build(space, idx)
  assert float(p.nic.count) == 1.0 and float(p.nic.bandwidth) * 8 == 100e9
  # and no fat tree, so no oversubscribed leaves, whatever the axis says
  assert float(p.nic.oversubscription) == 1.0
  assert bd.violations(p, proposal=True) == []
  d = ds.describe_index(space, idx)
  assert d['nic_count'] == 1.0 and d['nic_bandwidth_gbit_per_s'] == 100.0
  assert d['oversubscription'] == 1.0


def test_switch_count_is_whole_at_integers_and_continuous_between():
  ports = 6.0
  devices = np.arange(1.0, 30.0, 0.125)
  s = np.array(
    [
      float(bd.wiring(2.0, 2.0, d, 1.0, 12.5e9, 48, 48)['switches'])
      for d in devices - 1.0
    ]
  )
  whole = devices == np.round(devices)
  want = [bd.switches_needed(d, ports) for d in devices[whole]]
  np.testing.assert_array_equal(s[whole], want)
  assert np.all(np.diff(s) >= 0) and np.max(np.diff(s)) <= 0.125 + 1e-12
  grad = jax.grad(
    lambda a: bd.wiring(2.0, 2.0, a, 1.0, 12.5e9, 48.0, 48.0)['switches']
  )
  # 6.5 devices: on the ramp of the first switch; 8.5: its spare ports.
  assert float(grad(jnp.asarray(5.5))) == 1.0
  assert float(grad(jnp.asarray(7.5))) == 0.0


def test_traced_rules_agree_with_the_concrete_check_at_grid_points():
  space = _space(max_nodes=4)
  w = wp.get('criteo_kaggle')
  rng = np.random.default_rng(0)
  index = np.stack([rng.integers(0, n, 64) for n in space.sizes], axis=1)
  index = bd.canonical_index(space, index)

  def g(i):
    p, _, aux = ds.decode_index(space, w, STACK, i, jnp.zeros(0))
    return bd.relative_violations(p, aux)

  traced = np.asarray(jax.jit(jax.vmap(g))(jnp.asarray(index)))
  ok, rejected = snapping.buildable(space, index)
  # The board rule is checked on snapped designs only (CONCRETE_ONLY).
  traced_ok = np.array(
    [
      not {r for r, _ in bd.violations(ds.build(space, i), proposal=True)}
      - set(bd.CONCRETE_ONLY)
      for i in index
    ]
  )
  np.testing.assert_array_equal(np.all(traced <= 0.0, axis=1), traced_ok)
  assert not (ok & ~traced_ok).any()
  assert rejected and set(rejected) <= set(bd.RULES)
  assert not ok.all() and ok.any()


@pytest.mark.heavy
def test_search_output_is_buildable():
  w = wp.get('criteo_kaggle')
  space = ds.make_space(w, max_nodes=2)
  problem = gradient.Problem(space, w, STACK, 'throughput', budget_usd=1e6)
  config = gradient.Config(starts=4, steps=20, chunk=20, snap_top=1)
  res = gradient.gradient_search(
    problem, dataclasses.replace(config, polish=False)
  )
  p, plan = gradient.buildable(problem, res.best_index, res.best_plan_z)
  # Every rule, the board rule the relaxation does not see included.
  assert bd.violations(p, proposal=True) == []
  assert set(res.rejected) <= set(bd.RULES)
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, STACK)
  np.testing.assert_allclose(float(r.throughput), res.best_value, rtol=1e-9)


# ---- NIC bandwidth within its PCIe slot and the accelerator's link ---------


def _nic_case(rate_gbps, gen, nics=8, accels=8):
  """dgx_h100 with `nics` NICs of `rate_gbps` and both ends at Gen `gen`
  (its catalog facts overridden: the rule reads the parts' generations)."""
  p = _design(nics=nics, nic_gbps=rate_gbps)
  p = dataclasses.replace(p, accelerators_per_node=float(accels))
  facts = bd.catalog_facts()
  parts = {
    p.cpu.name: {**facts[p.cpu.name], 'pcie_gen': gen},
    p.accelerator.name: {**facts[p.accelerator.name], 'pcie_gen': gen},
  }
  return p, parts


def test_every_catalog_nic_rate_on_every_pcie_generation():
  """The catalog's NIC rates x PCIe generations: a NIC fits its x16 slot
  when its line rate is at most the slot's (Gen3 15.75, Gen4 31.5, Gen5
  63, Gen6 128 GB/s); 800 Gb/s (100 GB/s) needs Gen6, 400 Gb/s Gen5."""
  rates = catalog.raw()['links']['network_nic']['ethernet_roce_Gbps']
  gens = sorted(
    int(k[3]) for k in catalog.raw()['links']['pcie'] if k.startswith('gen')
  )
  table = {}
  for rate in rates:
    for gen in gens:
      p, parts = _nic_case(rate, gen)
      rules = [r for r, _ in bd.violations(p, parts=parts)]
      fits = rate / 8 * 1e9 <= catalog.pcie_x16_bandwidth(gen)
      assert ('nic_slot' not in rules) == fits, (rate, gen, rules)
      table[rate, gen] = fits
  assert table[800, 5] is False and table[800, 6] is True
  assert table[400, 4] is False and table[400, 5] is True
  assert table[200, 3] is False and table[200, 4] is True
  assert table[100, 3] is True


def test_nic_bandwidth_per_accelerator_within_its_link():
  """16 NICs of 400 Gb/s on 8 H100 (Gen5): 100 GB/s per GPU over a 63
  GB/s x16 link, refused; 8 of them (50 GB/s per GPU) pass; NICs on the
  sockets of a CPU trainer have no accelerator link."""
  p, parts = _nic_case(400, 5, nics=16)
  found = bd.violations(p, parts=parts)
  assert [r for r, _ in found] == ['nic_slot']
  assert 'per accelerator' in found[0][1]
  p, parts = _nic_case(400, 5, nics=8)
  assert bd.violations(p, parts=parts) == []
  cpu = platform_presets.get('cpu_2s')
  many = dataclasses.replace(cpu, nic=platform_presets.nic(4, 100, 'socket'))
  assert bd.violations(many) == []


def test_traced_nic_rows_agree_with_the_rule_at_grid_points():
  """Every NIC rate x count of the design space on an H100 + Sapphire
  Rapids node (Gen5) and a V100 + Skylake node (Gen3) at 2 nodes: the
  traced rows (`relative_violations`) are <= 0 exactly where the
  concrete rule passes, and no snapped design can break it."""
  space = _space()
  w = wp.get('criteo_kaggle')
  decode = jax.jit(
    lambda i: ds.decode_index(space, w, STACK, i, jnp.zeros(space.num_plan))
  )
  rows = [bd.TRACED.index('nic_slot'), bd.TRACED.index('nic_per_accelerator')]
  for acc, cpu in (('H100-SXM5-80GB', SAPPHIRE), ('V100-SXM2-32GB', SKYLAKE)):
    for nics in ds.NICS_PER_NODE:
      for rate in (100, 200, 400, 800):
        idx = _index(space, acc, cpu, 2, 2, 8, 64, nics, rate)
        p = ds.build(space, idx)
        bad = any(r == 'nic_slot' for r, _ in bd.violations(p))
        traced, _, aux = decode(jnp.array(idx))
        g = np.asarray(bd.relative_violations(traced, aux))[rows]
        assert bool((g > 1e-9).any()) == bad, (acc, nics, rate, g)


def test_superchips_pass_on_their_boards_and_stay_out_of_the_space():
  """GH200 on 1, 2 and 4 Grace sockets, one GPU each, and the GB200 tray
  pass every rule; their GPUs and Grace are not in the design space
  (Grace's memory is soldered: no DIMM population to search)."""
  gh = platform_presets.get('gh200')
  assert bd.violations(gh) == []
  for n in (1, 2):
    assert bd.violations(_design('gh200', accels=n, sockets=n)) == [], n
  assert bd.violations(_gb200_tray()) == []
  grace = platform_presets.GRACE
  assert catalog.soldered_gb(grace) == 480.0
  assert not bd.in_cpu_space(grace)
  assert all(bd.in_cpu_space(c) for c in catalog.raw()['cpus'] if c != grace)
  for part in ('GH200-H100-96GB', 'GB200-B200-186GB'):
    assert bd.is_superchip(part) and not bd.in_design_space(part)
  assert not bd.is_superchip('H100-SXM5-80GB')


def test_c2c_accelerators_take_no_root_port():
  """4 Grace sockets have 16 x16 root ports, 64 devices behind switches:
  61 NICs and 4 GH200 on NVLink-C2C are 61 devices (legal); on PCIe
  links the same GPUs would be 65 (`pcie_lanes`)."""
  p = _design('gh200', nics=61, nic_gbps=100)
  assert bd.violations(p) == []
  pcie = _with_link(p, kind='pcie', bandwidth=63e9)
  assert 'pcie_lanes' in {r for r, _ in bd.violations(pcie)}
