"""Named software stacks, every number with its source.

Each preset's static choices come from reading the stack's own code or
documentation (sources per field in `sources`). Its continuous fields
start from *priors*: values with a public source or a stated reason
(`PRIORS`). `experiments.calibrate` fits the leaves that the published
measurements (`data/calibration_cases.json`) can tell apart, judged
leave-one-case-out, and writes them to `data/stack_fit.json`; `get()`
applies that file, so a user gets the calibrated numbers without flags.
Leaves that no case constrains keep their priors.

Some leaves are *tied*: one physical number shared by several stacks
(`TIES`). PyTorch's per-operator host cost is the same whether TorchRec,
NVIDIA's DLRM or Intel's CPU trainer dispatches the operator, so one value
fitted on all of them serves each.
"""

import functools
import json

from codesign.core.errors import InputError
from codesign.core.paths import DATA_DIR
from codesign.core.pytree import replace
from codesign.spec import stack as stack_lib
from codesign.spec.stack import Stack, validate

FIT_FILE = DATA_DIR / 'stack_fit.json'

_NV = 'NVIDIA DeepLearningExamples PyTorch/Recommendation/DLRM'
_NV_README = _NV + ' README.md (October 2021, container 21.10)'
_NV_MAIN = _NV + ' dlrm/scripts/main.py'
_HUGECTR = (
  'mlcommons/training_results_v1.0 NVIDIA/benchmarks/dlrm/implementations/'
  'hugectr/dgx_a100_8x8x1120.json'
)
_HUGECTR_NOTES = 'NVIDIA-Merlin/HugeCTR v3.1 release notes'
_TREC_PLAN = 'pytorch/torchrec torchrec/distributed/planner/constants.py'
_TREC_DIST = 'pytorch/torchrec torchrec/distributed/dist_data.py KJTAllToAll'
_TREC_DLRM = 'mlcommons/training recommendation_v2/torchrec_dlrm dlrm_main.py'
_INTEL = (
  'mlcommons/training_results_v0.7 Intel/benchmarks/dlrm/'
  '1-node-4s-cpx-pytorch/README.md'
)
_FB_DLRM = 'facebookresearch/dlrm dlrm_s_pytorch.py'
_PYPROF = (
  'derived: ~800 kernels per step of the April-2020 NVIDIA PyTorch DLRM '
  '(26 nn.Embedding tables, sparse SGD; adityaagrawal.net/blog/dnn/dlrm, '
  'PyProf) less the 98 that codesign.terms.kernel_counts counts '
  'outside the tables, over 26 tables'
)
_DDP_BUCKET = 'PyTorch DistributedDataParallel bucket_cap_mb=25 (default)'
_TREC_PIPELINE = (
  'pytorch/torchrec torchrec/distributed/train_pipeline '
  'TrainPipelineSparseDist: "overlaps device transfer, and '
  'ShardedModule.input_dist() with forward and backward" (input_dist on '
  'its own data_dist CUDA stream, one batch ahead); the MLCommons '
  'torchrec_dlrm dlrm_main.py (C9) trains with it'
)
_TREC_KJT = (
  'pytorch/torchrec@a48cef7 torchrec/distributed/planner/'
  'storage_reservations.py HeuristicalStorageReservation: KJT storage of '
  '"2 pipelined batches each with 10 internal copies" (multiplier=20)'
)
_TREC_TRAINERS = (
  'the preset models the GPU path (FBGEMM TBE CUDA kernels, UVM caching); '
  'TorchRec on CPU sockets runs other kernels this preset does not describe'
)
_FBGEMM_ROCM = (
  'pytorch/FBGEMM fbgemm_gpu: builds for CUDA (NVIDIA) and ROCm (AMD) '
  'GPUs; confidence M'
)
_SOCKET_RATES = 'the socket profile gives the gather and update rates'
_IPEX_ISA = (
  'intel/intel-extension-for-pytorch ISA dynamic dispatch: AVX2 and '
  'AVX-512 kernels on x86-64 CPUs (Intel-tuned; AMD EPYC runs the same '
  'ISA paths); confidence M'
)

