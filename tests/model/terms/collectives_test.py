"""Known answers, worked by hand, for the model: communication.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import math

import numpy as np
import pytest

from codesign.model import cost_model
from codesign.model import terms as ct
from tests.model.fixtures import (
  ACC_GATHER,
  ACT_ELEMS,
  CPU_PCIE,
  DENSE_PARAMS,
  DIM,
  HBM_BW,
  HOST_BW,
  HOST_LAT,
  LINK,
  LINK_BW,
  LINK_EFF,
  LINK_LAT,
  NIC,
  NIC_LINE_SLOT,
  PENALTY,
  POOL,
  REL,
  ROWS,
  SOCKET_LINK_BW,
  SOCKET_LINKS,
  B,
  a2a_latency,
  allreduce_by_hand,
  arrays,
  close,
  dp_workload,
  hand_busiest,
  ids_terms,
  make_plan,
  plan_static,
  run,
  smax,
  smax64,
  smin,
  smin64,
  switch,
  tiny_platform,
  tiny_stack,
  tiny_workload,
  with_links,
)


@pytest.mark.parametrize(
  'comm_precision, nic_attach',
  [('fp32', 'accelerator'), ('bf16', 'accelerator'), ('fp32', 'socket')],
)
def test_alltoall_and_allreduce_on_switch(comm_precision, nic_attach):
  plan = make_plan(comm_precision=comm_precision)
  p = tiny_platform(nic_attach=nic_attach)
  bd = run(p, tiny_workload(), plan)['breakdown']
  cb = 4 if comm_precision == 'fp32' else 2
  # Table-wise: each rank owns whole tables and sends each of the B pooled
  # vectors it computes (3 tables x 16 x cb bytes per sample over 8 ranks).
  send = B * 3 * DIM * cb / 8
  v_intra = send * 3 / 8  # to the 3 other ranks of its node
  v_inter = send * 4 / 8  # to the 4 ranks of the other node
  nic = NIC
  if nic_attach == 'socket':
    # NICs on the sockets: the node's traffic is staged through the host.
    nic = smin(NIC_LINE_SLOT, smin(4 * HOST_BW, 2 * CPU_PCIE))
  # Ids are int32 whatever the payload precision, forward only.
  ids_intra, ids_inter = ids_terms(8, 4, switch, LINK_LAT, nic)
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / LINK + 3 * LINK_LAT))
  # The 4 ranks of a node share the node's NICs; 1 peer node.
  lat = a2a_latency(2, 4)
  close(bd['alltoall_inter'], ids_inter + 2 * (v_inter * 4 / nic + lat))
  # Dense gradients: NCCL's fastest algorithm for their size.
  grad = DENSE_PARAMS * cb
  intra, inter = allreduce_by_hand(grad, 4, 2, LINK, nic, LINK_LAT)
  close(bd['allreduce_intra'], intra)
  close(bd['allreduce_inter'], inter)


# Peers an accelerator reaches over its own links, of A - 1: all on a
# switch; `links` fully connected; log2(A) + 1 on a hybrid cube mesh
# (DGX-1: 4 of 7); 2 on a ring; none on PCIe only. The share is capped at
# 1 by a sharp smooth minimum (p = 64).
@pytest.mark.parametrize(
  'topology, accels, links, share',
  [
    ('switch', 8.0, 4.0, 1.0),
    ('switch', 2.0, 4.0, 1.0),
    ('fully_connected', 8.0, 3.0, smin64(1.0, 3.0 / 7.0)),
    ('fully_connected', 4.0, 7.0, smin64(1.0, 7.0 / 3.0)),
    ('hybrid_cube_mesh', 8.0, 6.0, smin64(1.0, 4.0 / 7.0)),
    ('hybrid_cube_mesh', 16.0, 6.0, smin64(1.0, 5.0 / 15.0)),
    ('ring', 8.0, 2.0, smin64(1.0, 2.0 / 7.0)),
    ('pcie_only', 8.0, 4.0, 0.0),
    # Bridged pairs: one peer, whatever the links (H100 PCIe: 12).
    ('bridged_pairs', 8.0, 12.0, smin64(1.0, 1.0 / 7.0)),
    ('bridged_pairs', 2.0, 12.0, smin64(1.0, 1.0)),
    # One accelerator has no peers: the denominator's floor of 0.5.
    ('fully_connected', 1.0, 3.0, smin64(1.0, 3.0 / 0.5)),
  ],
)
def test_direct_share(topology, accels, links, share):
  p = with_links(
    tiny_platform(topology=topology, nodes=1.0, accels=accels), links
  )
  close(float(ct.direct_share(arrays(p))), share)


@pytest.mark.parametrize(
  'topology, accels, links',
  [
    ('fully_connected', 8.0, 7.0),
    ('hybrid_cube_mesh', 4.0, 6.0),
    ('ring', 3.0, 2.0),
  ],
)
def test_direct_share_when_every_peer_is_linked(topology, accels, links):
  # Reach = A - 1 exactly (zion: 8 OAMs, 7 links; a 4-GPU hybrid cube
  # mesh; a 3-GPU ring): the smooth minimum of 1 and 1 at p = 64 is
  # 2^(-1/64) = 0.989, so 1.1% of the all-to-all goes through the host
  # (at p = 8 it was 8.3%).
  p = with_links(
    tiny_platform(topology=topology, nodes=1.0, accels=accels), links
  )
  share = float(ct.direct_share(arrays(p)))
  close(share, 2 ** (-1 / 64))
  assert share > 0.989


@pytest.mark.parametrize(
  'topology, links',
  [
    ('switch', 4.0),
    ('fully_connected', 7.0),
    ('fully_connected', 3.0),
    ('ring', 4.0),
    ('hybrid_cube_mesh', 4.0),
    ('pcie_only', 4.0),
  ],
)
def test_alltoall_topology(topology, links):
  # One node of 8 accelerators. The share of peers a rank reaches over its
  # own links gets its bytes over the fabric (links x 25 GB/s x 0.8); the
  # rest goes through the host over PCIe at the same time.
  p = with_links(tiny_platform(topology=topology, nodes=1.0, accels=8.0), links)
  bd = run(p, tiny_workload(), make_plan())['breakdown']
  reach = {
    'switch': 7.0,
    'fully_connected': links,
    'ring': 2.0,
    'hybrid_cube_mesh': 3.0 + 1.0,
    'pcie_only': 0.0,
  }[topology]
  if topology == 'switch':
    share = 1.0
  elif topology == 'pcie_only':
    share = 0.0
  else:
    share = smin64(1.0, reach / 7.0)
  # Over PCIe (`terms.pcie_peer_rate`, a root port per card): per byte a
  # card sends, its x16 link 1, its socket's lanes 4 cards x 7/7, the
  # socket links 4 x 4/7 (the peers on the other socket); the p = 8 norm
  # of the times. A ring over PCIe: one flow on each (`pcie_ring_rate`).
  upi = SOCKET_LINKS * SOCKET_LINK_BW
  relay = 1.0 / norm8(1 / HOST_BW, 4 / CPU_PCIE, 4 * 4 / 7 / upi)
  ring = 1.0 / norm8(1 / HOST_BW, 4 / CPU_PCIE, 1 / upi)
  direct = links * LINK_BW * LINK_EFF if topology != 'pcie_only' else relay
  alpha = HOST_LAT if topology == 'pcie_only' else LINK_LAT

  def intra(v):
    return smax(v * share / direct, v * (1 - share) / relay)

  send = B * 3 * DIM * 4 / 8
  v_intra = send * 7 / 8
  ids_intra, _ = ids_terms(8, 8, intra, alpha)
  close(bd['alltoall_intra'], ids_intra + 2 * (intra(v_intra) + 7 * alpha))
  # One node: nothing crosses the NICs.
  assert bd['alltoall_inter'] == 0.0
  assert bd['allreduce_inter'] == 0.0
  # The allreduce is a ring over all links whatever the topology (PCIe
  # only: the host share).
  ar_bw = ring if topology == 'pcie_only' else direct
  intra_ar, _ = allreduce_by_hand(DENSE_PARAMS * 4, 8, 1, ar_bw, NIC, alpha)
  close(bd['allreduce_intra'], intra_ar)
  # The term alone.
  fab = ct.fabric(
    arrays(p), tiny_stack(), ct.setup(arrays(p), tiny_workload(), tiny_stack())
  )
  close(float(ct.intra_node_seconds(1e6, fab)), intra(1e6))


def norm8(*times):
  return sum(t**8 for t in times) ** (1 / 8)


def test_several_ranks():
  # 1 - exp(-4 (R - 1)): 0 on one rank, about 1 from two on.
  for ranks, want in (
    (1.0, 0.0),
    (2.0, 1 - math.exp(-4)),
    (8.0, 1 - math.exp(-28)),
  ):
    p = tiny_platform(nodes=1.0, accels=ranks)
    st = ct.setup(arrays(p), tiny_workload(), tiny_stack())
    assert float(ct.several_ranks(st)) == pytest.approx(
      want, rel=REL, abs=1e-300
    )
  # One rank calls no collective: its software latency costs nothing.
  p = tiny_platform(nodes=1.0, accels=1.0)
  bd = run(p, tiny_workload(), make_plan(), tiny_stack(collective_latency=1e-3))
  bd = bd['breakdown']
  for k in (
    'alltoall_intra',
    'alltoall_inter',
    'allreduce_intra',
    'allreduce_inter',
  ):
    assert bd[k] < 1e-20, (k, bd[k])


def test_collective_latency_per_call():
  # 10 us per collective call: 1 id exchange + the pooled all-to-all each
  # way (3 calls) on the intra-node term, 1 allreduce (bucket 10 GB).
  p, w, plan = tiny_platform(), tiny_workload(), make_plan()
  base = run(p, w, plan)['breakdown']
  slow = run(p, w, plan, tiny_stack(collective_latency=10e-6))['breakdown']
  several = 1 - math.exp(-4 * 7)
  close(
    slow['alltoall_intra'] - base['alltoall_intra'],
    3 * 10e-6 * several,
    rel=1e-9,
  )
  close(
    slow['allreduce_intra'] - base['allreduce_intra'], 10e-6 * several, rel=1e-9
  )
  for k in ('alltoall_inter', 'allreduce_inter'):
    close(slow[k], base[k])


@pytest.mark.parametrize('calls, id_bytes', [(0, 4), (1, 4), (3, 8)])
def test_alltoall_ids(calls, id_bytes):
  # Ids of every sharded lookup, `id_bytes` each, in `calls` collectives
  # of 10 us; none at all when the data loader reads each rank's own ids
  # (0 calls, NVIDIA's DLRM). The pooled all-to-all is the same each time.
  s = tiny_stack(
    input_dist_collectives=calls, id_bytes=id_bytes, collective_latency=10e-6
  )
  bd = run(tiny_platform(), tiny_workload(), make_plan(), s)['breakdown']
  several = 1 - math.exp(-4 * 7)
  send = B * 3 * DIM * 4 / 8
  pooled_intra = send * 3 / 8 / LINK + 3 * LINK_LAT + 10e-6 * several
  pooled_inter = send * 4 / 8 * 4 / NIC + a2a_latency(2, 4)
  if calls == 0:
    ids_intra = ids_inter = 0.0
  else:
    ids_intra, ids_inter = ids_terms(
      8, 4, switch, LINK_LAT, NIC, id_bytes=id_bytes, calls=calls, latency=10e-6
    )
  close(bd['alltoall_intra'], ids_intra + 2 * pooled_intra)
  close(bd['alltoall_inter'], ids_inter + 2 * pooled_inter)


def test_every_call_pays_the_fabric_alpha():
  s1 = tiny_stack(input_dist_collectives=1)
  s3 = tiny_stack(input_dist_collectives=3)
  w, plan = tiny_workload(), make_plan()
  one = run(tiny_platform(), w, plan, s1)['breakdown']
  three = run(tiny_platform(), w, plan, s3)['breakdown']
  # Two more calls: 2 x (3 peers x 1 us) inside the node, 2 network
  # latencies across.
  close(
    three['alltoall_intra'] - one['alltoall_intra'], 2 * 3 * LINK_LAT, rel=1e-6
  )
  close(
    three['alltoall_inter'] - one['alltoall_inter'],
    2 * a2a_latency(2, 4),
    rel=1e-6,
  )
  # The allreduce per bucket: 7 calls of 1/7 of the bytes each.
  w = dp_workload()
  plan = make_plan(sharding=('data_parallel', 'table_wise', 'table_wise'))
  seven = tiny_stack(allreduce_bucket_bytes=1e6)  # 7 buckets
  seven = run(tiny_platform(), w, plan, seven)['breakdown']
  grad = (DENSE_PARAMS + 100_000 * DIM) * 4
  intra, inter = allreduce_by_hand(grad / 7, 4, 2, LINK, NIC, LINK_LAT)
  close(seven['allreduce_intra'], 7 * intra)
  close(seven['allreduce_inter'], 7 * inter)


@pytest.mark.parametrize(
  'comm, bucket, calls',
  [
    ('fp32', 1e10, 1),
    # dense 377 x 4 B + the replicated 100000 x 16 x 4 B: 6.4015 MB
    ('fp32', 1e6, 7),
    ('bf16', 1e6, 4),  # 3.2008 MB
    ('fp32', 2.5e6, 3),
  ],
)
def test_allreduce_calls(comm, bucket, calls):
  w = dp_workload()
  plan = make_plan(
    sharding=('data_parallel', 'table_wise', 'table_wise'), comm_precision=comm
  )
  s = tiny_stack(allreduce_bucket_bytes=bucket, collective_latency=10e-6)
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  assert ct.allreduce_calls(w, s, t, plan) == calls
  # Per bucket, a software latency on top of the ring allreduce.
  bd = run(tiny_platform(), w, plan, s)['breakdown']
  cb = 4 if comm == 'fp32' else 2
  grad = (DENSE_PARAMS + 100_000 * DIM) * cb
  several = 1 - math.exp(-4 * 7)
  # Every bucket is an allreduce of its own, and the software latency.
  intra, inter = allreduce_by_hand(grad / calls, 4, 2, LINK, NIC, LINK_LAT)
  close(bd['allreduce_intra'], calls * (intra + 10e-6 * several))
  close(bd['allreduce_inter'], calls * inter)


def test_alltoall_on_pcie_only():
  p = tiny_platform(topology='pcie_only', nodes=1.0, accels=8.0)
  bd = run(p, tiny_workload(), make_plan())['breakdown']
  # No fabric: the 8 accelerators reach each other over PCIe, a root
  # port each (`terms.pcie_peer_rate`): per byte a card sends, its x16
  # link 1, its socket's lanes 4 x 7/7 at 40 GB/s, the socket links 4 x
  # 4/7 at 2 x 20 GB/s; at the host-link latency. The allreduce's ring
  # meets one flow on each (`terms.pcie_ring_rate`).
  upi = SOCKET_LINKS * SOCKET_LINK_BW
  bw = 1.0 / norm8(1 / HOST_BW, 4 / CPU_PCIE, 4 * 4 / 7 / upi)
  ring = 1.0 / norm8(1 / HOST_BW, 4 / CPU_PCIE, 1 / upi)
  v_intra = B * 3 * DIM * 4 / 8 * 7 / 8
  ids_intra, _ = ids_terms(8, 8, lambda v: v / bw, HOST_LAT)
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / bw + 7 * HOST_LAT))
  ar, _ = allreduce_by_hand(DENSE_PARAMS * 4, 8, 1, ring, NIC, HOST_LAT)
  close(bd['allreduce_intra'], ar)


def test_row_wise_alltoall_volume():
  bd = run(tiny_platform(), tiny_workload(), make_plan(sharding='row_wise'))[
    'breakdown'
  ]
  # Row-wise: every rank holds 1/8 of every table's rows and sends a
  # partial pooled vector for each of the B samples and 3 tables, i.e.
  # 8x the volume of table-wise.
  send = B * 3 * DIM * 4
  # Each id still goes to exactly one rank (the one holding its row).
  ids_intra, ids_inter = ids_terms(8, 4, switch, LINK_LAT, NIC)
  close(
    bd['alltoall_intra'],
    ids_intra + 2 * (send * 3 / 8 / LINK + 3 * LINK_LAT),
  )
  close(
    bd['alltoall_inter'],
    ids_inter + 2 * (send * 4 / 8 * 4 / NIC + a2a_latency(2, 4)),
  )


def test_column_wise_sends_every_id_to_every_shard():
  bd = run(tiny_platform(), tiny_workload(), make_plan(sharding='column_wise'))[
    'breakdown'
  ]
  # Pooled vectors: the same bytes as table-wise (4 column shards of 4
  # elements instead of one 16-element vector). Ids: 4 copies of each.
  send = B * 3 * DIM * 4 / 8
  ids_intra, ids_inter = ids_terms(8, 4, switch, LINK_LAT, NIC, 4 * sum(POOL))
  close(
    bd['alltoall_intra'], ids_intra + 2 * (send * 3 / 8 / LINK + 3 * LINK_LAT)
  )
  close(
    bd['alltoall_inter'],
    ids_inter + 2 * (send * 4 / 8 * 4 / NIC + a2a_latency(2, 4)),
  )


def test_table_row_wise_terms():
  r = run(
    tiny_platform(), tiny_workload(), make_plan(sharding='table_row_wise')
  )
  bd = r['breakdown']
  # Each table on one node, its rows over that node's 4 ranks: the busiest
  # rank carries at least the largest table / 4, here 4 x 64 B x B / 4,
  # which exceeds the mean over 8 ranks, 7 x 64 B x B / 8.
  loads = [B * pool * 64 for pool in POOL]
  busiest = smax64(sum(loads) / 8, max(loads) / 4)
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], busiest / rate)
  close(bd['embedding_update_hbm'], 2 * busiest / rate)
  # All-to-all: each table's 4 ranks reduce-scatter B x 16 x 4 B partial
  # sums (3/4 of it leaves each rank), i.e. 3 x B x 64 B x 3 over the 8
  # ranks; then half of the B x 64 B results per table cross nodes, spread
  # over the 8 ranks, each node's 4 ranks sharing its NICs.
  pooled = B * 3 * DIM * 4
  ids_intra, ids_inter = ids_terms(8, 4, switch, LINK_LAT, NIC)
  close(
    bd['alltoall_intra'],
    ids_intra + 2 * (pooled * 3 / 8 / LINK + 3 * LINK_LAT),
  )
  v_inter = pooled * 4 / 64  # (R - a) / R^2
  close(
    bd['alltoall_inter'],
    ids_inter + 2 * (v_inter * 4 / NIC + a2a_latency(2, 4)),
  )
  # Memory: the busiest rank holds at least the largest table / 4.
  row = 64 * np.asarray(ROWS, dtype=float)
  hbm_tables = smax64(row.sum() / 8, row.max() / 4)
  rw = run(tiny_platform(), tiny_workload(), make_plan(sharding='row_wise'))
  close(
    r['required']['hbm'] - rw['required']['hbm'], hbm_tables - row.sum() / 8
  )


def test_table_row_wise_is_row_wise_on_one_node():
  p, w = tiny_platform(nodes=1.0), tiny_workload()
  twrw = run(p, w, make_plan(sharding='table_row_wise'))['breakdown']
  rw = run(p, w, make_plan(sharding='row_wise'))['breakdown']
  for k in cost_model.COMPONENTS:
    # The balance bounds tie on one node; p = 64 overstates them by < 2%.
    close(twrw[k], rw[k], rel=0.02 if k.startswith('embedding') else REL)
  # Between nodes, row-wise sends partial sums for the whole batch: R / 1
  # times the inter-node bytes of table-row-wise (here 8x).
  p2 = tiny_platform()
  twrw2 = run(p2, w, make_plan(sharding='table_row_wise'))['breakdown']
  rw2 = run(p2, w, make_plan(sharding='row_wise'))['breakdown']
  _, ids = ids_terms(8, 4, switch, LINK_LAT, NIC)  # the same for both
  lat = a2a_latency(2, 4)
  rw_bytes = ((rw2['alltoall_inter'] - ids) / 2 - lat) * NIC
  twrw_bytes = ((twrw2['alltoall_inter'] - ids) / 2 - lat) * NIC
  close(rw_bytes / twrw_bytes, 8.0)


def test_data_parallel_tables():
  # Table 0 replicated on every rank; the plan's 0.0 for it is overridden
  # (data-parallel tables always live in HBM).
  plan = make_plan(
    frac=(0.0, 1.0, 1.0), sharding=('data_parallel', 'table_wise', 'table_wise')
  )
  r = run(tiny_platform(), tiny_workload(), plan)
  bd = r['breakdown']
  # All-to-all only for the two sharded tables.
  send = B * 2 * DIM * 4 / 8
  # Ids only for the sharded tables: 2 + 4 lookups per sample.
  ids_intra, _ = ids_terms(8, 4, switch, LINK_LAT, lookups=6.0)
  close(
    bd['alltoall_intra'], ids_intra + 2 * (send * 3 / 8 / LINK + 3 * LINK_LAT)
  )
  # Allreduce: dense gradients plus the replicated table's 1000 x 16.
  grad = (DENSE_PARAMS + 1000 * DIM) * 4
  intra, inter = allreduce_by_hand(grad, 4, 2, LINK, NIC, LINK_LAT)
  close(bd['allreduce_intra'], intra)
  close(bd['allreduce_inter'], inter)
  # Gathers: the replicated table's lookups spread over the ranks; the
  # other two are table-wise.
  tw_loads = [B * 2 * 64, B * 4 * 64]
  dp_load = B * 1 * 64
  rate = HBM_BW * ACC_GATHER
  # (The replicated table is the smallest: it sits last in the static
  # order, masked to 0, as `hand_busiest` places it.)
  busiest = dp_load / 8 + hand_busiest(tw_loads + [0.0], 8)
  close(bd['embedding_gather_hbm'], busiest * PENALTY / rate)
  # Update: rows touched as usual (at the kernel's penalized rate), plus
  # every rank rewrites the whole replicated table (read and write
  # 1000 x 64 B) after the allreduce, at the plain update rate.
  close(
    bd['embedding_update_hbm'], (2 * busiest * PENALTY + 2 * 1000 * 64) / rate
  )
  # Memory: the replicated table on every accelerator, nothing in DDR.
  dense = DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  tw_bytes = [2000 * 64, 4000 * 64]
  hbm = hand_busiest(tw_bytes + [0.0], 8) + 1000 * 64 + dense
  close(r['required']['hbm'], hbm)
  assert r['required']['ddr'] == 0.0
