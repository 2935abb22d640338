"""The host side of the step: the kernels, eager operators and
collectives one step runs, the host's time to dispatch them, and how
host and device time combine (asynchronous or lockstep)."""

from typing import NamedTuple

import numpy as np

from codesign.core.smooth import smooth_max
from codesign.model.terms.collectives import allreduce_calls
from codesign.model.terms.dense import MLP_KERNELS, dcn_kernels, gemm_table
from codesign.model.terms.embedding import pooled_cast_bytes
from codesign.spec import workload as wl
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

KERNELS_LOSS = 4  # BCE-with-logits and sigmoid, forward and backward
KERNELS_DATA = 3  # host-to-device copies of dense, sparse, labels
KERNELS_AMP = 3  # loss scale, unscale/inf check, scale update
OPTIMIZER_KERNELS_PER_TENSOR = {
  'sgd': 1,
  'adagrad': 3,
  'rowwise_adagrad': 3,
  'adam': 4,
}


# Groups of work whose host operators are set against their device time
# in `compose` (keys of `Counts.host_ops`).
HOST_GROUPS = (
  'bottom_mlp',
  'interaction',
  'top_mlp',
  'optimizer',
  'embedding',
  'collectives',
  'other',
)


class Counts(NamedTuple):
  """Per step and rank (static Python numbers).

  device_kernels: kernels launched beyond those the dense and embedding
  terms charge themselves (their gaps go into `overhead`);
  host_ops: group (`HOST_GROUPS`) -> operators the host dispatches
  eagerly for that work (outside CUDA graphs);
  collectives: collective calls.
  """

  device_kernels: float
  host_ops: dict
  collectives: float


def kernel_counts(
  w: wl.Workload, s: Stack, t: dict, plan: Plan, payload: int
) -> Counts:
  """How many kernels, eager operators and collectives one step runs.

  Counting rules (per rank and step), from the implementations:
  - GEMMs: one forward, one or two backward per layer (as `dense_times`);
    a dot interaction that is not fused runs one batched GEMM forward and
    two backward plus 6 elementwise kernels (cat, index, cat; and their
    backward); fused, one kernel each way (both charged by the terms).
  - MLP layers: `MLP_KERNELS` elementwise kernels each (charged by
    `mlp_elementwise`); DCN-v2 cross layers `dcn_kernels`.
  - Embeddings: one fused kernel forward and one backward with the
    optimizer (TBE, HugeCTR, NVIDIA's fused gather); per table, the
    stack's `per_table_kernels` (see `codesign.spec.stack_presets`).
  - Dense optimizer: 2 kernels fused; otherwise
    `OPTIMIZER_KERNELS_PER_TENSOR` per weight and bias tensor.
  - Loss 4, data copies 3, and under mixed precision the loss scaler 3
    plus, without fused MLPs, a cast of every weight and bias (autocast);
    a separate cast of the pooled embeddings, 1 each way.
  - Collectives: the id distribution (`input_dist_collectives`), the
    pooled all-to-all forward and backward, one allreduce per bucket.
  Host operators: every kernel and collective of the work outside CUDA
  graphs, by group: all of it without graphs; the optimizer, the loss
  scaler and the data copies with forward and backward captured
  (`graph_scope='forward_backward'`, NVIDIA's DLRM); none when the whole
  step is one graph (`step`, HugeCTR).
  """
  dense = _dense_kernels(w, s)
  emb = _embedding_kernels(w, s)
  tensors = _dense_tensors(w)
  opt = _optimizer_kernels(w, s, tensors)
  amp = _precision_kernels(w, s, t, payload, tensors)
  misc = KERNELS_LOSS + KERNELS_DATA
  collectives = _collective_calls(w, s, t, plan)
  every = {
    **dense,
    'optimizer': opt,
    'embedding': emb,
    'collectives': collectives,
    'other': amp + misc,
  }
  inter = _interaction_kernels(w, s)
  # Gaps of the GEMMs, the MLP elementwise passes, the interaction's own
  # kernel each way and the dense optimizer are charged by their terms.
  return Counts(
    device_kernels=inter - 2.0 + emb + opt - 1.0 + amp + misc,
    host_ops=_host_ops(w, s, every),
    collectives=collectives,
  )


