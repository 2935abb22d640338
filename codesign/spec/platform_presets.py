"""Named training platforms built from catalog parts.

Every number is either from the catalog (`codesign.spec.catalog`, with the
catalog's sources) or an assumption listed here with its reason. The
per-field sources travel with each part (`sources`) and are written into
every dumped platform JSON.
"""

from codesign.core.errors import InputError
from codesign.core.pytree import replace
from codesign.core.units import GB, to_si
from codesign.spec import catalog
from codesign.spec.hardware import Accelerator, Fabric, HostLink, Nic, Platform

_LAT = catalog.raw()['links']['latency_alpha']
_LAT_SRC = 'catalog: links.latency_alpha (' + '; '.join(_LAT['source']) + ')'
_CALC = catalog.raw()['modeling_defaults']['calculon_a100_80g']
_CALC_SRC = 'catalog: modeling_defaults.calculon_a100_80g (calculon)'
_TREC_SRC = (
  'catalog: modeling_defaults.torchrec_planner (FUSED_UVM kernel bandwidth '
  '= HBM_TO_DDR/10)'
)

# Assumptions shared by the presets (no public number in the catalog).
FABRIC_USD_PER_GBPS = 5.0  # NVLink/NVSwitch or IF share, USD per GB/s
FABRIC_W_PER_GBPS = 0.05  # link PHYs plus switch share, W per GB/s
# The NIC alone (its switch port, optics and cable are billed with the
# network: `terms.network_bill`). Assumption (L): no NIC list price was
# found in the sources we hold; about 2,000 USD and 25 W for a 400 Gb/s
# ConnectX-7 class card.
NIC_USD_PER_GBITPS = 5.0  # USD per Gb/s
NIC_W_PER_GBITPS = 0.0625  # W per Gb/s
# The scale-out network, per Gb/s of a port or link, at every rate (the
# sources price 400 Gb/s parts; other rates scale with Gb/s: assumption).
# Switch (M): a 64 x 400 Gb/s Quantum-2 class switch at 36,000 USD
# (docs.google.com/spreadsheets/d/1Ft3RbeZ-w43kYSiLfYc1vxO41mK5lmJpcPC9GOYHAWc,
# Aug 2024: the FS.com variant, fs.com product 206473; NVIDIA's own about
# 50,000 USD; infra-economics.com: QM9700 at 35,000 USD on average).
# Conflict: yobitel.com/knowledge-base/infiniband-ndr puts 48 switches of a
# 1,024-GPU fat tree at 0.55-0.75 MUSD, 11,500-15,600 USD each.
SWITCH_USD_PER_GBITPS = 36000.0 / (64 * 400)
# Switch power (L): about 750 W for 64 x 400 Gb/s with passive cables
# (NVIDIA's QM9700 datasheet figure as we recall it: not in the sources we
# hold).
SWITCH_W_PER_GBITPS = 750.0 / (64 * 400)
# A link (L): a transceiver at each end and its fiber, 1,000 USD at 400
# Gb/s. infra-economics.com: OSFP transceivers 500-1,000 USD each;
# yobitel.com: 1.2-1.6 MUSD of optics for a 1,024-GPU NDR fat tree (about
# 2,048 links: 600-800 USD per link); ascentoptics.com: over 1.5 MUSD of
# transceivers at NVIDIA list for 128 DGX H100 (over 730 USD per link);
# the spreadsheet above: 2.6 MUSD of connectors and cables for 128 nodes
# (1,280 USD per link). They disagree by 2x; 1,000 USD sits between.
LINK_USD_PER_GBITPS = 1000.0 / 400
# Link power (H): 17 W per twin-port OSFP, 2 x 400 Gb/s
# (docs.nvidia.com/networking/display/mms4x00nm800g500m): 8.5 W per 400
# Gb/s end, two ends per link.
LINK_W_PER_GBITPS = 2 * 8.5 / 400
_NET_SRC = 'codesign.spec.platform_presets SWITCH_*, LINK_* (sources there)'
_ASSUMED_SRC = 'assumption: no public number; see codesign.platform_presets'


