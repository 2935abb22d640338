"""The software stack: how a framework runs a DLRM step on the hardware.

The same GPUs train several times faster or slower depending on the
software, so the stack is an input beside the workload, the platform and
the plan. A `Stack` is a pytree: its continuous fields (host costs,
latencies, efficiencies) are leaves that `jax.grad` sees; its discrete
choices (what is fused, where the bottom MLP runs, payload precision,
CUDA graphs, UVM caching, TF32) are static. SI inside; boundary units per
field, converted in `codesign.core.units`.

How the fields enter the step (`codesign.model.terms`):
- Host work. An eager framework spends `op_host_time` of CPU time on
  every operator it dispatches (Python, autograd, the dispatcher, the
  launch), plus `step_floor` per step (the training loop, the hand-off
  of the prefetched batch), plus `sample_host_time` per sample of the
  rank's batch where the stack loads it on the training thread (TorchRec's
  train pipeline). Work captured in a CUDA graph costs the host
  nothing per operator (`graph_scope`). Host and device run
  asynchronously; `host_overlap` blends the two limits of
  `terms.compose`: 1, the host queues far enough ahead that the
  step is the longer of the two; 0, lockstep, each group of operators
  takes the longer of its device time and its launch time. On a CPU
  trainer the same cores dispatch and compute, so they add.
- Collectives. Every collective call adds `collective_latency` of
  software latency (stream synchronization, the call itself) to the
  fabric's own alpha. The number of calls per step follows from the
  stack: the sparse input distribution (`input_dist_collectives`), the
  pooled all-to-all forward and backward, and one allreduce per gradient
  bucket (`allreduce_bucket_bytes`).
- Embedding kernels reach `embedding_efficiency` of the hardware's own
  gather and update rates (`Accelerator.gather_efficiency`,
  `update_efficiency`); one kernel per table (`embedding_kernel =
  'per_table'`, PyTorch's nn.Embedding) is slower per byte than one fused
  kernel for all tables (FBGEMM TBE, HugeCTR, NVIDIA's fused gather), by
  `PER_TABLE_EFFICIENCY` (TorchRec planner: DENSE kernel 0.5 x HBM
  bandwidth against 1.0 for FUSED). Shards narrower than 128 columns pay
  FBGEMM's block penalties (`terms.table_arrays`, as TorchRec's
  planner charges every kernel).
- Row gradients reach the rows by `update_path`: the fused backward
  aggregates per distinct row (FBGEMM TBE, HugeCTR), PyTorch's sparse
  gradients are written per lookup, coalesced and applied, XLA's
  scatter-add read-modify-writes a row per lookup
  (`terms.update_bytes`).
- Where the dense model runs (`bottom_mlp`), which kernels are fused
  (`mlp_fusion`, `fused_interaction`, `fused_dense_optimizer`), the
  payload precision and the pooled cast, the id bytes and the number of
  collectives that distribute them, TF32, and the planner's defaults
  (`hbm_reserve`, `comm_overlap`) are the stack's choices too.
- UVM caching (`uvm_caching`): the whole table stays in host DDR and HBM
  holds a cache of its hottest rows (the plan's `hbm_fraction`); misses
  are read by the accelerator over the host link at
  `uvm_fill_efficiency` of its bandwidth. Without it, the plan's split
  is static and the CPU sockets pool the DDR rows.
- HugeCTR's hybrid embedding (`planner = 'hybrid'`): each table's
  frequent rows are replicated and their gradients allreduced, the rest
  exchanged (`terms.hybrid`), at a threshold its configuration sets
  (`hybrid_bandwidth_ratio` across nodes, `hybrid_p_dup_max` on one
  node); its kernels reach `hybrid_embedding_efficiency`, and it runs
  `hybrid_kernels` more of them a step (each with the device's gap). Without
  `allreduce_overlap` the gradient allreduce waits for the backward.

Plausible ranges of the fitted leaves are `BOUNDS`; `FIT_RANGES` (inside
them) are the ranges a calibration may move a value within, each with the
reason in `FIT_RANGE_WHY`.
"""

import dataclasses

from codesign.core.errors import raise_problems
from codesign.core.pytree import dataclass, field
from codesign.core.units import UNITS

