"""Buildability: the rules a design must meet to be built from real parts.

Two forms of the same rules:
- `violations(platform, parts=None, proposal=False)`: the concrete check
  of any platform (a search result, a preset, a user's JSON): a list of
  (rule, one sentence naming the numbers), empty when it can be built.
- the traced form the search uses: `wiring` (the node's PCIe root ports,
  devices, switches, host-link share and its NICs, smooth in the
  relaxation) and `relative_violations` (g <= 0 holds, `TRACED`) of the
  rules that are inequalities on the design space's number axes; at grid
  points they are the concrete rules.

Rules (`RULES`), with their sources:
- `max_sockets` / `min_sockets`: sockets per node within the CPU's
  socket scalability (catalog `max_sockets`, `min_sockets`).
- `fabric_domain`: accelerators per scale-up domain (per node x
  `Fabric.hosts_per_domain`) within the largest domain of the part on
  its topology (`FABRICS`); for parts not in it, a full mesh holds at
  most links + 1 and a hybrid cube mesh 8; a domain of several hosts
  spans whole hosts of the cluster (an integer count, at most `nodes`),
  and the nodes are whole domains (the superchip space searches the
  hosts per domain).
- `topology`: the fabric is one the part can form (`FABRICS`: a PCIe
  card never a switch; bridged pairs only with an NVLink bridge).
- `pcie_lanes`: every accelerator and NIC takes an x16; beyond the
  sockets' root ports, one level of PCIe switches (`SWITCH_*`) fans them
  out, sharing uplinks; illegal when even that cannot hold them.
- `pcie_generation`: the host link runs at most at the x16 rate of the
  lower PCIe generation of its two ends. An NVLink-C2C host link
  (`HostLink.kind` 'c2c': GH200, GB200) is no PCIe link: it takes no
  root port (`pcie_lanes`) and is not held to an x16 rate; it must join
  a part that has one (catalog `host_link`) at most at its rate.
- `dimm`: DDR per socket is at most the CPU's maximum and a population
  of every channel with one or two DIMMs of `DIMM_GB` sizes.
- `soldered`: a CPU whose memory is soldered on its module (catalog
  `soldered_memory_gb`: Grace's LPDDR5X) has exactly that capacity, and
  its socket says so (`CpuSocket.memory`); no DIMM rule applies to it.
- `nics` (proposals only, `proposal=True`): a single-node design (or
  one scale-up domain of several hosts) has one front-end NIC a node at
  the lowest catalog rate; its scale-out NICs would carry nothing.
  Products evaluated as one node (DGX, Big Basin) carry NICs for the
  clusters they are sold for, so the check of a preset
  leaves this rule out. NICs per node count against PCIe (`pcie_lanes`).
- `nic_slot`: a NIC's line rate is at most the x16 rate of its PCIe slot
  (the generation both ends run: the lower of the CPU's and, with
  GPUDirect, the accelerator's; the CPU's for NICs on the sockets and
  for CPU trainers): an 800 Gb/s NIC (100 GB/s) needs Gen6 x16 (128
  GB/s), a Gen5 x16 slot carries 63 GB/s, 504 Gb/s; with GPUDirect the
  NIC bandwidth per accelerator is at most its own x16 link (16 NICs of
  400 Gb/s for 8 GPUs on Gen5 are 100 GB/s a GPU: refused). The cost
  model caps the same rates (`collectives.nic_rate`); the rule keeps a
  design from paying for what its slots cannot carry.
- `board`: accelerators per node, host sockets and host CPU as one of the
  boards the accelerator is sold on (`BOARDS`: HGX 4/8, HGX B200 8, the
  8-OAM MI300X board, 4-OAM MI250X nodes, SXM2 4/8 and HGX-2 16 with two
  Xeon sockets, PCIe servers of 1/2/4/8 cards, each with the CPU
  generations it was sold with). Checked
  on snapped designs only (`CONCRETE_ONLY`): the relaxation does not see
  it; every rounding that breaks it also brings the same design on its
  nearest sold board (`snapping.with_boards`), and the ones that break it
  are rejected (`snapping.buildable`; the baselines by
  `snapping.board_ok`).
A CPU trainer (`trainer='cpu'`) has no accelerator rules; its NICs still
need PCIe lanes.

Parts outside the catalog (a user's JSON part, Zion's assumed OAM) get
the generic checks only; pass their facts in `parts` to check the rest.

The presets pass (`platform_presets`) but three, for real reasons:
zionex and p4d run their A100s' host links at Gen4 while their CPUs
(Cooper Lake, Cascade Lake) are Gen3, so host DDR is reached at Gen3
(`pcie_generation`; their Gen4 PCIe switches carry GPU-NIC traffic);
zionex's 200 Gb/s NICs likewise exceed a Gen3 x16 slot (`nic_slot`
takes the generation both ends run, as the design space builds it);
dgx1_v100's CPU is a proxy (Skylake 8180, 6 channels) for the E5-2698 v4
(4 channels), and 256 GB per socket populates no 6 channels alike
(`dimm`). The presets' host links are not reduced by shared switch
uplinks (the design space's are).
"""

import functools
import math

import jax.numpy as jnp
import numpy as np

from codesign.core.units import GB
from codesign.spec import catalog, hardware

