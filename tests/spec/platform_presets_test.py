"""Today's platform presets (issue 21): dgx_b200, mi300x_8, h100_pcie_8.
Known answers from their sources: parts, counts, HBM, fabric links, host
link and DDR as the vendor pages give them; each on a board that is sold;
each evaluates finite on a small workload; a PCIe card is credited no
NVLink it does not have: none without a bridge (L40S), its one bridged
peer with one (H100 PCIe), the ring across pairs at PCIe speed."""

import dataclasses

import numpy as np
import pytest

from codesign.core.units import GB
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
  assert float(p.accelerator.hbm_capacity) == hbm * GB
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
