"""Collectives as NCCL and oneCCL run them: the fabric as the
collectives see it (direct links, relays through the host, NICs bounded
by their PCIe slot and the accelerators' own host links), the pooled and
id all-to-alls (every send posted at once; flat or hierarchical), and
the allreduce of the gradients by the algorithm NCCL would pick for its
size and node count (ring, tree, in-network reduction where the switches
do it) or oneCCL's size table (recursive doubling, star-like, ring; CPU
trainers), each with the stack's software latency per call.

Latencies follow NCCL's own tuning model, `src/graph/tuning.cc` of
github NVIDIA/nccl (read at commit 5067397c; the constants have been the
same since NCCL 2.19): a collective costs a base latency per call plus a
hardware latency per step of its algorithm and protocol, on NVLink
(`hwLatencies[NCCL_HW_NVLINK]`) or on the network
(`hwLatencies[NCCL_HW_NET]`), and moves its bytes at a bus bandwidth
with per-algorithm factors (`ncclTopoTuneModel`,
`ncclTopoGetAlgoTime`). Here the per-step latency is the platform's own
link latency (`Fabric.latency`, `Nic.latency`, a leaf each) plus NCCL's
protocol overhead: NCCL's constant for the (algorithm, protocol) less
its constant for the ring's LL protocol, the protocol with the least
work per step. The base latency per call is the stack's
`collective_latency` (its prior, 5 us under CUDA graphs, is NCCL's
`baseLatencies` of 6.6-8.4 us in size), not added twice.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from codesign.core.smooth import safe_div, smooth_max, smooth_min
from codesign.model.terms import structure as structure_lib
from codesign.model.terms.shared import Setup, domain_hosts, host_link_rate
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

# ---- NCCL's tuning model (src/graph/tuning.cc, ncclTunerConstantsDefaults,
# microseconds; protocols LL, Simple; LL128 is left out: NCCL enables it
# only on some systems, and it sits between the two) ------------------------
# hwLatencies[NCCL_HW_NVLINK]: Tree {LL 0.6, Simple 4.0}, Ring {LL 0.6,
# Simple 3.4}; CollNetDirect Simple 3.7; NVLS Simple 25.
NVLINK_US = {
  ('ring', 'll'): 0.6,
  ('ring', 'simple'): 3.4,
  ('tree', 'll'): 0.6,
  ('tree', 'simple'): 4.0,
  ('collnet', 'simple'): 3.7,
  ('nvls', 'simple'): 25.0,
}
# hwLatencies[NCCL_HW_NET]: Tree {LL 5.0, Simple 14}, Ring {LL 2.7,
# Simple 14.0}; CollNetDirect Simple 31; NVLSTree Simple 20.9.
NET_US = {
  ('ring', 'll'): 2.7,
  ('ring', 'simple'): 14.0,
  ('tree', 'll'): 5.0,
  ('tree', 'simple'): 14.0,
  ('collnet', 'simple'): 31.0,
  ('nvls', 'simple'): 20.9,
}
# The network's own latency per message that NCCL's numbers contain: the
# ring's LL step (the least protocol work). `Nic.latency` presets are it.
NET_FLOOR_US = NET_US[('ring', 'll')]
NVLINK_FLOOR_US = NVLINK_US[('ring', 'll')]
# ncclTopoTuneModel bandwidth factors: LL moves half its bytes as flags
# (ring busBw x 0.5; tree x 1 / 3.8); tree allreduce busBw x 0.92 and
# algorithm bandwidth busBw x 0.5 (ring: nRanks / nsteps).
LL_RING_BW = 0.5
LL_TREE_BW = 1.0 / 3.8
TREE_BW = 0.92
# ncclTopoGetAlgoTime: inter-node Simple rings lose to a plateau, latency
# x 1.4 from compute capability 8.0 (x 1.9 before; DLRM GPUs here are
# A100 and later in every multi-node case).
RING_PLATEAU = 1.4
# CollNet Direct (SHARP): 0.4 us arity serialization per local rank
# (tuning.cc), bus bandwidth x 0.85 on Hopper.
COLLNET_ARITY_US = 0.4
COLLNET_BW = 0.85
# NVLS: intra bandwidth x nvlsEfficiency (Hopper 0.85) x 2 (allreduce
# pipelines the reduce and the multicast).
NVLS_BW = 2.0 * 0.85
# Offset of the times in the choice, s (`pick_fastest`): far below any
# collective's time, it keeps gradients finite in float32 on one rank.
PICK_EPS = 1e-9
# Sharpness of the choice between algorithms: NCCL takes the fastest; the
# p-norm minimum of two equal options is 2^(-1/32) = 2.1% below either,
# an option 2x slower weighs 2^-32.
ALGO_P = 32


class Fabric(NamedTuple):
  """Per-rank bandwidths (B/s) and latencies (s).

  "Intra" is inside one scale-up domain (`Setup.per_domain` ranks: one
  node's, or `Fabric.hosts_per_domain` nodes'), "inter" between
  domains, over the NICs.

  direct: all-to-all bandwidth to the peers a rank reaches over the
  fabric without the host (its own links; on a torus, through the other
  chips' routers); direct_share: the share of its domain's peers it
  reaches so; relay: bandwidth to the other peers, which NCCL's
  point-to-point sends reach through the host (PCIe), not over other
  GPUs' links; allreduce: ring bandwidth inside a domain (a ring embeds
  in every topology); alpha: intra-domain latency per step; nic: one
  node's scale-out bandwidth (NICs bounded by their slots and, with
  GPUDirect, the accelerators' host links; leaf oversubscription
  applied); nic_alpha: the network's latency per message (NIC to NIC,
  across the switch tiers); post: host time to post one network
  message; domains: the domains the network joins (the node count when a
  domain is one node); hosts: nodes per domain, whose NICs together
  carry the domain's traffic; in_network: 1.0 where the switches reduce
  (SHARP), else 0.0 (static); nvls: likewise for NVLink SHARP (static);
  nvls_share: None, or the share (traced, in (0, 1]) in which a relaxed
  mixture of parts has it: the NVLS option's time over it.
  """

  direct: jax.Array
  direct_share: jax.Array
  relay: jax.Array
  allreduce: jax.Array
  alpha: jax.Array
  nic: jax.Array
  nic_alpha: jax.Array
  post: jax.Array
  domains: jax.Array
  hosts: jax.Array
  in_network: float
  nvls: float
  nvls_share: object = None


def direct_share(p: Platform):
  """Share of a domain's other accelerators that one reaches over the
  fabric: every one on a switch and on a torus (through the routers of
  the chips between); `links` of them fully connected; log2(A) + 1 on a
  hybrid cube mesh (DGX-1: 4 of 7); 2 on a ring; its one bridged peer on
  bridged pairs (PCIe cards joined in twos by NVLink bridges: all
  `links` go to that peer); none on PCIe only. A domain's accelerators
  are those of its hosts (a domain of one node: A per node)."""
  return _direct_share(p, p.fabric.topology)


def _direct_share(p: Platform, topo: str):
  """`direct_share` on topology `topo`."""
  f = p.fabric
  a = p.accelerators_per_node * domain_hosts(p)
  peers = a - 1.0
  if topo in ('switch', 'torus'):
    return jnp.ones_like(a)
  if topo == 'fully_connected':
    reach = f.links_per_accelerator
  elif topo == 'hybrid_cube_mesh':
    reach = jnp.log2(jnp.maximum(a, 1.0)) + 1.0
  elif topo == 'ring':
    reach = 2.0 * jnp.ones_like(a)
  elif topo == 'bridged_pairs':
    reach = jnp.ones_like(a)
  else:  # pcie_only
    return jnp.zeros_like(a)
  # p = 64: where the reach equals the peers (Zion: 7 links, 7 peers) the
  # share is 2^(-1/64) = 0.99, where p = 8 would route 8% via the host.
  return smooth_min(1.0, safe_div(reach, peers, 0.5), p=64)


def pair_ring(p: Platform, bridge, relay):
  """(bandwidth, latency per step) of a ring over bridged pairs.

  Two accelerators ring over their bridge alone; from three the ring
  alternates bridge edges inside each pair and PCIe edges between pairs
  (through the host, at `relay`), so it moves at the slower edge's rate
  and waits the PCIe hop's latency (`HostLink.latency`) each step. Blended
  by g = clip(A - 2, 0, 1) in the relaxation.
  """
  g = jnp.clip(p.accelerators_per_node - 2.0, 0.0, 1.0)
  ar = smooth_min(bridge, relay / jnp.maximum(g, 1e-6))
  lat = p.fabric.latency
  alpha = lat + g * jnp.maximum(p.host_link.latency - lat, 0.0)
  return ar, alpha


def pcie_cards(p: Platform):
  """(cards a socket holds, cards a switch holds) of a node whose
  accelerators hang off its sockets' PCIe: the cards split evenly over
  the sockets (at least one card on a socket that holds any), at most a
  socket's cards behind one switch (`HostLink.cards_per_switch`)."""
  per_socket = jnp.maximum(p.accelerators_per_node / p.sockets_per_node, 1.0)
  per_switch = jnp.minimum(p.host_link.cards_per_switch, per_socket)
  return per_socket, per_switch