RULES = {
  'max_sockets': 'catalog cpus.*.max_sockets (Intel ARK scalability; EPYC 2P)',
  'min_sockets': 'catalog cpus.*.min_sockets (Cooper Lake-SP: 4S/8S only)',
  'fabric_domain': 'FABRICS: HGX/DGX boards, DGX-1/DGX-2, OCP OAM',
  'topology': 'FABRICS: the topologies each part forms',
  'pcie_lanes': 'catalog cpus.*.pcie_lanes; SWITCH_* (assumption)',
  'pcie_generation': 'catalog links.pcie x16 at the lower generation',
  'dimm': 'catalog mem_channels, max_mem_per_socket_TB; DIMM_GB',
  'soldered': 'catalog cpus.*.soldered_memory_gb (on-module LPDDR5X: one '
  'capacity per part)',
  'nics': 'a single node needs one front-end NIC (proposals only)',
  'nic_slot': 'catalog links.pcie x16 of the NIC slot and the accelerator '
  'link (lower generation of the two ends)',
  'board': 'BOARDS: the baseboards each accelerator is sold on, their GPU '
  'counts, host sockets and qualified CPUs',
}

_SPR = 'Xeon-Platinum-8480+ (Sapphire Rapids-SP)'
_GENOA = 'EPYC-9654 (Genoa)'
_MILAN = 'EPYC-7763 (Milan)'
_ROME = 'EPYC-7742 (Rome)'
_SKL = 'Xeon-Platinum-8180 (Skylake-SP)'
_CLX = 'Xeon-Platinum-8280 (Cascade Lake-SP)'
_CPX = 'Xeon-Platinum-8380H (Cooper Lake-SP)'
_GRACE = 'Grace-72C-480GB (Neoverse V2)'
# Cards per PCIe server (1, 2, 4 or 8 double-width cards).
_PCIE_COUNTS = (1, 2, 4, 8)
# The boards each catalog accelerator is sold on (issue 21): name, the
# accelerator counts per node, the host sockets it is built with (None:
# the CPU's own socket rules) and the host CPUs it is qualified with (a
# CPU of another generation was not sold with it). Confidence M: vendor
# system pages, no single catalog of boards exists.
BOARDS = {
  'V100-SXM2': (
    # 4-GPU SXM2 servers (Supermicro SYS-1029GQ-TVRT, 2x Xeon Scalable);
    # HGX-1 8-GPU (DGX-1, Big Basin; Facebook Big Basin OCP spec with
    # Skylake hosts); HGX-2 16-GPU with NVSwitch, 2 sockets (DGX-2: 2x
    # Xeon Platinum 8168; DGX-2H 8174).
    ('SXM2 4-GPU board', (4,), (2,), (_SKL, _CLX)),
    ('HGX-1 8-GPU board', (8,), (2,), (_SKL, _CLX)),
    ('HGX-2 16-GPU board', (16,), (2,), (_SKL, _CLX)),
  ),
  'A100-SXM4': (
    # HGX A100 4- and 8-GPU (NVIDIA HGX A100 datasheet); hosts: DGX A100
    # 2x EPYC 7742, Milan servers, AWS p4d Cascade Lake 8275CL, ZionEX
    # 4x Cooper Lake (Mudigere et al., Neo, ISCA 2022).
    ('HGX A100 4/8-GPU board', (4, 8), None, (_ROME, _MILAN, _CLX, _CPX)),
  ),
  'H100-SXM5': (
    # HGX H100 4- and 8-GPU; DGX H100 2x Xeon 8480C, Genoa servers.
    ('HGX H100 4/8-GPU board', (4, 8), None, (_SPR, _GENOA)),
  ),
  'H200-SXM': (('HGX H200 4/8-GPU board', (4, 8), None, (_SPR, _GENOA)),),
  'B200-HGX': (
    # HGX B200 8-GPU only (DGX B200: 2x Xeon Platinum 8570, a Sapphire
    # Rapids-socket part; Genoa/Turin servers).
    ('HGX B200 8-GPU board', (8,), None, (_SPR, _GENOA)),
  ),
  'MI250X-OAM': (
    # 4 OAMs per node (HPE Cray EX235a with one EPYC Trento, Milan-class;
    # Supermicro AS-4124GQ-TNMI 2x Milan).
    ('4-OAM MI250X node', (4,), None, (_MILAN,)),
  ),
  'MI300X-OAM': (
    # The 8-OAM universal baseboard only (AMD Instinct MI300X platform);
    # hosts, both two-socket: 2x Genoa (Supermicro AS-8125GS-TNMR2), 2x
    # Sapphire Rapids (Dell PowerEdge XE9680).
    ('8-OAM MI300X board', (8,), (2,), (_GENOA, _SPR)),
  ),
  # PCIe cards: servers of 1, 2, 4 or 8 double-width cards on the CPU's
  # own sockets (Supermicro SYS-421GE-TNRT: 8-10 double-width cards, 2x
  # Sapphire Rapids; Dell PowerEdge R760xa: 4, 2x Sapphire Rapids); NVLink
  # bridges join pairs (A100/H100 PCIe, H100 NVL) or up to 4 cards (H200
  # NVL), never a whole node. Hosts: the server generations each card was
  # sold in (A100 PCIe from Rome/Cascade Lake servers on; the Gen5 cards
  # in Sapphire Rapids and Genoa servers; L40S also in Milan servers).
  'A100-PCIe': (
    ('PCIe server', _PCIE_COUNTS, None, (_ROME, _MILAN, _CLX, _SPR, _GENOA)),
  ),
  'H100-PCIe': (('PCIe server', _PCIE_COUNTS, None, (_SPR, _GENOA)),),
  'H100-NVL': (('PCIe server', _PCIE_COUNTS, None, (_SPR, _GENOA)),),
  'H200-NVL': (('PCIe server', _PCIE_COUNTS, None, (_SPR, _GENOA)),),
  'L40S': (('PCIe server', _PCIE_COUNTS, None, (_MILAN, _SPR, _GENOA)),),
  # Superchips: one Grace per GH200 (sold from 2023; 144 GB HBM3e from
  # 2024), one Grace per two B200 in GB200 (from late 2024); Grace only.
  # GH200 nodes of 1 (MGX 1U servers), 2 (GH200 NVL2: HPE ProLiant DL384
  # Gen12, P71411-B21) and 4 superchips (HPE Cray EX254n, the CSCS Alps
  # node: 4 Grace sockets and 4 GH200 a node, docs/alps/hardware.md).
  # GB200: a compute tray of 2 superchips (4 B200, 2 Grace: NVL72/NVL36
  # trays, MLPerf Crusoe GB200-NVL72 system description: 4 GPUs and 144
  # Grace cores a node) or the GB200 NVL4 board (4 B200, 2 Grace).
  'GH200-H100': (
    ('GH200 server, 1 superchip', (1,), (1,), (_GRACE,)),
    ('GH200 NVL2, 2 superchips', (2,), (2,), (_GRACE,)),
    ('quad GH200 node (HPE Cray EX254n)', (4,), (4,), (_GRACE,)),
  ),
  'GB200-B200': (
    ('GB200 compute tray or NVL4 board, 2 superchips', (4,), (2,), (_GRACE,)),
  ),
}