def fabric(topology, links, link_gbps, latency_s, latency_src, link_src):
  """An accelerator fabric of `links` x `link_gbps` GB/s per accelerator."""
  return Fabric(
    topology=topology,
    links_per_accelerator=float(links),
    link_bandwidth=link_gbps * GB,
    latency=latency_s,
    efficiency=_CALC['nvlink_eff'],
    bandwidth_price=FABRIC_USD_PER_GBPS / GB,
    bandwidth_power=FABRIC_W_PER_GBPS / GB,
    sources=(
      ('links_per_accelerator', link_src),
      ('link_bandwidth', link_src),
      ('latency', latency_src),
      ('efficiency', _CALC_SRC + ' nvlink_eff'),
      ('bandwidth_price', _ASSUMED_SRC),
      ('bandwidth_power', _ASSUMED_SRC),
    ),
  )


# Accelerators whose NVSwitch reduces in the switch (NVLink SHARP, NCCL's
# NVLS algorithm: third-generation NVSwitch, HGX H100 and later; NCCL
# 2.17 release notes).
NVLS_PARTS = ('H100', 'H200', 'B200', 'GB200')


def accel_fabric(part: str, topology: str) -> Fabric:
  """The catalog fabric of accelerator `part` on `topology`."""
  d = catalog.raw()['accelerators'][part]
  src = f'catalog: accelerators.{part} link_count, link_bw_GBps_per_direction'
  latency = _LAT['nvswitch_hgx_h100_astra_validated_ns'] * 1e-9
  fab = fabric(
    topology,
    d['link_count'],
    d['link_bw_GBps_per_direction'],
    latency,
    _LAT_SRC + ' nvswitch_hgx_h100_astra_validated_ns',
    src,
  )
  nvls = topology == 'switch' and part.startswith(NVLS_PARTS)
  return replace(fab, in_switch_reduction=nvls)


def host_link(pcie_gen: int) -> HostLink:
  src = 'catalog: links.pcie x16'
  return HostLink(
    bandwidth=catalog.pcie_x16_bandwidth(pcie_gen),
    latency=_LAT['pcie5_gpu_p2p_read_us_min'] * 1e-6,
    random_access_efficiency=0.1,
    sources=(
      ('bandwidth', src + f' gen{pcie_gen}'),
      ('latency', _LAT_SRC + ' pcie5_gpu_p2p_read_us_min'),
      ('random_access_efficiency', _TREC_SRC),
    ),
  )


def c2c_host_link(part: str) -> HostLink:
  """The NVLink-C2C host link of superchip accelerator `part` (GH200,
  GB200): its catalog rate per direction into its Grace's LPDDR5X, not
  through the Grace's PCIe lanes (`HostLink.kind` 'c2c')."""
  d = catalog.raw()['accelerators'][part]
  src = f'catalog: accelerators.{part} host_link_GBps_per_direction'
  return HostLink(
    bandwidth=d['host_link_GBps_per_direction'] * GB,
    latency=_LAT['pcie5_gpu_p2p_read_us_min'] * 1e-6,
    random_access_efficiency=0.1,
    kind='c2c',
    sources=(
      ('bandwidth', src + ' (NVLink-C2C, catalog links.nvlink_c2c)'),
      (
        'latency',
        'assumption (L): no NVLink-C2C latency in our sources; the PCIe '
        'Gen5 value (' + _LAT_SRC + ' pcie5_gpu_p2p_read_us_min) as an '
        'upper bound',
      ),
      ('random_access_efficiency', _TREC_SRC),
    ),
  )


# The network's latency per message: NCCL's per-step latency of its ring
# LL protocol on the network, the step with the least protocol work
# (github NVIDIA/nccl src/graph/tuning.cc hwLatencies[NCCL_HW_NET] Ring
# LL = 2.7 us; `terms.collectives` adds each protocol's overhead).
NIC_LATENCY_S = 2.7e-6
_NIC_LAT_SRC = 'NVIDIA/nccl src/graph/tuning.cc hwLatencies NET Ring LL'
# Host time per posted network message: NCCL getNetOverhead, 1 us on
# Intel hosts, 2 us on AMD (src/graph/tuning.cc).
POST_OVERHEAD_S = {'intel': 1e-6, 'amd': 2e-6}
_POST_SRC = 'NVIDIA/nccl src/graph/tuning.cc getNetOverhead'
# Port-to-port latency of an InfiniBand NDR switch: catalog
# links.latency_alpha ib_ndr_switch_port_to_port_ns (150-330 ns; the mean).
SWITCH_LATENCY_S = 0.5 * sum(_LAT['ib_ndr_switch_port_to_port_ns']) * 1e-9
# Ports of one network switch: NVIDIA Quantum-2 QM9700, 64 x NDR 400 Gb/s
# (product brief); Quantum HDR QM8700 has 40 x HDR 200 Gb/s.
SWITCH_RADIX = {100: 36.0, 200: 40.0, 400: 64.0, 800: 64.0}
_RADIX_SRC = (
  'NVIDIA switch product briefs: Switch-IB 2 36 x EDR, Quantum QM8700 40 '
  'x HDR, Quantum-2 QM9700 64 x NDR'
)