def pcie_peer_rate(p: Platform):
  """Bytes/s per card of a uniform all-to-all among a node's A cards
  over PCIe, as servers are built: k cards behind each PCIe switch share
  its one x16 uplink (`HostLink.cards_per_switch`), the switches hang off
  the S sockets' root complexes, A/S cards a socket, and a peer on the
  other socket is reached across the socket links (UPI, xGMI).

  Each card sends V bytes, V/(A - 1) to each peer, all at once. Per byte
  of V, the busiest of the shared links carries:
  - its own x16 link: 1 (at `HostLink.bandwidth`);
  - its switch's uplink: the k cards' bytes to the A - k peers outside
    the switch, k (A - k)/(A - 1) (at least 1 for 1 <= k <= A - 1), at
    the same x16 rate (a PCIe switch
    is non-blocking inside: Broadcom PEX8796, full line rate on all
    ports; peers under one switch meet there, NCCL_P2P_LEVEL PIX);
  - its socket's PCIe lanes (the root complex): what leaves its switches,
    A/S x (A - k)/(A - 1), at `CpuSocket.pcie_bandwidth` (all lanes, one
    way);
  - the socket links: what its A/S cards send to the A - A/S cards of
    the other sockets, A/S x (A - A/S)/(A - 1), at `socket_links` x
    `socket_link_bandwidth` per direction. NCCL moves it through host
    memory (its SHM transport: P2P stops at the NUMA node by default,
    NCCL_P2P_LEVEL PHB), crossing the socket links once.
  The rate is V over the longest of these (a smooth maximum of the
  per-byte times), so an 8-card server whose cards sit two to a switch
  and four to a socket moves its all-to-all at about half a card's link
  (its socket links at 4 x 4/7 of V), not at the card's x16 rate.
  Sources: Supermicro SYS-4029GP-TRT PCIe root architectures (dual root:
  the GPUs under PCIe switches on both CPUs; single root: one CPU's root
  complex; cascade: one x16 to the CPU); NCCL environment variables
  (NCCL_P2P_LEVEL, NCCL_SHM_DISABLE: host memory between sockets).
  """
  a = p.accelerators_per_node
  per_socket, k = pcie_cards(p)
  peers = jnp.maximum(a - 1.0, 0.5)
  card = p.host_link.bandwidth
  leave = jnp.maximum(a - k, 0.0) / peers  # a card's share leaving its switch
  cross = jnp.maximum(a - per_socket, 0.0) / peers  # and its socket
  cpu = p.cpu
  # The card's link and its switch's uplink run at the same x16 rate:
  # the busier of the two (the uplink, but for one switch holding every
  # card; exactly the card's link without switches, k = 1).
  times = (
    jnp.maximum(k * leave, 1.0) / card,
    per_socket * leave / cpu.pcie_bandwidth,
    per_socket * cross / (cpu.socket_links * cpu.socket_link_bandwidth),
  )
  return 1.0 / smooth_max(*times)


