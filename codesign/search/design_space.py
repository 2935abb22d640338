"""The space of buildable platforms the search explores, and its relaxation.

A design is a choice on each *axis*:
- part axes (`accelerator`, `cpu`): one catalog part. Every number of the
  part (FLOP/s, HBM or DDR bandwidth, HBM capacity, links, price, power)
  comes with it, so the search never gets FLOP/s or bandwidth without
  paying for the part that has them. The relaxation is a weighted mixture
  of the parts (one weight coordinate per part, normalized to sum to 1):
  every number, price and power included, is the weighted geometric mean
  of the parts' numbers, so a mixture of an A100 and an H100 costs between
  their prices and no mixture beats the parts' own price/performance
  envelope. A one-hot weight vector is exactly the part.
- number axes: counts and sizes sold in steps (nodes, sockets, accelerators
  and NICs per node, DDR per channel, NIC line rate). The relaxation is the
  continuous log-scaled range between the smallest and largest step.

Technology couplings of real parts (the rules: `codesign.search.buildability`):
- HBM capacity and bandwidth come with the accelerator (its stacks);
- fabric links and their rate come with the accelerator (NVLink or
  Infinity Fabric generation); each system class (`SYSTEMS`, a space of
  its own) gives its parts one topology: a switch on the `board` space
  (every peer one hop: NVSwitch, or the OAM parts' full mesh) of at most
  the part's domain per node (8 on HGX boards and OAM, 16 V100 as DGX-2:
  the `fabric_domain` constraint); on the `superchip` space too, its
  NVLink domain spanning `DOMAIN_HOSTS` hosts (GB200 NVL36 and NVL72;
  GH200's domain is its node); bridged pairs on the `pcie` space (PCIe
  cards with NVLink bridges). Whether a part's switch reduces (NVLink
  SHARP) is a number of its row (`aux['nvls_share']`), so one space
  holds parts with it and without;
- a superchip's GPU reaches its Grace over NVLink-C2C at the part's rate
  (no root port, no PCIe generation), and its Grace's LPDDR5X is
  soldered: one capacity, no DIMMs;
- the PCIe host link runs at the lower generation of its two ends; every
  accelerator and NIC is an x16 device: past the sockets' root ports, PCIe
  switches fan them out, each paid for (price, power) and sharing its
  uplink (host-link bandwidth per accelerator x ports / devices); more
  devices than one level of switches holds break the `pcie` constraint;
- DDR bandwidth comes with the CPU (channels x MT/s); DDR is bought per
  channel (one or two DIMMs, every channel alike), up to the CPU's maximum
  per socket; a DIMM's price per GB rises with its size and two DIMMs per
  channel run slower (`codesign.spec.dimms`: smooth in the relaxation,
  exact at the grid's sizes); a CPU allows `min_sockets` to
  `max_sockets` per node (all search constraints);
- NICs come in catalog line rates (100 to 800 Gb/s), and only where there
  is more than one node: a single node has one front-end NIC at the lowest
  rate, whatever the NIC axes say (`buildability.canonical_index`); a NIC
  no faster than its x16 slot, and with GPUDirect no more NIC bandwidth
  per accelerator than its x16 link (`nic_slot`, `nic_per_accelerator`
  constraints); the network they plug into (a fat tree of switches of the
  NIC rate's radix, its links) is priced by the cost model
  (`codesign.model.terms.switching`);
- a node's chassis price and power grow with its accelerator and socket
  slots (`NODE_*` below; assumptions), so slots are never free.

The plan is part of the design too: in `optimize` mode its continuous
leaves (the HBM fraction of each table, the CPU lookup share and optionally
the overlap) are search variables in [0, 1]; in `auto` mode the HBM
fractions follow the planner's rule for the platform, so a discrete
design maps to one plan and can be enumerated. The sharding is one for
every table, or searched per table (`plan_space.SEARCH`). The plan half
of z is `codesign.search.plan_space`'s.

Coordinates: a design vector z in [0, 1]^D: the accelerator weights (A),
the CPU weights (C), one coordinate per number axis (log-scaled between
the smallest and largest step; the superchip space's hosts per domain
last), then the plan. Buildable designs are integer index vectors (one
index per hardware axis, `DesignSpace.axes`) plus a plan.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core import dataflow
from codesign.core.errors import InputError
from codesign.core.pytree import replace
from codesign.core.units import GB
from codesign.search import buildability as bd
from codesign.search import part_tables as pt
from codesign.search import plan_space
from codesign.spec import catalog, dimms, hardware, platform_presets
from codesign.spec import plan as plan_lib
from codesign.spec import workload as wl
from codesign.spec.stack import Stack

# Chassis model (assumption, after the presets' 20-30 kUSD and 0.8-1.2 kW
# nodes): a base board plus a share per accelerator slot and per socket.
NODE_BASE_USD = 5000.0
NODE_USD_PER_ACCELERATOR = 2500.0
NODE_USD_PER_SOCKET = 1000.0
NODE_BASE_W = 300.0
NODE_W_PER_ACCELERATOR = 80.0
NODE_W_PER_SOCKET = 40.0
STEP_OVERHEAD_S = 200e-6  # as the accelerator presets

SOCKETS = (1, 2, 4, 8)
ACCELERATORS_PER_NODE = (1, 2, 4, 8, 16)
NICS_PER_NODE = (1, 2, 4, 8, 16)
# Leaf oversubscriptions of the scale-out fat tree (downlinks over
# uplinks): non-blocking, 2:1 and 3:1, as clusters are built (Meta's
# 24,576-GPU clusters oversubscribe above the racks: unanswered.io/guide/
# nvidia-h100-gpu-density-per-node-rack; DGX SuperPOD is non-blocking).
# Relaxed on a log scale like the other number axes: fewer uplinks and
# tiers above the leaves (`terms.switching.fat_tree`) against slower
# collectives across leaves (`terms.collectives.nic_rate`).
OVERSUBSCRIPTIONS = (1.0, 2.0, 3.0)

HW_AXES = (
  'accelerator',
  'cpu',
  'nodes',
  'sockets_per_node',
  'accelerators_per_node',
  'ddr_per_channel',
  'nic_count',
  'nic_bandwidth',
  'oversubscription',
)
# The superchip space's further axis: hosts per scale-up domain.
DOMAIN_AXIS = 'hosts_per_domain'
PLAN_MODES = ('optimize', 'auto')
# The system classes of the accelerator trainer, each a space of its own
# (`buildability.SYSTEM_TOPOLOGY`); a CPU trainer's space is `cpu`.
SYSTEMS = tuple(bd.SYSTEM_TOPOLOGY)
# Hosts per NVLink domain the superchip space offers: one host (a GH200
# node, a GB200 tray or NVL4 board on its own), 9 and 18 GB200 trays
# (NVL36 and NVL72: 36 and 72 GPUs on 9 NVLink switch trays; NVIDIA DGX
# GB200 user guide, hardware.html; two NVL36 racks cabled as one
# 72-GPU domain, NVL36x2, are an NVL72 domain in two racks, not
# modelled apart). M: the sizes NVIDIA and the OEMs sell.
DOMAIN_HOSTS = (1, 9, 18)
# Accelerators and sockets per node of each system's grids (a board's
# sold counts are the `board` rule's: `buildability.BOARDS`).
SYSTEM_ACCELERATORS = {
  'board': ACCELERATORS_PER_NODE,
  'pcie': (1, 2, 4, 8),
  'superchip': (1, 2, 4),
}
SYSTEM_SOCKETS = {'superchip': (1, 2, 4)}


@dataclasses.dataclass(frozen=True)
class DesignSpace:
  """A discrete platform space and the static settings of its plan.

  Hashable, so it can be a static argument of `jit`.

  Attributes:
    accelerators: catalog accelerator names, in relaxation order.
    cpus: catalog CPU names, in relaxation order.
    grids: per number axis (HW_AXES[2:]) its buildable values in SI,
      ascending.
    num_tables: T, tables of the workload (plan vector length).
    plan_mode: `optimize` (plan leaves are variables) or `auto`.
    sharding: sharding of every table (static), or `plan_space.SEARCH`
      (per table, searched).
    comm_precision: payload precision (static).
    overlap: the plan's overlap when it is not optimized.
    optimize_overlap: make the overlap a variable too (off by default: it
      is a property of the software stack, and presets use 0.5).
    prices: part prices the user set (`part_tables.Prices`, --price);
      every other part at the catalog's price.
    trainer: `accelerator`, or `cpu`: the CPU sockets train (no
      accelerators: the accelerator axes are degenerate and cost nothing,
      the fabric is PCIe only and the NICs hang off the sockets, as the
      CPU presets).
    system: the accelerator trainer's system class (`SYSTEMS`): `board`
      (SXM and OAM modules on a switch or full-mesh baseboard, DIMM
      hosts), `superchip` (GH200 and GB200 on their Grace: NVLink-C2C
      host link, soldered LPDDR5X, and hosts per NVLink domain a
      further axis, `DOMAIN_HOSTS`) or `pcie` (PCIe cards, NVLink
      bridges on pairs); `cpu` for a CPU trainer.
    user_parts: the user's parts in the catalog when the space was made
      (`catalog.using`, --catalog): part of the space's identity, so that
      programs cached for one set of parts are never run for another.
  """

  accelerators: tuple[str, ...]
  cpus: tuple[str, ...]
  grids: tuple[tuple[float, ...], ...]
  num_tables: int
  plan_mode: str = 'optimize'
  sharding: str = 'table_wise'
  comm_precision: str = 'fp32'
  overlap: float = 0.5
  optimize_overlap: bool = False
  prices: pt.Prices = ()
  trainer: str = 'accelerator'
  system: str = 'board'
  user_parts: catalog.UserParts = ()

  @property
  def axes(self) -> tuple[str, ...]:
    """The hardware axes: HW_AXES, and DOMAIN_AXIS in the superchip
    space."""
    return HW_AXES + ((DOMAIN_AXIS,) if self.system == 'superchip' else ())

  @property
  def sizes(self) -> tuple[int, ...]:
    """Choices per hardware axis."""
    return (len(self.accelerators), len(self.cpus)) + tuple(
      len(g) for g in self.grids
    )

  @property
  def num_hw(self) -> int:
    return len(self.axes)

  @property
  def num_hw_coords(self) -> int:
    """Coordinates of the hardware in z: part weights plus number axes."""
    return len(self.accelerators) + len(self.cpus) + len(self.grids)

  @property
  def num_plan(self) -> int:
    """Length of the plan vector (`codesign.search.plan_space`)."""
    return plan_space.size(self)

  @property
  def dim(self) -> int:
    """D, the length of a design vector z."""
    return self.num_hw_coords + self.num_plan

  @property
  def size(self) -> int:
    """Number of buildable platforms (distinct choices per axis)."""
    parts = (self.accelerators, self.cpus, *self.grids)
    return math.prod(len(set(x)) for x in parts)


def make_space(
  workload: wl.Workload,
  max_nodes: int = 16,
  plan_mode: str = 'optimize',
  sharding: str = 'table_wise',
  accelerators: tuple[str, ...] | None = None,
  cpus: tuple[str, ...] | None = None,
  node_grid: tuple[int, ...] | None = None,
  optimize_overlap: bool = False,
  prices: pt.Prices = (),
  trainer: str = 'accelerator',
  nic_rates: tuple[int, ...] | None = None,
  system: str = 'board',
) -> DesignSpace:
  """The default design space for `workload`.

  Args:
    workload: the DLRM (fixes the number of tables).
    max_nodes: the largest node count; nodes range over 1..max_nodes.
    plan_mode: one of PLAN_MODES.
    sharding: one of `plan.SHARDINGS`, used for every table, or
      `plan_space.SEARCH` (each table's sharding is searched).
    accelerators: catalog accelerator names (default: every modelled one).
    cpus: catalog CPU names (default: all).
    node_grid: buildable node counts (default: every integer up to
      max_nodes).
    optimize_overlap: whether the overlap is a search variable.
    prices: part prices set by the user (`part_tables.parse_prices`).
    trainer: `accelerator`, or `cpu` (a CPU trainer: one accelerator
      choice kept as a placeholder, none per node).
    nic_rates: NIC line rates in Gb/s (default: every catalog rate,
      `part_tables.nic_rates`).
    system: the accelerator trainer's system class (`SYSTEMS`); a CPU
      trainer's is `cpu` whatever is given.
  """
  _check_settings(max_nodes, plan_mode, sharding)
  if trainer not in hardware.TRAINERS:
    raise InputError(
      f'unknown trainer {trainer!r}; valid choices: '
      + ', '.join(hardware.TRAINERS)
    )
  system = 'cpu' if trainer == 'cpu' else system
  if system not in SYSTEMS + ('cpu',):
    raise InputError(
      f'unknown system class {system!r}; valid choices: ' + ', '.join(SYSTEMS)
    )
  parts_of = 'board' if system == 'cpu' else system
  accelerators, cpus = _parts(accelerators, cpus, parts_of)
  per_node = SYSTEM_ACCELERATORS.get(system, ACCELERATORS_PER_NODE)
  if trainer == 'cpu':
    accelerators, per_node = (accelerators[0],) * 2, (1, 1)
  return DesignSpace(
    accelerators=tuple(accelerators),
    cpus=tuple(cpus),
    grids=_grids(max_nodes, node_grid, per_node, nic_rates, system, cpus),
    num_tables=workload.num_tables,
    plan_mode=plan_mode,
    sharding=sharding,
    optimize_overlap=optimize_overlap,
    prices=tuple(prices),
    trainer=trainer,
    system=system,
    user_parts=catalog.user_parts(),
  )


def _check_settings(max_nodes: int, plan_mode: str, sharding: str) -> None:
  """Raises `InputError` for a node count out of bounds, an unknown plan
  mode or sharding."""
  if int(max_nodes) < 1:
    raise InputError(f'max_nodes must be at least 1, got {max_nodes}')
  if int(max_nodes) > hardware.BOUNDS['nodes'][1]:
    raise InputError(
      f'max_nodes must be at most {hardware.BOUNDS["nodes"][1]:.0f}, '
      f'got {max_nodes}'
    )
  if plan_mode not in PLAN_MODES:
    raise InputError(
      f'unknown plan mode {plan_mode!r}; valid choices: '
      + ', '.join(PLAN_MODES)
    )
  if sharding not in plan_lib.SHARDINGS + (plan_space.SEARCH,):
    raise InputError(
      f'unknown sharding {sharding!r}; valid choices: '
      + ', '.join(plan_lib.SHARDINGS + (plan_space.SEARCH,))
    )


def _parts(accelerators, cpus, system: str = 'board') -> tuple:
  """(accelerators, cpus): the given catalog parts, or every modelled one
  of `system` where None; raises `InputError` for an unknown part or
  fewer than two on an axis."""
  default_acc, default_cpu = pt.default_parts(system)
  if len(default_cpu) == 1:  # the superchips' one host, Grace
    default_cpu = default_cpu * 2
  accelerators = default_acc if accelerators is None else accelerators
  cpus = default_cpu if cpus is None else cpus
  for a in accelerators:
    catalog.accelerator(a)  # raises InputError for unknown parts
  for c in cpus:
    catalog.cpu(c, 64)
  if len(accelerators) < 2 or len(cpus) < 2:
    raise InputError('a design space needs at least two parts per part axis')
  return accelerators, cpus


def _grids(
  max_nodes: int,
  node_grid,
  per_node,
  nic_rates=None,
  system: str = 'board',
  cpus=(),
) -> tuple:
  """The number axes' buildable values in SI (the space's axes[2:]):
  nodes (`node_grid`, or every count up to max_nodes; one choice kept as
  a degenerate axis), sockets, accelerators per node `per_node`, DDR per
  channel (the DIMM populations; in the superchip space the one soldered
  capacity of its host `cpus`, per channel), NICs per node and NIC line
  rates (`nic_rates` in Gb/s, or every catalog rate; one kept as a
  degenerate axis); in the superchip space, hosts per NVLink domain
  (`DOMAIN_HOSTS` up to max_nodes)."""
  nodes = node_grid or tuple(range(1, int(max_nodes) + 1))
  if len(nodes) < 2:
    nodes = (1, 1)  # one choice: a degenerate axis that stays at 1 node
  rates = tuple(nic_rates or pt.nic_rates())
  if len(rates) < 2:
    rates = rates * 2
  ddr = tuple(g * GB for g in bd.DDR_PER_CHANNEL_GB)
  if system == 'superchip':
    f = bd.catalog_facts()[cpus[0]]
    ddr = (f['soldered_gb'] * GB / f['ddr_channels'],)
  grids = (
    tuple(float(n) for n in nodes),
    tuple(float(s) for s in SYSTEM_SOCKETS.get(system, SOCKETS)),
    tuple(float(a) for a in per_node),
    ddr,
    tuple(float(n) for n in NICS_PER_NODE),
    tuple(float(catalog.nic_bandwidth(r)) for r in rates),
    OVERSUBSCRIPTIONS,
  )
  if system != 'superchip':
    return grids
  hosts = tuple(float(h) for h in DOMAIN_HOSTS if h <= max(nodes))
  return grids + (hosts,)


def _template(space: DesignSpace) -> hardware.Platform:
  """A concrete platform with every field the axes do not set; its
  fabric reduces in its switch (NVLink SHARP) where any part of the
  space's does, each part's share of it traced (`aux['nvls_share']`)."""
  p = build(space, (0,) * space.num_hw)
  topology = bd.SYSTEM_TOPOLOGY.get(space.system)
  if space.trainer != 'cpu' and any(
    bd.part_topology(a, space.system) == topology for a in space.accelerators
  ):
    # One static topology for every part: the system's where a part forms
    # it (a PCIe card without a bridge has none in it: `bd.bridge_gate`).
    p = replace(p, fabric=replace(p.fabric, topology=topology))
  acc, _ = part_rows(space)
  nvls = bool(np.any(acc[:, len(pt.ACC_FIELDS) + 5] == 1.0))
  if space.trainer == 'cpu' or nvls == p.fabric.in_switch_reduction:
    return p
  return replace(p, fabric=replace(p.fabric, in_switch_reduction=nvls))


def build(space: DesignSpace, index) -> hardware.Platform:
  """The concrete buildable platform at `index` (one int per hw axis),
  made from catalog parts with their per-field sources."""
  index = [int(i) for i in index]
  acc_name, cpu_name = space.accelerators[index[0]], space.cpus[index[1]]
  nodes, sockets, accels, ddr_ch, nics, nic_bw, oversub, *hosts = (
    g[i] for g, i in zip(space.grids, index[2:], strict=True)
  )
  hosts = float(hosts[0]) if hosts else 1.0
  cpu_trainer = space.trainer == 'cpu'
  accels = 0.0 if cpu_trainer else accels
  gen = _slot_generation(space, acc_name, cpu_name)
  f = bd.catalog_facts()[cpu_name]
  # A superchip's GPU reaches its Grace over NVLink-C2C: no root port.
  # Whole domains (a design whose nodes are not whole domains breaks the
  # `fabric_domain` rule; its NICs are those of the whole ones).
  w = bd.wiring(
    nodes // hosts,
    sockets,
    0.0 if space.system == 'superchip' else accels,
    nics,
    nic_bw,
    f['pcie_lanes'],
    f['pcie_lanes_multi'],
  )
  nic = _built_nic(w, cpu_trainer, gen, cpu_name, nodes // hosts, oversub)
  topology = (
    'pcie_only' if cpu_trainer else bd.part_topology(acc_name, space.system)
  )
  fab = replace(
    platform_presets.accel_fabric(acc_name, topology), hosts_per_domain=hosts
  )
  ddr = float(f['ddr_channels']) * ddr_ch
  cpu = replace(catalog.cpu(cpu_name, ddr / GB), ddr_capacity=ddr)
  switches = float(w['switches'])
  chassis = 'assumption: design_space NODE_*, buildability.SWITCH_* per switch'
  platform = hardware.Platform(
    name='proposal',
    trainer=space.trainer,
    nodes=float(nodes),
    sockets_per_node=float(sockets),
    accelerators_per_node=float(accels),
    cpu=cpu,
    accelerator=catalog.accelerator(acc_name),
    fabric=fab,
    host_link=_host_link(space, acc_name, gen, float(w['host_share'])),
    nic=nic,
    node_price=_node_price(accels, sockets, switches),
    node_power=_node_power(accels, sockets, switches),
    sources=(
      ('node_price', chassis),
      ('node_power', chassis),
      ('notes', NOTES[space.system]),
    ),
  )
  return pt.priced(platform, space.prices)


def _built_nic(w, cpu_trainer, gen, cpu_name, domains, oversub):
  """The catalog NICs of `wiring` `w` (on the sockets of a CPU trainer,
  else on the accelerators) in PCIe gen `gen` slots, under leaves of
  `oversub` (1:1 at one domain)."""
  nic = platform_presets.nic(
    round(float(w['nic_count'])),
    float(w['nic_bandwidth']) / (1e9 / 8),
    'socket' if cpu_trainer else 'accelerator',
    gen,
    catalog.host_vendor(cpu_name),
  )
  # The last source given for a field wins (`pytree.canonical_sources`).
  searched = (
    'oversubscription',
    'design_space OVERSUBSCRIPTIONS: the leaves searched',
  )
  return replace(
    nic,
    oversubscription=float(bd.leaf_oversubscription(domains, oversub)),
    sources=nic.sources + (searched,),
  )


def _slot_generation(space: DesignSpace, acc_name: str, cpu_name: str) -> int:
  """The PCIe generation of the NICs' slots: the one both ends run (a CPU
  trainer's NICs sit on the sockets: the CPU's;
  `buildability.nic_slot_generation`)."""
  raw = catalog.raw()
  cpu_gen = raw['cpus'][cpu_name]['pcie_gen']
  if space.trainer == 'cpu':
    return cpu_gen
  return min(raw['accelerators'][acc_name]['pcie_gen'], cpu_gen)


def _host_link(space, acc_name: str, gen: int, share: float):
  """A superchip's NVLink-C2C host link, or the x16 of generation `gen`
  at `share` of its rate (uplinks shared behind PCIe switches)."""
  if space.system == 'superchip':
    return platform_presets.c2c_host_link(acc_name)
  link = platform_presets.host_link(gen)
  return replace(link, bandwidth=link.bandwidth * share)


ACCELERATOR_NOTE = (
  "proposed by codesign.search; fabric: the accelerator's own (NVSwitch "
  'or OAM full mesh), modelled as a switch; NICs on the accelerators; PCIe '
  'at the lower generation of its two ends, uplinks shared where switches '
  'fan devices out (buildability)'
)
CPU_TRAINER_NOTE = (
  'proposed by codesign.search; a CPU trainer: the sockets train and hold '
  'the tables in DDR, no accelerators (their fields are unused); NICs on '
  'the sockets'
)
# The platform's `notes` per system class.
NOTES = {
  'board': ACCELERATOR_NOTE,
  'superchip': 'proposed by codesign.search; superchips: each GPU reaches '
  "its Grace's soldered LPDDR5X over NVLink-C2C (no PCIe), the NVLink "
  'domain spans fabric.hosts_per_domain hosts (NVLink switch trays in the '
  "fabric's price per B/s); NICs on the Graces' PCIe Gen5",
  'pcie': 'proposed by codesign.search; PCIe cards in a PCIe server: NVLink '
  'bridges on pairs, the other peers and the host over PCIe at the lower '
  'generation of its two ends, uplinks shared where switches fan devices '
  'out (buildability)',
  'cpu': CPU_TRAINER_NOTE,
}


def _node_price(accels, sockets, switches):
  return (
    NODE_BASE_USD
    + NODE_USD_PER_ACCELERATOR * accels
    + NODE_USD_PER_SOCKET * sockets
    + bd.SWITCH_USD * switches
  )


def _node_power(accels, sockets, switches):
  return (
    NODE_BASE_W
    + NODE_W_PER_ACCELERATOR * accels
    + NODE_W_PER_SOCKET * sockets
    + bd.SWITCH_W * switches
  )


# ---- decoding (traced) -----------------------------------------------------


def _assemble(space, template, acc, cpu, numbers):
  """A platform from part rows (acc, cpu) and the number-axis values."""
  nodes, sockets, accels, ddr_ch, nics, nic_bw, oversub, *hosts = numbers
  accels = 0.0 * accels if space.trainer == 'cpu' else accels
  c2c = space.system == 'superchip'
  na = len(pt.ACC_FIELDS)
  nc = len(pt.CPU_FIELDS)
  links, link_bw, acc_pcie, domain, c2c_bw, nvls = acc[na : na + 6]
  bridge = bd.bridge_gate(links)  # 0: a card without NVLink (L40S)
  cpu_pcie, max_sockets, max_ddr, min_sockets, channels, lanes, multi = cpu[
    nc : nc + 7
  ]
  post = cpu[nc + 7]  # the host's NIC post overhead (its maker's)
  cpu_fields = _cpu_fields(space, cpu, ddr_ch)
  cpu_trainer = space.trainer == 'cpu'
  slot = cpu_pcie if cpu_trainer else jnp.minimum(acc_pcie, cpu_pcie)
  on_pcie = 0.0 * accels if c2c else accels  # C2C takes no root port
  domains = nodes / hosts[0] if hosts else nodes
  w = bd.wiring(domains, sockets, on_pcie, nics, nic_bw, lanes, multi)
  acc_part = replace(
    template.accelerator,
    **{f: acc[i] for i, f in enumerate(pt.ACC_FIELDS)},
  )
  cpu_part = replace(template.cpu, ddr_capacity=channels * ddr_ch, **cpu_fields)
  host_bw = c2c_bw if c2c else slot * w['host_share']
  fabric = replace(
    template.fabric,
    links_per_accelerator=links * bridge,
    link_bandwidth=link_bw * bridge,
    hosts_per_domain=hosts[0] if hosts else template.fabric.hosts_per_domain,
  )
  nic = _traced_nic(template.nic, w, slot, post, domains, oversub)
  return replace(
    template,
    nodes=nodes,
    sockets_per_node=sockets,
    accelerators_per_node=accels,
    cpu=cpu_part,
    accelerator=acc_part,
    fabric=fabric,
    host_link=replace(template.host_link, bandwidth=host_bw),
    nic=nic,
    node_price=_node_price(accels, sockets, w['switches']),
    node_power=_node_power(accels, sockets, w['switches']),
  ), {
    'max_sockets': max_sockets,
    'max_ddr': max_ddr,
    'min_sockets': min_sockets,
    'fabric_domain': domain,
    'devices': w['devices'],
    'ports': w['ports'],
    'x16': slot,
    'gpudirect': 0.0 if cpu_trainer else 1.0,
    'nvls_share': nvls,
  }


def _traced_nic(nic, w, slot, post, domains, oversub):
  """The NICs of `wiring` `w` in slots of `slot` B/s, posting at the
  host's `post`, under leaves of `oversub` (1:1 at one domain)."""
  return replace(
    nic,
    count=w['nic_count'],
    bandwidth=w['nic_bandwidth'],
    # A x16 slot of the generation both parts run (as `build` does).
    slot_bandwidth=slot,
    post_overhead=post,
    switch_radix=_switch_radix(w['nic_bandwidth']),
    oversubscription=bd.leaf_oversubscription(domains, oversub),
  )