def nic(
  count: int,
  gbit_per_s: float,
  attach: str,
  pcie_gen: int = 5,
  host: str = 'intel',
  sharp: bool = False,
) -> Nic:
  """`count` NICs of `gbit_per_s` in PCIe Gen `pcie_gen` x16 slots of an
  `host` ('intel' or 'amd') node; `sharp`: the switches reduce."""
  radix = SWITCH_RADIX.get(int(gbit_per_s), 64.0)
  return Nic(
    attach=attach,
    count=float(count),
    bandwidth=catalog.nic_bandwidth(gbit_per_s),
    latency=NIC_LATENCY_S,
    efficiency=_CALC['net_eff'],
    bandwidth_price=NIC_USD_PER_GBITPS / (1e9 / 8),
    bandwidth_power=NIC_W_PER_GBITPS / (1e9 / 8),
    slot_bandwidth=catalog.pcie_x16_bandwidth(pcie_gen),
    post_overhead=POST_OVERHEAD_S[host],
    switch_latency=SWITCH_LATENCY_S,
    switch_radix=radix,
    oversubscription=1.0,
    in_network_reduction=sharp,
    # to_si: the JSON's boundary value reads back to the same bits.
    switch_port_price=to_si(SWITCH_USD_PER_GBITPS, 'usd_per_gbit_per_s'),
    switch_port_power=to_si(SWITCH_W_PER_GBITPS, 'w_per_gbit_per_s'),
    link_price=to_si(LINK_USD_PER_GBITPS, 'usd_per_gbit_per_s'),
    link_power=to_si(LINK_W_PER_GBITPS, 'w_per_gbit_per_s'),
    sources=(
      ('count', 'platform preset choice'),
      ('bandwidth', 'catalog: links.network_nic'),
      ('latency', _NIC_LAT_SRC),
      ('efficiency', _CALC_SRC + ' net_eff'),
      ('bandwidth_price', 'assumption (L): NIC_USD_PER_GBITPS'),
      ('bandwidth_power', 'assumption (L): NIC_W_PER_GBITPS'),
      ('switch_port_price', _NET_SRC + ' (M)'),
      ('switch_port_power', _NET_SRC + ' (L)'),
      ('link_price', _NET_SRC + ' (L)'),
      ('link_power', _NET_SRC + ' (H)'),
      ('slot_bandwidth', f'catalog: links.pcie gen{pcie_gen}_x16'),
      ('post_overhead', f'{_POST_SRC} ({host} host)'),
      (
        'switch_latency',
        _LAT_SRC + ' ib_ndr_switch_port_to_port_ns (mean of the range)',
      ),
      ('switch_radix', _RADIX_SRC),
      ('oversubscription', 'assumption: a full-bisection fat tree'),
    ),
  )


def _platform(
  name,
  trainer,
  nodes,
  sockets,
  accels,
  cpu,
  accel,
  fab,
  pcie,
  nics,
  node_price,
  node_power,
  notes,
) -> Platform:
  return Platform(
    name=name,
    trainer=trainer,
    nodes=float(nodes),
    sockets_per_node=float(sockets),
    accelerators_per_node=float(accels),
    cpu=cpu,
    accelerator=accel,
    fabric=fab,
    host_link=host_link(pcie),
    nic=nics,
    node_price=float(node_price),
    node_power=float(node_power),
    sources=(
      ('node_price', _ASSUMED_SRC + ' (chassis, board, PSUs, storage)'),
      ('node_power', _ASSUMED_SRC + ' (fans, board, storage)'),
      ('notes', notes),
    ),
  )


SKYLAKE = 'Xeon-Platinum-8180 (Skylake-SP)'
CASCADE = 'Xeon-Platinum-8280 (Cascade Lake-SP)'
COOPER = 'Xeon-Platinum-8380H (Cooper Lake-SP)'
SAPPHIRE = 'Xeon-Platinum-8480+ (Sapphire Rapids-SP)'
ROME = 'EPYC-7742 (Rome)'


