"""Collectives in the alpha-beta form: the fabric as the collectives
see it (direct links, relays through the host, NICs), the pooled and
id all-to-alls, and the bucketed ring allreduce, each with the stack's
software latency per call."""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core.smooth import safe_div, smooth_max, smooth_min
from codesign.model.terms.shared import Setup, host_link_rate
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack


class Fabric(NamedTuple):
  """Per-rank bandwidths (B/s) and per-message latencies (s).

  direct: all-to-all bandwidth to the peers a rank reaches over its own
  fabric links; direct_share: the share of its node's peers it reaches
  so; relay: bandwidth to the other peers, which NCCL's point-to-point
  sends reach through the host (PCIe), not over other GPUs' links;
  allreduce: ring bandwidth inside a node (a ring embeds in every
  topology); alpha: intra-node latency; nic: one node's scale-out
  bandwidth; nic_alpha: scale-out latency.
  """

  direct: jax.Array
  direct_share: jax.Array
  relay: jax.Array
  allreduce: jax.Array
  alpha: jax.Array
  nic: jax.Array
  nic_alpha: jax.Array


def direct_share(p: Platform):
  """Share of a node's other accelerators that one reaches over its own
  fabric links: every one on a switch; `links` of them fully connected;
  log2(A) + 1 on a hybrid cube mesh (DGX-1: 4 of 7); 2 on a ring; none
  on PCIe only."""
  f = p.fabric
  a = p.accelerators_per_node
  peers = a - 1.0
  topo = f.topology
  if topo == 'switch':
    return jnp.ones_like(a)
  if topo == 'fully_connected':
    reach = f.links_per_accelerator
  elif topo == 'hybrid_cube_mesh':
    reach = jnp.log2(jnp.maximum(a, 1.0)) + 1.0
  elif topo == 'ring':
    reach = 2.0 * jnp.ones_like(a)
  else:  # pcie_only
    return jnp.zeros_like(a)
  # p = 64: where the reach equals the peers (Zion: 7 links, 7 peers) the
  # share is 2^(-1/64) = 0.99, where p = 8 would route 8% via the host.
  return smooth_min(1.0, safe_div(reach, peers, 0.5), p=64)


def fabric(p: Platform, s: Stack, st: Setup) -> Fabric:
  """The fabric as the collectives see it."""
  if st.cpu_trainer:
    cpu = p.cpu
    links = cpu.socket_links
    direct = links * cpu.socket_link_bandwidth
    share = smooth_min(1.0, safe_div(links, st.per_node - 1.0, 0.5))
    # Sockets beyond the direct links are reached in two UPI hops.
    relay = 0.5 * direct
    alpha = cpu.kernel_overhead
    ar = direct
  else:
    relay = host_link_rate(p) / p.accelerators_per_node
    if p.fabric.topology == 'pcie_only':
      direct, share, ar = relay, jnp.zeros_like(relay), relay
      alpha = p.host_link.latency
    else:
      f = p.fabric
      ar = f.links_per_accelerator * f.link_bandwidth * f.efficiency
      direct, share = ar, direct_share(p)
      alpha = f.latency
  nic = p.nic.count * p.nic.bandwidth * p.nic.efficiency
  if p.nic.attach == 'socket' and not st.cpu_trainer:
    nic = smooth_min(nic, host_link_rate(p))  # staged through the host
  return Fabric(
    direct=direct,
    direct_share=share,
    relay=relay,
    allreduce=ar,
    alpha=alpha,
    nic=nic,
    nic_alpha=p.nic.latency,
  )


def intra_node_seconds(volume, fab: Fabric):
  """Seconds for a rank to send `volume` bytes spread over its node's
  peers: the directly linked share over the fabric and the rest through
  the host at the same time."""
  direct = volume * fab.direct_share / fab.direct
  relay = volume * (1.0 - fab.direct_share) / fab.relay
  return smooth_max(direct, relay)


def several_ranks(st: Setup):
  """About 1 with two ranks or more, 0 with one: a collective on one
  rank is never called. Smooth in R (1 - e^(-4 (R - 1)))."""
  return -jnp.expm1(-4.0 * jnp.maximum(st.ranks - 1.0, 0.0))


def _split_volume(send, st: Setup):
  """(intra-node, inter-node) bytes per rank of `send` bytes spread over
  all ranks."""
  a, r = st.per_node, st.ranks
  return send * safe_div(a - 1.0, r), send * safe_div(r - a, r)