def _cpu_fields(space: DesignSpace, cpu, ddr_ch) -> dict:
  """The socket's fields of a CPU row at `ddr_ch` bytes per channel: DIMMs
  per channel, their size and the channel speed they allow
  (`dimms.population`; the row's DDR bandwidth and price are at 1DPC);
  a superchip's soldered memory as its row says (no DIMMs)."""
  nc = len(pt.CPU_FIELDS)
  out = {f: cpu[i] for i, f in enumerate(pt.CPU_FIELDS)}
  if space.system == 'superchip':
    return out
  _, _, ddr_speed, ddr_usd = dimms.population(ddr_ch, cpu[nc + 8])
  out['ddr_bandwidth'] = out['ddr_bandwidth'] * ddr_speed
  out['ddr_price'] = ddr_usd
  return out


def part_rows(space: DesignSpace) -> tuple[np.ndarray, np.ndarray]:
  """The space's part tables (`part_tables.tables`), fabric domains on
  its system's topology (a CPU trainer's placeholder on the board's)."""
  system = 'board' if space.system == 'cpu' else space.system
  return pt.tables(space.accelerators, space.cpus, space.prices, system)


def _switch_radix(nic_bandwidth):
  """Ports of the switch a NIC of this bandwidth (B/s) plugs into
  (`platform_presets.SWITCH_RADIX` at its line rates, as `build` reads it;
  linear between them, so the relaxed search sees a continuous number)."""
  rates = sorted(platform_presets.SWITCH_RADIX)
  return jnp.interp(
    nic_bandwidth,
    jnp.array([catalog.nic_bandwidth(r) for r in rates]),
    jnp.array([platform_presets.SWITCH_RADIX[r] for r in rates]),
  )