def zion_oam() -> Accelerator:
  """The accelerator of the Zion preset: a generic OAM module.

  The Zion paper does not name its accelerator. Assumed: V100-class
  compute and HBM (the accelerator generation of 2019-2020; catalog
  V100-SXM2-32GB), 7 inter-module links (OAM maximum), and the 350 W OAM
  12 V power envelope (catalog form_factors.OCP-OAM).
  """
  base = catalog.accelerator('V100-SXM2-32GB')
  oam = catalog.raw()['form_factors']['OCP-OAM']
  src = dict(base.sources)
  src['power'] = 'catalog: form_factors.OCP-OAM max_power_w_12v'
  return replace(
    base,
    name='Zion-OAM (assumed V100-class)',
    power=float(oam['max_power_w_12v']),
    sources=tuple(
      (k, v if k == 'power' else 'assumption (V100-class OAM): ' + v)
      for k, v in src.items()
    ),
  )


def cpu_2s() -> Platform:
  """Dual-socket Skylake CPU trainer (2 x Xeon 8180, 384 GB DDR4 each,
  one 100 Gb/s NIC). The accelerator fields are unused."""
  return _platform(
    'cpu_2s',
    'cpu',
    1,
    2,
    0,
    catalog.cpu(SKYLAKE, 384),
    catalog.accelerator('V100-SXM2-32GB'),
    accel_fabric('V100-SXM2-32GB', 'pcie_only'),
    3,
    nic(1, 100, 'socket', 3),
    5000,
    300,
    'DDR 6 x 64 GB per socket (assumption); accelerators unused',
  )


def cpu_4s() -> Platform:
  """Four-socket Cooper Lake CPU trainer, as Intel's MLPerf v0.7 DLRM
  node (4 x Xeon 8380H-class with 192 GB DDR4-3200 each, one 100 Gb/s
  NIC). The accelerator fields are unused."""
  return _platform(
    'cpu_4s',
    'cpu',
    1,
    4,
    0,
    catalog.cpu(COOPER, 192),
    catalog.accelerator('V100-SXM2-32GB'),
    accel_fabric('V100-SXM2-32GB', 'pcie_only'),
    3,
    nic(1, 100, 'socket', 3),
    8000,
    400,
    'mlcommons/training_results_v0.7 Intel 1-node-4s-cpx-pytorch: 192 GB '
    'per socket at 3200 MT/s; NIC and chassis are assumptions',
  )


def big_basin() -> Platform:
  """Big Basin: 8 x V100-32GB on an NVLink2 hybrid cube mesh, PCIe Gen3 to
  2 Skylake sockets with 768 GB DDR4 each (assumed 12 x 64 GB DIMMs, the
  8180 maximum), 4 x 100 Gb/s NICs behind the PCIe switches."""
  part = 'V100-SXM2-32GB'
  return _platform(
    'big_basin',
    'accelerator',
    1,
    2,
    8,
    catalog.cpu(SKYLAKE, 768),
    catalog.accelerator(part),
    accel_fabric(part, 'hybrid_cube_mesh'),
    3,
    nic(4, 100, 'accelerator', 3),
    20000,
    800,
    'host DDR size and NIC count are assumptions',
  )


def zion() -> Platform:
  """Zion: 8 Cooper Lake sockets with large DDR plus 8 OAM accelerators,
  fully connected.

  Assumptions where the public record is silent (zion_context.md):
  - DDR: 6 channels x 64 GB DDR4-3200 per socket = 384 GB, 3.07 TB a node;
  - accelerators: `zion_oam()` (V100-class, 32 GB HBM, 350 W);
  - fabric: 7 OAM links x 25 GB/s per direction, fully connected;
  - host wiring: one accelerator per socket on PCIe Gen3 x16;
  - NICs: 4 x 100 Gb/s, attached to the sockets.
  """
  oam = zion_oam()
  fab = fabric(
    'fully_connected',
    7,
    25.0,
    _LAT['nvswitch_hgx_h100_astra_validated_ns'] * 1e-9,
    _LAT_SRC + ' (astra-sim validated NVSwitch value used for OAM links)',
    'catalog: form_factors.OCP-OAM inter_module_links=7; link rate assumed '
    'NVLink2-class 25 GB/s',
  )
  return _platform(
    'zion',
    'accelerator',
    1,
    8,
    8,
    catalog.cpu(COOPER, 384),
    oam,
    fab,
    3,
    nic(4, 100, 'socket', 3),
    30000,
    1200,
    'see codesign.platform_presets.zion docstring for every assumption',
  )