_NV_2020 = (
  'NVIDIA DeepLearningExamples PyTorch/Recommendation/DLRM as of 2020 '
  '(README changelog: CUDA graphs came with the 21.xx containers and '
  'PyTorch 1.10) and the MLPerf v0.7 submission (training_results_v0.7 '
  'NVIDIA/benchmarks/dlrm/implementations/pytorch, container 20.06)'
)
# The first release (README changelog: "April 2020 - Initial release"),
# read at NVIDIA/DeepLearningExamples@23a6382 (the commit of that README).
_NV_2020_04 = _NV + ' at 23a6382 (April 2020, the initial release)'
_HCTR_V31 = (
  'NVIDIA-Merlin/HugeCTR v3.1 (21.05, MLPerf v1.0) release notes and '
  'training_results_v1.0 NVIDIA dlrm hugectr dgx_a100*.json'
)
_HCTR_V11 = (
  'mlcommons/training_results_v1.1 NVIDIA/benchmarks/dlrm/implementations/'
  'hugectr/dgx_a100_14x8x640.py (MLPerf v1.1, 2021)'
)
_HCTR_PARSER = (
  'NVIDIA-Merlin/HugeCTR@v3.1 HugeCTR/src/parsers/create_embedding.cpp: '
  'max_all_reduce_bandwidth 1.3e11, max_all_to_all_bandwidth 1.9e11, '
  'efficiency_bandwidth_ratio 1.0, p_dup_max 0.01 when a config sets none'
)
# Kernels of HybridSparseEmbedding's training step beside one lookup
# kernel each way, counted in NVIDIA-Merlin/HugeCTR HugeCTR/src/
# embeddings/hybrid_sparse_embedding.cu and hybrid_embedding/*.cu (a
# cub::DeviceSelect is 2 kernels, a shuffle or a GPU barrier 1; the
# exchanges are counted as collectives). Index passes on the step's
# stream (v3.1: data_to_unique_categories 1, frequent sample indices 2,
# infrequent model indices 3, and either the single node's cache masks
# 2, network cache indices 3 and model cache indices 4, or the
# hierarchical network indices 5, index sizes 2 and size update 1):
# 14-15. Forward (single node: infrequent forward_network_direct,
# frequent forward_model, barrier, frequent forward_network;
# hierarchical: frequent forward_network, fused_intra_forward_model,
# hier_forward_network, size update): 4. Backward (frequent local_reduce
# 3; single node: barrier and two update_model_direct; hierarchical:
# fused_intra_update_network, frequent update_model, hier_update_model):
# 6. So 24-25 a step, 22 beyond the two lookups, with the index passes
# on the stream (v3.1); 10 where they run ahead (v1.1's
# use_train_precompute_indices, v2.1's inter-iteration overlap) and
# only the hierarchical index sizes stay (v3.3 forward: 3).
_HCTR_KERNELS = (
  'NVIDIA-Merlin/HugeCTR@v3.1 and @v3.3 hybrid_sparse_embedding.cu and '
  'hybrid_embedding/*.cu, kernels counted per training step '
  '(stack_presets._HCTR_KERNELS)'
)
_HCTR_V21 = (
  'training_results_v2.1 NVIDIA/benchmarks/dlrm/implementations/'
  'hugectr-preview (dgx_h100.py, dgx_h100_4x8x2240.py)'
)
_HCTR_V30 = (
  'training_results_v3.0 NVIDIA/benchmarks/dlrm_dcnv2/implementations/'
  'hugectr (HugeCTR 23.04)'
)
_HCTR_V40 = (
  'training_results_v4.0 NVIDIA/benchmarks/dlrm_dcnv2/implementations/'
  'hugectr (HugeCTR 24.04) and training_results_v5.0 (HugeCTR 24.09)'
)
_IPEX_V21 = (
  'mlcommons/training_results_v2.1 Intel/benchmarks/dlrm/'
  '1-node-SPR-pytorch and 4-nodes-SPR-pytorch (IPEX 1.x for Sapphire '
  'Rapids; calibration_cases.json C15, C18 model_note)'
)

# Prior values of the continuous leaves (SI) with their reasons.
PRIORS = {
  'graph_step_floor': (
    150e-6,
    f'{_NV_README}: inference latency with CUDA graphs bottoms out at '
    '0.14 ms for a whole forward pass at small batch',
  ),
  'eager_step_floor': (
    1e-3,
    'assumption: an eager Python training loop with a loader hand-off and '
    'metrics spends about a millisecond per step outside operators',
  ),
  'torchrec_step_floor': (
    3e-3,
    'pytorch/torchrec PR 1694: loading the batch and copying it to the GPU '
    'run on the main thread of the train pipeline and "can take tens of '
    'milliseconds" for production inputs; a few ms for the 26-feature '
    'Criteo input (one KeyedJaggedTensor). NOTE: chosen after the TorchRec '
    'case C9 was seen to need several ms of host time, so C9 does not '
    'test this prior independently; the part that grows with the batch '
    'is torchrec_sample_host_time',
  ),
  'torchrec_sample_host_time': (
    0.5e-6,
    'pytorch/torchrec PR 1694: loading the batch and copying it to the '
    'GPU run on the main thread of the train pipeline; per sample of the '
    "rank's batch of the Criteo input (13 dense floats, 26 ids with their "
    'lengths and offsets: about 0.3-0.7 kB through a few numpy and torch '
    'passes at 1-2 GB/s on one thread): about 0.5 us (assumption). '
    'NOTE: added after C9 and C16 (one p4d at 2,048 and 256 samples per '
    'GPU) were seen to differ by 2.6 ms a step, more than the device '
    'work that differs, so they do not test this prior independently',
  ),
  'overlap_default': (
    0.5,
    'assumption: half of the communication hides under compute',
  ),
  'overlap_hugectr': (
    0.9,
    f'{_HUGECTR}: enable_overlap true; {_HUGECTR_NOTES}: compute-'
    'communication overlap, embedding and bottom MLP overlap',
  ),
  'op_host_time': (
    20e-6,
    '~5-25 us of CPU work per eager PyTorch operator before its kernel '
    '(dispatcher, autograd, launch); the NVIDIA DLRM README shows an '
    'eager inference floor ~0.3 ms above the graph floor',
  ),
  'graph_collective_latency': (
    5e-6,
    'NCCL small-message latency under CUDA graphs ~0.5-6 us (NVIDIA/nccl '
    'issues 1984, 1259)',
  ),
  'eager_collective_latency': (
    30e-6,
    'assumption: an eager torch.distributed call adds stream waits and '
    'bookkeeping to NCCL latency (no public measurement found)',
  ),
  'embedding_efficiency': (
    0.7,
    f'{_TREC_PLAN}: a FUSED kernel runs at 1.0 x HBM bandwidth in the '
    'planner; 0.7 allows for its sort and aggregation passes',
  ),
  'uvm_fill_efficiency': (
    0.1,
    f'{_TREC_PLAN}: FUSED_UVM_CACHING misses at HBM_TO_DDR_MEM_BW / 10',
  ),
  'hybrid_embedding_efficiency': (
    0.7,
    "assumption: the fused kernels' prior (embedding_efficiency); the "
    "hybrid embedding's own passes (frequent and infrequent indices, the "
    "frequent rows' gradients reduced on each GPU) have no public "
    'breakdown and are left to the fit',
  ),
  'host_overlap_async': (
    0.9,
    'assumption: a graph launch or an eager queue runs well ahead of the '
    'device',
  ),
  'host_overlap_pipelined': (
    0.9,
    'torchrec v0.3.2 train_pipeline.py TrainPipelineSparseDist.progress '
    '(as copied in twitter/the-algorithm-ml core/train_pipeline.py): the '
    'host loads batch i+2, issues forward i, then starts the input '
    'distribution of batch i+1, whose splits it waits for on the host '
    '(.tolist(); pytorch/torchrec PR 1112); that stream waits on an event '
    'recorded before forward i and its NCCL call queues behind forward '
    "i's all-to-all, so the host runs up to one forward ahead of the "
    'device and host and device work overlap but for the wait (as '
    'host_overlap_async). Was 0.5 ("half serialize") until the per-sample '
    'loading term: C9 and C16 then needed the lockstep half',
  ),
  'host_overlap_timed': (
    0.5,
    f'{_NV_MAIN}: every training step starts with torch.cuda.synchronize() '
    '(the timer), so the next step launches from an idle device',
  ),
}


