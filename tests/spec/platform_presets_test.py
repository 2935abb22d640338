"""Today's platform presets (issue 21): dgx_b200, mi300x_8, h100_pcie_8,
gh200.
Known answers from their sources: parts, counts, HBM, fabric links, host
link and DDR as the vendor pages give them; each on a board that is sold;
each evaluates finite on a small workload; a PCIe card is credited no
NVLink it does not have: none without a bridge (L40S), its one bridged
peer with one (H100 PCIe), the ring across pairs at PCIe speed."""

import dataclasses

import numpy as np
import pytest

from codesign.core.units import GB, GIB
from codesign.model import cost_model, planner, terms
from codesign.search import buildability as bd
from codesign.spec import catalog, hardware, platform_presets, stack_presets
from codesign.spec import workload_presets as wp

# name: (accelerator, accelerators, topology, links, link GB/s per
# direction, HBM GB, CPU, sockets, DDR GB a node, host link GB/s, NICs,
# NIC Gb/s).
KNOWN = {
  # DGX B200 user guide: 8 B200 (180 GB, 18 NVLink5 x 50 GB/s/dir), 2
  # Xeon 8570 (8480+ proxy), 2 TB DDR, 8 x 400 Gb/s ConnectX-7, Gen5.
  'dgx_b200': (
    'B200-HGX',
    8,
    'switch',
    18,
    50.0,
    180,
    platform_presets.SAPPHIRE,
    2,
    2048,
    63.0,
    8,
    400,
  ),
  # Supermicro AS-8125GS-TNMR2: 8 MI300X (192 GB, 7 IF links x 64 GB/s/
  # dir, fully connected), 2 Genoa, 24 x 64 GB DDR5, Gen5.
  'mi300x_8': (
    'MI300X-OAM',
    8,
    'fully_connected',
    7,
    64.0,
    192,
    platform_presets.GENOA,
    2,
    1536,
    63.0,
    8,
    400,
  ),
  # 8 H100 PCIe (80 GB) in a 2-socket Sapphire Rapids server on PCIe Gen5
  # x16, NVLink bridges (12 x 25 GB/s/dir) joining pairs.
  'h100_pcie_8': (
    'H100-PCIe-80GB',
    8,
    'bridged_pairs',
    12,
    25.0,
    80,
    platform_presets.SAPPHIRE,
    2,
    2048,
    63.0,
    4,
    400,
  ),
  # HPE Cray EX254n (CSCS Alps): 4 GH200 (96 GB HBM3, 18 NVLink4 x 25
  # GB/s/dir, all-to-all), 4 Grace with 480 GB LPDDR5X each, NVLink-C2C
  # 450 GB/s/dir per GPU, 4 x 200 Gb/s Slingshot NICs.
  'gh200': (
    'GH200-H100-96GB',
    4,
    'fully_connected',
    18,
    25.0,
    96,
    platform_presets.GRACE,
    4,
    1920,
    450.0,
    4,
    200,
  ),
  # One GB200 NVL72 rack (NVIDIA DGX GB200 user guide): 18 trays of 2
  # Grace + 4 B200 (186 GB HBM3e, 18 NVLink5 x 50 GB/s/dir on the NVLink
  # switch trays), NVLink-C2C 225 GB/s/dir per GPU, 4 x 400 Gb/s CX-7.
  'gb200_nvl72': (
    'GB200-B200-186GB',
    4,
    'switch',
    18,
    50.0,
    186,
    platform_presets.GRACE,
    2,
    960,
    225.0,
    4,
    400,
  ),
}