def zionex() -> Platform:
  """ZionEX: 16 nodes x (4 Cooper Lake sockets with 1.5 TB DDR a node,
  8 x A100-40GB on NVSwitch, one 200 Gb/s RoCE NIC per GPU)."""
  part = 'A100-SXM4-40GB'
  return _platform(
    'zionex',
    'accelerator',
    16,
    4,
    8,
    catalog.cpu(COOPER, 384),
    catalog.accelerator(part),
    accel_fabric(part, 'switch'),
    4,
    nic(8, 200, 'accelerator', 4),
    30000,
    1200,
    'zion_context.md: 200 Gb/s per GPU NIC, 1.5 TB DDR a node, pods of 16',
  )


def _dgx(
  name,
  part,
  accels,
  topology,
  cpu,
  ddr_per_socket_gb,
  pcie,
  nics,
  nic_gbps,
  notes,
  dimms_per_channel=None,
):
  host = 'amd' if cpu.startswith('EPYC') else 'intel'
  return _platform(
    name,
    'accelerator',
    1,
    2,
    accels,
    catalog.cpu(cpu, ddr_per_socket_gb, dimms_per_channel),
    catalog.accelerator(part),
    accel_fabric(part, topology),
    pcie,
    nic(nics, nic_gbps, 'accelerator', pcie, host),
    25000,
    1000,
    notes,
  )


def dgx1_v100() -> Platform:
  """DGX-1: 8 x V100-32GB, NVLink2 hybrid cube mesh, 2 sockets (the
  E5-2698 v4 is not in the catalog: Skylake 8180 as proxy), 512 GB DDR,
  4 x 100 Gb/s InfiniBand."""
  return _dgx(
    'dgx1_v100',
    'V100-SXM2-32GB',
    8,
    'hybrid_cube_mesh',
    SKYLAKE,
    256,
    3,
    4,
    100,
    'CPU is a proxy; DDR 512 GB total',
  )


def dgx2_v100() -> Platform:
  """DGX-2: 16 x V100-32GB on NVSwitch (6 links each), 2 sockets (Xeon
  8168, proxied by 8180), 1.5 TB DDR, 8 x 100 Gb/s InfiniBand."""
  return _dgx(
    'dgx2_v100',
    'V100-SXM2-32GB',
    16,
    'switch',
    SKYLAKE,
    768,
    3,
    8,
    100,
    'CPU is a proxy; DDR 1.5 TB total',
  )


def dgx_a100_40gb() -> Platform:
  """DGX A100 (40 GB): 8 x A100-40GB on NVSwitch, 2 x EPYC 7742, 1 TB DDR,
  8 x 200 Gb/s HDR InfiniBand."""
  return _dgx(
    'dgx_a100_40gb',
    'A100-SXM4-40GB',
    8,
    'switch',
    ROME,
    512,
    4,
    8,
    200,
    'DDR 1 TB total',
  )


# The 2 TB DGX hosts hold 32 DIMMs over 2 sockets x 8 channels: two 64 GB
# DIMMs per channel (DGX B200 user guide, "2 TB using 32 x DIMMs",
# https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200
# .html; the DGX H100/H200 and DGX A100 (2 TB) guides list the same
# population, not retrieved here; medium).
DGX_2TB_DIMMS_PER_CHANNEL = 2.0


def dgx_a100_80gb() -> Platform:
  """DGX A100 (80 GB): 8 x A100-80GB on NVSwitch, 2 x EPYC 7742, 2 TB DDR,
  8 x 200 Gb/s HDR InfiniBand."""
  return _dgx(
    'dgx_a100_80gb',
    'A100-SXM4-80GB',
    8,
    'switch',
    ROME,
    1024,
    4,
    8,
    200,
    'DDR 2 TB total in 32 x 64 GB DIMMs (2 per channel)',
    dimms_per_channel=DGX_2TB_DIMMS_PER_CHANNEL,
  )


def p4d() -> Platform:
  """AWS p4d.24xlarge: 8 x A100-40GB on NVSwitch, 2 Cascade Lake sockets
  (8275CL, proxied by 8280), 1152 GB DDR, 4 x 100 Gb/s EFA."""
  return _dgx(
    'p4d',
    'A100-SXM4-40GB',
    8,
    'switch',
    CASCADE,
    576,
    4,
    4,
    100,
    'CPU is a proxy; DDR 1152 GB total',
  )