# Largest accelerators per node on each topology a part forms.
# - NVSwitch parts: HGX baseboards of 8 SXM GPUs (DGX A100/H100/H200/B200;
#   catalog links.nvswitch switches_per_hgx8).
# - V100: 8 on the DGX-1 / Big Basin NVLink2 hybrid cube mesh (catalog
#   V100 notes, DGX-1), 16 on the DGX-2 NVSwitch (catalog links.nvswitch
#   gen1_V100_DGX2).
# - OAM modules (MI250X, MI300X): a full mesh of at most 8 (catalog
#   form_factors.OCP-OAM modules_per_system_max 8, inter_module_links 7;
#   MI300X notes: 7 IF links form a fully connected 8-GPU node). 'switch'
#   is the design space's model of that mesh: in the cost model a switch
#   and a full mesh with a link to every peer reach every peer in one hop
#   at the part's link bandwidth (codesign.terms.collectives.direct_share),
#   and one static topology serves every part of a batched search.
_HGX8 = {'switch': 8}
# PCIe cards, 8 a server: their peers over PCIe, and with NVLink bridges
# (A100/H100 PCIe, H100 NVL, H200 NVL) one bridged peer each
# ('bridged_pairs'; H200 NVL's 4-way bridge is not modelled: pairs). The
# L40S has no NVLink: PCIe only (issue 21: a PCIe card gets no NVLink
# bandwidth it does not have).
_PCIE = {'pcie_only': 8}
_BRIDGED = {'pcie_only': 8, 'bridged_pairs': 8}
_V100 = {'hybrid_cube_mesh': 8, 'switch': 16}
# GH200: the GPUs of a node joined directly by NVLink4 (NVL2: all 18
# links to the one peer; the quad node: 6 to each of 3), at most 4 a node
# (the NVLink switch systems, DGX GH200, span hosts: not modelled); the
# superchip space models that mesh as a switch, as the OAM parts' (every
# peer one hop at the part's links).
# GB200: 72 on the NVL72's NVLink switch trays, a domain across 18 hosts
# (issue 22); a node here is one tray (BOARDS: 4).
_GH200 = {'fully_connected': 4, 'switch': 4}
_GB200 = {'switch': 72}
_OAM = {'fully_connected': 8, 'switch': 8}
FABRICS = {
  'V100-SXM2-16GB': _V100,
  'V100-SXM2-32GB': _V100,
  'A100-SXM4-40GB': _HGX8,
  'A100-SXM4-80GB': _HGX8,
  'H100-SXM5-80GB': _HGX8,
  'H200-SXM-141GB': _HGX8,
  'B200-HGX': _HGX8,
  'MI250X-OAM': _OAM,
  'MI300X-OAM': _OAM,
  'A100-PCIe-80GB': _BRIDGED,
  'H100-PCIe-80GB': _BRIDGED,
  'H100-NVL-94GB': _BRIDGED,
  'H200-NVL-141GB': _BRIDGED,
  'L40S': _PCIE,
  'GH200-H100-96GB': _GH200,
  'GB200-B200-186GB': _GB200,
}
# The topology the design space gives every part (see FABRICS).
DESIGN_TOPOLOGY = 'switch'
# The accelerator trainer's system classes, each searched in a design
# space of its own (`design_space.SYSTEMS`), and the one topology each
# gives its parts: `board`, SXM and OAM modules on a switch or full-mesh
# baseboard with DIMM hosts; `superchip`, GH200 and GB200 modules on
# their Grace (NVLink-C2C, soldered LPDDR5X), their NVLink domains
# spanning hosts (NVL36, NVL72); `pcie`, PCIe cards in PCIe servers,
# NVLink bridges on pairs, and the cards without a bridge (the L40S) on
# PCIe only (`part_topology`): the relaxed space keeps the one static
# topology, bridged pairs, and a card without links has no bridge in it
# (`bridge_gate`; the cost model reaches its peers over PCIe).
SYSTEM_TOPOLOGY = {
  'board': DESIGN_TOPOLOGY,
  'superchip': DESIGN_TOPOLOGY,
  'pcie': 'bridged_pairs',
}
# A hybrid cube mesh is 8 accelerators (DGX-1, Big Basin).
CUBE_MESH_MAX = 8