GRAPH_SCOPES = ('none', 'forward_backward', 'step')
BOTTOM_MLP_PLACEMENTS = ('data_parallel', 'one_device')
EMBEDDING_KERNELS = ('fused', 'per_table')
MLP_FUSIONS = ('none', 'elementwise', 'epilogue')
UPDATE_PATHS = ('fused', 'sparse_grad', 'scatter')
PAYLOAD_PRECISIONS = ('dense', 'fp32', 'bf16', 'fp16', 'fp8')
ID_BYTES = (4, 8)
# Who makes the device that runs the step (the accelerator, or the CPU of a
# CPU trainer); `codesign.spec.catalog.vendor` names a part's.
VENDORS = ('nvidia', 'amd', 'google', 'intel')
# How the training loop feeds the step: none (each step distributes its own
# ids, then computes), sparse_dist (TorchRec's TrainPipelineSparseDist:
# the next batch's input distribution runs on its own stream while this
# batch computes).
TRAIN_PIPELINES = ('none', 'sparse_dist')
ALLTOALLS = ('flat', 'hierarchical')
# The precision of the gradient allreduce: fp32, or the dense precision
# (a mixed-precision stack that reduces its 16-bit gradients).
ALLREDUCE_PRECISIONS = ('fp32', 'dense')
# NCCL (RCCL follows its tuning model) or Intel's oneCCL (CPU trainers).
COLLECTIVE_LIBRARIES = ('nccl', 'oneccl')
# The plan the stack's software makes (`codesign.model.planner.stack_plan`):
# auto (a cost-model planner balancing the tables, as TorchRec's planner
# and HugeCTR's embedding collection do), hybrid (HugeCTR's hybrid
# embedding: each table's frequent rows data-parallel, the rest sharded),
# table_placement (NVIDIA's PyTorch DLRM: every table whole on one GPU,
# all in HBM), intel (Intel's DLRM: the largest tables model-parallel, 4
# a rank, the rest data-parallel).
PLANNERS = ('auto', 'hybrid', 'table_placement', 'intel')

# One kernel per table runs at half the bytes/s of a fused kernel for all
# tables: TorchRec planner constants.py kernel_bw_lookup, cuda DENSE =
# 0.5 x HBM_MEM_BW against FUSED = 1.0 x HBM_MEM_BW (catalog
# modeling_defaults.torchrec_planner).
PER_TABLE_EFFICIENCY = 0.5