def _interp_number(grid, z):
  lo, hi = math.log(grid[0]), math.log(grid[-1])
  return jnp.exp(lo + z * (hi - lo))


def decode(space: DesignSpace, workload: wl.Workload, stack: Stack, z):
  """The relaxed platform and plan at design vector z (shape (D,)).

  Returns:
    (platform, plan, aux): aux holds the numbers of the buildability
    constraints (`buildability.relative_violations`): the (interpolated)
    CPU's `max_sockets`, `max_ddr` (bytes per socket), `min_sockets`, the
    accelerator's `fabric_domain`, and the node's PCIe `devices` and root
    `ports`; and `sharding_weights` ((T, K) or None:
    `plan_space.decode`).
  """
  acc_t, cpu_t = part_rows(space)
  template = _template(space)
  a, c = len(space.accelerators), len(space.cpus)
  n = len(space.grids)
  plan_size = z.shape[-1] - space.num_hw_coords
  acc_z, cpu_z, *number_z, plan_z = plan_space.split(
    z, (a, c, *(1,) * n, plan_size)
  )
  acc = pt.mix(acc_t, acc_z)
  cpu = pt.mix(cpu_t, cpu_z)
  numbers = [_interp_number(g, x[0]) for g, x in zip(space.grids, number_z)]
  p, aux = _assemble(space, template, acc, cpu, numbers)
  plan, weights = plan_space.decode(space, workload, stack, p, plan_z)
  return p, plan, {**aux, 'sharding_weights': weights}