# PCIe: every accelerator and NIC is an x16 device (catalog links.pcie;
# host_link_GBps_per_direction is the x16 rate).
X16_LANES = 16
# One level of PCIe switches, each on one x16 root port with up to
# SWITCH_DEVICES x16 devices below it: a 96-lane Broadcom PEX88096 class
# switch (x16 up, 4 x16 down, 16 lanes spare), as the four in an HGX A100
# node serve 2 GPUs and 2 NICs each (besthub.dev and allpcb.com A100
# server topologies). Deeper switch trees are not modelled.
SWITCH_DEVICES = 4
# Assumption (no public price found): one switch with its board share and
# retimers.
SWITCH_USD = 1000.0
# PEX88096: 36 W typical (Linley Group newsletter, 2019-09-24).
SWITCH_W = 36.0

# DIMM sizes, GB: RDIMM/LRDIMM 16-256 GB (256 GB DDR4 3DS RDIMM: Samsung,
# AnandTech 13500, 2018; DDR5 RDIMMs span the same range), one or two per
# channel (two slots per channel: AnandTech 13500). The two DIMMs of a
# channel may differ in size, the larger in slot 1 (Fujitsu PRIMERGY
# RX4770 M6 manual, 10.2); every channel is populated alike, as the
# model's DDR bandwidth (all channels) assumes.
DIMM_GB = (16, 32, 64, 128, 256)
# Per-channel capacities of the design space (1 DIMM or 2 of the largest).
DDR_PER_CHANNEL_GB = (16, 32, 64, 128, 256, 512)


def channel_populations_gb() -> tuple[int, ...]:
  """Every capacity of one channel: one DIMM, or two of any sizes."""
  two = {a + b for a in DIMM_GB for b in DIMM_GB}
  return tuple(sorted(set(DIMM_GB) | two))


def fabrics_of(name: str) -> dict:
  """The topologies accelerator `name` forms, each with the most per
  node (`FABRICS`; a user's part, its `max_per_node` on a switch)."""
  if name in FABRICS:
    return FABRICS[name]
  return catalog.raw()['accelerators'].get(name, {}).get('user_fabrics', {})


def catalog_facts() -> dict:
  """Per catalog part the numbers the rules need (name -> dict): the
  shipped parts and the user's in effect (`catalog.using`)."""
  return _catalog_facts(catalog.user_parts())


@functools.cache
def _catalog_facts(parts: catalog.UserParts) -> dict:
  raw = catalog.raw()
  out = {}
  for name, d in raw['cpus'].items():
    lanes = int(d['pcie_lanes'])
    # EPYC: xGMI runs on PCIe SerDes; a 2P node gives 4 x16 per socket to
    # it (128 lanes left for a 2P Rome/Milan/Genoa; catalog Rome notes).
    xgmi = 'xGMI' in d['socket_link_type']
    multi = lanes - X16_LANES * int(d['socket_link_count']) if xgmi else lanes
    out[name] = {
      'kind': 'cpu',
      'max_sockets': int(d['max_sockets']),
      'min_sockets': int(d.get('min_sockets', 1)),
      'pcie_gen': int(d['pcie_gen']),
      'pcie_lanes': lanes,
      'pcie_lanes_multi': multi,
      'ddr_channels': int(d['mem_channels']),
      'max_ddr': d['max_mem_per_socket_TB'] * 1e12,
      'soldered_gb': catalog.soldered_gb(name),
    }
  for name in catalog.accelerator_names():
    d = raw['accelerators'][name]
    c2c = d.get('host_link') == 'NVLink-C2C'
    out[name] = {
      'kind': 'accelerator',
      'pcie_gen': int(d['pcie_gen']),
      'links': float(d['link_count']),
      'fabrics': fabrics_of(name),
      'c2c': d['host_link_GBps_per_direction'] * GB if c2c else None,
    }
  return out


def in_design_space(name: str) -> bool:
  """Whether the board space can wire the catalog accelerator `name`
  (`in_system`)."""
  return in_system(name, 'board')


def part_topology(name: str, system: str) -> str | None:
  """The topology the design space of `system` gives accelerator
  `name`: the system's (`SYSTEM_TOPOLOGY`) where the part forms it; in
  the PCIe space a card without an NVLink bridge (the L40S: `FABRICS`
  'pcie_only') reaches its peers over PCIe only, as sold; None where
  the part forms neither."""
  forms = fabrics_of(name)
  if SYSTEM_TOPOLOGY[system] in forms:
    return SYSTEM_TOPOLOGY[system]
  if system == 'pcie' and 'pcie_only' in forms:
    return 'pcie_only'
  return None


def in_system(name: str, system: str) -> bool:
  """Whether the design space of `system` (`SYSTEM_TOPOLOGY`) can wire
  the catalog accelerator `name`: its fabric forms the system's topology
  (`FABRICS`: a PCIe card no switch, an SXM module no bridged pair; the
  PCIe space also the cards without a bridge, `part_topology`), and its
  host is the system's (a superchip GPU's is its Grace, `is_superchip`;
  the other systems' are DIMM sockets)."""
  superchip = is_superchip(name)
  return part_topology(name, system) is not None and superchip == (
    system == 'superchip'
  )