def pcie_ring_rate(p: Platform):
  """Bytes/s of a ring through a node's cards over PCIe (the allreduce's
  ring, or the PCIe edges of a ring over bridged pairs): each card sends
  to the next, one flow on each card link; the ring visits a switch's
  cards in turn, so one flow each way crosses each switch uplink, and it
  crosses to another socket and back once: one flow each way on the
  socket links (where the cards span sockets). A socket's root complex
  forwards the flows of its A/(S k) switches. The slowest of these, as
  `pcie_peer_rate` weighs them."""
  per_socket, k = pcie_cards(p)
  cpu = p.cpu
  spans = jnp.clip(p.accelerators_per_node - per_socket, 0.0, 1.0)
  times = (
    1.0 / p.host_link.bandwidth,
    per_socket / k / cpu.pcie_bandwidth,
    spans / (cpu.socket_links * cpu.socket_link_bandwidth),
  )
  return 1.0 / smooth_max(*times)


def _bridged(p: Platform, bridge, relay, direct, share):
  """(allreduce, alpha, direct, direct_share) on bridged pairs: a ring
  over the pairs (`pair_ring`); a card without a bridge (no links: the
  L40S in the PCIe space's relaxation, whose fabric is bridged pairs for
  every card) reaches every peer over PCIe, as `pcie_only` (its ring at
  `pcie_ring_rate`); blended by its links between 0 and 1, exactly one
  or the other outside."""
  b = jnp.clip(p.fabric.links_per_accelerator, 0.0, 1.0)
  ring = pcie_ring_rate(p)
  ar, alpha = pair_ring(p, jnp.maximum(bridge, 1.0), ring)
  return (
    b * ar + (1.0 - b) * ring,
    b * alpha + (1.0 - b) * p.host_link.latency,
    b * direct + (1.0 - b) * relay,
    b * share,
  )


def torus_hops(ranks, links):
  """Mean hops from a rank to its peers on a k-ary D-cube with
  wraparound (a torus; TPU v4/v5p ICI: D = 3, 6 links a chip), D = links
  / 2 and k = ranks^(1/D) chips a side.

  Derivation: on a ring of k (k even) the distances to the k nodes sum
  to k^2/4 (0, 1, ..., k/2, ..., 1), a mean of k/4 over all k; on the
  D-cube the hop count is the sum over dimensions, so the sum over the
  N = k^D destinations is N D k/4 and the mean over the N - 1 peers D
  k/4 x N/(N - 1) (Dally and Towles, Principles and Practices of
  Interconnection Networks, 2004, ch. 3: average distance of a k-ary
  n-cube, nk/4 for even k). At least one hop. Smooth in `ranks` and
  `links` (the relaxation's continuous counts).
  """
  dims = 0.5 * links
  side = jnp.maximum(ranks, 1.0) ** (1.0 / dims)
  hops = dims * side / 4.0 * safe_div(ranks, ranks - 1.0, 0.5)
  return jnp.maximum(hops, 1.0)


def torus_alltoall(ranks, links, link_rate):
  """Bytes/s per rank of a uniform all-to-all on a torus of `ranks` chips
  with `links` links each of `link_rate` per direction.

  Each rank's bytes cross `torus_hops` links on the way (minimal routes,
  spread evenly over the dimensions and both directions by symmetry);
  every chip drives `links` x `link_rate` out, so the whole torus moves
  N x links x rate link-bytes a second and a rank's V bytes take V x
  hops / (links x rate): per rank links x rate / hops. On a k-ary 3-cube
  (6 links) that is 8 rate / k x (N - 1)/N, the bisection bound too:
  2 k^2 wraparound links a direction across the cut, (N/2)^2 m bytes to
  cross with m = V/(N - 1) per pair, (N/2)^2 m / (2 k^2 rate) = V k/(8
  rate) x N/(N - 1).
  """
  return links * link_rate / torus_hops(ranks, links)