@pytest.mark.parametrize('name', list(KNOWN))
def test_preset_numbers_are_the_sourced_ones(name):
  acc, n, topo, links, link, hbm, cpu, sockets, ddr, host, nics, gbit = KNOWN[
    name
  ]
  p = platform_presets.get(name)
  assert (p.accelerator.name, p.fabric.topology) == (acc, topo)
  assert (p.cpu.name, float(p.sockets_per_node)) == (cpu, sockets)
  assert float(p.accelerators_per_node) == n
  assert float(p.fabric.links_per_accelerator) == links
  assert float(p.fabric.link_bandwidth) == link * GB
  # HBM is sold in binary GB.
  assert float(p.accelerator.hbm_capacity) == hbm * GIB
  assert float(p.sockets_per_node * p.cpu.ddr_capacity) == ddr * GB
  assert float(p.host_link.bandwidth) == host * GB
  assert float(p.nic.count) == nics
  assert float(p.nic.bandwidth) == gbit * 1e9 / 8
  # A board that is sold, and every other rule.
  assert bd.violations(p) == []
  assert bd.board_allows(acc, cpu, float(n), float(sockets))


def test_h100_pcie_numbers_are_the_datasheet_ones():
  a = catalog.accelerator('H100-PCIe-80GB')
  # NVIDIA: FP32 51, BF16 1,513 sparse (756.5 dense), 2,000 GB/s, 350 W.
  assert float(a.peak_flops_fp32) == 51e12
  assert float(a.peak_flops_bf16) == 756.5e12
  assert float(a.hbm_bandwidth) == 2000 * GB
  assert float(a.power) == 350.0
  l40s = catalog.raw()['accelerators']['L40S']
  assert l40s['link_count'] == 0 and l40s['pcie_gen'] == 4
  for part in ('A100-PCIe-80GB', 'H100-NVL-94GB', 'H200-NVL-141GB', 'L40S'):
    d = catalog.raw()['accelerators'][part]
    assert d['source'] and d['confidence'], part
    assert catalog.accelerator(part).sources, part


def _step(p, w, s):
  pl = planner.make(w, p, s, placement='auto', sharding='table_wise')
  return cost_model.evaluate(hardware.as_arrays(p), w, pl, s)


@pytest.mark.parametrize('name', list(KNOWN))
def test_preset_evaluates_finite(name):
  p = platform_presets.get(name)
  w = wp.get('criteo_kaggle')
  r = _step(p, w, stack_presets.get('torchrec'))
  step = float(r.step_time)
  assert np.isfinite(step) and step > 0
  assert bool(r.feasible)


def _faster_links(p, factor=10.0):
  bw = factor * float(p.fabric.link_bandwidth)
  return hardware.with_value(p, 'fabric.link_bandwidth', bw)


def test_a_pcie_card_without_a_bridge_gets_no_nvlink_credit():
  """An L40S server (PCIe only): ten times the fabric's bandwidth leaves
  the step as it was; on NVSwitch (dgx_h100) the step is faster."""
  w = wp.get('criteo_kaggle')
  s = stack_presets.get('torchrec')
  base = platform_presets.get('h100_pcie_8')
  l40s = dataclasses.replace(
    base,
    accelerator=catalog.accelerator('L40S'),
    fabric=platform_presets.accel_fabric('H100-PCIe-80GB', 'pcie_only'),
    host_link=platform_presets.host_link(4),
  )
  assert {r for r, _ in bd.violations(l40s)} == {'nic_slot'}  # 400G on Gen4
  for p, moves in ((l40s, False), (platform_presets.get('dgx_h100'), True)):
    t0 = float(_step(p, w, s).step_time)
    t1 = float(_step(_faster_links(p), w, s).step_time)
    assert (t1 < t0) if moves else (t1 == t0), (p.name, t0, t1)


def test_bridged_pairs_credit_one_peer_and_a_pcie_ring():
  p = hardware.as_arrays(platform_presets.get('h100_pcie_8'))
  # One bridged peer of 7: smooth min (p = 64) of 1 and 1/7.
  share = float(terms.direct_share(p))
  assert share == pytest.approx(1.0 / 7.0, rel=1e-6)
  # The ring over 4 pairs runs at the PCIe relay (host links over the 8
  # cards: min(8 x 63, 2 x 315 GB/s) / 8 = 63 GB/s), far below the
  # bridge (12 x 25 GB/s x efficiency), and waits the PCIe latency.
  bridge = 12 * 25.0 * GB * float(p.fabric.efficiency)
  relay = float(terms.host_link_rate(p)) / 8.0
  ar, alpha = terms.pair_ring(p, bridge, relay)
  assert relay < 70 * GB < bridge
  assert float(ar) == pytest.approx(relay, rel=0.03)
  assert float(ar) <= relay
  assert float(alpha) == pytest.approx(float(p.host_link.latency))
  # Two cards ring over the bridge alone, at the bridge's latency.
  two = hardware.with_value(p, 'accelerators_per_node', 2.0)
  ar2, alpha2 = terms.pair_ring(two, bridge, relay)
  assert float(ar2) == pytest.approx(bridge, rel=1e-3)
  assert float(alpha2) == pytest.approx(float(p.fabric.latency))