def is_superchip(name: str) -> bool:
  """Whether catalog accelerator `name` reaches its host over NVLink-C2C
  (catalog `host_link`: GH200, GB200): its boards carry Grace only."""
  d = catalog.raw()['accelerators'].get(name, {})
  return d.get('host_link') == 'NVLink-C2C'


def in_cpu_space(name: str) -> bool:
  """Whether the design space offers catalog CPU `name`: a socket whose
  DDR it buys in DIMM populations. Grace (soldered LPDDR5X, one capacity)
  is not offered: the space's DDR axis would price DIMMs it cannot hold,
  and its GPUs are out of the space (`in_design_space`)."""
  return catalog.soldered_gb(name) is None


def in_system_cpus(name: str, system: str) -> bool:
  """Whether the design space of `system` offers catalog CPU `name`: the
  superchips' Grace (soldered memory) there, the DIMM sockets
  (`in_cpu_space`) elsewhere."""
  return in_cpu_space(name) != (system == 'superchip')


def design_domain(name: str, system: str = 'board') -> float:
  """Accelerators per scale-up domain the design space of `system`
  allows the part (its domain on the system's topology)."""
  return float(fabrics_of(name)[part_topology(name, system)])


# Floors of a part row's fabric links and their B/s where the part has
# none (the L40S: no NVLink): rows mix in log space, so every number is
# positive; `bridge_gate` is 0 at the floor, so the platform it decodes
# has no links, as the part's catalog fabric (`pcie_only`).
NO_LINKS = 1e-6
NO_LINK_BANDWIDTH = 1.0


def bridge_gate(links):
  """0 for a part row without fabric links (`NO_LINKS`), 1 from one
  link on, linear between (a mixture of a bridged card and a card
  without NVLink has part of a bridge). Traced or concrete."""
  g = (links - NO_LINKS) / (1.0 - NO_LINKS)
  return _xp(links).clip(g, 0.0, 1.0)


def lowest_nic_bandwidth() -> float:
  """The lowest catalog NIC line rate, B/s per direction."""
  rates = catalog.raw()['links']['network_nic']['ethernet_roce_Gbps']
  return catalog.nic_bandwidth(min(rates))


# ---- traced: the node's wiring and the relative violations -----------------


def _xp(*xs):
  """numpy for concrete numbers (fast in loops), jax.numpy when traced."""
  concrete = all(isinstance(x, (int, float, np.number)) for x in xs)
  return np if concrete else jnp


def _gate(x):
  """0 at x <= 1, 1 at x >= 2, linear between."""
  return _xp(x).clip(x - 1.0, 0.0, 1.0)


def root_ports(sockets, lanes, lanes_multi):
  """x16 root ports of a node's sockets (lanes per socket alone and with
  more sockets; a blend between 1 and 2 sockets in the relaxation)."""
  per_socket = lanes + (lanes_multi - lanes) * _gate(sockets)
  return sockets * per_socket / X16_LANES


def leaf_oversubscription(domains, oversubscription):
  """The leaves' oversubscription of a design of `domains` nodes (or
  scale-up domains): the chosen one from two on, 1 (no fat tree) at one,
  a blend between (as its NICs, `wiring`). Traced or concrete."""
  return 1.0 + (oversubscription - 1.0) * _gate(domains)


def wiring(nodes, sockets, accels, nics, nic_bw, lanes, lanes_multi):
  """The node's PCIe wiring and its NICs (traced or concrete numbers).

  NICs only where there is more than one node (or scale-up domain): at one
  the design has one NIC at the lowest rate (`nics` rule); from two the
  chosen ones; between them (the relaxation) a blend.

  Args:
    nodes: nodes of the design, or its scale-up domains where a domain
      spans several hosts (one domain has no scale-out network).
    sockets, accels: counts of the design.
    nics, nic_bw: NICs per node and line rate (B/s) chosen.
    lanes, lanes_multi: PCIe lanes per socket alone and with more sockets.

  Returns:
    dict: nic_count, nic_bandwidth (B/s), ports (x16 root ports), devices
    (x16 devices), switches (whole switches at integer counts, a ramp over
    the first device of each in between), host_share (host-link bandwidth
    per accelerator over the x16 rate: shared uplinks).
  """
  xp = _xp(nodes, sockets, accels, nics, nic_bw, lanes, lanes_multi)
  g = _gate(nodes)
  low = lowest_nic_bandwidth()
  nic_count = 1.0 + (nics - 1.0) * g
  nic_rate = low * (nic_bw / low) ** g
  ports = root_ports(sockets, lanes, lanes_multi)
  devices = accels + nic_count
  extra = xp.maximum(devices - ports, 0.0)
  k = SWITCH_DEVICES - 1
  n = xp.floor(extra / k)
  switches = n + xp.clip(extra - k * n, 0.0, 1.0)
  return {
    'nic_count': nic_count,
    'nic_bandwidth': nic_rate,
    'ports': ports,
    'devices': devices,
    'switches': switches,
    'host_share': xp.minimum(1.0, ports / devices),
  }


