"""Known answers, worked by hand, for the model: the host side.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import math

from codesign.model import terms as ct
from tests.model.fixtures import (
  ACC_GATHER,
  ACT_ELEMS,
  DENSE_PARAMS,
  DIM,
  EAGER,
  HBM_BW,
  LINK,
  LINK_LAT,
  NIC,
  OP_HOST,
  PENALTY,
  POOL,
  ROWS,
  STEP_FLOOR,
  B,
  allreduce_by_hand,
  close,
  counts,
  dp_workload,
  ids_terms,
  make_plan,
  run,
  smax,
  switch,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)


def host_ops(s, w=None, plan=None):
  return sum(counts(s, w, plan).host_ops.values())


def test_kernel_counts():
  # The tiny stack: unfused dot 6, fused embeddings 2, fused optimizer 2,
  # loss 4, data copies 3 = 17 device kernels beyond the GEMMs, of which
  # 2 (the interaction's own) + 1 (the optimizer's) are charged by their
  # terms: 14 gaps. Collectives: 1 id exchange, 2 pooled, 1 allreduce.
  c = counts(tiny_stack())
  assert (c.device_kernels, c.collectives) == (14.0, 4.0)
  assert set(c.host_ops) == set(ct.HOST_GROUPS)
  assert sum(c.host_ops.values()) == 0.0  # one graph: no host operators
  # No graphs: every kernel and collective is an eager operator, 35.
  assert counts(tiny_stack(graph_scope='none')).host_ops == EAGER
  # Forward and backward in a graph: the optimizer (2) and the data
  # copies (3) stay eager.
  c = counts(tiny_stack(graph_scope='forward_backward'))
  assert c.host_ops == {
    **dict.fromkeys(EAGER, 0.0),
    'optimizer': 2.0,
    'other': 3.0,
  }
  # TorchRec-like: nn.Linear + ReLU (3 kernels x 4 layers, charged by the
  # MLP term), 3 input-distribution calls, UVM cache lookup and insert (2),
  # a per-tensor SGD loop (8), no graphs.
  s = tiny_stack(
    graph_scope='none',
    mlp_fusion='none',
    input_dist_collectives=3,
    uvm_caching=True,
    fused_dense_optimizer=False,
  )
  c = counts(s)
  assert (c.device_kernels, c.collectives) == (6 + 4 + 8 + 4 + 3 - 3, 6.0)
  assert c.host_ops == {
    'bottom_mlp': 5.0 + 3 * 2,
    'interaction': 9.0,
    'top_mlp': 6.0 + 3 * 2,
    'optimizer': 8.0,
    'embedding': 4.0,
    'collectives': 6.0,
    'other': 7.0,
  }
  # Per-table embeddings: 5 kernels x 3 tables instead of 2.
  assert counts(tiny_stack(embedding_kernel='per_table')).device_kernels == 27.0
  # Mixed precision: the loss scaler (3), and with nn.Linear autocast casts
  # of each weight and bias (8); a pooled cast, 1 each way.
  w16 = tiny_workload(dense_precision='bf16')
  assert counts(tiny_stack(), w16).device_kernels == 17.0
  s = tiny_stack(mlp_fusion='none', pooled_cast=True)
  assert counts(s, w16).device_kernels == 14 + 3 + 8 + 2
  # Adagrad per tensor: 3 kernels x 8 tensors; Adam: 4 x 8.
  s = tiny_stack(fused_dense_optimizer=False)
  adagrad, adam = (
    tiny_workload(optimizer='adagrad'),
    tiny_workload(optimizer='adam'),
  )
  assert counts(s, adagrad).device_kernels == 14 - 2 + 24
  assert counts(s, adam).device_kernels == 14 - 2 + 32
  # Fused interaction: 1 kernel each way, both charged by its term.
  assert counts(tiny_stack(fused_interaction=True)).device_kernels == 10.0
  # Every table data-parallel: no id exchange, no pooled all-to-all.
  plan = make_plan(sharding='data_parallel')
  assert counts(tiny_stack(), plan=plan).collectives == 1.0
  # Several allreduce buckets count as several collectives.
  w = dp_workload()
  plan = make_plan(sharding=('data_parallel', 'table_wise', 'table_wise'))
  s = tiny_stack(allreduce_bucket_bytes=1e6)
  assert counts(s, w, plan).collectives == 3 + 7


def test_kernel_counts_fused_interaction_runs_no_gemm():
  # Eager: the fused dot interaction is 1 kernel each way, no batched GEMM
  # (unfused: the GEMM 1 + 2 and 6 cat/index kernels).
  s = tiny_stack(graph_scope='none', fused_interaction=True)
  assert counts(s).host_ops['interaction'] == 2.0
  assert counts(tiny_stack(graph_scope='none')).host_ops['interaction'] == 9.0


def test_kernel_counts_dcnv2_tensors():
  w = tiny_workload(interaction='dcnv2', dcn_layers=2, dcn_rank=3)
  s = tiny_stack(fused_dense_optimizer=False)  # SGD: 1 kernel per tensor
  # cross layers 5 x 2 kernels, embeddings 2, optimizer 8 + 3 x 2 tensors,
  # loss 4, data 3; less 2 + 1 charged by their terms.
  assert counts(s, w).device_kernels == 10 + 2 + 14 + 4 + 3 - 3


def test_kernel_counts_forward_backward_graph_captures_the_casts():
  w16 = tiny_workload(dense_precision='bf16')
  s = tiny_stack(graph_scope='forward_backward', pooled_cast=True)
  # fused optimizer 2 + loss scaler 3 + data copies 3; the pooled cast and
  # nn.Linear's autocast casts are in the captured forward.
  assert host_ops(s, w16) == 8.0
  s = tiny_stack(
    graph_scope='forward_backward', pooled_cast=True, mlp_fusion='none'
  )
  assert host_ops(s, w16) == 8.0
  # fp32: no loss scaler.
  assert host_ops(s) == 5.0


def test_host_time_and_compose():
  # No graphs: the 100 us floor plus 35 operators x 10 us = 450 us.
  p, w, plan = tiny_platform(), tiny_workload(), make_plan()
  s = tiny_stack(graph_scope='none', host_overlap=0.0)
  host = STEP_FLOOR + 35 * OP_HOST
  close(float(ct.host_time(s, counts(s), ct.setup(p, w, s))), host)
  r = run(p, w, plan, s)
  bd = r['breakdown']
  close(bd['host'], host)
  # The device time does not depend on the graphs or the host: under one
  # graph with no floor, asynchronous, the step is smax(device, 0).
  device = run(p, w, plan, tiny_stack(step_floor=0.0))['step']
  # Device seconds of each group of work, from the breakdown (all in HBM).
  dev = {
    'bottom_mlp': bd['dense_bottom_mlp'],
    'interaction': bd['dense_interaction'],
    'top_mlp': bd['dense_top_mlp'],
    'optimizer': bd['dense_optimizer'],
    'embedding': bd['embedding_gather_hbm'] + bd['embedding_update_hbm'],
    'other': bd['overhead'],
  }
  # host_overlap 0, lockstep: after the floor the compute groups run one
  # after another, each the longer of its device time and its operators'
  # host time; the collectives (own stream) add only their launches; the
  # step is at least the device time.
  serial = STEP_FLOOR + EAGER['collectives'] * OP_HOST
  for k, d in dev.items():
    serial += smax(d, EAGER[k] * OP_HOST)
  lockstep = smax(device, serial)
  close(r['step'], lockstep)
  # host_overlap 1, asynchronous: smax(device, host); 0.6 blends.
  r1 = run(p, w, plan, tiny_stack(graph_scope='none', host_overlap=1.0))
  close(r1['step'], smax(device, host))
  r6 = run(p, w, plan, tiny_stack(graph_scope='none', host_overlap=0.6))
  close(r6['step'], 0.6 * smax(device, host) + 0.4 * lockstep)
  close(r6['throughput'], B / r6['step'])
  # One graph, lockstep: no operators, the floor and the compute groups'
  # device times in turn.
  r0 = run(p, w, plan, tiny_stack(host_overlap=0.0))
  close(r0['step'], smax(device, STEP_FLOOR + sum(dev.values())))
  # A CPU trainer dispatches and computes on the same cores: they add,
  # whatever the overlap.
  cpu = tiny_platform(trainer='cpu')
  c0 = run(cpu, w, plan, s)
  c1 = run(cpu, w, plan, tiny_stack(graph_scope='none', host_overlap=1.0))
  cpu_device = run(cpu, w, plan, tiny_stack(step_floor=0.0))['step']
  close(c0['step'], cpu_device + host)
  close(c1['step'], c0['step'])
  close(c1['breakdown']['host'], host)


def test_ceiling_is_the_host_alone():
  # The stack's hardware-independent ceiling: the step with infinitely
  # fast devices and links is the host's work, 100 us + 35 x 10 us, on
  # either trainer and at any overlap.
  from codesign.model import cost_model
  from codesign.spec import hardware

  p, w, plan = tiny_platform(), tiny_workload(), make_plan()
  host = STEP_FLOOR + 35 * OP_HOST
  for s in (
    tiny_stack(graph_scope='none', host_overlap=0.0),
    tiny_stack(graph_scope='none', host_overlap=0.6),
  ):
    for plat in (p, tiny_platform(trainer='cpu')):
      r = cost_model.evaluate(hardware.as_arrays(plat), w, plan, s)
      close(float(r.ceiling_step_time), host)
      close(float(r.ceiling_throughput), B / host)
      assert float(r.throughput) <= float(r.ceiling_throughput)
  # compose at zero device time is that ceiling.
  s = tiny_stack(graph_scope='none', host_overlap=0.6)
  zero = dict.fromkeys(ct.HOST_GROUPS, 0.0)
  st = ct.setup(p, w, s)
  close(float(ct.compose(0.0, zero, s, counts(s), st)), host, rel=1e-9)
  # One graph: only the 100 us floor.
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, tiny_stack())
  close(float(r.ceiling_step_time), STEP_FLOOR)


def test_a_batch_loaded_on_the_training_thread_costs_per_sample():
  # TorchRec loads each rank's batch on its training thread: 2 us per
  # sample of the rank's batch (8,192 over the tiny platform's ranks)
  # adds to the floor, in the host time, both limits of the step and the
  # ceiling; a stack that loads elsewhere (0, the default) pays nothing.
  from codesign.model import cost_model
  from codesign.spec import hardware

  p, w, plan = tiny_platform(), tiny_workload(), make_plan()
  st = ct.setup(p, w, tiny_stack())
  local = B / float(st.ranks)
  assert float(st.local) == local
  base = tiny_stack(graph_scope='none', host_overlap=0.0)
  loads = tiny_stack(
    graph_scope='none', host_overlap=0.0, sample_host_time=2e-6
  )
  assert base.sample_host_time == 0.0
  extra = 2e-6 * local
  close(float(ct.step_host_floor(loads, st)), STEP_FLOOR + extra)
  host = STEP_FLOOR + 35 * OP_HOST
  close(float(ct.host_time(loads, counts(loads), st)), host + extra)
  r0, r1 = run(p, w, plan, base), run(p, w, plan, loads)
  close(r1['breakdown']['host'], host + extra)
  # Host-bound in lockstep: the floor precedes the groups, so the step
  # grows by the loading whole (but for the smooth maximum with the
  # device time, 2e-4 of it here).
  assert r0['step'] > r0['breakdown']['host'] * 0.99
  close(r1['step'] - r0['step'], extra, rel=1e-3)
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, loads)
  close(float(r.ceiling_step_time), host + extra)
  close(float(r.ceiling_loading_time), extra)


def test_ceiling_share_and_sentence():
  from codesign.model import report

  c = {'throughput_samples_per_s': 1e6, 'step_time_s': 0.01}
  binds = report.ceiling_sentence({**c, 'share': 0.95, 'binds': True})
  assert binds.endswith(
    '95% of it: host-bound: more hardware does not help; the stack decides'
  )
  # Loading each rank's batch (TorchRec) is the part more ranks split:
  # named when it is over 5% of the ceiling's step.
  loads = report.ceiling_sentence(
    {**c, 'share': 0.95, 'binds': True, 'loading_s': 0.004}
  )
  assert loads.endswith(
    'host-bound: faster devices do not help, more ranks split the 4.00 ms '
    "of loading each rank's batch; the stack decides"
  )
  small = {**c, 'share': 0.95, 'binds': True, 'loading_s': 0.0004}
  assert report.ceiling_sentence(small) == binds
  free = report.ceiling_sentence({**c, 'share': 0.5, 'binds': False})
  assert 'does not bind' in free and '1,000,000 samples/s' in free
  assert report.CEILING_BINDS == 0.9


def test_sparse_dist_pipeline_takes_the_ids_off_the_critical_path():
  # TorchRec's TrainPipelineSparseDist distributes the next batch's ids on
  # a stream of its own: the step's device time is smax(rest, ids) instead
  # of rest + ids (the tiny plan overlaps nothing, so without a pipeline
  # the ids add to the step). Graph and no floor: the step is the device.
  p, w, plan = tiny_platform(), tiny_workload(), make_plan()
  ids = sum(ids_terms(8, 4, switch, LINK_LAT, NIC))
  plain = run(p, w, plan, tiny_stack(step_floor=0.0))['step']
  piped = run(
    p, w, plan, tiny_stack(step_floor=0.0, train_pipeline='sparse_dist')
  )['step']
  close(piped, smax(plain - ids, ids), rel=1e-9)
  assert piped < plain
  # The terms alone.
  s = tiny_stack(train_pipeline='sparse_dist')
  assert ct.ids_on_critical_path(s, 3.0) == 0.0
  assert ct.ids_on_critical_path(tiny_stack(), 3.0) == 3.0
  close(float(ct.with_pipelined_ids(s, 5.0, 3.0)), smax(5.0, 3.0))
  assert ct.with_pipelined_ids(tiny_stack(), 5.0, 3.0) == 5.0


def test_row_scale():
  # row_scale multiplies every table's rows: memory (once), the distinct
  # rows of the updates and the replicated tables' dense traffic, but not
  # the lookups. Row-wise W0 with table 0 data-parallel, fused updates,
  # rows x 3.
  plan = make_plan(sharding=('data_parallel', 'row_wise', 'row_wise'))
  s = tiny_stack(update_path='fused')
  r = run(tiny_platform(), tiny_workload(), plan, s, row_scale=3.0)
  bd = r['breakdown']
  rows = [3 * x for x in ROWS]
  dense = DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  close(
    r['required']['hbm'], (rows[1] + rows[2]) * 64 / 8 + rows[0] * 64 + dense
  )
  # Gathers do not change.
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], B * 7 * 64 / 8 / rate)
  # Update: sort, bags' gradients (sharded tables only) and distinct rows
  # of every table, spread; plus the replica's read and write.
  moved = 0.0
  for i, (n_rows, pool) in enumerate(zip(rows, POOL)):
    n = B * pool
    bags = 0.0 if i == 0 else B
    moved += 32 * n + bags * 64 + n_rows * (1 - math.exp(-n / n_rows)) * 128
  update = (moved / 8 * PENALTY + 2 * rows[0] * 64) / (HBM_BW * ACC_GATHER)
  close(bd['embedding_update_hbm'], update)
  # Allreduce: the replicated table's 3000 x 16 gradients.
  grad = (DENSE_PARAMS + rows[0] * DIM) * 4
  intra_ar, _ = allreduce_by_hand(grad, 4, 2, LINK, NIC, LINK_LAT)
  close(bd['allreduce_intra'], intra_ar)