def prior(key: str) -> float:
  return PRIORS[key][0]


def _src(key: str) -> str:
  return 'prior: ' + PRIORS[key][1]


def _prior(key: str) -> tuple[float, str]:
  """(value, source) of the prior `key`."""
  return prior(key), _src(key)


# Fields of a stack preset by concept: the static choices read from the
# stack's code (how it dispatches, fuses, updates and exchanges), the host
# numbers (floors, per-operator and per-collective times, overlap with the
# device) and the device numbers (kernel efficiencies, HBM kept free,
# communication hidden under compute).
CHOICE_FIELDS = (
  'graph_scope',
  'bottom_mlp',
  'fused_interaction',
  'mlp_fusion',
  'fused_dense_optimizer',
  'embedding_kernel',
  'per_table_kernels',
  'update_path',
  'payload_precision',
  'pooled_cast',
  'id_bytes',
  'input_dist_collectives',
  'uvm_caching',
  'tf32',
  'allreduce_bucket_bytes',
)
HOST_FIELDS = (
  'step_floor',
  'op_host_time',
  'collective_latency',
  'host_overlap',
)
DEVICE_FIELDS = (
  'embedding_efficiency',
  'uvm_fill_efficiency',
  'hbm_reserve',
  'comm_overlap',
)


def _stack(
  name: str,
  choices: dict,
  host: dict,
  device: dict,
  runs_on: dict,
  extra: dict | None = None,
) -> Stack:
  """The `Stack` called `name` from its tables by concept (field ->
  (value, source or None)): `runs_on` holds `trainers` and `vendors`,
  `extra` fields that keep their defaults in other presets. Its `sources`
  are sorted by field (`pytree.canonical_sources`)."""
  for table, fields in (
    (choices, CHOICE_FIELDS),
    (host, HOST_FIELDS),
    (device, DEVICE_FIELDS),
  ):
    assert set(table) == set(fields), (name, set(table) ^ set(fields))
  assert set(runs_on) == {'trainers', 'vendors'}, name
  first = {**runs_on, **(extra or {})}
  tables = {**choices, **host, **device}
  sources = (
    [(k, s) for k, (_, s) in first.items()]
    + [('comm_overlap', device['comm_overlap'][1])]
    + [
      (k, s)
      for k, (_, s) in tables.items()
      if s is not None and k != 'comm_overlap'
    ]
  )
  values = {k: v for k, (v, _) in {**first, **tables}.items()}
  return Stack(name=name, **values, sources=tuple(sources))


# nvidia_pytorch: field -> (value, source or None), by concept.
_NVIDIA_PYTORCH_CHOICES = {
  'graph_scope': (
    'forward_backward',
    f'{_NV_MAIN}: CudaGraphWrapper captures forward, '
    'loss and backward; weight_update runs after the graph',
  ),
  'bottom_mlp': (
    'one_device',
    f'{_NV} dlrm/utils/distributed.py get_device_mapping',
  ),
  'fused_interaction': (True, f'{_NV_MAIN}: interaction_op default cuda_dot'),
  'mlp_fusion': (
    'elementwise',
    f'{_NV_MAIN}: optimized_mlp (apex MLP: GEMMs, then one '
    'bias-ReLU kernel each way) default True',
  ),
  'pooled_cast': (
    True,
    f'{_NV} dlrm/nn/parts.py: embedding outputs .half() under AMP',
  ),
  'fused_dense_optimizer': (True, f'{_NV_MAIN}: apex FusedSGD'),
  'embedding_kernel': ('fused', f'{_NV_MAIN}: embedding_type custom_cuda'),
  'update_path': (
    'sparse_grad',
    f'{_NV_MAIN}: embedding_optimizer torch.optim.SGD '
    'on the sparse embedding gradients, after the graph',
  ),
  'payload_precision': (
    'dense',
    f'{_NV} dlrm/nn/parts.py: outputs .half() under AMP before the all-to-all',
  ),
  'input_dist_collectives': (
    0,
    f'{_NV} dlrm/scripts/main.py, '
    "dist_main.py: each rank loads its own tables' features",
  ),
  'tf32': (True, f'{_NV_README}: TF32 enabled by default'),
  'allreduce_bucket_bytes': (
    40e6,
    'apex DistributedDataParallel message_size 1e7 elements (fp32)',
  ),
  'per_table_kernels': (27, None),
  'id_bytes': (4, None),
  'uvm_caching': (False, None),
}