# Rows of `relative_violations`; the search's CONSTRAINTS end with them.
# 'sockets' is the max_sockets rule and 'ddr_per_socket' the dimm rule's
# maximum (their names in earlier results); DDR is bought per channel, so
# the design space's populations are always realizable.
TRACED = (
  'sockets',
  'ddr_per_socket',
  'min_sockets',
  'fabric_domain',
  'pcie_lanes',
  'nic_slot',
  'nic_per_accelerator',
)
# Rules the relaxation does not see: the concrete check names them and
# the snapping enforces them (`snapping.buildable`, with the nearest sold
# board of every rounding, `snapping.with_boards`); a proposal that still
# broke one would say so (`studies.proposal`).
CONCRETE_ONLY = ('board',)
TRACED_WHAT = {
  'sockets': "the CPU's maximum sockets",
  'ddr_per_socket': "the CPU's maximum DDR per socket",
  'min_sockets': "the CPU's minimum sockets",
  'fabric_domain': "the accelerator's largest fabric domain",
  'pcie_lanes': "the sockets' PCIe lanes with one level of switches",
  'nic_slot': "the NIC's PCIe x16 slot",
  'nic_per_accelerator': "the accelerators' own x16 links (GPUDirect)",
}


def relative_violations(p: hardware.Platform, aux: dict):
  """g (len(TRACED),) of a decoded design; aux from the design space:
  max_sockets, max_ddr, min_sockets, fabric_domain, devices, ports, x16
  (B/s of the NIC slot and accelerator link), gpudirect (1.0 where the
  NICs ride the accelerators' links, else 0.0)."""
  nic = p.nic
  per_acc = nic.count * nic.bandwidth * aux['gpudirect']
  return jnp.stack(
    [
      p.sockets_per_node / aux['max_sockets'] - 1.0,
      p.cpu.ddr_capacity / aux['max_ddr'] - 1.0,
      aux['min_sockets'] / p.sockets_per_node - 1.0,
      p.accelerators_per_node * p.fabric.hosts_per_domain / aux['fabric_domain']
      - 1.0,
      aux['devices'] / (aux['ports'] * SWITCH_DEVICES) - 1.0,
      nic.bandwidth / aux['x16'] - 1.0,
      per_acc / (aux['x16'] * jnp.maximum(p.accelerators_per_node, 1.0)) - 1.0,
    ]
  )


def canonical_index(space, index):
  """Grid indices (..., H) of `design_space` (axes in its `axes` order:
  nodes 2, NICs 6 and 7, the leaves' oversubscription 8, hosts per
  domain 9 where the space has it) with the network's axes (and the
  hosts per domain) at their first step where the design has one node
  (it has one lowest-rate NIC and no fat tree whatever they say, and its
  domain is its one host), and the network's axes there too where its
  nodes are one scale-up domain, so that equal platforms have equal
  indices."""
  index = np.array(index, dtype=np.int64, copy=True)
  nodes = np.asarray(space.grids[0])[index[..., 2]]
  one = nodes == 1.0
  if index.shape[-1] > 9:  # hosts per domain: one domain has no network
    domain = nodes == np.asarray(space.grids[7])[index[..., 9]]
    for axis in (6, 7, 8):
      index[..., axis] = np.where(domain, 0, index[..., axis])
  for axis in range(6, index.shape[-1]):
    index[..., axis] = np.where(one, 0, index[..., axis])
  return index


# ---- concrete --------------------------------------------------------------


def _x16(gen) -> float:
  return catalog.pcie_x16_bandwidth(int(gen))


def violations(
  platform: hardware.Platform, parts: dict | None = None, proposal=False
) -> list[tuple[str, str]]:
  """The buildability rules `platform` breaks: (rule, sentence) pairs.

  Args:
    platform: a concrete platform (float leaves).
    parts: extra or overriding part facts, name -> dict with the keys of
      `catalog_facts()` entries (a CPU: max_sockets, min_sockets, pcie_gen,
      pcie_lanes, pcie_lanes_multi, ddr_channels, max_ddr in bytes; an
      accelerator: pcie_gen, links, fabrics {topology: max per node}).
    proposal: also hold it to the `nics` rule (a design the search
      proposes, not a product as sold).
  """
  facts = {**catalog_facts(), **(parts or {})}
  cpu = facts.get(platform.cpu.name)
  acc = facts.get(platform.accelerator.name)
  trains = platform.trainer == 'accelerator'
  out = []
  if cpu:
    out += _socket_rules(platform, cpu)
    out += _memory_rule(platform, cpu)
    out += _pcie_rule(platform, cpu, trains)
  if trains:
    out += _fabric_rules(platform, acc)
    out += _board_rule(platform)
    if platform.host_link.kind == 'c2c':
      out += _c2c_rule(platform, acc)
    elif cpu and acc:
      gen = min(cpu['pcie_gen'], acc['pcie_gen'])
      bw = float(platform.host_link.bandwidth)
      if bw > _x16(gen) * (1.0 + 1e-9):
        out.append(
          (
            'pcie_generation',
            f'the host link of {bw / GB:g} GB/s exceeds the x16 rate of '
            f'PCIe gen {gen} ({_x16(gen) / GB:g} GB/s), the lower '
            'generation of its two ends',
          )
        )
  out += nic_slot_rule(platform, cpu, acc)
  if proposal:
    out += _nic_rule(platform)
  return out