def decode_index(
  space: DesignSpace,
  workload: wl.Workload,
  stack: Stack,
  index,
  plan_z,
  frac=None,
):
  """The buildable platform at integer `index` (shape (H,)) with plan
  vector `plan_z` (shape (D - H,)); traced, matches `build` exactly.
  `frac`: the auto plan's fractions when known (`auto_fractions_index`)."""
  p, aux = platform_index(space, index)
  plan, weights = plan_space.decode(space, workload, stack, p, plan_z, frac)
  return p, plan, {**aux, 'sharding_weights': weights}


def auto_fractions_index(
  space: DesignSpace, workload: wl.Workload, stack: Stack, index, plan_z
):
  """The auto plan's HBM fractions (T,) of the buildable design at
  `index` with plan vector `plan_z` (`plan_space.auto_fractions`)."""
  p, _ = platform_index(space, index)
  return plan_space.auto_fractions(space, workload, stack, p, plan_z)


@functools.cache
def plan_axes(
  space: DesignSpace, workload: wl.Workload, stack: Stack
) -> tuple[int, ...]:
  """The hardware axes (positions in HW_AXES) that the auto plan reads:
  designs equal on these axes and in their plan vector have the same
  `auto_fractions_index` (of the default space: the accelerator, the
  nodes and the accelerators per node; the CPU, DDR and NICs do not move
  the HBM fit). Found from the traced program (`dataflow.arguments_read`),
  not listed by hand, so a new term that reads another axis joins it."""

  def fractions(*axes):
    return auto_fractions_index(
      space, workload, stack, list(axes[:-1]), axes[-1]
    )

  index = [jnp.zeros((), jnp.int32)] * len(space.sizes)
  read = dataflow.arguments_read(fractions, *index, jnp.zeros(space.num_plan))
  return tuple(sorted(i for i in read if i < len(space.sizes)))