_NVIDIA_PYTORCH_HOST = {
  'step_floor': _prior('graph_step_floor'),
  'op_host_time': _prior('op_host_time'),
  'collective_latency': _prior('graph_collective_latency'),
  'host_overlap': _prior('host_overlap_timed'),
}

_NVIDIA_PYTORCH_DEVICE = {
  'embedding_efficiency': _prior('embedding_efficiency'),
  'uvm_fill_efficiency': (
    prior('uvm_fill_efficiency'),
    'unused (no UVM caching)',
  ),
  'hbm_reserve': (
    0.05,
    'assumption: 5% of HBM for the CUDA context and allocator slack',
  ),
  'comm_overlap': _prior('overlap_default'),
}


_NVIDIA_PYTORCH_EXTRA = {
  'planner': (
    'table_placement',
    f'{_NV} dlrm/utils/distributed.py get_device_mapping: every table '
    'whole on one GPU, all in HBM',
  ),
}


_NVIDIA_PYTORCH_RUNS_ON = {
  'trainers': (
    ('accelerator',),
    f'{_NV_README}: CUDA GPUs (CUDA graphs, apex)',
  ),
  'vendors': (('nvidia',), f'{_NV_README}: NVIDIA GPUs only'),
}


def nvidia_pytorch() -> Stack:
  """NVIDIA's PyTorch DLRM (DeepLearningExamples 21.10 and later; its
  MLPerf submissions ran the same design).

  Forward, loss and backward are captured in one CUDA graph, the
  optimizers run eagerly after it; apex's fused MLP and FusedSGD, the
  custom dot-interaction kernel and a fused embedding gather; the bottom
  MLP runs on GPU 0 for the whole batch (alone above 4 GPUs); one fp16
  all-to-all each way under AMP; every rank reads its own tables' ids
  from the dataset (no id exchange); TF32 on.
  """
  return _stack(
    'nvidia_pytorch',
    _NVIDIA_PYTORCH_CHOICES,
    _NVIDIA_PYTORCH_HOST,
    _NVIDIA_PYTORCH_DEVICE,
    _NVIDIA_PYTORCH_RUNS_ON,
    _NVIDIA_PYTORCH_EXTRA,
  )


# hugectr: field -> (value, source or None), by concept.
_HUGECTR_CHOICES = {
  'graph_scope': ('step', f'{_HUGECTR}: holistic_cuda_graph true'),
  'mlp_fusion': (
    'epilogue',
    f'{_HUGECTR_NOTES}: fused GEMM + ReLU + bias fprop, '
    'GEMM + dReLU + bgrad bprop',
  ),
  'fused_interaction': (
    True,
    f'{_HUGECTR}: Interaction layer (fused); DCN-v2: MultiCrossLayer '
    'fused_matrix_elementwise_dot_add and fused_mul_fma3 (HugeCTR v4.3 on)',
  ),
  'embedding_kernel': ('fused', f'{_HUGECTR}: HybridSparseEmbedding'),
  'id_bytes': (
    8,
    'HugeCTR HybridSparseEmbedding<long long, __half> for '
    'i64 input keys under mixed precision',
  ),
  'payload_precision': (
    'dense',
    'HybridSparseEmbedding<long long, __half>: fp16 '
    'embedding outputs under mixed precision',
  ),
  'input_dist_collectives': (
    1,
    f'{_HUGECTR}: one exchange of the infrequent keys (hybrid embedding)',
  ),
  'allreduce_bucket_bytes': (
    1e10,
    f'{_HUGECTR}: all_reduce Oneshot, grouped (one call per step)',
  ),
  'bottom_mlp': ('data_parallel', None),
  'fused_dense_optimizer': (True, None),
  'per_table_kernels': (27, None),
  'update_path': ('fused', None),
  'pooled_cast': (False, None),
  'uvm_caching': (False, None),
  'tf32': (True, None),
}

_HUGECTR_HOST = {
  'step_floor': _prior('graph_step_floor'),
  'op_host_time': (
    prior('op_host_time'),
    'unused (the whole step is one graph)',
  ),
  'collective_latency': _prior('graph_collective_latency'),
  'host_overlap': _prior('host_overlap_async'),
}

_HUGECTR_DEVICE = {
  'embedding_efficiency': _prior('embedding_efficiency'),
  'uvm_fill_efficiency': (
    prior('uvm_fill_efficiency'),
    'unused (no UVM caching)',
  ),
  'hbm_reserve': (0.05, 'assumption: 5% of HBM for the CUDA context'),
  'comm_overlap': _prior('overlap_hugectr'),
}


_HUGECTR_RUNS_ON = {
  'trainers': (('accelerator',), f'{_HUGECTR_NOTES}: a CUDA GPU framework'),
  'vendors': (('nvidia',), 'NVIDIA-Merlin/HugeCTR README: NVIDIA GPUs only'),
}