def switch_tiers(p: Platform):
  """Switch tiers of a rail-optimized fat tree that connects the nodes:
  one leaf per rail serves radix / 2 nodes (the other half of its ports
  go up), each tier above multiplies the reach by radix / 2; at least 1.
  Smooth in the node count (log_{k/2} n, floored at 1 by a p-norm)."""
  half = 0.5 * p.nic.switch_radix
  reach = jnp.log(jnp.maximum(p.nodes, 1.0)) / jnp.log(half)
  return smooth_max(1.0, reach, p=16)


def network_latency(p: Platform):
  """Seconds for one message across the network: the NIC-to-NIC latency
  through one leaf (`Nic.latency`) plus two more switch traversals (up
  and down) for every tier above the leaf."""
  tiers = switch_tiers(p)
  return p.nic.latency + 2.0 * (tiers - 1.0) * p.nic.switch_latency


def nic_rate(p: Platform, cpu_trainer: bool, structure=None):
  """Bytes/s per direction that one node's NICs move.

  Each NIC at its line rate times its efficiency, no faster than its
  PCIe slot (a Gen5 x16 slot carries 63 GB/s, about 500 Gb/s: an 800
  Gb/s NIC needs Gen6); with GPUDirect (`attach='accelerator'`) the
  bytes also cross the accelerators' own host links, so the node moves
  no more than they carry; NICs on the sockets stage through the host
  (the node's host-link rate). Traffic between nodes of different leaves
  shares the leaf uplinks: divided by the oversubscription for the share
  of peers outside the leaf (1 - (k/2) / n, about 0 within one leaf).
  `structure`: `Setup.structure`.
  """
  nic = p.nic
  line = nic.count * nic.bandwidth * nic.efficiency
  rate = smooth_min(line, nic.count * nic.slot_bandwidth)
  if not cpu_trainer:
    links = p.accelerators_per_node * p.host_link.bandwidth
    rate = structure_lib.pick(
      structure_lib.nic_on_accelerator(p, structure),
      lambda: smooth_min(rate, links),
      # Staged through the host.
      lambda: smooth_min(rate, host_link_rate(p, structure)),
    )
  half = 0.5 * nic.switch_radix
  outside = jnp.maximum(1.0 - safe_div(half, p.nodes), 0.0)
  return rate / (1.0 + (nic.oversubscription - 1.0) * outside)


def fabric(p: Platform, s: Stack, st: Setup, nvls_share=None) -> Fabric:
  """The fabric as the collectives see it (`nvls_share`: `Fabric`'s)."""
  del s  # the stack's choices enter per collective
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
    # Peers the fabric does not reach are reached over PCIe: through the
    # switches, root complexes and socket links as built (NVLink-C2C
    # hosts: through their Grace, at the host links' rate).
    # (On a switch or a torus every peer is on the fabric, share 1: the
    # relay weighs nothing, and the cheaper host-link rate stands in.)
    k = st.structure
    over_pcie = structure_lib.all_of(
      structure_lib.no(structure_lib.c2c(p, k)),
      structure_lib.no(structure_lib.topology_is(p, k, 'switch', 'torus')),
    )
    relay = structure_lib.pick(
      over_pcie,
      lambda: pcie_peer_rate(p),
      lambda: host_link_rate(p, k) / p.accelerators_per_node,
    )
    ar, alpha, direct, share = structure_lib.by_topology(
      p, k, lambda topo: _on_fabric(p, st, relay, topo)
    )
  nvls, nvls_share = _nvls(p, st, nvls_share)
  return Fabric(
    direct=direct,
    direct_share=share,
    relay=relay,
    allreduce=ar,
    alpha=alpha,
    nic=nic_rate(p, st.cpu_trainer, st.structure),
    nic_alpha=network_latency(p),
    post=p.nic.post_overhead,
    domains=st.domains,
    hosts=domain_hosts(p),
    in_network=float(p.nic.in_network_reduction),
    nvls=float(nvls),
    nvls_share=nvls_share,
  )


def _on_fabric(p: Platform, st: Setup, relay, topo: str) -> tuple:
  """(allreduce, alpha, direct, direct_share) of the accelerators'
  fabric on topology `topo` (peers off the fabric at `relay`)."""
  if topo == 'pcie_only':
    zero = jnp.zeros_like(relay)
    return pcie_ring_rate(p), p.host_link.latency, relay, zero
  f = p.fabric
  # A ring embeds in every topology at the links' rate; on a torus, a
  # k-ary D-cube has D edge-disjoint Hamiltonian cycles (Bae and Bose,
  # IEEE Trans. Computers 52(10), 2003), each run both ways: 2D = links
  # rings at once.
  ar = f.links_per_accelerator * f.link_bandwidth * f.efficiency
  direct, share = ar, _direct_share(p, topo)
  if topo == 'bridged_pairs':
    return _bridged(p, ar, relay, direct, share)
  if topo == 'torus':
    direct = torus_alltoall(
      st.per_domain,
      f.links_per_accelerator,
      f.link_bandwidth * f.efficiency,
    )
  return ar, f.latency, direct, share


