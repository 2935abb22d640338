"""Known answers, worked by hand, for the model: the CPU trainer.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

from tests.model.fixtures import (
  ACT_ELEMS,
  BOTTOM_WIDTHS,
  CPU_EFF,
  CPU_FLOPS,
  CPU_GATHER,
  CPU_HALF,
  CPU_KERNEL,
  DDR_BW,
  DDR_CAP,
  DENSE_PARAMS,
  DIM,
  NIC_LINE_SLOT,
  ROWS,
  SOCKET_LINK_BW,
  SOCKET_LINKS,
  STEP_FLOOR,
  TINY_GAPS,
  TOP_WIDTHS,
  B,
  a2a_latency,
  allreduce_by_hand,
  close,
  hand_dense,
  hand_ew,
  ids_terms,
  make_plan,
  run,
  smax,
  smin,
  tiny_platform,
  tiny_workload,
)

# ---- the CPU trainer -------------------------------------------------------


def test_cpu_trainer():
  # The plan says "all in HBM, lookups on the accelerators": a CPU trainer
  # ignores it (everything in DDR, every lookup on the sockets), and the
  # accelerator count of 4 is unused.
  p = tiny_platform(trainer='cpu', nic_attach='socket')
  plan = make_plan(cpu_lookup_fraction=0.0)
  r = run(p, tiny_workload(), plan)
  bd = r['breakdown']
  ranks = 2 * 2  # sockets
  b = B / ranks
  d = hand_dense(b, CPU_FLOPS, 4, CPU_EFF, CPU_HALF, DDR_BW, CPU_KERNEL)
  ew_bottom = hand_ew(b, 'epilogue', BOTTOM_WIDTHS, 4, DDR_BW, CPU_KERNEL)
  ew_top = hand_ew(b, 'epilogue', TOP_WIDTHS, 4, DDR_BW, CPU_KERNEL)
  close(bd['dense_bottom_mlp'], sum(d['bottom']) + ew_bottom)
  close(bd['dense_interaction'], sum(d['inter']))
  close(bd['dense_top_mlp'], sum(d['top']) + ew_top)
  close(bd['dense_optimizer'], DENSE_PARAMS * 12 / DDR_BW + CPU_KERNEL)
  # All 7 lookups per sample from DDR on 2 nodes x 2 sockets (no block
  # penalty: that is the accelerators' FBGEMM kernel).
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  close(bd['embedding_gather_ddr'], B * 7 * 64 / ddr_rate)
  close(bd['embedding_update_ddr'], 2 * B * 7 * 64 / ddr_rate)
  assert bd['embedding_gather_hbm'] < 1e-25
  assert bd['embedding_update_hbm'] < 1e-25
  assert bd['host_transfer'] == 0.0 and bd['socket_links'] == 0.0
  # All-to-all between the sockets: 2 socket links of 20 GB/s reach the
  # one peer socket (share smin(1, 2/1)); the rest in two hops at half
  # that; the per-op cost as latency.
  send = B * 3 * DIM * 4 / ranks
  direct = SOCKET_LINKS * SOCKET_LINK_BW
  share = smin(1.0, 2.0 / 1.0)

  def intra(v):
    return smax(v * share / direct, v * (1 - share) / (0.5 * direct))

  # The sockets' NICs: line rate and slots (no accelerator host links).
  nic = NIC_LINE_SLOT
  ids_intra, ids_inter = ids_terms(4, 2, intra, CPU_KERNEL, nic)
  close(
    bd['alltoall_intra'], ids_intra + 2 * (intra(send * 1 / 4) + CPU_KERNEL)
  )
  lat = a2a_latency(2, 2)
  close(bd['alltoall_inter'], ids_inter + 2 * (send * 2 / 4 * 2 / nic + lat))
  grad = DENSE_PARAMS * 4
  intra_ar, inter_ar = allreduce_by_hand(grad, 2, 2, direct, nic, CPU_KERNEL)
  close(bd['allreduce_intra'], intra_ar)
  close(bd['allreduce_inter'], inter_ar)
  # Kernel gaps at the socket's per-op cost; host and device add.
  close(bd['overhead'], TINY_GAPS * CPU_KERNEL)
  close(bd['host'], STEP_FLOOR)
  # Memory: no HBM; each node holds half of the tables and one dense
  # model with activations per socket.
  assert r['required']['hbm'] == 0.0 and r['available']['hbm'] == 0.0
  dense = DENSE_PARAMS * 8 + b * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  close(r['required']['ddr'], sum(ROWS) * 64 / 2 + 2 * dense)
  close(r['available']['ddr'], 2 * DDR_CAP)
  # No accelerators or fabric are bought: 5000 + 2 x 1500 + NICs 2500;
  # the network as budget_test's: one 64-port switch (64 x 12.5 GB/s x
  # 100 USD per GB/s, 1 W per GB/s) and 4 links (12.5 GB/s x 200 USD, 2 W
  # per GB/s each).
  net_usd, net_w = 64 * 12.5 * 100 + 4 * 12.5 * 200, 64 * 12.5 + 4 * 25
  close(r['capex'], 2 * (5000 + 2 * 1500 + 2500) + net_usd)
  # Power at the wall (terms.wall_power: x 1.15 fans / 0.94 supplies) but
  # the NICs (at their rating).
  close(r['power'], 2 * ((500 + 2 * 210) * 1.15 / 0.94 + 25) + net_w)


def test_cpu_trainer_replicates_data_parallel_tables_on_every_node():
  p = tiny_platform(trainer='cpu', nic_attach='socket')
  plan = make_plan(sharding=('data_parallel', 'table_wise', 'table_wise'))
  r = run(p, tiny_workload(), plan)
  dense = DENSE_PARAMS * 8 + 2048 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  # Per node: 2 replicas of table 0, half of tables 1 and 2, 2 dense models.
  want = 2 * 1000 * 64 + (2000 + 4000) * 64 / 2 + 2 * dense
  close(r['required']['ddr'], want)