_HUGECTR_EXTRA = {
  'allreduce_overlap': (
    True,
    f'{_HCTR_V11}: overlap_ar_a2a = True, async_mlp_wgrad = True (the '
    'grouped allreduce runs beside the backward exchange)',
  ),
  'hybrid_kernels': (10, f'{_HCTR_KERNELS}: 10 with the indices ahead'),
  'hybrid_bandwidth_ratio': (1.9e11 / 1.3e11, _HCTR_PARSER),
  'hybrid_p_dup_max': (0.01, _HCTR_PARSER),
  'hybrid_embedding_efficiency': _prior('hybrid_embedding_efficiency'),
  'planner': (
    'auto',
    f'{_HCTR_V30}: the embedding collection with sharding plan hier_auto '
    '(calibration_cases.json C11, C14 model_note): tables balanced over '
    'the GPUs, the auto plan; HybridSparseEmbedding is "restricted to '
    'MLPerf use" (HugeCTR docs hugectr_layer_book HybridEmbeddingParam) '
    'and MLPerf moved to multi-hot DCNv2 in v3.0',
  ),
  'alltoall': (
    'hierarchical',
    f'{_HUGECTR}: communication type IB_NVLink_Hierarchical '
    '(calibration_cases.json C10 model_note)',
  ),
  'allreduce_precision': (
    'dense',
    'NVIDIA-Merlin/HugeCTR AllReduceInPlaceComm::create: under '
    'use_mixed_precision the Oneshot and NCCL allreduces are '
    'OneshotMultiARInplaceComm<__half> and NCCLARInplaceComm<__half> '
    '(fp16 gradients reduced)',
  ),
}


def hugectr() -> Stack:
  """NVIDIA Merlin HugeCTR as in its MLPerf DLRM submissions.

  The whole iteration is one CUDA graph; fused GEMM+ReLU+bias layers,
  fused interaction, hybrid embedding with 64-bit keys and fp16 outputs,
  a hierarchical NVLink/InfiniBand all-to-all and one grouped one-shot
  allreduce per step.
  """
  return _stack(
    'hugectr',
    _HUGECTR_CHOICES,
    _HUGECTR_HOST,
    _HUGECTR_DEVICE,
    _HUGECTR_RUNS_ON,
    _HUGECTR_EXTRA,
  )


# torchrec: field -> (value, source or None), by concept.
_TORCHREC_CHOICES = {
  'graph_scope': ('none', f'{_TREC_DLRM}: eager training loop'),
  'mlp_fusion': (
    'none',
    'torchrec.models.dlrm DenseArch/OverArch: nn.Linear and nn.ReLU modules',
  ),
  'fused_interaction': (
    False,
    'torchrec.models.dlrm InteractionArch: bmm, tril indices, cat',
  ),
  'fused_dense_optimizer': (
    False,
    f'{_TREC_DLRM}: torch.optim dense optimizer '
    '(assumption: per-parameter loop)',
  ),
  'embedding_kernel': ('fused', 'FBGEMM TBE (EmbeddingComputeKernel.FUSED)'),
  'payload_precision': (
    'fp32',
    'pooled outputs in the table dtype (no qcomms)',
  ),
  'id_bytes': (8, f'{_TREC_PLAN}: BIGINT_DTYPE = 8'),
  'input_dist_collectives': (3, f'{_TREC_DIST}: splits, lengths, values'),
  'uvm_caching': (True, 'EmbeddingComputeKernel.FUSED_UVM_CACHING'),
  'tf32': (
    False,
    'PyTorch docs: allow_tf32 for matmul defaults to False from 1.12',
  ),
  'allreduce_bucket_bytes': (25e6, _DDP_BUCKET),
  'bottom_mlp': ('data_parallel', None),
  'per_table_kernels': (27, None),
  'update_path': ('fused', None),
  'pooled_cast': (False, None),
}

_TORCHREC_HOST = {
  'step_floor': _prior('torchrec_step_floor'),
  'op_host_time': _prior('op_host_time'),
  'collective_latency': _prior('eager_collective_latency'),
  'host_overlap': _prior('host_overlap_pipelined'),
}

_TORCHREC_DEVICE = {
  'embedding_efficiency': _prior('embedding_efficiency'),
  'uvm_fill_efficiency': _prior('uvm_fill_efficiency'),
  'hbm_reserve': (
    0.15,
    'torchrec planner storage_reservations.py: '
    'HeuristicalStorageReservation(percentage=0.15)',
  ),
  'comm_overlap': _prior('overlap_default'),
}


_TORCHREC_RUNS_ON = {
  'trainers': (('accelerator',), _TREC_TRAINERS),
  'vendors': (('nvidia', 'amd'), _FBGEMM_ROCM),
}
_TORCHREC_EXTRA = {
  'planner': (
    'auto',
    'pytorch/torchrec torchrec/distributed/planner/planners.py '
    'EmbeddingShardingPlanner: the cheapest feasible sharding per table '
    'by its cost estimates; the auto plan stands for it',
  ),
  'sample_host_time': _prior('torchrec_sample_host_time'),
  'train_pipeline': ('sparse_dist', _TREC_PIPELINE),
  'kjt_copies': (20, _TREC_KJT),
}


def torchrec() -> Stack:
  """TorchRec with FBGEMM table-batched embeddings, eager PyTorch (the
  MLCommons torchrec_dlrm reference).

  Every operator is dispatched eagerly; nn.Linear + ReLU and a bmm
  interaction; one TBE kernel for all tables with the optimizer fused in
  its backward; 64-bit ids in three all-to-alls (splits, lengths,
  values) with a host sync on the splits; each rank's batch loaded on
  the training thread (a host time per sample); UVM caching for tables
  HBM cannot hold; 15% of HBM reserved; TF32 off (PyTorch 1.12 and
  later).
  """
  return _stack(
    'torchrec',
    _TORCHREC_CHOICES,
    _TORCHREC_HOST,
    _TORCHREC_DEVICE,
    _TORCHREC_RUNS_ON,
    _TORCHREC_EXTRA,
  )