@dataclass
class Stack:
  """A software stack that trains DLRMs. See the module docstring."""

  name: str = field(static=True, doc='preset name or a label')
  graph_scope: str = field(
    static=True,
    doc='work captured in CUDA graphs: none, forward_backward or step',
  )
  bottom_mlp: str = field(
    static=True,
    doc='data_parallel (every rank, its samples) or one_device (rank 0, '
    'the whole batch; with more than 4 ranks rank 0 holds no tables)',
  )
  fused_interaction: bool = field(
    static=True,
    doc='the interaction runs as one fused kernel each way (DCN-v2: one '
    'elementwise kernel a cross layer each way beside its GEMMs)',
  )
  mlp_fusion: str = field(
    static=True,
    doc='how bias and activation run: none (separate kernels), '
    'elementwise (one kernel each way) or epilogue (inside the GEMM)',
  )
  fused_dense_optimizer: bool = field(
    static=True, doc='one multi-tensor kernel updates every dense parameter'
  )
  embedding_kernel: str = field(
    static=True, doc='fused (all tables, one kernel) or per_table'
  )
  per_table_kernels: int = field(
    static=True,
    doc='kernels per table and step when embedding_kernel is per_table',
  )
  update_path: str = field(
    static=True,
    doc='how row gradients reach the rows: fused (the backward kernel '
    'aggregates per row and applies the optimizer), sparse_grad (a sparse '
    'gradient tensor, coalesced, then applied) or scatter (every lookup '
    'read-modify-writes its row)',
  )
  payload_precision: str = field(
    static=True,
    doc='all-to-all payload precision; dense follows the dense precision',
  )
  pooled_cast: bool = field(
    static=True,
    doc='pooled embeddings are cast to the payload precision in a pass '
    'of their own (each way) rather than written in it by the kernel',
  )
  id_bytes: int = field(static=True, doc='bytes per row id on the wire')
  input_dist_collectives: int = field(
    static=True, doc='collectives that distribute the sparse ids per step'
  )
  uvm_caching: bool = field(
    static=True, doc='HBM caches the hottest rows of tables kept in DDR'
  )
  tf32: bool = field(
    static=True, doc='fp32 GEMMs run on TF32 tensor cores where there are'
  )
  allreduce_bucket_bytes: float = field(
    static=True, doc='dense gradient bytes per allreduce call'
  )
  step_floor: float = field(
    unit='us', doc='host time per step outside the operators, s'
  )
  op_host_time: float = field(
    unit='us', doc='host time per eagerly dispatched operator, s'
  )
  collective_latency: float = field(
    unit='us', doc='software latency per collective call, s'
  )
  host_overlap: float = field(doc='share of host time hidden under device time')
  embedding_efficiency: float = field(
    doc="share of the hardware's gather and update rates the embedding "
    'kernels reach',
  )
  uvm_fill_efficiency: float = field(
    doc='share of the host link for UVM cache misses'
  )
  hbm_reserve: float = field(doc='share of HBM the stack keeps free')
  comm_overlap: float = field(
    doc='share of communication the stack hides under compute (the '
    "planner's default plan overlap)"
  )
  sources: tuple[tuple[str, str], ...] = field(
    static=True, doc='field -> source'
  )
  trainers: tuple[str, ...] = field(
    static=True,
    default=('accelerator', 'cpu'),
    doc='kinds of trainer it runs on (hardware.TRAINERS)',
  )
  vendors: tuple[str, ...] = field(
    static=True,
    default=VENDORS,
    doc='makers of the training device it runs on (accelerator, or CPU '
    'on a CPU trainer)',
  )
  kjt_copies: int = field(
    static=True,
    default=0,
    doc="copies of a batch's sparse ids (input features) the stack keeps "
    'in HBM per rank',
  )
  train_pipeline: str = field(
    static=True,
    default='none',
    doc="none, or sparse_dist (the next batch's id distribution overlaps "
    "this batch's compute)",
  )
  allreduce_precision: str = field(
    static=True,
    default='fp32',
    doc='precision of the gradient allreduce: fp32, or dense (the dense '
    'precision: under mixed precision the 16-bit gradients are reduced)',
  )
  alltoall: str = field(
    static=True,
    default='flat',
    doc='how the all-to-alls cross nodes: flat (one message per remote '
    'rank) or hierarchical (gathered per node over the fabric, one '
    "message per node pair: HugeCTR's IB_NVLink_Hierarchical)",
  )
  sample_host_time: float = field(
    unit='us',
    default=0.0,
    doc="host time per sample of the rank's batch spent loading it on "
    'the training thread (0: a loader in other threads or processes), s',
  )
  collective_library: str = field(
    static=True,
    default='nccl',
    doc='nccl (its algorithm picked by its tuning model: ring, tree, '
    "SHARP, NVLS) or oneccl (Intel's oneCCL: allreduce by message size, "
    'recursive doubling, star-like, ring; flat over CPU buffers)',
  )
  planner: str = field(
    static=True,
    default='auto',
    doc="the plan the stack's software makes when none is given: auto, "
    'hybrid (frequent rows of each table data-parallel), '
    'table_placement (each table whole in one HBM) or intel (the '
    'largest tables model-parallel, the rest data-parallel)',
  )
  allreduce_overlap: bool = field(
    static=True,
    default=True,
    doc='the dense gradient allreduce runs beside the backward pass '
    '(False: it starts once the backward is done)',
  )
  hybrid_bandwidth_ratio: float = field(
    static=True,
    default=1.9e11 / 1.3e11,
    doc="hybrid embedding across nodes: HugeCTR's max_all_to_all_bandwidth "
    '/ max_all_reduce_bandwidth x efficiency_bandwidth_ratio, which sets '
    'the frequent-row threshold (`terms.hybrid.threshold`)',
  )
  hybrid_p_dup_max: float = field(
    static=True,
    default=0.01,
    doc="hybrid embedding on one node: HugeCTR's p_dup_max, which sets the "
    'frequent-row threshold (`terms.hybrid.threshold`)',
  )
  hybrid_kernels: int = field(
    static=True,
    default=0,
    doc='kernels the hybrid embedding runs a step beside its lookup and '
    'update (index passes, frequent and infrequent forward and backward, '
    'barriers; planner hybrid)',
  )
  hybrid_embedding_efficiency: float = field(
    default=0.7,
    doc="share of the hardware's gather and update rates the hybrid "
    "embedding's kernels reach (planner hybrid), in place of "
    'embedding_efficiency',
  )


# Physical bounds of the continuous fields (SI). The cost model is finite
# and differentiable everywhere inside them.
BOUNDS: dict[str, tuple[float, float]] = {
  'step_floor': (0.0, 0.1),
  'op_host_time': (0.0, 1e-3),
  'sample_host_time': (0.0, 1e-4),
  'collective_latency': (0.0, 1e-3),
  'host_overlap': (0.0, 1.0),
  'embedding_efficiency': (0.01, 1.0),
  'uvm_fill_efficiency': (0.01, 1.0),
  'hbm_reserve': (0.0, 0.5),
  'comm_overlap': (0.0, 1.0),
  'hybrid_embedding_efficiency': (0.01, 1.0),
}