# The NVLS option's share where a platform costed with a `Structure` has
# no NVLink SHARP: its time over it, 1e30 times the option's, weighs
# exactly 0 in `pick_fastest` (((1e-30)^ALGO_P underflows), as if absent.
NVLS_ABSENT = 1e-30


def _nvls(p: Platform, st: Setup, share) -> tuple:
  """(`Fabric.nvls`, `Fabric.nvls_share`): NVLink SHARP where an
  accelerator trainer's switch reduces (`share`: a relaxed mixture's,
  or None); with a `Structure`, the option always, at NVLS_ABSENT where
  the platform has none."""
  k = st.structure
  if st.cpu_trainer:
    return False, None
  if k is None:
    on = p.fabric.in_switch_reduction and p.fabric.topology == 'switch'
    return on, share if on else None
  on = structure_lib.in_switch_reduction(p, k) * structure_lib.topology_is(
    p, k, 'switch'
  )
  full = 1.0 if share is None else share
  return True, jnp.where(on > 0.5, full, NVLS_ABSENT)


def intra_node_seconds(volume, fab: Fabric):
  """Seconds for a rank to send `volume` bytes spread over its domain's
  peers: the directly linked share over the fabric and the rest through
  the host at the same time."""
  direct = volume * fab.direct_share / fab.direct
  relay = volume * (1.0 - fab.direct_share) / fab.relay
  return smooth_max(direct, relay)


def several_ranks(st: Setup):
  """About 1 with two ranks or more, 0 with one: a collective on one
  rank is never called. Smooth in R (1 - e^(-4 (R - 1)))."""
  return -jnp.expm1(-4.0 * jnp.maximum(st.ranks - 1.0, 0.0))


def several_nodes(nodes):
  """About 1 with two nodes (domains) or more, 0 with one (as
  `several_ranks`)."""
  return -jnp.expm1(-4.0 * jnp.maximum(nodes - 1.0, 0.0))


def split_volume(send, st: Setup):
  """(intra-domain, inter-domain) bytes per rank of `send` bytes spread
  over all ranks: the peers of its domain get (d - 1)/R of them."""
  a, r = st.per_domain, st.ranks
  return send * safe_div(a - 1.0, r), send * safe_div(r - a, r)


def alltoall_inter(v_inter, calls, s: Stack, st: Setup, fab: Fabric):
  """Seconds of the network part of `calls` all-to-alls in which each
  rank sends `v_inter` bytes (in all) to the ranks of other domains.

  Each node's NICs carry what its `a` ranks send (a domain of h nodes:
  its d = a h ranks over h nodes' NICs, the same rate). NCCL posts every
  send of a grouped all-to-all at once, so a call waits one network
  latency (at NCCL's Simple protocol overhead: `NET_US` ring Simple less
  its LL floor) plus the host time to post each message
  (`Nic.post_overhead`, NCCL's getNetOverhead), not one latency per
  peer. A flat all-to-all posts one message per remote rank, d(n - 1)
  over n domains; a hierarchical one (HugeCTR's IB_NVLink_Hierarchical)
  gathers a domain's data for each domain over the fabric first and
  posts one message per domain pair, n - 1 per rank
  (`alltoall_extra_intra` charges the gather). oneCCL's default
  all-to-all over OFI (`scatter`: every isend and irecv posted at once;
  oneCCL selector_alltoall.cpp) is flat the same way, without NCCL's
  protocol overhead.
  """
  a, d, n = st.per_node, st.per_domain, fab.domains
  simple = (NET_US[('ring', 'simple')] - NET_FLOOR_US) * 1e-6
  if s.collective_library == 'oneccl':
    simple = 0.0  # oneCCL's scatter all-to-all: point-to-point over OFI
  posts = (n - 1.0) if s.alltoall == 'hierarchical' else d * (n - 1.0)
  latency = several_nodes(n) * (fab.nic_alpha + simple) + posts * fab.post
  return v_inter * a / fab.nic + calls * latency


def alltoall_extra_intra(v_inter, s: Stack, st: Setup):
  """Bytes per rank that a hierarchical all-to-all adds on the domain's
  fabric: the (d - 1)/d of its inter-domain bytes that leave through
  another rank's NIC, and as many that arrive through one (0 flat)."""
  if s.alltoall != 'hierarchical':
    return 0.0 * v_inter
  a = st.per_domain
  return 2.0 * v_inter * safe_div(a - 1.0, a)