def platform_index(space: DesignSpace, index):
  """(platform, aux) of `decode_index` without the plan: traced, no
  workload (what a design costs and whether it is built right does not
  depend on what it trains)."""
  acc_t, cpu_t = part_rows(space)
  template = _template(space)
  acc = jnp.asarray(acc_t)[index[0]]
  cpu = jnp.asarray(cpu_t)[index[1]]
  numbers = [
    jnp.asarray(np.array(g))[index[2 + i]] for i, g in enumerate(space.grids)
  ]
  return _assemble(space, template, acc, cpu, numbers)


# ---- snapping --------------------------------------------------------------


def _grid_position(g, z):
  """Fractional index of a log-scaled coordinate z in grid g."""
  lo, hi = math.log(g[0]), math.log(g[-1])
  logv = lo + np.asarray(z) * (hi - lo) if hi > lo else np.full_like(z, lo)
  return np.interp(logv, np.log(np.array(g)), np.arange(len(g)))


def bracket(space: DesignSpace, z_hw: np.ndarray):
  """The two nearest choices on every hardware axis of relaxed designs.

  Part axes: the two heaviest parts (heaviest first); number axes: the
  grid steps below and above.

  Args:
    z_hw: shape (..., num_hw_coords).

  Returns:
    (first, second): int arrays (..., H).
  """
  z_hw = np.asarray(z_hw, dtype=np.float64)
  a, c = len(space.accelerators), len(space.cpus)
  first, second = [], []
  for zp in (z_hw[..., :a], z_hw[..., a : a + c]):
    order = np.argsort(-zp, axis=-1, kind='stable')
    first.append(order[..., 0])
    second.append(order[..., 1])
  for i, g in enumerate(space.grids):
    u = _grid_position(g, z_hw[..., a + c + i])
    # A tolerance, so that a coordinate on a grid step (up to rounding)
    # brackets to that step on both sides.
    first.append(np.clip(np.floor(u + 1e-9), 0, len(g) - 1))
    second.append(np.clip(np.ceil(u - 1e-9), 0, len(g) - 1))
  return (
    np.stack(first, axis=-1).astype(np.int64),
    np.stack(second, axis=-1).astype(np.int64),
  )


