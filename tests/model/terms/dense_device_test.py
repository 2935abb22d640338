"""Known answers, worked by hand, for the model: the bottom MLP on one device.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import pytest

from codesign.model import terms as ct
from tests.model.fixtures import (
  ACC_EFF,
  ACC_GATHER,
  ACC_HALF,
  ACC_KERNEL,
  ACT_ELEMS,
  BOTTOM_PARAMS,
  BOTTOM_WIDTHS,
  DENSE_PARAMS,
  DIM,
  HBM_BW,
  LINK,
  LINK_LAT,
  NIC,
  PENALTY,
  POOL,
  TOP_WIDTHS,
  B,
  a2a_latency,
  allreduce_by_hand,
  arrays,
  close,
  hand_busiest,
  hand_dense,
  hand_ew,
  ids_terms,
  make_plan,
  plan_static,
  run,
  sigmoid,
  smax,
  switch,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)

# ---- the bottom MLP on one device ------------------------------------------


def one_device_send(send, ranks):
  """Bytes per sample x B a rank sends in the pooled all-to-all with the
  bottom MLP on rank 0: rank 0 also sends its 16-wide fp32 output for
  every sample, besides its own tables' `send` unless it is dedicated (a
  logistic of slope 8 around R = 4.5); the slower sender sets the time."""
  dedicated = sigmoid(8 * (ranks - 4.5))
  rank0 = B * 16 * 4 + (1 - dedicated) * send
  return smax(send, rank0)


@pytest.mark.parametrize('nodes, accels', [(2.0, 4.0), (1.0, 4.0), (1.0, 2.0)])
def test_bottom_mlp_on_one_device(nodes, accels):
  # NVIDIA's DLRM: rank 0 runs the bottom MLP on the whole batch; above 4
  # ranks it holds no tables (a logistic of slope 8 around R = 4.5 stands
  # for R > 4), so the tables spread over R - that ranks; the bottom MLP's
  # parameters live on rank 0 only and are not allreduced.
  ranks = nodes * accels
  a = accels
  b = B / ranks
  s = tiny_stack(bottom_mlp='one_device')
  p = tiny_platform(nodes=nodes, accels=accels)
  w = tiny_workload()
  bd = run(p, w, make_plan(sharding='row_wise'), s)['breakdown']
  table_ranks = ranks - sigmoid(8 * (ranks - 4.5))
  if ranks == 8:
    close(table_ranks, 7.0, rel=1e-7)
  # Dense: the bottom MLP on B samples, the rest on b.
  d = hand_dense(b, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL, bottom_b=B)
  ew_bottom = hand_ew(B, 'epilogue', BOTTOM_WIDTHS, 4, HBM_BW, ACC_KERNEL)
  ew_top = hand_ew(b, 'epilogue', TOP_WIDTHS, 4, HBM_BW, ACC_KERNEL)
  close(bd['dense_bottom_mlp'], sum(d['bottom']) + ew_bottom)
  close(bd['dense_top_mlp'], sum(d['top']) + ew_top)
  close(bd['dense_interaction'], sum(d['inter']))
  # Row-wise gathers spread over the table ranks.
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], B * 7 * 64 / table_ranks / rate)
  # The pooled all-to-all: each table rank sends all B partial sums
  # (row-wise), rank 0 also the bottom output; (a - 1)/R of it inside the
  # node, (R - a)/R across.
  send = one_device_send(B * 3 * DIM * 4, ranks)
  ids_intra, ids_inter = ids_terms(ranks, a, switch, LINK_LAT, NIC)
  close(
    bd['alltoall_intra'],
    ids_intra + 2 * (send * (a - 1) / ranks / LINK + (a - 1) * LINK_LAT),
  )
  inter = send * (ranks - a) / ranks * a / NIC + a2a_latency(nodes, a)
  close(bd['alltoall_inter'], ids_inter + 2 * inter)
  # The allreduce leaves out the 184 bottom-MLP parameters.
  grad = (DENSE_PARAMS - BOTTOM_PARAMS) * 4
  intra, _ = allreduce_by_hand(grad, a, nodes, LINK, NIC, LINK_LAT)
  close(bd['allreduce_intra'], intra)
  # Table-wise: busiest_rank over the table ranks (on 2 ranks one of them
  # holds 2 of the 3 tables: at least 2 x the smallest).
  bd = run(p, w, make_plan(), s)['breakdown']
  loads = [B * pool * 64 for pool in POOL]
  busiest = hand_busiest(loads, table_ranks)
  close(bd['embedding_gather_hbm'], busiest / rate)
  send = one_device_send(B * 3 * DIM * 4 / table_ranks, ranks)
  close(
    bd['alltoall_intra'],
    ids_intra + 2 * (send * (a - 1) / ranks / LINK + (a - 1) * LINK_LAT),
  )


def test_one_device_on_one_rank_holds_every_table():
  # R - sigmoid(8 (1 - 4.5)): 1 - 7e-13 table ranks, no floor above it.
  p = tiny_platform(nodes=1.0, accels=1.0)
  st = ct.setup(arrays(p), tiny_workload(), tiny_stack(bottom_mlp='one_device'))
  close(float(st.table_ranks), 1.0 - sigmoid(-28.0))
  close(float(st.table_ranks), 1.0, rel=1e-12)
  assert st.one_device
  close(float(st.dedicated), sigmoid(-28.0))
  # A CPU trainer has no device 0 for the bottom MLP: data-parallel.
  cpu = tiny_platform(trainer='cpu')
  st = ct.setup(
    arrays(cpu), tiny_workload(), tiny_stack(bottom_mlp='one_device')
  )
  assert not st.one_device
  assert float(st.table_ranks) == 4.0 and float(st.dedicated) == 0.0


def test_allreduce_calls_follow_the_allreduced_bytes():
  # Bottom MLP 1000-1000-16 on 1000 dense features: 1,017,016 parameters,
  # 4.07 MB; the rest 377 - 184 parameters. One bucket of 1 MB holds what
  # is allreduced under one_device; data-parallel it takes 5.
  w = tiny_workload(num_dense=1000, bottom_mlp=(1000, 16))
  plan = make_plan()
  s = tiny_stack(bottom_mlp='one_device', allreduce_bucket_bytes=1e6)
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  nbytes = float(ct.allreduce_bytes(w, s, t, plan, 1.0))
  close(nbytes, (377 - 184) * 4)
  assert ct.allreduce_calls(w, s, t, plan) == 1
  s = tiny_stack(allreduce_bucket_bytes=1e6)
  close(float(ct.allreduce_bytes(w, s, t, plan, 1.0)), (1_017_016 + 193) * 4)
  assert ct.allreduce_calls(w, s, t, plan) == 5


def test_one_device_rank_holds_the_bottom_activations_of_the_batch():
  # Every rank is charged the bottom-MLP activations of the B samples rank
  # 0 runs: (4 + 8) + (8 + 16) elements of 4 B per sample, for B - b more
  # samples than data-parallel; the rest of the model as before.
  w = tiny_workload()
  p = arrays(tiny_platform())
  dp = float(ct.dense_hbm_bytes(w, p, tiny_stack()))
  one = float(ct.dense_hbm_bytes(w, p, tiny_stack(bottom_mlp='one_device')))
  close(one - dp, (B - 1024) * 36 * 4)
  close(dp, DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4))


@pytest.mark.parametrize('accels', [4.0, 8.0])
def test_one_device_sends_the_bottom_output(accels):
  # One node, row-wise. Rank 0 sends B x 16 x 4 B of bottom output besides
  # its own partial sums, B x 192 B, unless it holds no tables: on 4 ranks
  # it holds them (1 - sigmoid(-4) = 0.98), on 8 it does not (sigmoid(28)).
  p, w, plan = (
    tiny_platform(nodes=1.0, accels=accels),
    tiny_workload(),
    make_plan(sharding='row_wise'),
  )
  dp = run(p, w, plan)['breakdown']
  one = run(p, w, plan, tiny_stack(bottom_mlp='one_device'))['breakdown']
  dedicated = sigmoid(8 * (accels - 4.5))
  send = B * 192
  rank0 = B * 64 + (1 - dedicated) * send
  close(one_device_send(send, accels), smax(send, rank0))
  # Only the pooled exchange changes (each way), (A - 1)/A of it inside.
  extra = smax(send, rank0) - send
  close(
    one['alltoall_intra'] - dp['alltoall_intra'],
    2 * extra * (accels - 1) / accels / LINK,
    rel=1e-9,
  )
  if accels == 4.0:  # rank 0 sends 64 + 188.5 B per sample: it is slower
    assert extra > 0.99 * B * 64
  else:  # 64 B per sample against the others' 192
    assert extra < 0.01 * B * 64