def _gemm_kernels(w: wl.Workload, s: Stack) -> dict:
  """GEMM kernels per step of the bottom MLP, the interaction (none when
  a fused dot kernel replaces its batched GEMMs) and the top MLP."""
  g = gemm_table(w)
  per_gemm = 1.0 + g['bwd_kernels']
  gemm = {
    k: float(np.sum(per_gemm * (g['component'] == i)))
    for i, k in enumerate(('bottom_mlp', 'interaction', 'top_mlp'))
  }
  if w.interaction == 'dot' and s.fused_interaction:
    gemm['interaction'] = 0.0  # one kernel each way replaces the GEMMs
  return gemm


def _dense_kernels(w: wl.Workload, s: Stack) -> dict:
  """Kernels per step of the bottom MLP, the interaction and the top MLP:
  their GEMMs, the MLP layers' elementwise kernels and the interaction's
  own."""
  gemm = _gemm_kernels(w, s)
  ew = float(MLP_KERNELS[s.mlp_fusion])
  return {
    'bottom_mlp': gemm['bottom_mlp'] + ew * len(w.bottom_mlp),
    'interaction': gemm['interaction'] + _interaction_kernels(w, s),
    'top_mlp': gemm['top_mlp'] + ew * len(w.top_mlp),
  }


def _interaction_kernels(w: wl.Workload, s: Stack) -> float:
  """The interaction's own kernels per step: 2 fused, 6 unfused for a
  dot; for DCN-v2 the cross layers' elementwise kernels (`dcn_kernels`:
  5 a layer eager, 2 a layer and 2 a step fused)."""
  if w.interaction == 'dot':
    return 2.0 if s.fused_interaction else 6.0
  if w.interaction == 'dcnv2':
    return float(sum(dcn_kernels(w, s)))
  return 2.0


def _embedding_kernels(w: wl.Workload, s: Stack) -> float:
  """Embedding kernels per step: a fused kernel each way, or the stack's
  `per_table_kernels` per table; 2 more with a UVM cache; the hybrid
  embedding's own (`Stack.hybrid_kernels`)."""
  if s.embedding_kernel == 'fused':
    emb = 2.0
  else:
    emb = float(s.per_table_kernels * w.num_tables)
  if s.uvm_caching:
    emb += 2.0  # cache lookup and insert
  if s.planner == 'hybrid':
    emb += float(s.hybrid_kernels)
  return emb


def _dense_tensors(w: wl.Workload) -> int:
  """Dense parameter tensors: a weight and a bias per MLP layer; U, V and
  a bias per cross layer."""
  layers = len(w.bottom_mlp) + len(w.top_mlp)
  return 2 * layers + (3 * w.dcn_layers if w.interaction == 'dcnv2' else 0)


def _optimizer_kernels(w: wl.Workload, s: Stack, tensors: int) -> float:
  """Dense optimizer kernels per step: 2 fused, else
  `OPTIMIZER_KERNELS_PER_TENSOR` per tensor."""
  if s.fused_dense_optimizer:
    return 2.0
  return float(OPTIMIZER_KERNELS_PER_TENSOR[w.optimizer] * tensors)


def _precision_kernels(w: wl.Workload, s: Stack, t, payload, tensors):
  """Mixed-precision kernels per step: the loss scaler's, a cast of every
  tensor without fused MLPs (autocast), and the pooled embeddings' cast,
  one each way."""
  mixed = w.dense_precision in ('bf16', 'fp16')
  casts = tensors if s.mlp_fusion == 'none' else 0.0  # autocast
  amp = (KERNELS_AMP + casts) if mixed else 0.0
  if pooled_cast_bytes(s, t, None, payload) is not None:
    amp += 2.0
  return amp


def _collective_calls(w: wl.Workload, s: Stack, t: dict, plan: Plan) -> float:
  """Collective calls per step: the id distribution and the pooled
  all-to-all each way where tables are sharded, one allreduce per
  bucket."""
  sharded = bool(np.any(t['data_parallel'] < 1.0))
  return float(
    (s.input_dist_collectives + 2 if sharded else 0)
    + allreduce_calls(w, s, t, plan)
  )


def _host_ops(w: wl.Workload, s: Stack, every: dict) -> dict:
  """Host operators per group (`HOST_GROUPS`) given every group's kernels
  and collectives `every`: all of them without graphs; the optimizer, the
  loss scaler and the data copies with forward and backward captured;
  none when the whole step is one graph."""
  if s.graph_scope == 'none':
    return every
  if s.graph_scope == 'forward_backward':
    # The optimizer, the loss scaler's update and the data copies stay
    # outside the graph (NVIDIA's DLRM main.py).
    mixed = w.dense_precision in ('bf16', 'fp16')
    scaler = KERNELS_AMP if mixed else 0.0
    zero = dict.fromkeys(HOST_GROUPS, 0.0)
    return {
      **zero,
      'optimizer': every['optimizer'],
      'other': scaler + KERNELS_DATA,
    }
  return dict.fromkeys(HOST_GROUPS, 0.0)