# Valid ranges of the static numbers (inclusive).
STATIC_BOUNDS: dict[str, tuple[float, float]] = {
  'per_table_kernels': (1, 1000),
  'input_dist_collectives': (0, 16),
  'kjt_copies': (0, 100),
  'allreduce_bucket_bytes': (1e6, 1e10),
  'hybrid_bandwidth_ratio': (1e-3, 1e3),
  'hybrid_p_dup_max': (1e-6, 1.0),
  'hybrid_kernels': (0, 1000),
}
# The static numbers that need not be integers.
STATIC_REALS = (
  'allreduce_bucket_bytes',
  'hybrid_bandwidth_ratio',
  'hybrid_p_dup_max',
)

# Where a calibration may move a value (inside BOUNDS), and why.
FIT_RANGES: dict[str, tuple[float, float]] = {
  'step_floor': (20e-6, 30e-3),
  'op_host_time': (3e-6, 100e-6),
  'sample_host_time': (10e-9, 5e-6),
  'collective_latency': (1e-6, 200e-6),
  'host_overlap': (0.3, 0.98),
  'embedding_efficiency': (0.1, 1.0),
  'hybrid_embedding_efficiency': (0.1, 1.0),
}
FIT_RANGE_WHY = {
  'step_floor': 'a CUDA-graph launch and a prefetched batch hand-off take '
  'tens of us (NVIDIA DLRM README: 0.14 ms for a whole graph-captured '
  'forward); loading and copying a batch on the main thread takes up to '
  'tens of ms (pytorch/torchrec PR 1694)',
  'op_host_time': 'CPU-side work per eager PyTorch operator is ~5-25 us '
  'in the dispatcher and launch alone; Python modules and autograd add '
  'tens of us (NVIDIA DLRM README: eager inference floor ~0.3 ms above '
  'the graph floor for a handful of module calls)',
  'sample_host_time': 'a batch loaded on the training thread costs tens '
  'of ns per sample when it is one memcpy of prepared arrays, and a few '
  'us when Python touches each sample (pytorch/torchrec PR 1694: "tens '
  'of milliseconds" a batch for production inputs)',
  'collective_latency': 'NCCL small-message latency is ~0.5-6 us under '
  'CUDA graphs and a few us eager on NVLink (nccl issues 1984, 1259); '
  'an eager torch.distributed call with stream waits and tensor '
  'bookkeeping adds up to ~100-200 us',
  'host_overlap': 'eager PyTorch queues kernels ahead of the GPU, but '
  'every device-to-host sync (loss logging, split sizes of the sparse '
  'input) drains the queue: never fully hidden, rarely not at all',
  'embedding_efficiency': 'fused embedding kernels sustain a large share '
  'of the hardware rate (TorchRec planner: FUSED at 1.0 x HBM bandwidth); '
  'below 0.1 no production kernel would ship',
  'hybrid_embedding_efficiency': "HugeCTR's hybrid embedding adds passes "
  "of its own (frequent and infrequent indices, the frequent rows' "
  'gradients reduced per GPU): a share of the rate below the fused '
  "kernels', above 0.1",
}


def unlabelled(s: Stack) -> Stack:
  """The same stack without its labels (its name and sources, static
  fields that no term reads), so that releases that differ only in their
  labels share one compile (`cost_model.evaluate_design`, the planner's
  HBM need)."""
  return dataclasses.replace(s, name='', sources=())


def leaf_paths(s: Stack) -> list[str]:
  """Names of the continuous fields, in pytree order."""
  return [f.name for f in dataclasses.fields(s) if not f.metadata.get('static')]


def _element_bytes(precision: str, dense_precision: str) -> int:
  """Bytes per element of a stack's precision field ('dense': the
  workload's dense precision)."""
  from codesign.spec.workload import PRECISION_BYTES

  return PRECISION_BYTES[dense_precision if precision == 'dense' else precision]


def allreduce_bytes_per_element(s: Stack, dense_precision: str) -> int:
  """Bytes per element of the gradient allreduce."""
  return _element_bytes(s.allreduce_precision, dense_precision)


def payload_bytes(s: Stack, dense_precision: str) -> int:
  """Bytes per element of the pooled all-to-all payload."""
  return _element_bytes(s.payload_precision, dense_precision)