# ipex_cpu: field -> (value, source or None), by concept.
_IPEX_CPU_CHOICES = {
  'graph_scope': ('none', f'{_IPEX_V21}: eager PyTorch with IPEX'),
  'mlp_fusion': (
    'epilogue',
    f'{_IPEX_V21}: fused MLP (GEMM with bias and ReLU)',
  ),
  'fused_interaction': (False, f'{_FB_DLRM}: bmm and tril indices'),
  'embedding_kernel': (
    'fused',
    f'{_IPEX_V21}: IPEX merged embedding, one kernel for all tables',
  ),
  'per_table_kernels': (27, _PYPROF + ' (the same PyTorch operators on CPU)'),
  'payload_precision': ('dense', f'{_INTEL}: --bf16'),
  'input_dist_collectives': (
    0,
    f'{_FB_DLRM}: each rank reads the sparse features of its own tables',
  ),
  'allreduce_bucket_bytes': (25e6, _DDP_BUCKET),
  'bottom_mlp': ('data_parallel', None),
  'fused_dense_optimizer': (False, None),
  'update_path': (
    'fused',
    f'{_IPEX_V21}: "hybrid-gradient embedding", the SGD update fused '
    "into the merged embedding's backward",
  ),
  'pooled_cast': (True, None),
  'id_bytes': (8, None),
  'uvm_caching': (False, None),
  'tf32': (False, None),
}

_IPEX_CPU_HOST = {
  'step_floor': _prior('eager_step_floor'),
  'op_host_time': _prior('op_host_time'),
  'collective_latency': _prior('eager_collective_latency'),
  'host_overlap': (
    0.0,
    'a CPU trainer dispatches and computes on the same '
    'cores (terms.compose adds them)',
  ),
}

_IPEX_CPU_DEVICE = {
  'embedding_efficiency': (
    1.0,
    'the socket profile gives the gather and update rates',
  ),
  'uvm_fill_efficiency': (prior('uvm_fill_efficiency'), 'unused (CPU trainer)'),
  'hbm_reserve': (0.0, 'unused (CPU trainer)'),
  'comm_overlap': _prior('overlap_default'),
}


_IPEX_CPU_RUNS_ON = {
  'trainers': (('cpu',), f'{_INTEL}: CPU sockets only'),
  'vendors': (('intel', 'amd'), _IPEX_ISA),
}


_IPEX_CPU_EXTRA = {
  'planner': (
    'intel',
    f'{_INTEL}: 4 ranks; large tables model-parallel (4 per rank), small '
    'tables data-parallel',
  ),
  'collective_library': (
    'oneccl',
    f'{_INTEL}: --dist-backend=ccl (torch-ccl over oneCCL '
    '2021.1-beta07), CCL_ATL_TRANSPORT=ofi; its algorithms: '
    'oneapi-src/oneCCL src/coll/selection/selector_allreduce.cpp and '
    'selector_alltoall.cpp (read at a later commit)',
  ),
}


def ipex_cpu() -> Stack:
  """Intel's PyTorch DLRM on CPU sockets (IPEX, oneCCL), as in its MLPerf
  v0.7 submission: one rank per socket, bf16, the facebookresearch/dlrm
  model code with one nn.EmbeddingBag per table and sparse SGD.
  """
  return _stack(
    'ipex_cpu',
    _IPEX_CPU_CHOICES,
    _IPEX_CPU_HOST,
    _IPEX_CPU_DEVICE,
    _IPEX_CPU_RUNS_ON,
    _IPEX_CPU_EXTRA,
  )


# jax_xla: field -> (value, source or None), by concept.
_JAX_XLA_CHOICES = {
  'graph_scope': ('step', 'codesign.dlrm: one jax.jit train step'),
  'mlp_fusion': (
    'epilogue',
    'XLA fuses bias add, ReLU and their gradients into '
    'loop fusions beside the dots; on a CPU the activations stay in '
    'cache, so one pass is charged',
  ),
  'embedding_kernel': (
    'per_table',
    'codesign.dlrm: a gather and segment sum per table, scatter-add updates',
  ),
  'per_table_kernels': (
    4,
    'codesign.dlrm: gather, segment sum, scatter-add, update',
  ),
  'update_path': ('scatter', 'codesign.dlrm: .at[ids].add per lookup'),
  'id_bytes': (4, 'codesign.dlrm: int32 ids'),
  'tf32': (True, 'JAX default matmul precision uses TF32 on Ampere and later'),
  'bottom_mlp': ('data_parallel', None),
  'fused_interaction': (False, None),
  'fused_dense_optimizer': (True, None),
  'payload_precision': ('dense', None),
  'pooled_cast': (False, None),
  'input_dist_collectives': (1, None),
  'uvm_caching': (False, None),
  'allreduce_bucket_bytes': (1e10, None),
}

_JAX_XLA_HOST = {
  'step_floor': (
    20e-6,
    'assumption: one jitted call; experiments.calibrate '
    'measures it per device (device profile step_overhead_us)',
  ),
  'op_host_time': (0.0, 'no eager operators'),
  'collective_latency': (prior('graph_collective_latency'), None),
  'host_overlap': (prior('host_overlap_async'), None),
}

_JAX_XLA_DEVICE = {
  'embedding_efficiency': (
    1.0,
    "the device profile measures XLA's own gathers and scatters",
  ),
  'comm_overlap': (
    0.0,
    'one device runs every op in turn (no communication to hide)',
  ),
  'uvm_fill_efficiency': (prior('uvm_fill_efficiency'), None),
  'hbm_reserve': (0.05, None),
}


_JAX_XLA_RUNS_ON = {
  'trainers': (
    ('accelerator', 'cpu'),
    'XLA compiles the step for GPUs, TPUs and CPUs',
  ),
  'vendors': (
    ('nvidia', 'amd', 'google', 'intel'),
    'jax installation guide: NVIDIA and AMD GPUs, Google TPUs, x86-64 CPUs',
  ),
}