def alltoall_pooled(w, s, t, st: Setup, fab: Fabric, payload: int, p: Platform):
  """(intra, inter) seconds of one direction of the pooled all-to-all.

  Each table rank sends the pooled vectors of its whole tables (and
  column shards) for every sample, and the partial sums of its row
  shards for the whole batch. Table-row-wise tables reduce-scatter their
  partial sums on the domain's fabric, then cross the NICs as whole
  tables. With the bottom MLP on rank 0 (`one_device`), rank 0 also
  sends its output for every sample (in the same all-to-all); the
  slower sender sets the time. Latency: one call of the stack's
  collective latency plus the per-peer alphas inside the domain; across
  domains, `alltoall_inter`.
  """
  del p
  pooled = t['dim'] * payload * t.get('infrequent', 1.0)
  tw, cw, rw, twrw = (
    t['table_wise'],
    t['column_wise'],
    t['row_wise'],
    t['table_row_wise'],
  )
  a, ranks = st.per_domain, st.ranks
  d_spread = jnp.sum((tw + cw) * pooled)
  d_rw = jnp.sum(rw * pooled)
  d_twrw = jnp.sum(twrw * pooled)
  send = st.batch * (d_spread / st.table_ranks + d_rw)
  if st.one_device:
    rank0 = st.batch * w.bottom_mlp[-1] * payload + (1.0 - st.dedicated) * send
    send = smooth_max(send, rank0)
  v_intra, v_inter = split_volume(send, st)
  v_intra = v_intra + st.batch * d_twrw * safe_div(a - 1.0, ranks)
  v_inter = v_inter + st.batch * d_twrw * safe_div(ranks - a, ranks * ranks)
  v_intra = v_intra + alltoall_extra_intra(v_inter, s, st)
  sharded = float(np.any(t['data_parallel'] < 1.0))  # static
  call = sharded * s.collective_latency * several_ranks(st)
  intra = intra_node_seconds(v_intra, fab) + (a - 1.0) * fab.alpha + call
  inter = sharded * alltoall_inter(v_inter, 1.0, s, st, fab)
  return intra, inter


def alltoall_ids(w, s, t, st: Setup, fab: Fabric, p: Platform):
  """(intra, inter) seconds of the forward exchange of row ids.

  Each rank sends its samples' ids of every sharded table (each id once;
  to every column shard of a column-wise table) in
  `input_dist_collectives` calls (TorchRec: splits, lengths, values). A
  stack whose data loader reads each rank's own ids (NVIDIA's DLRM: zero
  calls) sends none.
  """
  del p
  calls = float(s.input_dist_collectives)
  dp = t['data_parallel']
  sharded = float(np.any(dp < 1.0)) * float(calls > 0)
  ids = (
    st.batch
    * s.id_bytes
    * jnp.sum(
      (1.0 - dp) * t['pool'] * t['id_copies'] * t.get('infrequent', 1.0)
    )
    / st.ranks
  )
  a = st.per_domain
  v_intra, v_inter = split_volume(ids, st)
  v_intra = v_intra + alltoall_extra_intra(v_inter, s, st)
  # Every call pays the per-peer latencies and the software latency.
  intra = sharded * (
    intra_node_seconds(v_intra, fab)
    + calls * ((a - 1.0) * fab.alpha + s.collective_latency * several_ranks(st))
  )
  inter = sharded * alltoall_inter(v_inter, calls, s, st, fab)
  return intra, inter


def allreduce_elem_bytes(w: wl.Workload, s: Stack, plan: Plan) -> float:
  """Bytes per allreduced gradient element: the stack's allreduce
  precision (`Stack.allreduce_precision`), or the plan's if narrower
  (quantized communication)."""
  return float(
    min(
      stack_lib.allreduce_bytes_per_element(s, w.dense_precision),
      wl.PRECISION_BYTES[plan.comm_precision],
    )
  )


def allreduce_bytes(w: wl.Workload, s: Stack, t: dict, plan: Plan, row_scale):
  """Gradient bytes allreduced per step: the dense parameters that every
  rank replicates, the data-parallel tables and the hybrid embedding's
  frequent rows (`terms.hybrid`)."""
  cb = allreduce_elem_bytes(w, s, plan)
  dense = wl.dense_param_count(w)
  if s.bottom_mlp == 'one_device':
    dense -= wl.bottom_mlp_param_count(w)  # on rank 0 only
  tables = row_scale * jnp.sum(t['data_parallel'] * t['rows'] * t['dim'])
  if 'frequent_rows' in t:
    tables = tables + jnp.sum(t['frequent_rows'] * t['dim'])
  return cb * (dense + tables)


def allreduce_calls(w: wl.Workload, s: Stack, t: dict, plan: Plan) -> int:
  """Allreduce calls per step: one per gradient bucket (static)."""
  cb = allreduce_elem_bytes(w, s, plan)
  dense = wl.dense_param_count(w)
  if s.bottom_mlp == 'one_device':
    dense -= wl.bottom_mlp_param_count(w)  # on rank 0 only
  tables = float(np.sum(t['data_parallel'] * t['rows'] * t['dim']))
  return max(1, math.ceil((dense + tables) * cb / s.allreduce_bucket_bytes))


def _step_latency(fab: Fabric, table: dict, floor_us: float, key):
  """Per-step latency, s: the platform's link latency plus NCCL's
  protocol overhead for `key` = (algorithm, protocol)."""
  link = fab.nic_alpha if table is NET_US else fab.alpha
  return link + (table[key] - floor_us) * 1e-6