def batch_loading_time(s: Stack, st):
  """Host seconds per step loading the rank's batch on the training
  thread: `sample_host_time` x the local batch `st.local` (0 for a stack
  that loads elsewhere), at the host's speed (`st.host_speed`). More
  ranks split it."""
  return s.sample_host_time * st.local / st.host_speed


def step_host_floor(s: Stack, st):
  """Host seconds per step outside the operators: the stack's floor at
  the host's speed (`st.host_speed`) plus the loading of the rank's
  batch (`batch_loading_time`)."""
  return s.step_floor / st.host_speed + batch_loading_time(s, st)


def op_time(s: Stack, st):
  """Host seconds per eagerly dispatched operator: the stack's
  `op_host_time` (on the reference CPU) at the host's speed."""
  return s.op_host_time / st.host_speed


def host_time(s: Stack, counts: Counts, st):
  """Host seconds per step: the floor (with the loading of the rank's
  batch) plus every eager operator, at the host's speed. Also the
  stack's ceiling: `compose` at zero device time is the host's work
  alone, on either trainer, so 1 / this bounds the steps per second any
  hardware with these ranks and this host CPU reaches with this stack
  (more ranks split the loading, nothing else of it)."""
  ops = sum(counts.host_ops.values())
  return step_host_floor(s, st) + ops * op_time(s, st)


def ids_on_critical_path(s: Stack, ids):
  """The id distribution's seconds (`ids`: the id all-to-alls) that the
  step's lookups wait for. Without a train pipeline the step distributes
  its own ids before its lookups: all of them. TorchRec's
  TrainPipelineSparseDist (`train_pipeline='sparse_dist'`) runs the next
  batch's input_dist on its own CUDA stream while this batch computes
  (pytorch/torchrec train_pipeline.py: "overlaps device transfer, and
  ShardedModule.input_dist() with forward and backward"): none."""
  return 0.0 if s.train_pipeline == 'sparse_dist' else ids


def with_pipelined_ids(s: Stack, device, ids):
  """Device seconds of the step with the pipelined id distribution: on
  its own stream, one batch ahead, it costs time only where it outlasts
  the rest of the step (smax(device, ids)); unchanged without a
  pipeline (the ids are on the critical path, `ids_on_critical_path`)."""
  if s.train_pipeline == 'sparse_dist':
    return smooth_max(device, ids)
  return device


def compose(device, device_by_group: dict, s: Stack, counts: Counts, st):
  """Step seconds from the device time and the host's work.

  `device_by_group` maps each of `HOST_GROUPS` to the device seconds of
  that work. The host dispatches each group's operators
  (`counts.host_ops` x `op_time`) and spends its floor outside them
  (`step_host_floor`), all at the host's speed. Two limits bound the
  step:
  - asynchronous: the host queues work far enough ahead that the two
    overlap completely: smax(device, host);
  - lockstep: the device waits for each operator's launch, so the groups
    run one after another, each taking the longer of its device time and
    its host time, after the floor; collectives run on their own stream,
    so only their launches count there: smax(device, floor + sum over
    compute groups of smax(device_g, host_g) + host_collectives).
  `host_overlap` blends them (1: asynchronous). Both limits grow with
  every device and host time, so the step does. On a CPU trainer the
  same cores dispatch and compute, so host and device add.
  """
  per_op = op_time(s, st)
  host_g = {k: counts.host_ops[k] * per_op for k in HOST_GROUPS}
  floor = step_host_floor(s, st)
  host = floor + sum(host_g.values())
  if st.cpu_trainer:
    return device + host
  serial = floor + host_g['collectives']
  for k in HOST_GROUPS:
    if k == 'collectives':
      continue
    if counts.host_ops[k] > 0:  # static
      serial = serial + smooth_max(device_by_group[k], host_g[k])
    else:
      serial = serial + device_by_group[k]
  lockstep = smooth_max(device, serial)
  o = s.host_overlap
  return o * smooth_max(device, host) + (1.0 - o) * lockstep