def test_grace_and_superchip_numbers_are_the_sourced_ones():
  g = catalog.cpu(platform_presets.GRACE)
  # 72 Neoverse V2 cores x 4 x 128-bit SVE2 FMA (32 fp32 FLOP/cycle) x
  # 3.1 GHz; no BF16 speedup credited.
  assert float(g.peak_flops_fp32) == pytest.approx(72 * 32 * 3.1e9)
  assert float(g.peak_flops_bf16) == float(g.peak_flops_fp32)
  # Half the Grace CPU Superchip's 1 TB/s and 960 GB; soldered, so no
  # DIMM derating; 4 x16 PCIe Gen5 (63 GB/s each).
  assert float(g.ddr_bandwidth) == 500 * GB
  assert float(g.ddr_capacity) == 480 * GB
  assert g.memory == 'soldered'
  assert float(g.pcie_bandwidth) == 4 * 63 * GB
  # Price (assumed, L) and LPDDR5X at the DDR5 2.4 USD/GB; power: 250 W
  # with its memory (half the superchip's 500 W), LPDDR5X at 0.1 / 8 W/GB.
  assert float(g.price) == 11258.0
  assert float(g.ddr_price) * GB == pytest.approx(2.4)
  assert float(g.ddr_power) * GB == pytest.approx(0.0125)
  assert float(g.power) + 480 * 0.0125 == pytest.approx(250.0)
  for field in ('price', 'ddr_price', 'power', 'ddr_power', 'ddr_capacity'):
    assert dict(g.sources)[field], field
  # Another capacity builds (buildability refuses it: rule soldered).
  assert float(catalog.cpu(platform_presets.GRACE, 512).ddr_capacity) == (
    512 * GB
  )
  # GH200's Hopper: H100 SXM5 compute, 96 GB at 4 TB/s, 1,000 W module
  # less its Grace's 250 W; priced as the H100 SXM5 board ($30k less 80 GB
  # at 17 USD/GB).
  h = catalog.accelerator('GH200-H100-96GB')
  h100 = catalog.accelerator('H100-SXM5-80GB')
  assert float(h.peak_flops_bf16) == float(h100.peak_flops_bf16)
  assert float(h.hbm_capacity) == 96 * GIB
  assert float(h.hbm_bandwidth) == 4000 * GB
  assert float(h.power) == 1000.0 - 250.0
  assert float(h.price) == 30000.0 - 80 * 17.0 == float(h100.price)
  # GB200's B200: 1,200 W, 186 GB at 8 TB/s, 2.5 PF bf16 dense; price the
  # B200-HGX's assumed $40k x 2500/2250; C2C 900 GB/s bidir over 2 GPUs.
  b = catalog.accelerator('GB200-B200-186GB')
  assert float(b.power) == 1200.0
  assert float(b.hbm_capacity) == 186 * GIB
  assert float(b.hbm_bandwidth) == 8000 * GB
  assert float(b.peak_flops_bf16) == 2500e12
  assert float(b.price) == pytest.approx(40000.0 * 2500 / 2250, abs=1.0)
  link = platform_presets.c2c_host_link('GB200-B200-186GB')
  assert (link.kind, float(link.bandwidth)) == ('c2c', 900 * GB / 2 / 2)