def dgx_h100() -> Platform:
  """DGX H100: 8 x H100-80GB on NVSwitch (18 NVLink4), 2 x Xeon 8480+,
  2 TB DDR, 8 x 400 Gb/s ConnectX-7."""
  return _dgx(
    'dgx_h100',
    'H100-SXM5-80GB',
    8,
    'switch',
    SAPPHIRE,
    1024,
    5,
    8,
    400,
    'DDR 2 TB total in 32 x 64 GB DIMMs (2 per channel)',
    dimms_per_channel=DGX_2TB_DIMMS_PER_CHANNEL,
  )


def dgx_h200() -> Platform:
  """DGX H200: as DGX H100 with H200-141GB."""
  return _dgx(
    'dgx_h200',
    'H200-SXM-141GB',
    8,
    'switch',
    SAPPHIRE,
    1024,
    5,
    8,
    400,
    'DDR 2 TB total in 32 x 64 GB DIMMs (2 per channel)',
    dimms_per_channel=DGX_2TB_DIMMS_PER_CHANNEL,
  )


GENOA = 'EPYC-9654 (Genoa)'


def pcie_generation(cpu_name: str, part: str) -> int:
  """The PCIe generation a card's host link runs at: the lower of the
  CPU's and the accelerator's (catalog `pcie_gen`), as the slot carries
  it (buildability rule `pcie_generation`)."""
  raw = catalog.raw()
  return min(
    int(raw['cpus'][cpu_name]['pcie_gen']),
    int(raw['accelerators'][part]['pcie_gen']),
  )


def dgx_b200() -> Platform:
  """DGX B200: 8 x B200 on NVSwitch (18 NVLink5 links, 50 GB/s per
  direction each), 2 x Xeon Platinum 8570, 2 TB DDR5 (32 DIMMs), 8 x 400
  Gb/s ConnectX-7 (NVIDIA DGX B200 user guide,
  docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html).

  The 8570 (Emerald Rapids, same LGA4677 platform: 8 DDR5 channels, 80
  PCIe Gen5 lanes) is not in the catalog: the 8480+ stands in for it.
  The datasheet's 14.3 kW maximum is not the model's power (the sum of
  part TDPs and the assumed chassis).
  """
  part = 'B200-HGX'
  return _dgx(
    'dgx_b200',
    part,
    8,
    'switch',
    SAPPHIRE,
    1024,
    pcie_generation(SAPPHIRE, part),
    8,
    400,
    'NVIDIA DGX B200 user guide: 8 x B200 (1,440 GB HBM3e), 2 x Xeon 8570 '
    '(proxy: 8480+), 2 TB DDR in 32 DIMMs (1 TB a socket, 2 x 64 GB per '
    'channel), 8 x ConnectX-7 400 Gb/s, 14.3 kW max',
  )


def mi300x_8() -> Platform:
  """8 x MI300X on the 8-OAM board, fully connected by Infinity Fabric (7
  links of 64 GB/s per direction each), 2 x EPYC 9654 (Genoa) with 768
  GB DDR5 each (12 channels x 64 GB), 8 x 400 Gb/s NICs, one per GPU:
  Supermicro AS-8125GS-TNMR2 as sold (2 x EPYC 9004, 24 DIMM slots).

  DIMM size and NICs are a preset choice: 8 x 400 Gb/s is the usual
  population of 8-GPU OAM servers (servethehome.com ASUS ESC A8A-E12U
  review: eight 400 Gb/s NICs, one per GPU).
  """
  part = 'MI300X-OAM'
  return _dgx(
    'mi300x_8',
    part,
    8,
    'fully_connected',
    GENOA,
    768,
    pcie_generation(GENOA, part),
    8,
    400,
    'Supermicro AS-8125GS-TNMR2 (2 x EPYC 9004, 8 x MI300X OAM); DDR 1.5 '
    'TB (24 x 64 GB) and 8 x 400 Gb/s NICs are preset choices',
  )