def gemm_precision(s: Stack, dense_precision: str) -> str:
  """The precision GEMMs run in: fp32 becomes tf32 when the stack allows."""
  if dense_precision == 'fp32' and s.tf32:
    return 'tf32'
  return dense_precision


def problems(s: Stack) -> list[str]:
  """Every reason `s` is not a valid stack, one sentence each. Fields
  that are None (unreadable in a JSON file, reported there) are skipped."""
  out = []

  def choice(value, choices, what):
    if value is not None and value not in choices:
      out.append(
        f'unknown stack {what} {value!r} (valid choices: '
        + ', '.join(choices)
        + ')'
      )

  def within(key, lo, hi, what):
    value = getattr(s, key)
    if value is not None and not lo <= value <= hi:
      out.append(f'stack.{key} must {what}, got {value}')

  choice(s.graph_scope, GRAPH_SCOPES, 'graph_scope')
  choice(s.bottom_mlp, BOTTOM_MLP_PLACEMENTS, 'bottom_mlp')
  choice(s.embedding_kernel, EMBEDDING_KERNELS, 'embedding_kernel')
  choice(s.mlp_fusion, MLP_FUSIONS, 'mlp_fusion')
  choice(s.update_path, UPDATE_PATHS, 'update_path')
  choice(s.payload_precision, PAYLOAD_PRECISIONS, 'payload_precision')
  choice(s.train_pipeline, TRAIN_PIPELINES, 'train_pipeline')
  for t in s.trainers or ():
    choice(t, ('accelerator', 'cpu'), 'trainer')
  for v in s.vendors or ():
    choice(v, VENDORS, 'vendor')
  choice(s.alltoall, ALLTOALLS, 'alltoall')
  choice(s.allreduce_precision, ALLREDUCE_PRECISIONS, 'allreduce_precision')
  choice(s.collective_library, COLLECTIVE_LIBRARIES, 'collective_library')
  choice(s.planner, PLANNERS, 'planner')
  for key in (
    'fused_interaction',
    'fused_dense_optimizer',
    'pooled_cast',
    'uvm_caching',
    'tf32',
    'allreduce_overlap',
  ):
    value = getattr(s, key)
    if value is not None and not isinstance(value, bool):
      out.append(f'stack.{key} must be true or false')
  for key, (lo, hi) in STATIC_BOUNDS.items():
    kind = 'lie in' if key in STATIC_REALS else 'be an integer in'
    within(key, lo, hi, f'{kind} [{lo:g}, {hi:g}]')
  if s.id_bytes is not None and s.id_bytes not in ID_BYTES:
    out.append(f'stack.id_bytes must be 4 or 8, got {s.id_bytes}')
  units = {f.name: f.metadata.get('unit') for f in dataclasses.fields(s)}
  for path in leaf_paths(s):
    lo, hi = BOUNDS[path]
    if getattr(s, path) is None:
      continue
    x = float(getattr(s, path))
    # Slack of an ulp or so: a bound typed in microseconds converts to SI
    # within rounding.
    if not lo - 1e-12 * abs(lo) <= x <= hi + 1e-12 * abs(hi):
      unit = units[path]
      scale = UNITS[unit] if unit else 1.0
      key = f'{path}_{unit}' if unit else path
      out.append(
        f'stack.{key} must lie in [{lo / scale:g}, {hi / scale:g}]'
        f'{" " + unit if unit else ""}, got {x / scale:g}'
      )
  return out


def _a(word: str) -> str:
  return ('an ' if word[0] in 'aeiou' else 'a ') + word


def mismatch(s: Stack, trainer: str, vendor: str | None) -> str | None:
  """One sentence when stack `s` cannot train on a `trainer`
  (`hardware.TRAINERS`) whose device is made by `vendor` (None: unknown,
  accepted); None when it can."""
  if trainer not in s.trainers:
    return (
      f'stack {s.name!r} does not run on {_a(trainer)} trainer (it runs '
      'on: ' + ', '.join(s.trainers) + ')'
    )
  if vendor is not None and vendor not in s.vendors:
    return (
      f'stack {s.name!r} does not run on {vendor} devices (it runs on: '
      + ', '.join(s.vendors)
      + ')'
    )
  return None


def validate(s: Stack) -> Stack:
  """Raises `InputError` naming every problem if `s` is not a valid stack
  (`problems`); returns `s`."""
  raise_problems(problems(s), what='stack')
  return s