def allreduce_algorithms(b, st: Setup, fab: Fabric):
  """(intra, inter) seconds of one allreduce call of `b` bytes for each
  algorithm NCCL may pick, as a dict name -> pair (the stack's software
  latency not included).

  Over n domains of a ranks (a domain: one node's accelerators, or
  `hosts_per_domain` nodes' on one fabric, as GB200 NVL72's 72 GPUs on
  18 trays). Bandwidth terms: a ring moves 2 (a - 1)/a of the bytes per
  rank over the domain's fabric and 2 (n - 1)/n of them per domain over
  the NICs of its h nodes (the hierarchical form of NCCL's rings, one
  per rail: h x `Fabric.nic`); a double binary tree as much at 0.92 of
  the bus bandwidth (`TREE_BW`); LL moves flags with its data
  (`LL_RING_BW`, `LL_TREE_BW`). SHARP (CollNet Direct) reduces in the
  switches: each domain's bytes cross its NICs once each way at
  `COLLNET_BW`; NVLS reduces in the NVSwitch at `NVLS_BW` times the
  ring's rate inside the domain.

  Latency terms (tuning.cc): a ring of R = n a ranks takes 2 (R - 1)
  steps, 2 (n - 1) of them across the network (x 1.4, the plateau of
  inter-node Simple rings, which tuning.cc skips under multi-node NVLink:
  `!comm->MNNVL && nNodes > 1`); a tree 2 (a - 1) steps inside the
  domain and 2 log2(n) across; CollNet Direct 2 (intra step + 0.4 us per
  local rank) and one network step; NVLS one NVLink step of 25 us and,
  across domains (NVLS tree), 2 log2(n) network steps. With multi-node
  NVLink (MNNVL) NCCL fuses the topology of the NVLink clique and builds
  its graphs over the clique's ranks as one node's (src/graph/topo.cc:
  the clique's ranks are the local ranks; src/transport/nvls.cc: "single
  node/MNNVL domain"), so the domain's ranks and the domains stand where
  tuning.cc has a node's ranks and the nodes.
  """
  a, n = st.per_domain, fab.domains
  multi = several_nodes(n)
  log_n = jnp.log2(jnp.maximum(n, 1.0))
  nic = fab.hosts * fab.nic  # the domain's NICs
  # 1 from two hosts a domain (multi-node NVLink), 0 at one; a smoothstep
  # between in the relaxation (flat at both ends: no kink at one host).
  x = jnp.clip(fab.hosts - 1.0, 0.0, 1.0)
  mnnvl = x * x * (3.0 - 2.0 * x)
  ring_intra = 2.0 * safe_div(a - 1.0, a) * b / fab.allreduce
  ring_inter = 2.0 * safe_div(n - 1.0, n) * b / nic
  tree_intra = 2.0 * safe_div(a - 1.0, a) * b / (TREE_BW * fab.allreduce)
  # A double binary tree: each node sends and receives 2 (n - 1)/n of the
  # bytes over its NICs, as a ring (b at n = 2, where both trees are a
  # root and a leaf; 2 b for large n, where a node is inner in one tree
  # and a leaf in the other: NCCL 2.4 double binary trees).
  tree_inter = ring_inter / TREE_BW
  out = {}
  for proto, ring_bw, tree_bw in (
    ('simple', 1.0, 1.0),
    ('ll', LL_RING_BW, LL_TREE_BW),
  ):
    lat_i = _step_latency(fab, NVLINK_US, NVLINK_FLOOR_US, ('ring', proto))
    lat_n = _step_latency(fab, NET_US, NET_FLOOR_US, ('ring', proto))
    plateau = RING_PLATEAU if proto == 'simple' else 1.0
    plateau = 1.0 + (plateau - 1.0) * multi * (1.0 - mnnvl)
    out['ring_' + proto] = (
      ring_intra / ring_bw + plateau * 2.0 * n * (a - 1.0) * lat_i,
      ring_inter / ring_bw + plateau * 2.0 * (n - 1.0) * lat_n,
    )
    lat_i = _step_latency(fab, NVLINK_US, NVLINK_FLOOR_US, ('tree', proto))
    lat_n = _step_latency(fab, NET_US, NET_FLOOR_US, ('tree', proto))
    out['tree_' + proto] = (
      tree_intra / tree_bw + 2.0 * (a - 1.0) * lat_i,
      tree_inter / tree_bw + 2.0 * log_n * lat_n,
    )
  if fab.in_network:
    lat_i = _step_latency(
      fab, NVLINK_US, NVLINK_FLOOR_US, ('collnet', 'simple')
    )
    lat_n = _step_latency(fab, NET_US, NET_FLOOR_US, ('collnet', 'simple'))
    out['collnet'] = (
      ring_intra + 2.0 * (lat_i + (a - 1.0) * COLLNET_ARITY_US * 1e-6),
      multi * (b / (COLLNET_BW * nic) + lat_n),
    )
  if fab.nvls:
    lat_i = _step_latency(fab, NVLINK_US, NVLINK_FLOOR_US, ('nvls', 'simple'))
    lat_n = _step_latency(fab, NET_US, NET_FLOOR_US, ('nvls', 'simple'))
    # A relaxed mixture reduces in its switch in its share: the option's
    # time over it (a part without NVLS, share 1e-6: all but absent).
    slow = 1.0 if fab.nvls_share is None else 1.0 / fab.nvls_share
    out['nvls'] = (
      slow * (ring_intra / NVLS_BW + lat_i),
      slow * (tree_inter + 2.0 * log_n * lat_n),
    )
  return out


