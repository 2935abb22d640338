"""What every term of the step needs: the `Setup` of one design (ranks,
batch per rank, where the bottom MLP runs), the device that runs the
dense part and its peak, and the host link's rate."""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from codesign.core.smooth import smooth_min
from codesign.model.terms import structure as structure_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.stack import Stack

# Elementwise kernels stream at this share of the memory bandwidth
# (BabelStream-class kernels reach 80-90% of HBM peak on V100/A100; the
# low end, since DLRM's activation passes are short).
STREAM_EFFICIENCY = 0.8
# Bottom MLP alone on rank 0 above this many ranks (NVIDIA DLRM
# dlrm/utils/distributed.py get_device_mapping: `if num_gpus > 4`).
ONE_DEVICE_DEDICATED_ABOVE = 4.0
# Busy host threads per rank: the training thread, which dispatches the
# operators and loads the batch, and NCCL's proxy thread, which polls
# the rank's network and peer transfers (NVIDIA/nccl src/proxy.cc: one
# progress thread per rank). A node with fewer cores than these shares
# them (`host_speed`).
HOST_THREADS_PER_RANK = 2.0


class Setup(NamedTuple):
  """Quantities shared by the terms of one design (scalars unless noted).

  ranks: R = nodes x ranks per node; per_node: ranks per node (sockets on
  a CPU trainer); per_domain: ranks that share the scale-up fabric, per
  node x hosts per domain (`domain_hosts`; per_node on a CPU trainer);
  domains: nodes / hosts per domain, the groups the network joins;
  batch: global batch B (Python float); local: B / R;
  table_ranks: ranks that hold sharded tables (R, or R - 1 when the
  bottom MLP has a rank to itself); bottom_batch: samples the bottom MLP
  runs per rank (B / R, or B on one device); one_device: static bool,
  the bottom MLP on rank 0; dedicated: about 1 when rank 0 holds no
  tables, else 0; cpu_trainer: static bool; host_speed: how fast the
  host runs a rank's host work against the CPU the stacks' host times
  were fitted on (`host_speed`; 1 there); structure: None, or the
  platform's wiring as traced numbers (`terms.structure`).
  """

  ranks: jax.Array
  per_node: jax.Array
  per_domain: jax.Array
  domains: jax.Array
  batch: float
  local: jax.Array
  table_ranks: jax.Array
  bottom_batch: jax.Array
  one_device: bool
  dedicated: jax.Array
  cpu_trainer: bool
  host_speed: object = 1.0
  structure: object = None


def ranks_per_node(p: Platform):
  if p.trainer == 'cpu':
    return p.sockets_per_node
  return p.accelerators_per_node


def host_speed(p: Platform):
  """How fast one rank's host work runs (the operators the framework
  dispatches, the step's loop, the batch loaded on the training thread)
  against the CPU the stacks' host times were fitted on
  (`hardware.REFERENCE_CPU`: 1).

  That work runs on one thread per rank, so it scales with one core's
  speed (`CpuSocket.thread_speed`: boost clock x instructions per clock
  over the reference's), not with the cores. The cores enter where the
  ranks' threads outnumber them: a node's `HOST_THREADS_PER_RANK` x
  ranks busy threads share its sockets x cores, each at
  min(1, cores / threads) of a core (`core_share`: exactly 1 on every
  built server, a DGX H100 has 112 cores for 16 threads).
  """
  cores = p.sockets_per_node * p.cpu.cores
  threads = HOST_THREADS_PER_RANK * ranks_per_node(p)
  return p.cpu.thread_speed * core_share(cores / threads)


# Half the width of the bend of `core_share` around one core a thread.
CORE_SHARE_BEND = 0.5


def core_share(x):
  """The share of a core each busy thread gets at `x` cores a thread:
  min(1, x) with its corner rounded by a parabola over [1 - b, 1 + b]
  (b = `CORE_SHARE_BEND`): x below, exactly 1 above, continuous with
  its derivative (a Huber-style soft minimum, so that a platform with
  cores to spare keeps the fitted host times exactly)."""
  b = CORE_SHARE_BEND
  u = jnp.clip(x - (1.0 - b), 0.0, 2.0 * b)
  return jnp.minimum(x, 1.0 - b) + u - u * u / (4.0 * b)


def domain_hosts(p: Platform):
  """Hosts per scale-up domain, clamped to [1, max(nodes, 1)] (a domain
  larger than the cluster is the cluster: `buildability` flags it, rule
  `fabric_domain`, and the model stays finite; the cap is max(nodes, 1),
  so below one node, where finite differences step, nothing changes); 1
  on a CPU trainer, whose sockets' links do not leave the host.

  A select, not a smooth minimum: with hosts_per_domain = 1 it is exactly
  1 for every node count, so a platform without domains keeps its values
  and its node gradients. At a kink the derivative in hosts_per_domain
  is the mean of the one-sided ones, as `jnp.minimum`'s at a tie: 1/2 at
  1 < cap and at the cap, 0 at 1 = cap (one node: flat on both sides);
  none flows to the node count there.
  """
  h = p.fabric.hosts_per_domain
  if p.trainer == 'cpu':
    return jnp.ones_like(h)
  return _clamped_hosts(h, p.nodes)


