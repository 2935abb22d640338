"""Today's platform presets (issue 21): dgx_b200, mi300x_8, h100_pcie_8.
Known answers from their sources: parts, counts, HBM, fabric links, host
link and DDR as the vendor pages give them; each on a board that is sold;
each evaluates finite on a small workload; a PCIe card is credited no
NVLink (its step time does not move with its bridge's bandwidth)."""

import numpy as np
import pytest

from codesign.core.units import GB
from codesign.model import cost_model, planner
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
  # x16, their NVLink bridge (12 x 25 GB/s/dir) recorded but PCIe only.
  'h100_pcie_8': (
    'H100-PCIe-80GB',
    8,
    'pcie_only',
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


def test_a_pcie_card_gets_no_nvlink_credit():
  """Ten times the bridge's bandwidth leaves the PCIe server's step as it
  was (its peers are over PCIe); on NVSwitch (dgx_h100) it is faster."""
  w = wp.get('criteo_kaggle')
  s = stack_presets.get('torchrec')
  times = {}
  for name in ('h100_pcie_8', 'dgx_h100'):
    p = platform_presets.get(name)
    fast = hardware.with_value(
      p, 'fabric.link_bandwidth', 10.0 * float(p.fabric.link_bandwidth)
    )
    times[name] = (
      float(_step(p, w, s).step_time),
      float(_step(fast, w, s).step_time),
    )
  assert times['h100_pcie_8'][1] == times['h100_pcie_8'][0]
  assert times['dgx_h100'][1] < times['dgx_h100'][0]