def jax_xla() -> Stack:
  """Our own Flax DLRM (`codesign.calibration.dlrm`): one jitted train step, XLA
  fusion of bias and activation, one gather and scatter-add per table
  without aggregation, int32 ids.
  """
  return _stack(
    'jax_xla',
    _JAX_XLA_CHOICES,
    _JAX_XLA_HOST,
    _JAX_XLA_DEVICE,
    _JAX_XLA_RUNS_ON,
  )


PRESETS = {
  f.__name__: f for f in (torchrec, nvidia_pytorch, hugectr, ipex_cpu, jax_xla)
}

# The releases of each preset by year: year -> field -> (value, source),
# the fields where that release differs from the newest (the preset of the
# bare name). A field whose change is known from one published case only
# says so. `get('NAME@YEAR')` builds one. Where a year saw two releases that
# differ, the earlier one is named by its month (`'YYYY-MM'`,
# `NAME@YYYY-MM`) and the year's entry is the later one.
VERSIONS = {
  'nvidia_pytorch': {
    # The initial release (C4's): PyTorch modules, before NVIDIA's fused
    # kernels; the `2020` entry is the 20.06 code that C5 ran.
    '2020-04': {
      'graph_scope': (
        'none',
        f'{_NV_2020_04} dlrm/scripts/main.py: every operator launched '
        'eagerly (no CUDA graphs)',
      ),
      'embedding_kernel': (
        'per_table',
        f'{_NV_2020_04} dlrm/model.py _create_embeddings: one nn.Embedding '
        '(sparse=True) per table, looked up one table at a time',
      ),
      'per_table_kernels': (27, _PYPROF),
      'fused_interaction': (
        False,
        f'{_NV_2020_04} dlrm/model.py _interaction: torch.bmm, a gather of '
        'the lower triangle and a concatenation (interaction_op dot or cat)',
      ),
      'mlp_fusion': (
        'none',
        f'{_NV_2020_04} dlrm/model.py: nn.Linear then nn.ReLU per layer',
      ),
      'fused_dense_optimizer': (
        False,
        f'{_NV_2020_04} dlrm/scripts/main.py: torch.optim.SGD over every '
        'parameter (apex amp O2 on the MLPs)',
      ),
    },
    2020: {
      'graph_scope': (
        'none',
        f'{_NV_2020}: before PyTorch 1.10 brought CUDA graphs every '
        'operator launched eagerly (seen in C5)',
      ),
    },
    2021: {},
  },
  'hugectr': {
    # MLPerf v1.0 (container 21.05, C6 and C10): the hybrid embedding
    # without the overlaps that v1.1 switched on.
    '2021-05': {
      'planner': (
        'hybrid',
        f'{_HCTR_V31}: HybridSparseEmbedding, communication type '
        'IB_NVLink_Hierarchical (frequent rows data-parallel, infrequent '
        'model-parallel; calibration_cases.json C10 model_note)',
      ),
      'allreduce_overlap': (
        False,
        f'{_HUGECTR}: the solver sets enable_overlap only; HugeCTR v3.1 '
        'has no overlap_ar_a2a or async_mlp_wgrad (both first in v3.3 and '
        'in the v1.1 configs), so the grouped allreduce waits for the '
        'backward',
      ),
      'hybrid_bandwidth_ratio': (
        1.9e11 / 1.3e11,
        f'{_HUGECTR} sets no bandwidths: {_HCTR_PARSER}',
      ),
      'hybrid_kernels': (
        22,
        f"{_HCTR_KERNELS}: 22 with the index passes on the step's stream "
        '(HugeCTR v3.1 has no use_train_precompute_indices)',
      ),
    },
    2021: {
      'planner': (
        'hybrid',
        f'{_HCTR_V11}: HybridSparseEmbedding, IB_NVLink_Hier',
      ),
      'hybrid_bandwidth_ratio': (
        1.9e11 / 1.3e11 * 0.5,
        f'{_HCTR_V11}: HybridEmbeddingParam(2, -1, 0.01, 1.3e11, 1.9e11, '
        '0.5, ...): max_all_to_all_bandwidth / max_all_reduce_bandwidth x '
        'efficiency_bandwidth_ratio',
      ),
    },
    2022: {
      'planner': (
        'hybrid',
        f'{_HCTR_V21}: HybridSparseEmbedding (calibration_cases.json C12 '
        'model_note)',
      ),
      'hybrid_bandwidth_ratio': (
        23.75e9 / 1.3e11,
        f'{_HCTR_V21} dgx_h100_4x8x2240.py: HybridEmbeddingParam(2, 29120 '
        '+ 1707, 0.01, 1.3e11, 23.75e9, 1.0, IB_NVLink_Hier, ...)',
      ),
      'hybrid_p_dup_max': (
        0.03,
        f'{_HCTR_V21} dgx_h100.py: HybridEmbeddingParam(2, -1, 0.03, '
        '1.3e11, 1.9e11, 1.0, NVLink_SingleNode, ...)',
      ),
    },
    2023: {},
    2024: {},
  },
  'ipex_cpu': {
    2020: {
      'embedding_kernel': (
        'per_table',
        f'{_INTEL}: PyTorch 1.5 + IPEX 0.2 on the facebookresearch/dlrm '
        'model, one nn.EmbeddingBag per table',
      ),
      'update_path': (
        'sparse_grad',
        f'{_INTEL}: sparse gradients of nn.EmbeddingBag(sparse=True), then SGD',
      ),
      'mlp_fusion': ('none', f'{_INTEL}: nn.Linear and nn.ReLU'),
    },
    2022: {},
  },
  'torchrec': {2022: {}},
}
DEFAULT = 'torchrec'
# The stack a platform gets when none is named: its trainer's (issue 21).
DEFAULT_FOR_TRAINER = {'accelerator': 'torchrec', 'cpu': 'ipex_cpu'}