@jax.jit
def _clamped_hosts(h, nodes):
  cap = jnp.maximum(nodes, 1.0)
  still = jax.lax.stop_gradient(h)
  half = 0.5 * h + 0.5 * still
  kink = jnp.where(cap <= 1.0, still, half)
  inside = jnp.where((h == 1.0) | (h == cap), kink, h)
  return jnp.where(h > cap, cap, jnp.where(h < 1.0, 1.0, inside))


def setup(p: Platform, w: wl.Workload, s: Stack, structure=None) -> Setup:
  """The `Setup` of a design (`structure`: `Setup.structure`)."""
  a = ranks_per_node(p)
  ranks = p.nodes * a
  hosts = domain_hosts(p)
  batch = float(w.global_batch)
  one_device = s.bottom_mlp == 'one_device' and p.trainer != 'cpu'
  if one_device:
    # Rank 0 runs the bottom MLP on the whole batch; above 4 ranks it
    # holds no tables. A steep logistic in R stands for `R > 4` (R is an
    # integer for every buildable design).
    dedicated = jax.nn.sigmoid(8.0 * (ranks - ONE_DEVICE_DEDICATED_ABOVE - 0.5))
    # At least 1 (1 - sigmoid(-28) at R = 1; 4.02 at R = 5).
    table_ranks = ranks - dedicated
    bottom_batch = batch * jnp.ones_like(ranks)
  else:
    dedicated = jnp.zeros_like(ranks)
    table_ranks = ranks
    bottom_batch = batch / ranks
  return Setup(
    ranks=ranks,
    per_node=a,
    per_domain=a * hosts,
    domains=p.nodes / hosts,
    batch=batch,
    local=batch / ranks,
    table_ranks=table_ranks,
    bottom_batch=bottom_batch,
    one_device=one_device,
    dedicated=dedicated,
    cpu_trainer=p.trainer == 'cpu',
    host_speed=host_speed(p),
    structure=structure,
  )


def dense_device(p: Platform):
  """(device part, its memory bandwidth) that runs the dense part."""
  if p.trainer == 'cpu':
    return p.cpu, p.cpu.ddr_bandwidth
  return p.accelerator, p.accelerator.hbm_bandwidth


def peak_flops(device, precision: str):
  if precision in ('bf16', 'fp16'):
    return device.peak_flops_bf16
  if precision == 'tf32' and hasattr(device, 'peak_flops_tf32'):
    return device.peak_flops_tf32
  return device.peak_flops_fp32


def gemm_rate(device, precision: str):
  """FLOP/s a large GEMM at `precision` sustains on `device`: a peak
  times the best fraction of it the units reach.

  On an accelerator, 16-bit GEMMs run on the tensor cores
  (`gemm_efficiency`) and fp32 GEMMs on the fp32 units, another kernel
  on other units (SGEMM: `fp32_gemm_efficiency`). With TF32 allowed,
  the library runs a GEMM on whichever is faster: the tensor cores at
  the TF32 peak (A100 on) or the fp32 units, which a part without TF32
  has alone (V100: its TF32 rate is its fp32 rate). A CPU's GEMMs have
  its one `gemm_efficiency`.
  """
  peak = peak_flops(device, precision)
  if precision in ('bf16', 'fp16') or not hasattr(
    device, 'fp32_gemm_efficiency'
  ):
    return peak * device.gemm_efficiency
  fp32 = device.peak_flops_fp32 * device.fp32_gemm_efficiency
  if precision != 'tf32':
    return fp32
  return jnp.maximum(peak * device.gemm_efficiency, fp32)


def dense_elem_bytes(w: wl.Workload) -> int:
  return wl.PRECISION_BYTES[w.dense_precision]


def host_link_rate(p: Platform, structure=None):
  """Bytes/s from one node's host memory to its accelerators.

  Over PCIe (`HostLink.kind` 'pcie') the accelerators' x16 links, no
  faster together than the sockets' PCIe lanes. Over NVLink-C2C ('c2c':
  GH200, GB200) each accelerator has its own link into its Grace's
  memory, outside the Grace's PCIe lanes: the accelerators' links alone
  (the memory's own rate still bounds the row reads: `embedding_ddr`).
  """
  links = p.accelerators_per_node * p.host_link.bandwidth
  return structure_lib.pick(
    structure_lib.c2c(p, structure),
    lambda: links,
    lambda: smooth_min(links, p.sockets_per_node * p.cpu.pcie_bandwidth),
  )