def h100_pcie_8() -> Platform:
  """8 x H100 PCIe cards in a 2-socket Sapphire Rapids PCIe server
  (Supermicro SYS-421GE-TNRT class), 1 TB DDR5 a socket (8 channels x 2
  x 64 GB, as DGX H100, so that the two differ in fabric and card only),
  4 x 400 Gb/s NICs under the same PCIe switches (GPUDirect).

  The fabric is bridged pairs: each card's NVLink bridge (12 NVLink4
  links, 300 GB/s per direction) reaches its one bridged peer; the other
  six peers are reached over PCIe, and a ring over the 8 runs at the
  slower PCIe edge (`terms.pair_ring`). The host link is the slot's Gen5
  x16, two cards behind each PCIe switch (`H100_PCIE_CARDS_PER_SWITCH`):
  the six PCIe peers share the switches' uplinks and, four of them, the
  socket links (`terms.pcie_peer_rate`).
  """
  part = 'H100-PCIe-80GB'
  gen = pcie_generation(SAPPHIRE, part)
  p = _platform(
    'h100_pcie_8',
    'accelerator',
    1,
    2,
    8,
    catalog.cpu(SAPPHIRE, 1024),
    catalog.accelerator(part),
    accel_fabric(part, 'bridged_pairs'),
    gen,
    nic(4, 400, 'accelerator', gen, catalog.host_vendor(SAPPHIRE)),
    25000,
    1000,
    'PCIe server, 8 x H100 PCIe, NVLink bridges on pairs (PCIe between '
    'pairs); DDR 2 TB, 4 x 400 Gb/s NICs and chassis are preset choices',
  )
  link = p.host_link
  return replace(
    p,
    host_link=replace(
      link,
      cards_per_switch=H100_PCIE_CARDS_PER_SWITCH,
      sources=(*link.sources, ('cards_per_switch', _PCIE_SWITCH_SRC)),
    ),
  )


# Cards behind one PCIe switch in an 8-card Sapphire Rapids server: a
# socket's 80 lanes (catalog) cannot give 4 cards and 2 NICs an x16 each
# (96 lanes), so each socket feeds two switches by an x16 each, two cards
# and a NIC under each (derived, medium).
H100_PCIE_CARDS_PER_SWITCH = 2.0
_PCIE_SWITCH_SRC = (
  'derived (M): 80 PCIe lanes a Sapphire Rapids socket (catalog) against '
  '4 cards and 2 NICs of x16 a socket; the dual-root switched layout of '
  '8-GPU PCIe servers (supermicro.org.cn products/system/4U/4029 '
  'PCIe-Root-Architecture: GPUs under PCIe switches on both CPUs)'
)


GRACE = 'Grace-72C-480GB (Neoverse V2)'


def gh200() -> Platform:
  """A quad GH200 node as HPE Cray EX254n builds it (the CSCS Alps node,
  github eth-cscs/cscs-docs docs/alps/hardware.md: 2,688 nodes with
  10,752 Grace sockets and 10,752 GPUs, four GH200 modules and four NICs
  a node; H): 4 x GH200 (Hopper GPU, 96 GB HBM3; Grace, 480 GB LPDDR5X),
  each GPU reaching its Grace's memory over NVLink-C2C (450 GB/s per
  direction, not through PCIe), the four GPUs joined all-to-all by their
  18 NVLink4 links (6 to each peer), one NIC per superchip.

  Preset choices with their confidence:
  - LPDDR5X 480 GB per Grace: the catalog's one Grace part (the GH200
    datasheet's size); Alps' own size is not in the sources we hold (M).
  - NICs: HPE Slingshot 11 at 200 Gb/s, one per GH200, on the Grace's
    PCIe Gen5 (the rate as recalled, not in the pages we hold: M);
    GPUDirect (the NIC's DMA reaches HBM through its Grace and C2C).
  - Grace-to-Grace traffic crosses the GPUs' NVLink in this node; the
    model's socket links are the Grace part's C2C (the Grace CPU
    Superchip's): only CPU-pooled lookups (no UVM) see them (L).
  - chassis price and power: half the 8-GPU DGX presets' (L).
  """
  part = 'GH200-H100-96GB'
  p = _platform(
    'gh200',
    'accelerator',
    1,
    4,
    4,
    catalog.cpu(GRACE),
    catalog.accelerator(part),
    accel_fabric(part, 'fully_connected'),
    5,
    nic(4, 200, 'accelerator', 5, catalog.host_vendor(GRACE)),
    12500,
    500,
    'HPE Cray EX254n quad GH200 node (CSCS Alps); 480 GB LPDDR5X a Grace '
    '(the catalog part), 4 x 200 Gb/s Slingshot 11 NICs and chassis are '
    'preset choices',
  )
  return replace(p, host_link=c2c_host_link(part))


