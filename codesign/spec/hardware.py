"""The hardware: a training platform as a pytree of differentiable numbers.

Continuous fields (FLOP/s, bandwidths, capacities, latencies, prices, power,
and counts relaxed to reals) are pytree leaves, so `jax.grad` of any cost
returns a `Platform` of sensitivities. Structural choices (topology, where
NICs attach, whether the accelerators or the CPUs train) are static fields.
Everything inside is SI: FLOP/s, bytes, bytes/s per direction, seconds, USD,
W. Boundary units are declared per field and converted in `codesign.core.units`.

Counts (sockets, accelerators, links, NICs, nodes) are continuous in the
model; a buildable platform rounds them (see the search).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core.pytree import dataclass, field, replace
from codesign.core.units import to_si

TOPOLOGIES = (
  'switch',
  'fully_connected',
  'hybrid_cube_mesh',
  'ring',
  'pcie_only',
  'bridged_pairs',
  'torus',
)
NIC_ATTACH = ('accelerator', 'socket')
# How the accelerators reach host memory (`HostLink.kind`): 'pcie' (an
# x16 link each, all of them together no faster than the sockets' PCIe
# lanes) or 'c2c' (NVLink-C2C, GH200/GB200: each accelerator's own
# cache-coherent link to its Grace, not through the sockets' PCIe lanes).
HOST_LINK_KINDS = ('pcie', 'c2c')
# How a socket's memory is bought (`CpuSocket.memory`): 'dimm' (DIMMs in
# slots, priced and derated per population: `codesign.spec.dimms`) or
# 'soldered' (LPDDR5X on the package, Grace: one fixed capacity per part).
MEMORY_KINDS = ('dimm', 'soldered')
TRAINERS = ('accelerator', 'cpu')
# The CPU part the host-time constants of the stacks were fitted on (the
# TorchRec cases ran on AWS p4d, whose Xeon 8275CL the catalog's 8280
# stands for): `CpuSocket.thread_speed` is 1 there.
REFERENCE_CPU = 'Xeon-Platinum-8280 (Cascade Lake-SP)'

Sources = tuple[tuple[str, str], ...]


@dataclass
class CpuSocket:
  """One CPU socket with its DDR."""

  name: str = field(static=True, doc='part name')
  peak_flops_fp32: float = field(unit='tflops', doc='peak fp32 FLOP/s')
  peak_flops_bf16: float = field(
    unit='tflops', doc='peak 16-bit FLOP/s (AVX-512 BF16/AMX; else = fp32)'
  )
  ddr_bandwidth: float = field(unit='gb_per_s', doc='DDR bandwidth, B/s')
  ddr_capacity: float = field(unit='gb', doc='DDR capacity, bytes')
  socket_links: float = field(doc='inter-socket links (UPI/xGMI) per socket')
  socket_link_bandwidth: float = field(
    unit='gb_per_s', doc='per link per direction, B/s'
  )
  pcie_bandwidth: float = field(
    unit='gb_per_s', doc='all PCIe lanes of the socket, one direction, B/s'
  )
  gemm_efficiency: float = field(doc='best achievable fraction of peak')
  gemm_half_size: float = field(doc='GEMM dim at which efficiency halves')
  gather_efficiency: float = field(doc='fraction of DDR B/s for row gathers')
  update_efficiency: float = field(
    doc='fraction of DDR B/s for row read-modify-write (backward, optimizer)'
  )
  kernel_overhead: float = field(unit='us', doc='fixed cost per op, s')
  price: float = field(unit='usd', doc='socket price')
  ddr_price: float = field(unit='usd_per_gb', doc='DDR USD/byte')
  power: float = field(unit='w', doc='socket TDP')
  ddr_power: float = field(unit='w_per_gb', doc='DDR W/byte')
  access_granularity: int = field(
    static=True, doc='DDR access size in bytes (one cache line)'
  )
  sources: Sources = field(static=True, doc='field -> source')
  memory: str = field(
    static=True,
    default='dimm',
    doc="one of MEMORY_KINDS: 'dimm' (DIMM populations, rule dimm) or "
    "'soldered' (on-package LPDDR5X: the part's one capacity)",
  )
  thread_speed: float = field(
    default=1.0,
    doc='speed of one core on one thread (the host work of a training '
    'step: the framework dispatching operators, the loop, the batch '
    'loaded on the training thread) relative to the reference part the '
    "host-time constants were fitted on (REFERENCE_CPU: 1): the part's "
    "highest boost clock times its core generation's instructions per "
    'clock (catalog cpus max_turbo_ghz, ipc_vs_skylake)',
  )
  cores: float = field(
    default=28.0,
    doc="cores of the socket (default: the reference part's 28)",
  )


@dataclass
class Accelerator:
  """One accelerator (GPU/OAM) with its HBM."""

  name: str = field(static=True, doc='part name')
  peak_flops_fp32: float = field(unit='tflops', doc='peak fp32 FLOP/s')
  peak_flops_tf32: float = field(unit='tflops', doc='peak tf32 FLOP/s')
  peak_flops_bf16: float = field(unit='tflops', doc='peak bf16/fp16 FLOP/s')
  hbm_bandwidth: float = field(unit='gb_per_s', doc='HBM bandwidth, B/s')
  hbm_capacity: float = field(unit='gb', doc='HBM capacity, bytes')
  gemm_efficiency: float = field(doc='best achievable fraction of peak')
  gemm_half_size: float = field(doc='GEMM dim at which efficiency halves')
  fp32_gemm_efficiency: float = field(
    doc='best achievable fraction of peak_flops_fp32 for GEMMs that run in '
    'fp32 (no TF32: the fp32 units, not the tensor cores)'
  )
  gather_efficiency: float = field(doc='fraction of HBM B/s for row gathers')
  update_efficiency: float = field(
    doc='fraction of HBM B/s for row read-modify-write (backward, optimizer)'
  )
  kernel_overhead: float = field(unit='us', doc='launch cost per kernel, s')
  price: float = field(unit='usd', doc='board price without its HBM')
  hbm_price: float = field(unit='usd_per_gb', doc='HBM USD/byte')
  power: float = field(unit='w', doc='module TDP')
  access_granularity: int = field(static=True, doc='HBM access size in bytes')
  sources: Sources = field(static=True, doc='field -> source')


@dataclass
class Fabric:
  """The scale-up fabric: it joins the accelerators of `hosts_per_domain`
  hosts (one scale-up domain; 1: the accelerators of one node, as in an
  HGX board; 18: GB200 NVL72's NVLink across 18 compute trays; a TPU
  slice's ICI across its hosts). Traffic between the hosts of a domain
  rides the fabric; traffic between domains crosses the NICs of all the
  domain's hosts (`codesign.model.terms.collectives`). Topology `torus`:
  a k-ary D-cube with wraparound, D = links_per_accelerator / 2 (TPU
  v4/v5p ICI: 3-D, 6 links a chip), every peer reached through the chips
  between (`collectives.torus_alltoall`)."""

  topology: str = field(static=True, doc='one of TOPOLOGIES')
  links_per_accelerator: float = field(doc='fabric links per accelerator')
  link_bandwidth: float = field(unit='gb_per_s', doc='per link per direction')
  latency: float = field(unit='us', doc='per-message latency (alpha), s')
  efficiency: float = field(doc='achievable fraction of link bandwidth')
  bandwidth_price: float = field(
    unit='usd_per_gb_per_s', doc='USD per B/s of link bandwidth'
  )
  bandwidth_power: float = field(
    unit='w_per_gb_per_s', doc='W per B/s of link bandwidth'
  )
  sources: Sources = field(static=True, doc='field -> source')
  in_switch_reduction: bool = field(
    static=True,
    default=False,
    doc='the switch reduces allreduce data itself (NVLink SHARP, NCCL '
    'NVLS: third-generation NVSwitch, H100 and later)',
  )
  hosts_per_domain: float = field(
    default=1.0,
    doc='hosts (nodes) whose accelerators share this fabric, one scale-up '
    'domain: its ranks are accelerators_per_node x hosts_per_domain, the '
    'domains nodes / hosts_per_domain (taken at most nodes). 1: one node '
    '(HGX/DGX boards). 18: GB200 NVL72, 72 GPUs on NVLink5 switch trays '
    'across 18 compute trays of 4 GPUs (docs.nvidia.com Mission Control '
    'NVLink chapter: 9 NVLink switch trays a rack; MLCommons GB200-NVL72 '
    'system descriptions: 4 accelerators per node; high). TPU v5p: 4 '
    'chips per host on an ICI 3-D torus, 16 hosts a 4x4x4 cube, slices '
    'up to 16x16x24 (cloud.google.com/tpu/docs/v5p; high)',
  )


@dataclass
class HostLink:
  """The link from each accelerator to the host: PCIe, or NVLink-C2C to
  its Grace (`kind`, one of HOST_LINK_KINDS)."""

  bandwidth: float = field(unit='gb_per_s', doc='per accelerator, per dir')
  latency: float = field(unit='us', doc='per-transfer latency, s')
  random_access_efficiency: float = field(
    doc='fraction of bandwidth for row reads from host memory (UVM)'
  )
  sources: Sources = field(static=True, doc='field -> source')
  kind: str = field(
    static=True,
    default='pcie',
    doc="one of HOST_LINK_KINDS: 'pcie' (capped by the sockets' PCIe "
    "lanes) or 'c2c' (NVLink-C2C to the accelerator's Grace: not)",
  )
  cards_per_switch: float = field(
    default=1.0,
    doc='accelerators behind one PCIe switch, sharing its one x16 uplink '
    "to the socket's root complex at `bandwidth` (1: each card on a root "
    'port of its own). Peers under one switch meet inside it; the others '
    'cross the uplinks, and those on another socket the socket links '
    '(terms.pcie_peer_rate)',
  )


@dataclass
class Nic:
  """The scale-out network interfaces of one node."""

  attach: str = field(static=True, doc='accelerator (GPUDirect) or socket')
  count: float = field(doc='NICs per node')
  bandwidth: float = field(unit='gbit_per_s', doc='per NIC per direction')
  latency: float = field(unit='us', doc='per-message latency (alpha), s')
  efficiency: float = field(doc='achievable fraction of line rate')
  bandwidth_price: float = field(
    unit='usd_per_gbit_per_s', doc='the NIC alone, USD per B/s'
  )
  bandwidth_power: float = field(
    unit='w_per_gbit_per_s', doc='the NIC alone, W per B/s'
  )
  sources: Sources = field(static=True, doc='field -> source')
  slot_bandwidth: float = field(
    unit='gb_per_s',
    default=63.0e9,
    doc='PCIe slot of one NIC, per direction (default Gen5 x16)',
  )
  post_overhead: float = field(
    unit='us',
    default=1e-6,
    doc='host time to post one network message (NCCL tuning.cc '
    'getNetOverhead: 1 us Intel, 2 us AMD hosts)',
  )
  switch_latency: float = field(
    unit='us',
    default=0.25e-6,
    doc='port-to-port latency of one network switch (IB NDR 150-330 ns)',
  )
  switch_radix: float = field(
    default=64.0,
    doc='ports per network switch (Quantum-2 QM9700: 64 x NDR)',
  )
  oversubscription: float = field(
    default=1.0,
    doc='downlink over uplink bandwidth of a leaf switch (1: full bisection)',
  )
  in_network_reduction: bool = field(
    static=True,
    default=False,
    doc='the switches reduce allreduce data (InfiniBand SHARP, NCCL CollNet)',
  )
  switch_port_price: float = field(
    unit='usd_per_gbit_per_s',
    default=to_si(36000.0 / (64 * 400), 'usd_per_gbit_per_s'),
    doc='network switch price per B/s of its ports (Quantum-2 QM9700: '
    'about 36,000 USD for 64 x 400 Gb/s; terms.network_bill)',
  )
  switch_port_power: float = field(
    unit='w_per_gbit_per_s',
    default=to_si(750.0 / (64 * 400), 'w_per_gbit_per_s'),
    doc='network switch power per B/s of its ports (about 750 W for 64 x '
    '400 Gb/s)',
  )
  link_price: float = field(
    unit='usd_per_gbit_per_s',
    default=to_si(1000.0 / 400, 'usd_per_gbit_per_s'),
    doc='one network link (a transceiver at each end and the fiber) per '
    'B/s of its rate (about 1,000 USD at 400 Gb/s)',
  )
  link_power: float = field(
    unit='w_per_gbit_per_s',
    default=to_si(2 * 8.5 / 400, 'w_per_gbit_per_s'),
    doc='one network link (its two transceivers) per B/s of its rate '
    '(2 x 8.5 W at 400 Gb/s)',
  )


@dataclass
class Platform:
  """A training cluster of identical nodes.

  `trainer` says which devices run the dense part: `accelerator` (tables in
  HBM and host DDR, MLPs on accelerators) or `cpu` (a CPU-only trainer: all
  tables in DDR, MLPs on the sockets; accelerator fields are unused and the
  accelerator count is ignored).
  """

  name: str = field(static=True, doc='preset name or a label')
  trainer: str = field(static=True, doc='one of TRAINERS')
  nodes: float = field(doc='number of nodes')
  sockets_per_node: float = field(doc='CPU sockets per node')
  accelerators_per_node: float = field(doc='accelerators per node')
  cpu: CpuSocket = field(doc='the CPU socket part')
  accelerator: Accelerator = field(doc='the accelerator part')
  fabric: Fabric = field(doc='accelerator fabric')
  host_link: HostLink = field(doc='accelerator-to-host link')
  nic: Nic = field(doc='scale-out NICs')
  node_price: float = field(unit='usd', doc='chassis, board, PSU, storage')
  node_power: float = field(unit='w', doc='chassis, fans, board, storage')
  sources: Sources = field(static=True, doc='field -> source')


def with_value(platform: Platform, path: str, value) -> Platform:
  """Returns `platform` with the field at dotted `path` set to `value`."""
  head, _, rest = path.partition('.')
  if not rest:
    return replace(platform, **{head: value})
  return replace(
    platform, **{head: with_value(getattr(platform, head), rest, value)}
  )


# Physical bounds of each continuous field, in SI. The cost model is finite,
# positive and differentiable everywhere inside them; the search stays inside.
BOUNDS: dict[str, tuple[float, float]] = {
  'nodes': (1.0, 1024.0),
  'sockets_per_node': (1.0, 16.0),
  'accelerators_per_node': (1.0, 64.0),
  'cpu.peak_flops_fp32': (1e11, 1e14),
  'cpu.peak_flops_bf16': (1e11, 1e15),
  'cpu.ddr_bandwidth': (1e10, 2e12),
  'cpu.ddr_capacity': (1e10, 2e13),
  'cpu.socket_links': (1.0, 16.0),
  'cpu.socket_link_bandwidth': (1e9, 1e12),
  'cpu.pcie_bandwidth': (1e9, 2e12),
  'cpu.gemm_efficiency': (0.05, 1.0),
  'cpu.gemm_half_size': (1.0, 1024.0),
  'cpu.gather_efficiency': (0.05, 1.0),
  'cpu.update_efficiency': (0.01, 1.0),
  'cpu.kernel_overhead': (1e-7, 1e-3),
  'cpu.price': (1e2, 1e5),
  'cpu.ddr_price': (1e-10, 1e-7),
  'cpu.power': (10.0, 1000.0),
  'cpu.ddr_power': (1e-12, 1e-8),
  'cpu.thread_speed': (0.1, 10.0),
  'cpu.cores': (1.0, 512.0),
  'accelerator.peak_flops_fp32': (1e12, 1e15),
  'accelerator.peak_flops_tf32': (1e12, 1e16),
  'accelerator.peak_flops_bf16': (1e12, 1e16),
  'accelerator.hbm_bandwidth': (1e11, 5e13),
  'accelerator.hbm_capacity': (1e9, 2e12),
  'accelerator.gemm_efficiency': (0.05, 1.0),
  'accelerator.gemm_half_size': (1.0, 1024.0),
  'accelerator.fp32_gemm_efficiency': (0.05, 1.0),
  'accelerator.gather_efficiency': (0.05, 1.0),
  'accelerator.update_efficiency': (0.01, 1.0),
  'accelerator.kernel_overhead': (1e-7, 1e-3),
  'accelerator.price': (1e2, 1e6),
  'accelerator.hbm_price': (1e-10, 1e-7),
  'accelerator.power': (10.0, 3000.0),
  'fabric.links_per_accelerator': (1.0, 64.0),
  'fabric.link_bandwidth': (1e9, 1e12),
  'fabric.latency': (1e-8, 1e-3),
  'fabric.efficiency': (0.05, 1.0),
  'fabric.bandwidth_price': (1e-12, 1e-6),
  'fabric.bandwidth_power': (1e-13, 1e-7),
  'fabric.hosts_per_domain': (1.0, 1024.0),
  'host_link.bandwidth': (1e9, 1e12),
  'host_link.latency': (1e-8, 1e-3),
  'host_link.random_access_efficiency': (0.01, 1.0),
  'host_link.cards_per_switch': (1.0, 16.0),
  'nic.count': (1.0, 64.0),
  'nic.bandwidth': (1e9, 1e12),
  'nic.latency': (1e-8, 1e-3),
  'nic.efficiency': (0.05, 1.0),
  'nic.bandwidth_price': (1e-12, 1e-5),
  'nic.bandwidth_power': (1e-13, 1e-6),
  'nic.slot_bandwidth': (1e9, 1e12),
  'nic.post_overhead': (1e-8, 1e-4),
  'nic.switch_latency': (1e-8, 1e-5),
  'nic.switch_radix': (4.0, 512.0),
  'nic.oversubscription': (1.0, 16.0),
  'nic.switch_port_price': (0.0, 1e-5),
  'nic.switch_port_power': (0.0, 1e-6),
  'nic.link_price': (0.0, 1e-5),
  'nic.link_power': (0.0, 1e-6),
  'node_price': (0.0, 1e6),
  'node_power': (0.0, 1e5),
}


# The leaves that count things: a platform a user gives (a file, an
# override, a built object) holds whole numbers there. Relaxed counts
# belong to the search (its decoded designs are never read back as input).
COUNTS = (
  'nodes',
  'sockets_per_node',
  'accelerators_per_node',
  'cpu.socket_links',
  'cpu.cores',
  'fabric.links_per_accelerator',
  'fabric.hosts_per_domain',
  'host_link.cards_per_switch',
  'nic.count',
  'nic.switch_radix',
)


def leaf_paths(platform: Platform) -> list[str]:
  """Dotted paths of the continuous fields, in pytree order."""
  out = []
  for key, _ in _walk(platform, ''):
    out.append(key)
  return out


def _walk(obj, prefix):
  import dataclasses

  for f in dataclasses.fields(obj):
    if f.metadata.get('static'):
      continue
    value = getattr(obj, f.name)
    path = prefix + f.name
    if dataclasses.is_dataclass(value):
      yield from _walk(value, path + '.')
    else:
      yield path, value


def get_value(platform: Platform, path: str):
  obj = platform
  for part in path.split('.'):
    obj = getattr(obj, part)
  return obj


def as_arrays(platform: Platform, dtype=None) -> Platform:
  """The same platform with every leaf a JAX array of `dtype`.

  A platform of Python numbers is converted once and remembered by its
  exact values (`_converted`): a conversion is a device transfer per
  leaf (about 3.5 ms a platform on 2 cores), and one `codesign.evaluate`
  asked for the same platform's arrays four times. JAX arrays cannot be
  changed, so the remembered ones are safe to share; inside a trace the
  arrays made are that trace's, so they are made afresh."""
  if _outside_traces():
    try:
      return _converted(_exact_key(platform, dtype))
    except TypeError:  # a leaf that is already an array
      pass
  return jax.tree.map(lambda x: jnp.asarray(x, dtype=dtype), platform)


def _exact_key(platform: Platform, dtype) -> tuple:
  """What `as_arrays` makes of `platform` depends on: its structure and
  labels, `dtype`, the precision JAX now gives Python floats (x64 on or
  off), each leaf's type and exact value (float.hex: -0.0 is not 0.0, 8
  is not 8.0). An array leaf makes it unhashable (TypeError when the
  cache hashes it)."""
  leaves, treedef = jax.tree.flatten(platform)
  exact = tuple(
    (type(x), x.hex() if isinstance(x, float) else x) for x in leaves
  )
  return (treedef, dtype, jax.dtypes.canonicalize_dtype(np.float64), exact)


def _outside_traces() -> bool:
  """Whether no JAX trace is running (JAX has no public test of it)."""
  from jax._src import core

  return core.trace_state_clean()


@functools.lru_cache(maxsize=256)
def _converted(key) -> Platform:
  """`as_arrays` of the platform that `key` spells out."""
  treedef, dtype, _, exact = key
  leaves = [
    jnp.asarray(t(float.fromhex(v)) if issubclass(t, float) else v, dtype)
    for t, v in exact
  ]
  return jax.tree.unflatten(treedef, leaves)


def as_numpy(platform: Platform) -> Platform:
  """The same platform with every leaf a numpy array: the arguments of a
  jitted program, where a JAX array per leaf (`as_arrays`) costs a
  device transfer each (about 4 ms a platform against 0.1 ms)."""
  return jax.tree.map(np.asarray, platform)


def unlabelled(platform: Platform) -> Platform:
  """The same platform without its labels (names and sources, static
  fields that no term reads), so that platforms that differ only in
  numbers share one jit compile."""

  def strip(x):
    if not dataclasses.is_dataclass(x):
      return x
    changes = {}
    for f in dataclasses.fields(x):
      v = getattr(x, f.name)
      if f.name in ('name', 'sources'):
        changes[f.name] = '' if f.name == 'name' else ()
      elif dataclasses.is_dataclass(v):
        changes[f.name] = strip(v)
    return dataclasses.replace(x, **changes)

  return strip(platform)