def test_gh200_node_capex_and_power_by_hand():
  p = hardware.as_arrays(platform_presets.get('gh200'))
  usd, w = terms.nodes_capex_and_power(p)
  # Chassis + 4 x (Grace + 480 GB LPDDR5X) + 4 x (GPU + 96 GB HBM) + 4 x
  # 450 GB/s of NVLink at 5 USD per GB/s.
  want_usd = 12500 + 4 * (11258 + 480 * 2.4) + 4 * (28640 + 96 * 17)
  want_usd += 4 * 450 * 5.0
  assert float(usd) == pytest.approx(want_usd) == pytest.approx(192228.0)
  # Chassis 500 W + 4 x (244 + 6 W) + 4 x (750 W + 450 GB/s x 0.05 W), at
  # the wall (fans 15%, supplies 94%).
  parts_w = 500 + 4 * (244 + 480 * 0.0125) + 4 * (750 + 450 * 0.05)
  assert parts_w == pytest.approx(4590.0)
  assert float(w) == pytest.approx(parts_w * 1.15 / 0.94)


def test_gh200_reads_host_memory_over_c2c():
  """The same node with its tables forced into host memory: over
  NVLink-C2C (4 x 450 GB/s) its UVM rows arrive faster than over the
  PCIe x16 links (4 x 63 GB/s, under the Graces' 4 x 252 GB/s lanes)."""
  w = wp.get('criteo_kaggle')
  s = stack_presets.get('torchrec')
  c2c = platform_presets.get('gh200')
  pcie = dataclasses.replace(c2c, host_link=platform_presets.host_link(5))
  pa, pb = hardware.as_arrays(c2c), hardware.as_arrays(pcie)
  assert float(terms.host_link_rate(pa)) == 4 * 450 * GB
  assert float(terms.host_link_rate(pb)) == pytest.approx(4 * 63 * GB, 1e-3)
  steps = []
  for p in (c2c, pcie):
    pl = planner.make(w, p, s, placement='ddr', sharding='table_wise')
    r = cost_model.evaluate(hardware.as_arrays(p), w, pl, s)
    steps.append(float(r.breakdown['embedding_gather_ddr']))
  assert 0 < steps[0] < steps[1]


def test_gb200_nvl72_is_one_domain_in_one_rack():
  """18 trays in one NVLink domain: a tray's parts at the wall (chassis
  500 W, 2 x (244 + 480 x 0.0125) W of Grace, 4 x (1,200 + 900 GB/s x
  0.05) W of B200 and NVLink, fans 15%, supplies 94%) and its 4 x 400
  Gb/s NICs (25 W each); the rack rule's unit is the 18 trays (133.5
  kW). One domain buys no scale-out switch or link; two racks buy the
  fat tree of 36 nodes of 4 NICs (144 NICs on 5 leaves of 32, 144
  uplinks to 3 spines: 2 tiers)."""
  p = platform_presets.get('gb200_nvl72')
  assert float(p.fabric.hosts_per_domain) == 18.0
  assert p.fabric.in_switch_reduction
  tray_w = (500 + 2 * (244 + 480 * 0.0125) + 4 * (1200 + 900 * 0.05)) * (
    1.15 / 0.94
  ) + 4 * 25
  assert float(terms.node_wall_power(p)) == pytest.approx(tray_w)
  assert float(terms.rack_unit_power(p)) == pytest.approx(18 * tray_w)
  assert 18 * tray_w == pytest.approx(133487.2, rel=1e-6)
  bill = terms.network_bill(p)
  assert float(bill['switches']) == float(bill['links']) == 0.0
  assert float(bill['nic_usd']) == pytest.approx(72 * 2000.0)
  two = terms.network_bill(hardware.with_value(p, 'nodes', 36.0))
  assert float(two['switches']) == 8.0 and float(two['tiers']) == 2.0
  r = terms.racks(p, 140e3)
  assert (r['racks'], r['nodes_per_rack'], r['fits']) == (1, 18, True)
  assert r['cooling'] == 'liquid' and r['cooling_usd'] > 0.0
  assert not terms.racks(p, 40.8e3)['fits']