def default_for(trainer: str) -> str:
  """The default stack preset of a `hardware.TRAINERS` kind."""
  return DEFAULT_FOR_TRAINER[trainer]


def check_runs_on(s: Stack, p) -> Stack:
  """`s`, or `InputError` in one sentence when it cannot train platform
  `p` (its trainer, or the maker of its training device)."""
  from codesign.spec import catalog

  why = stack_lib.mismatch(s, p.trainer, catalog.platform_vendor(p))
  if why is not None:
    raise InputError(f'{why}; platform {p.name!r} needs another --stack')
  return s


# The smallest batch per rank (samples) each preset's numbers were fitted
# at: the least global batch over ranks of the published cases it runs
# (codesign/data/calibration_cases.json; `calibration.public_cases`).
# No stack documents a hard floor; below this one its fitted host and
# kernel costs are extrapolated, so a run there is flagged
# (`boundary.inputs.rank_batch`). jax_xla is fitted on the local device's
# own cases only: none.
FITTED_RANK_BATCH = {
  'torchrec': (256, 'C16: 2,048 samples on 8 A100 (p4d)'),
  'hugectr': (1120, 'C10: 71,680 samples on 64 A100 (8 DGX A100)'),
  'nvidia_pytorch': (6912, 'C5: 55,296 samples on 8 A100 (DGX A100)'),
  'ipex_cpu': (4096, 'C18: 32,768 samples on 8 Sapphire Rapids sockets'),
}


# Leaves shared by several stacks: tie name -> (stack, field) pairs.
TIES = {
  'op_host_time': (
    ('torchrec', 'op_host_time'),
    ('nvidia_pytorch', 'op_host_time'),
    ('ipex_cpu', 'op_host_time'),
  ),
  'nvidia_step_floor': (('nvidia_pytorch', 'step_floor'),),
  'torchrec_step_floor': (('torchrec', 'step_floor'),),
  'torchrec_sample_host_time': (('torchrec', 'sample_host_time'),),
  'eager_step_floor': (('ipex_cpu', 'step_floor'),),
  'fused_embedding_efficiency': (
    ('nvidia_pytorch', 'embedding_efficiency'),
    ('hugectr', 'embedding_efficiency'),
    ('torchrec', 'embedding_efficiency'),
  ),
  'hybrid_embedding_efficiency': (('hugectr', 'hybrid_embedding_efficiency'),),
}


@functools.cache
def fitted_values() -> dict:
  """The shipped fit (`data/stack_fit.json`): stack -> field -> value, or
  empty when no fit has been shipped."""
  if not FIT_FILE.is_file():
    return {}
  return json.loads(FIT_FILE.read_text())


def with_fit(s: Stack, fit: dict) -> Stack:
  """`s` with the fitted fields of `fit` (a stack_fit.json dict) applied,
  each field's source replaced by the fit's provenance."""
  entry = fit.get('stacks', {}).get(family(s.name), {})
  if not entry:
    return s
  values = {k: float(v['value']) for k, v in entry.items()}
  sources = dict(s.sources)
  for k, v in entry.items():
    sources[k] = 'fitted: ' + v['provenance']
  return replace(s, **values, sources=tuple(sources.items()))


def family(name: str) -> str:
  """The preset a stack name belongs to: `hugectr` of `hugectr@2021`."""
  return name.split('@', 1)[0]


def version_names() -> tuple[str, ...]:
  """Every `NAME@YEAR` (and `NAME@YYYY-MM`) preset, by name and release."""
  return tuple(
    f'{name}@{year}' for name, years in VERSIONS.items() for year in years
  )


def _release_key(text: str):
  """The `VERSIONS` key a release name reads as: a year (`2021`, an int)
  or a month (`2020-04`, kept as text); None for anything else."""
  if text.isdigit():
    return int(text)
  year, dash, month = text.partition('-')
  if dash and year.isdigit() and len(month) == 2 and month.isdigit():
    return text
  return None


def _version(name: str) -> Stack:
  """The preset `NAME@YEAR`: the newest preset `NAME` with the fields its
  release of that year had (`VERSIONS`), each with its source."""
  base, _, year = name.partition('@')
  years = VERSIONS.get(base)
  release = _release_key(year)
  if base not in PRESETS or years is None or release is None:
    raise InputError(
      f'unknown stack preset {name!r}; valid choices: '
      + ', '.join((*PRESETS, *version_names()))
    )
  if release not in years:
    raise InputError(
      f'no {base} release of {year} is described; valid releases: '
      + ', '.join(str(y) for y in years)
    )
  changes = years[release]
  sources = dict(PRESETS[base]().sources)
  sources.update({k: f'{name}: {src}' for k, (_, src) in changes.items()})
  values = {k: v for k, (v, _) in changes.items()}
  s = replace(PRESETS[base](), **values)
  return replace(s, name=name, sources=tuple(sorted(sources.items())))


def get(name: str, fitted: bool = True) -> Stack:
  """The stack preset called `name` (`NAME`, its newest release, or
  `NAME@YEAR`, `VERSIONS`), with the shipped fit applied unless `fitted`
  is False (the priors)."""
  if '@' in name:
    s = _version(name)
  elif name in PRESETS:
    s = PRESETS[name]()
  else:
    raise InputError(
      f'unknown stack preset {name!r}; valid choices: '
      + ', '.join((*PRESETS, *version_names()))
    )
  if fitted:
    s = with_fit(s, fitted_values())
  return validate(s)