def nic_slot_generation(platform, cpu, acc) -> int | None:
  """The PCIe generation of the NIC slots (and, with GPUDirect, of the
  accelerators' links): the lower of the CPU's and the accelerator's for
  NICs on the accelerators of an accelerator trainer, the CPU's
  otherwise; None without the facts."""
  gpudirect = platform.trainer == 'accelerator' and (
    platform.nic.attach == 'accelerator'
  )
  if gpudirect:
    return min(cpu['pcie_gen'], acc['pcie_gen']) if cpu and acc else None
  return cpu['pcie_gen'] if cpu else None


def nic_slot_rule(platform, cpu, acc) -> list[tuple[str, str]]:
  """`nic_slot`: each NIC's line rate within its x16 slot and, with
  GPUDirect, the NIC bandwidth per accelerator within its x16 link."""
  gen = nic_slot_generation(platform, cpu, acc)
  if gen is None:
    return []
  x16 = _x16(gen)
  bw, count = float(platform.nic.bandwidth), float(platform.nic.count)
  gbit = bw * 8 / 1e9
  if bw > x16 * (1.0 + 1e-9):
    return [
      (
        'nic_slot',
        f'a {gbit:g} Gb/s NIC exceeds its PCIe gen {gen} x16 slot '
        f'({x16 / GB:g} GB/s, {x16 * 8 / 1e9:g} Gb/s)',
      )
    ]
  accels = float(platform.accelerators_per_node)
  gpudirect = platform.trainer == 'accelerator' and (
    platform.nic.attach == 'accelerator'
  )
  per_acc = count * bw / max(accels, 1.0)
  if gpudirect and platform.host_link.kind == 'c2c':
    # The NIC's DMA reaches the GPU's memory through its Grace and the
    # NVLink-C2C link, not an x16 link of the GPU's own.
    link = float(platform.host_link.bandwidth)
    if per_acc > link * (1.0 + 1e-9):
      return [
        (
          'nic_slot',
          f'{count:g} NICs of {gbit:g} Gb/s on {accels:g} accelerators '
          f'are {per_acc / GB:g} GB/s per accelerator, more than its '
          f'NVLink-C2C host link carries ({link / GB:g} GB/s)',
        )
      ]
    return []
  if gpudirect and per_acc > x16 * (1.0 + 1e-9):
    return [
      (
        'nic_slot',
        f'{count:g} NICs of {gbit:g} Gb/s on {accels:g} accelerators are '
        f'{per_acc / GB:g} GB/s per accelerator, more than its PCIe gen '
        f'{gen} x16 link carries ({x16 / GB:g} GB/s)',
      )
    ]
  return []


def _socket_rules(p, cpu):
  s, name = float(p.sockets_per_node), p.cpu.name
  out = []
  if s > cpu['max_sockets']:
    out.append(
      (
        'max_sockets',
        f'{s:g} sockets per node exceed the {cpu["max_sockets"]} that '
        f'{name} scales to',
      )
    )
  if s < cpu['min_sockets']:
    out.append(
      (
        'min_sockets',
        f'{s:g} sockets per node are fewer than the {cpu["min_sockets"]} '
        f'of every {name} platform',
      )
    )
  return out


def _c2c_rule(p, acc):
  """`pcie_generation` for an NVLink-C2C host link: the accelerator has
  one (catalog `host_link`), and the link runs at most at its rate."""
  if not acc:
    return []
  bw, rate = float(p.host_link.bandwidth), acc.get('c2c')
  if rate is None:
    return [
      (
        'pcie_generation',
        f'{p.accelerator.name} has no NVLink-C2C host link: it reaches '
        'its host over PCIe',
      )
    ]
  if bw > rate * (1.0 + 1e-9):
    return [
      (
        'pcie_generation',
        f'the NVLink-C2C host link of {bw / GB:g} GB/s exceeds the '
        f'{rate / GB:g} GB/s per direction of {p.accelerator.name}',
      )
    ]
  return []


def _memory_rule(p, cpu):
  """`soldered` for a part with soldered memory (or a socket that says
  it has), else `dimm`."""
  fixed = cpu.get('soldered_gb')
  if fixed is None and p.cpu.memory == 'dimm':
    return _dimm_rule(p, cpu)
  name, gb = p.cpu.name, float(p.cpu.ddr_capacity) / GB
  if fixed is None:
    return [
      (
        'soldered',
        f'{name} takes DIMMs; its memory is not soldered on its module',
      )
    ]
  out = []
  if p.cpu.memory != 'soldered':
    out.append(
      (
        'soldered',
        f'the memory of {name} is soldered on its module, not in DIMMs',
      )
    )
  if not math.isclose(gb, fixed, rel_tol=1e-9):
    out.append(
      (
        'soldered',
        f'{gb:g} GB of memory per socket is not the {fixed:g} GB soldered '
        f'on every {name}',
      )
    )
  return out


def _dimm_rule(p, cpu):
  ddr = float(p.cpu.ddr_capacity)
  ch = cpu['ddr_channels']
  per_channel = ddr / ch / GB
  if ddr > cpu['max_ddr'] * (1.0 + 1e-9):
    return [
      (
        'dimm',
        f'{ddr / GB:g} GB of DDR per socket exceed the '
        f'{cpu["max_ddr"] / GB:g} GB maximum of {p.cpu.name}',
      )
    ]
  if not any(
    math.isclose(per_channel, c, rel_tol=1e-9) for c in channel_populations_gb()
  ):
    return [
      (
        'dimm',
        f'{ddr / GB:g} GB of DDR per socket is {per_channel:g} GB on each '
        f'of the {ch} channels of {p.cpu.name}, not one or two DIMMs of '
        f'{"/".join(str(d) for d in DIMM_GB)} GB',
      )
    ]
  return []