def gb200_nvl72() -> Platform:
  """One GB200 NVL72 rack (NVIDIA DGX GB200 user guide, docs.nvidia.com/
  dgx/dgxgb200-user-guide/hardware.html; H): 18 compute trays, each 2
  Grace and 4 B200 (two GB200 superchips) with 4 ConnectX-7 400 Gb/s
  NICs for the compute fabric, and 9 NVLink switch trays that join all
  72 GPUs in one NVLink domain (`fabric.hosts_per_domain` 18: every GPU
  reaches every other at NVLink5's 18 x 50 GB/s per direction, NVLink
  SHARP in the switches). Each B200 reaches its Grace's LPDDR5X over
  NVLink-C2C (225 GB/s per direction, half the superchip's link). A node
  here is a tray; more racks are more nodes (36, 54, ...), one domain
  per 18.

  Preset choices with their confidence:
  - the tray's chassis: 12,500 USD and 500 W (as the gh200 preset's, L);
    the 9 switch trays stand in the fabric's price and power per B/s.
    Bottom up the rack costs about 3.8M USD (72 B200 at the assumed
    44,444 USD each are 3.2M): press estimates say 2-3M USD a rack
    (awesomeagents.ai, kshirol-dev learnAI; L);
  - power: the parts' TDPs at the wall (`terms.wall_power`) give 7.4 kW
    a tray with its NICs, 133 kW for the 18 (press: about 120 kW a rack;
    GB300 NVL72 racks up to 142 kW, NVIDIA's enterprise reference
    architecture; M), so `propose --rack_kw` must allow a rack of that
    size: the rack rule holds a domain's trays in one rack;
  - NIC slots: the ConnectX-7's PCIe Gen5 x16 on the Grace (M).
  """
  part = 'GB200-B200-186GB'
  p = _platform(
    'gb200_nvl72',
    'accelerator',
    18,
    2,
    4,
    catalog.cpu(GRACE),
    catalog.accelerator(part),
    replace(accel_fabric(part, 'switch'), hosts_per_domain=18.0),
    5,
    nic(4, 400, 'accelerator', 5, catalog.host_vendor(GRACE)),
    12500,
    500,
    'NVIDIA DGX GB200 user guide (hardware.html): 18 compute trays of 2 '
    'Grace + 4 Blackwell, 9 NVLink switch trays, 4 x ConnectX-7 400G a '
    'tray; chassis price and power are preset choices',
  )
  return replace(p, host_link=c2c_host_link(part))


PLATFORMS = {
  f.__name__: f
  for f in (
    cpu_2s,
    cpu_4s,
    big_basin,
    zion,
    zionex,
    dgx1_v100,
    dgx2_v100,
    dgx_a100_40gb,
    dgx_a100_80gb,
    p4d,
    dgx_h100,
    dgx_h200,
    dgx_b200,
    mi300x_8,
    h100_pcie_8,
    gh200,
    gb200_nvl72,
  )
}


# The year each preset system was first built or sold (M: the systems'
# announcements as the presets' docstrings cite them): what an era of
# `studies.zion_decision` may compare. Big Basin: OCP Summit 2017; DGX-1
# with V100: 2017; DGX-2: 2018; Zion: the paper's 2019 decision (OCP
# Summit 2019; its Cooper Lake sockets stand in for the 2019 parts); CPU
# trainers of Skylake (2017) and Cooper Lake (2020) sockets; DGX A100 and
# AWS p4d: 2020; ZionEX: 2021 (Mudigere et al., ISCA 2022); DGX H100 and
# H100 PCIe servers: 2022; MI300X 8-OAM servers: 2023 (catalog year);
# GH200 nodes, DGX H200 and DGX B200: 2024; GB200 NVL72: 2025 (shipping).
YEARS = {
  'big_basin': 2017,
  'dgx1_v100': 2017,
  'cpu_2s': 2017,
  'dgx2_v100': 2018,
  'zion': 2019,
  'cpu_4s': 2020,
  'dgx_a100_40gb': 2020,
  'dgx_a100_80gb': 2020,
  'p4d': 2020,
  'zionex': 2021,
  'dgx_h100': 2022,
  'h100_pcie_8': 2022,
  'mi300x_8': 2023,
  'gh200': 2024,
  'dgx_h200': 2024,
  'dgx_b200': 2024,
  'gb200_nvl72': 2025,
}


def get(name: str) -> Platform:
  """The platform preset called `name`."""
  if name not in PLATFORMS:
    raise InputError(
      f'unknown platform preset {name!r}; valid choices: '
      + ', '.join(PLATFORMS)
    )
  return PLATFORMS[name]()