def nearest_index(space: DesignSpace, z_hw: np.ndarray) -> np.ndarray:
  """The nearest buildable design: heaviest part, nearest grid step (in
  log value). Shape (..., H)."""
  z_hw = np.asarray(z_hw, dtype=np.float64)
  a, c = len(space.accelerators), len(space.cpus)
  out = [
    np.argmax(z_hw[..., :a], axis=-1),
    np.argmax(z_hw[..., a : a + c], axis=-1),
  ]
  for i, g in enumerate(space.grids):
    u = _grid_position(g, z_hw[..., a + c + i])
    out.append(np.clip(np.rint(u), 0, len(g) - 1))
  return np.stack(out, axis=-1).astype(np.int64)


def neighbour_indices(space: DesignSpace, z_hw: np.ndarray) -> np.ndarray:
  """Every rounding of one relaxed design: per axis one of its two nearest
  choices (`bracket`), each distinct once.

  Args:
    z_hw: shape (num_hw_coords,).

  Returns:
    int array (2^K, H) of grid indices, K the axes whose two choices
    differ (an axis on a grid step, or of one value, has one); row 0
    takes the first choice on every axis.
  """
  lo, hi = bracket(space, z_hw)
  varying = np.flatnonzero(lo != hi)
  k = len(varying)
  bits = (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1
  out = np.repeat(lo[None, :], 2**k, axis=0)
  out[:, varying] = np.where(bits == 1, hi[varying], lo[varying])
  return out


def grid_z(space: DesignSpace, index) -> np.ndarray:
  """Relaxed hardware coordinates (num_hw_coords,) of a buildable design:
  one-hot part weights and the grid steps' log positions."""
  a, c = len(space.accelerators), len(space.cpus)
  acc = np.zeros(a)
  acc[int(index[0])] = 1.0
  cpu = np.zeros(c)
  cpu[int(index[1])] = 1.0
  out = [acc, cpu]
  for i, g in enumerate(space.grids):
    lo, hi = math.log(g[0]), math.log(g[-1])
    v = math.log(g[int(index[2 + i])])
    out.append(np.array([(v - lo) / (hi - lo) if hi > lo else 0.0]))
  return np.concatenate(out)


def unravel(space: DesignSpace, flat):
  """Flat design numbers -> grid indices, shape (..., H) (traced or not)."""
  out = []
  for s in reversed(space.sizes):
    out.append(flat % s)
    flat = flat // s
  return jnp.stack(out[::-1], axis=-1)


def describe_relaxed(space: DesignSpace, z_hw) -> dict:
  """The hardware coordinates of a relaxed design in boundary units: part
  weights above 0.1% and the number axes' continuous values."""
  z_hw = np.asarray(z_hw, dtype=np.float64)
  a, c = len(space.accelerators), len(space.cpus)
  out = {}
  for axis, parts, zp in (
    ('accelerator', space.accelerators, z_hw[:a]),
    ('cpu', space.cpus, z_hw[a : a + c]),
  ):
    w = np.asarray(pt.weights(jnp.asarray(zp)))
    out[axis + '_weights'] = {
      parts[i]: float(w[i])
      for i in np.argsort(-w, kind='stable')
      if w[i] > 1e-3
    }
  units = {
    'ddr_per_channel': ('ddr_per_channel_gb', 1e9),
    'nic_bandwidth': ('nic_bandwidth_gbit_per_s', 1e9 / 8),
  }
  for i, (name, g) in enumerate(zip(space.axes[2:], space.grids, strict=True)):
    lo, hi = math.log(g[0]), math.log(g[-1])
    value = math.exp(lo + float(z_hw[a + c + i]) * (hi - lo))
    key, scale = units.get(name, (name, 1.0))
    out[key] = value / scale
  return out


def stack_tree(trees):
  """Stacks a list of identical-structure pytrees along a new axis 0."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def describe_index(space: DesignSpace, index) -> dict:
  """A buildable design's choices in boundary units (a single node's NICs
  as built: one at the lowest rate)."""
  index = [int(i) for i in bd.canonical_index(space, index)]
  nodes, sockets, accels, ddr_ch, nics, nic_bw, oversub, *hosts = (
    g[i] for g, i in zip(space.grids, index[2:], strict=True)
  )
  cpu = space.cpus[index[1]]
  return {
    'trainer': space.trainer,
    'system': space.system,
    'hosts_per_domain': hosts[0] if hosts else 1.0,
    'accelerator': space.accelerators[index[0]],
    'cpu': cpu,
    'nodes': nodes,
    'sockets_per_node': sockets,
    'accelerators_per_node': 0.0 if space.trainer == 'cpu' else accels,
    'ddr_per_socket_gb': ddr_ch * bd.catalog_facts()[cpu]['ddr_channels'] / GB,
    'ddr_per_channel_gb': ddr_ch / GB,
    'nic_count': nics,
    'nic_bandwidth_gbit_per_s': nic_bw / (1e9 / 8),
    'oversubscription': oversub,
  }