def _pcie_rule(p, cpu, trains):
  s = float(p.sockets_per_node)
  ports = float(root_ports(s, cpu['pcie_lanes'], cpu['pcie_lanes_multi']))
  # Accelerators on NVLink-C2C take no root port.
  pcie = trains and p.host_link.kind == 'pcie'
  accels = float(p.accelerators_per_node) if pcie else 0.0
  devices = accels + float(p.nic.count)
  if devices > ports * SWITCH_DEVICES:
    return [
      (
        'pcie_lanes',
        f'{devices:g} x16 devices (accelerators and NICs) exceed the '
        f'{ports:g} x16 root ports of {s:g} '
        f'{p.cpu.name} sockets even with a switch of {SWITCH_DEVICES} '
        'devices on each',
      )
    ]
  return []


def switches_needed(devices: float, ports: float) -> int:
  """PCIe switches of one level that fan `devices` x16 devices out of
  `ports` x16 root ports (0 when the ports suffice)."""
  extra = max(devices - ports, 0.0)
  return int(math.ceil(extra / (SWITCH_DEVICES - 1) - 1e-9))


def _fabric_rules(p, acc):
  topo = p.fabric.topology
  hosts = float(p.fabric.hosts_per_domain)
  n = float(p.accelerators_per_node) * hosts
  links = float(p.fabric.links_per_accelerator)
  name = p.accelerator.name
  out = []
  domain = None
  if acc:
    forms = acc['fabrics']
    if topo not in forms:
      out.append(
        (
          'topology',
          f'{name} forms {" or ".join(forms)} fabrics, not {topo}',
        )
      )
    domain = forms.get(topo)
  if domain is None and topo == 'hybrid_cube_mesh':
    domain = CUBE_MESH_MAX
  if topo == 'fully_connected':
    mesh = links + 1.0
    domain = mesh if domain is None else min(domain, mesh)
  where = 'per node' if hosts == 1.0 else f'per domain of {hosts:g} hosts'
  if domain is not None and n > domain:
    out.append(
      (
        'fabric_domain',
        f'{n:g} {name} {where} exceed the {domain:g} its {topo} fabric holds',
      )
    )
  nodes = float(p.nodes)
  if hosts != round(hosts) or hosts > nodes:
    out.append(
      (
        'fabric_domain',
        f'a scale-up domain of {hosts:g} hosts is not whole hosts of the '
        f'{nodes:g} nodes',
      )
    )
  elif nodes % hosts:
    out.append(
      (
        'fabric_domain',
        f'{nodes:g} nodes are not whole scale-up domains of {hosts:g} hosts',
      )
    )
  return out


def boards_of(name: str) -> tuple:
  """The boards (`BOARDS`; a user's part, its own `boards`) a catalog
  accelerator is sold on; () for a part outside the catalog, or a user's
  part that names none (no board rule)."""
  user = catalog.raw()['accelerators'].get(name, {}).get('user_boards')
  if user is not None:
    return tuple(tuple(map(_frozen, b)) for b in user)
  for prefix, boards in BOARDS.items():
    if name.startswith(prefix):
      return boards
  return ()


def _frozen(x):
  """A board's field from JSON: lists as tuples."""
  return tuple(x) if isinstance(x, list) else x


def board_allows(accelerator: str, cpu: str, n: float, sockets: float):
  """Whether `n` `accelerator`s per node on `sockets` `cpu` sockets are one
  of the boards the accelerator is sold on (`BOARDS`); True for a part
  outside them (no board rule)."""
  boards = boards_of(accelerator)
  return not boards or any(
    n in counts and (socks is None or sockets in socks) and cpu in cpus
    for _, counts, socks, cpus in boards
  )


def _board_rule(p):
  """Accelerators per node, host sockets and host CPU as one of the
  boards the accelerator is sold on."""
  boards = boards_of(p.accelerator.name)
  n, s = float(p.accelerators_per_node), float(p.sockets_per_node)
  if board_allows(p.accelerator.name, p.cpu.name, n, s):
    return []
  sold = '; '.join(
    f'{name}: {"/".join(map(str, counts))} GPUs'
    + (f' on {"/".join(map(str, sockets))} sockets' if sockets else '')
    + f' with {", ".join(c.split(" ")[0] for c in cpus)}'
    for name, counts, sockets, cpus in boards
  )
  return [
    (
      'board',
      f'{n:g} {p.accelerator.name} on {s:g} {p.cpu.name} socket(s) is no '
      f'board that is sold ({sold})',
    )
  ]


def _nic_rule(p):
  low = lowest_nic_bandwidth()
  count, bw = float(p.nic.count), float(p.nic.bandwidth)
  hosts = float(p.fabric.hosts_per_domain) if p.trainer != 'cpu' else 1.0
  one = float(p.nodes) == 1.0 or float(p.nodes) == hosts
  if one and (count > 1.0 or bw > low * (1.0 + 1e-9)):
    what = 'a single node' if float(p.nodes) == 1.0 else 'one scale-up domain'
    return [
      (
        'nics',
        f'{what} buys {count:g} NICs of {bw * 8 / 1e9:g} Gb/s a node where '
        f'one front-end NIC of {low * 8 / 1e9:g} Gb/s serves it',
      )
    ]
  return []