def pick_fastest(pairs: dict, p: int = ALGO_P):
  """Smooth choice of the fastest of (intra, inter) pairs.

  The time is the smooth minimum of the totals t_k (p-norm of their
  reciprocals, each offset by `PICK_EPS`), so it never exceeds the
  fastest and never grows when one option gets faster; it is split into
  (intra, inter) as the options near the minimum split theirs, weighted
  by (t_k + eps)^-p.
  """
  eps = PICK_EPS
  totals = [i + e + eps for i, e in pairs.values()]
  time = jnp.maximum(smooth_min(*totals, p=p) - eps, 0.0)
  ref = jax.lax.stop_gradient(functools.reduce(jnp.minimum, totals))
  weights = [(ref / tk) ** p for tk in totals]
  # A picosecond keeps the share 1 (all inside) where nothing crosses.
  intra = sum(wk * i for wk, (i, _) in zip(weights, pairs.values()))
  both = sum(wk * (i + e) for wk, (i, e) in zip(weights, pairs.values()))
  share = (intra + 1e-12) / (both + 1e-12)
  return time * share, time * (1.0 - share)


# oneCCL's default allreduce over OFI by element count (oneapi-src/oneCCL
# src/coll/selection/selector_allreduce.cpp with selector.hpp's
# CCL_ALLREDUCE_SHORT_MSG_SIZE 8192 and CCL_ALLREDUCE_MEDIUM_MSG_SIZE
# 1024 x 1024): recursive doubling up to 8,192 elements, star-like up to
# 1,048,576, ring above.
ONECCL_SHORT = 8192.0
ONECCL_MEDIUM = 1024.0 * 1024.0
# Sharpness of the size thresholds in log(elements): a factor of 2 past
# a threshold weighs the other side e^-(8 ln 2) = 0.4%.
ONECCL_STEEP = 8.0


def oneccl_algorithms(b, st: Setup, fab: Fabric):
  """(intra, inter) seconds of one oneCCL allreduce of `b` bytes for each
  algorithm of its default table, as a dict name -> pair.

  oneCCL runs collectives over CPU buffers flat, not node by node (its
  developer guide, Collective Algorithms Selection: "only a
  non-hierarchical algorithm can be chosen"), one rank per socket here,
  and each step waits the network's latency (`Fabric.nic_alpha`) across
  nodes or the socket link's (`Fabric.alpha`) inside one; a node's a
  ranks share its NICs.
  - recursive doubling: log2 R steps, each exchanging all b bytes with
    one partner (log2 a inside the node, log2 n across);
  - star-like: a reduce-scatter and an allgather, each rank sending (R -
    1)/R of b straight to every other rank at once (as an all-to-all:
    one latency and a post per remote rank, `Fabric.post`);
  - ring: 2 (R - 1) steps of b / R, 2 (a - 1)/a of b inside the node and
    2 (n - 1)/n across per node (the ring leaves a node once).
  """
  a, n = st.per_node, fab.domains
  r = a * n
  multi = several_nodes(n)
  log_a = jnp.log2(jnp.maximum(a, 1.0))
  log_n = jnp.log2(jnp.maximum(n, 1.0))
  net = fab.nic_alpha + fab.post
  remote = safe_div(r - a, r)
  return {
    'recursive_doubling': (
      log_a * (fab.alpha + b / fab.allreduce),
      log_n * (net + a * b / fab.nic),
    ),
    'starlike': (
      2.0 * (safe_div(a - 1.0, r) * b / fab.allreduce + (a - 1.0) * fab.alpha),
      2.0 * (a * remote * b / fab.nic + multi * fab.nic_alpha)
      + 2.0 * (r - a) * fab.post,
    ),
    'ring': (
      2.0 * safe_div(a - 1.0, a) * b / fab.allreduce
      + 2.0 * n * (a - 1.0) * fab.alpha,
      2.0 * safe_div(n - 1.0, n) * b / fab.nic + 2.0 * (n - 1.0) * net,
    ),
  }


def oneccl_pick(pairs: dict, elements):
  """oneCCL's choice by size: recursive doubling up to `ONECCL_SHORT`
  elements, star-like up to `ONECCL_MEDIUM`, ring above; logistic
  weights in log(elements) (`ONECCL_STEEP`) for a smooth model."""
  x = jnp.log(jnp.maximum(elements, 1.0))
  above_short = jax.nn.sigmoid(ONECCL_STEEP * (x - math.log(ONECCL_SHORT)))
  above_medium = jax.nn.sigmoid(ONECCL_STEEP * (x - math.log(ONECCL_MEDIUM)))
  weights = {
    'recursive_doubling': 1.0 - above_short,
    'starlike': above_short * (1.0 - above_medium),
    'ring': above_short * above_medium,
  }
  intra = sum(weights[k] * pairs[k][0] for k in weights)
  inter = sum(weights[k] * pairs[k][1] for k in weights)
  return intra, inter


def allreduce_dense(
  nbytes, calls: int, s, st: Setup, fab: Fabric, p: Platform, elem_bytes=4.0
):
  """(intra, inter) seconds of the allreduce of `nbytes` (elements of
  `elem_bytes`) in `calls` calls (buckets): each call by the algorithm
  its library runs for its size (NCCL: the fastest of
  `allreduce_algorithms`; oneCCL: its size table, `oneccl_pick`) plus the
  stack's software latency."""
  del p
  b = nbytes / calls
  if s.collective_library == 'oneccl':
    intra, inter = oneccl_pick(oneccl_algorithms(b, st, fab), b / elem_bytes)
  else:
    intra, inter = pick_fastest(allreduce_algorithms(b, st, fab))
  intra = calls * (intra + s.collective_latency * several_ranks(st))
  return intra, calls * inter