def alltoall_pooled(w, s, t, st: Setup, fab: Fabric, payload: int, p: Platform):
  """(intra, inter) seconds of one direction of the pooled all-to-all.

  Each table rank sends the pooled vectors of its whole tables (and
  column shards) for every sample, and the partial sums of its row
  shards for the whole batch. Table-row-wise tables reduce-scatter their
  partial sums on the node's fabric, then cross the NICs as whole
  tables. With the bottom MLP on rank 0 (`one_device`), rank 0 also
  sends its output for every sample (in the same all-to-all); the
  slower sender sets the time. Latency: one call of the stack's
  collective latency plus the per-peer alphas.
  """
  pooled = t['dim'] * payload
  tw, cw, rw, twrw = (
    t['table_wise'],
    t['column_wise'],
    t['row_wise'],
    t['table_row_wise'],
  )
  a, ranks = st.per_node, st.ranks
  d_spread = jnp.sum((tw + cw) * pooled)
  d_rw = jnp.sum(rw * pooled)
  d_twrw = jnp.sum(twrw * pooled)
  send = st.batch * (d_spread / st.table_ranks + d_rw)
  if st.one_device:
    rank0 = st.batch * w.bottom_mlp[-1] * payload + (1.0 - st.dedicated) * send
    send = smooth_max(send, rank0)
  v_intra, v_inter = _split_volume(send, st)
  v_intra = v_intra + st.batch * d_twrw * safe_div(a - 1.0, ranks)
  v_inter = v_inter + st.batch * d_twrw * safe_div(ranks - a, ranks * ranks)
  sharded = float(np.any(t['data_parallel'] < 1.0))  # static
  call = sharded * s.collective_latency * several_ranks(st)
  intra = intra_node_seconds(v_intra, fab) + (a - 1.0) * fab.alpha + call
  inter = v_inter * a / fab.nic + (p.nodes - 1.0) * fab.nic_alpha
  return intra, inter


def alltoall_ids(w, s, t, st: Setup, fab: Fabric, p: Platform):
  """(intra, inter) seconds of the forward exchange of row ids.

  Each rank sends its samples' ids of every sharded table (each id once;
  to every column shard of a column-wise table) in
  `input_dist_collectives` calls (TorchRec: splits, lengths, values). A
  stack whose data loader reads each rank's own ids (NVIDIA's DLRM: zero
  calls) sends none.
  """
  calls = float(s.input_dist_collectives)
  dp = t['data_parallel']
  sharded = float(np.any(dp < 1.0)) * float(calls > 0)
  ids = (
    st.batch
    * s.id_bytes
    * jnp.sum((1.0 - dp) * t['pool'] * t['id_copies'])
    / st.ranks
  )
  a = st.per_node
  v_intra, v_inter = _split_volume(ids, st)
  # Every call pays the per-peer latencies and the software latency.
  intra = sharded * (
    intra_node_seconds(v_intra, fab)
    + calls * ((a - 1.0) * fab.alpha + s.collective_latency * several_ranks(st))
  )
  inter = sharded * (
    v_inter * a / fab.nic + calls * (p.nodes - 1.0) * fab.nic_alpha
  )
  return intra, inter


def allreduce_bytes(w: wl.Workload, s: Stack, t: dict, plan: Plan, row_scale):
  """Gradient bytes allreduced per step: the dense parameters that every
  rank replicates and the data-parallel tables."""
  cb = float(wl.PRECISION_BYTES[plan.comm_precision])
  dense = wl.dense_param_count(w)
  if s.bottom_mlp == 'one_device':
    dense -= wl.bottom_mlp_param_count(w)  # on rank 0 only
  tables = row_scale * jnp.sum(t['data_parallel'] * t['rows'] * t['dim'])
  return cb * (dense + tables)


def allreduce_calls(w: wl.Workload, s: Stack, t: dict, plan: Plan) -> int:
  """Allreduce calls per step: one per gradient bucket (static)."""
  cb = float(wl.PRECISION_BYTES[plan.comm_precision])
  dense = wl.dense_param_count(w)
  if s.bottom_mlp == 'one_device':
    dense -= wl.bottom_mlp_param_count(w)  # on rank 0 only
  tables = float(np.sum(t['data_parallel'] * t['rows'] * t['dim']))
  return max(1, math.ceil((dense + tables) * cb / s.allreduce_bucket_bytes))


def allreduce_dense(nbytes, calls: int, s, st: Setup, fab: Fabric, p: Platform):
  """(intra, inter) seconds of the ring allreduce of `nbytes` in `calls`
  calls (buckets): each call pays the ring's 2 (ranks - 1) latencies and
  the stack's software latency."""
  a, nodes = st.per_node, p.nodes
  intra = 2.0 * safe_div(a - 1.0, a) * nbytes / fab.allreduce + calls * (
    2.0 * (a - 1.0) * fab.alpha + s.collective_latency * several_ranks(st)
  )
  inter = 2.0 * safe_div(nodes - 1.0, nodes) * nbytes / fab.nic + calls * (
    2.0 * (nodes - 1.0) * fab.nic_alpha
  )
  return intra, inter
