"""The named terms of one DLRM training step, each a small pure function.

`codesign.cost_model.evaluate` composes them. Every term takes the
platform (`hardware.Platform`, leaves possibly traced), the static
workload, the plan and the software stack (`stack.Stack`) or the
`Setup` derived from them, and returns seconds, bytes or counts in SI.
No term branches on a traced value; maxima are smooth p-norms, and every
division has a floor, so values and gradients are finite inside
`hardware.BOUNDS` and `stack.BOUNDS`.

Terms, with the physics each one stands for:
- `dense_times`, `mlp_elementwise`, `interaction_times`,
  `dense_optimizer_time`: the dense half (GEMM rooflines with a
  tile-size efficiency; unfused bias/activation passes; the dot
  interaction as a fused kernel or as tiny batched GEMMs).
- `hbm_hits`, `distinct_rows`, `busiest_rank`, `embedding_hbm`,
  `embedding_ddr`, `pooled_to_host`: embedding lookups and row updates
  per tier (updates touch each distinct row once, after the stack's
  sort-and-aggregate), and the load of the busiest rank when whole
  tables pack unevenly.
- `alltoall_pooled`, `alltoall_ids`, `allreduce_dense`: collectives in
  the alpha-beta form with the stack's software latency per call.
- `kernel_counts`, `host_time`, `compose`: the host side (operators the
  framework dispatches, CUDA graphs), device-side kernel gaps, and how
  host and device time combine.
- `memory`, `capex_and_power`: feasibility per tier and the bill.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from codesign import stack as stack_lib
from codesign import workload as wl
from codesign.hardware import Platform
from codesign.plan import Plan
from codesign.smooth import TINY, safe_div, smooth_max, smooth_min
from codesign.stack import Stack

# Elementwise kernels stream at this share of the memory bandwidth
# (BabelStream-class kernels reach 80-90% of HBM peak on V100/A100; the
# low end, since DLRM's activation passes are short).
STREAM_EFFICIENCY = 0.8
# Memory passes over each MLP layer's output per sample and step, beyond
# the GEMM's own read and write, by `stack.mlp_fusion`: `none` (PyTorch
# nn.Linear + nn.ReLU): the bias-add output copy, ReLU read and write
# forward (3), ReLU gradient read of gradient and output and write, bias
# gradient read backward (4); `elementwise` (apex MLP, XLA loop fusion):
# bias and ReLU in one read-write pass forward (2), one ReLU-and-bias
# gradient kernel reading gradient and output and writing (3);
# `epilogue` (cuBLASLt BIAS/RELU and DRELU_BGRAD, HugeCTR
# FusedInnerProduct, oneDNN post-ops): one pass backward for the saved
# activation mask.
MLP_PASSES = {'none': 7.0, 'elementwise': 5.0, 'epilogue': 1.0}
# The forward share of those passes (3 of 7, 2 of 5, none of 1).
MLP_FORWARD_SHARE = {
  'none': 3.0 / 7.0,
  'elementwise': 2.0 / 5.0,
  'epilogue': 0.0,
}
# Kernels per layer and step beyond the GEMMs (counted in `dense_times`):
# ReLU forward, ReLU and bias gradients backward (none); bias-ReLU
# forward, their gradient backward (elementwise); none (epilogue).
MLP_KERNELS = {'none': 3, 'elementwise': 2, 'epilogue': 0}
MLP_KERNELS_FORWARD = {'none': 1, 'elementwise': 1, 'epilogue': 0}
KERNELS_LOSS = 4  # BCE-with-logits and sigmoid, forward and backward
KERNELS_DATA = 3  # host-to-device copies of dense, sparse, labels
KERNELS_AMP = 3  # loss scale, unscale/inf check, scale update
OPTIMIZER_KERNELS_PER_TENSOR = {
  'sgd': 1,
  'adagrad': 3,
  'rowwise_adagrad': 3,
  'adam': 4,
}
# Bottom MLP alone on rank 0 above this many ranks (NVIDIA DLRM
# dlrm/utils/distributed.py get_device_mapping: `if num_gpus > 4`).
ONE_DEVICE_DEDICATED_ABOVE = 4.0
# Gauss-Legendre nodes of the distinct-row integral.
_QUAD_NODES = 16
# Packing bounds in `busiest_rank` (j = 0 .. J-1): exact while a rank
# holds at most J whole tables; beyond, the share bound sum/R is within
# a factor (1 + R/T) <= 1 + 1/J of the packing (each bound costs a
# batched gather, and the model must stay fast).
_MAX_PACKING_BOUNDS = 4
# Radix-sort traffic per sorted id: about 4 passes (8-bit digits over the
# ~25 bits of a table's row range), each reading and writing the key.
SORT_PASSES = 4
# FBGEMM TBE block penalties for narrow shards (TorchRec planner
# constants.py: HALF_BLOCK_PENALTY 1.15 below 128 columns,
# QUARTER_BLOCK_PENALTY 1.75 below 64; FULL_BLOCK_EMB_DIM 128).
FULL_BLOCK_DIM = 128
HALF_BLOCK_PENALTY = 1.15
QUARTER_BLOCK_PENALTY = 1.75


# ---- what every term needs --------------------------------------------------


class Setup(NamedTuple):
  """Quantities shared by the terms of one design (scalars unless noted).

  ranks: R = nodes x ranks per node; per_node: ranks per node (sockets on
  a CPU trainer); batch: global batch B (Python float); local: B / R;
  table_ranks: ranks that hold sharded tables (R, or R - 1 when the
  bottom MLP has a rank to itself); bottom_batch: samples the bottom MLP
  runs per rank (B / R, or B on one device); one_device: static bool,
  the bottom MLP on rank 0; dedicated: about 1 when rank 0 holds no
  tables, else 0; cpu_trainer: static bool.
  """

  ranks: jax.Array
  per_node: jax.Array
  batch: float
  local: jax.Array
  table_ranks: jax.Array
  bottom_batch: jax.Array
  one_device: bool
  dedicated: jax.Array
  cpu_trainer: bool


def ranks_per_node(p: Platform):
  if p.trainer == 'cpu':
    return p.sockets_per_node
  return p.accelerators_per_node


def setup(p: Platform, w: wl.Workload, s: Stack) -> Setup:
  a = ranks_per_node(p)
  ranks = p.nodes * a
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
    batch=batch,
    local=batch / ranks,
    table_ranks=table_ranks,
    bottom_batch=bottom_batch,
    one_device=one_device,
    dedicated=dedicated,
    cpu_trainer=p.trainer == 'cpu',
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


def dense_elem_bytes(w: wl.Workload) -> int:
  return wl.PRECISION_BYTES[w.dense_precision]


# ---- dense half -------------------------------------------------------------


@functools.cache
def gemm_table(w: wl.Workload) -> dict[str, np.ndarray]:
  """Static per-GEMM arrays (length L) of the workload's dense part."""
  gs = wl.gemms(w)
  comp = {'bottom_mlp': 0, 'interaction': 1, 'top_mlp': 2}
  batched = np.array([g.m > 1 for g in gs])  # per-sample products (dot)
  fwd, bwd = zip(*(wl.gemm_flops(g) for g in gs), strict=True)
  return {
    'component': np.array([comp[g.component] for g in gs]),
    'batched': batched.astype(np.float64),
    'm': np.array([float(g.m) for g in gs]),
    'k': np.array([float(g.k) for g in gs]),
    'n': np.array([float(g.n) for g in gs]),
    'fwd_flops': np.array(fwd),
    'bwd_flops': np.array(bwd),
    # elements touched per sample (activations in and out) and per step
    # (weights): per-sample products also read their "weights" per sample.
    'per_sample_elems': np.array(
      [g.m * g.k + g.m * g.n + (g.k * g.n if g.m > 1 else 0) for g in gs],
      dtype=np.float64,
    ),
    'fixed_elems': np.array(
      [0 if g.m > 1 else g.k * g.n for g in gs], dtype=np.float64
    ),
    'bwd_kernels': np.array([2.0 if g.input_grad else 1.0 for g in gs]),
  }


def _tile_efficiency(dim, half):
  return dim / (dim + half)


def dense_times(p: Platform, w: wl.Workload, s: Stack, st: Setup):
  """Per-GEMM (forward, backward) seconds on one rank, shape (L,) each.

  A roofline per GEMM: FLOPs at the peak of the precision the stack runs
  (fp32 becomes TF32 where the stack allows it) times a tile efficiency
  m/(m+h) k/(k+h) n/(n+h), against the bytes of its operands; plus one
  kernel overhead per kernel. Bottom-MLP GEMMs run `bottom_batch`
  samples, the others the local batch.
  """
  g = gemm_table(w)
  dev, bw = dense_device(p)
  peak = peak_flops(dev, stack_lib.gemm_precision(s, w.dense_precision))
  elem = dense_elem_bytes(w)
  is_bottom = (g['component'] == 0).astype(np.float64)
  b = is_bottom * st.bottom_batch + (1.0 - is_bottom) * st.local
  m = g['batched'] * g['m'] + (1.0 - g['batched']) * b
  eff = dev.gemm_efficiency * (
    _tile_efficiency(m, dev.gemm_half_size)
    * _tile_efficiency(g['k'], dev.gemm_half_size)
    * _tile_efficiency(g['n'], dev.gemm_half_size)
  )
  nbytes = elem * (b * g['per_sample_elems'] + g['fixed_elems'])
  fwd = smooth_max(b * g['fwd_flops'] / (peak * eff), nbytes / bw)
  bwd = smooth_max(b * g['bwd_flops'] / (peak * eff), 2.0 * nbytes / bw)
  fwd = fwd + dev.kernel_overhead
  bwd = bwd + g['bwd_kernels'] * dev.kernel_overhead
  return fwd, bwd


def mlp_elementwise(p: Platform, w: wl.Workload, s: Stack, st: Setup):
  """((bottom fwd, bwd), (top fwd, bwd)) seconds per step of the MLPs'
  elementwise passes: `MLP_PASSES` passes over every layer's output at
  `STREAM_EFFICIENCY` of the memory bandwidth (`MLP_FORWARD_SHARE` of
  them forward), and one kernel overhead per kernel (`MLP_KERNELS`, of
  which `MLP_KERNELS_FORWARD` forward)."""
  dev, bw = dense_device(p)
  passes = MLP_PASSES[s.mlp_fusion]
  share = MLP_FORWARD_SHARE[s.mlp_fusion]
  elem = dense_elem_bytes(w)
  rate = bw * STREAM_EFFICIENCY
  k_fwd = float(MLP_KERNELS_FORWARD[s.mlp_fusion])
  k_bwd = float(MLP_KERNELS[s.mlp_fusion]) - k_fwd
  out = []
  for batch, widths in (
    (st.bottom_batch, w.bottom_mlp),
    (st.local, w.top_mlp),
  ):
    stream = batch * passes * float(sum(widths)) * elem / rate
    layers = len(widths) * dev.kernel_overhead
    out.append(
      (stream * share + k_fwd * layers, stream * (1.0 - share) + k_bwd * layers)
    )
  return tuple(out)


def interaction_times(p: Platform, w: wl.Workload, s: Stack, st: Setup, gemm):
  """(forward, backward) seconds of the interaction on one rank.

  `gemm` is (fwd, bwd) of the interaction's GEMMs from `dense_times`.
  A fused dot interaction (NVIDIA's dot_based_interact, HugeCTR) is one
  kernel each way: a roofline of its FLOPs at the GEMM efficiency
  without tile penalties against its bytes (the F x d inputs and the
  output forward; twice that backward). Otherwise the batched GEMMs run
  as they are and the output is read and written once forward, twice
  backward (DCN-v2: three passes per cross layer).
  """
  dev, bw = dense_device(p)
  elem = dense_elem_bytes(w)
  width = wl.interaction_output_width(w)
  b = st.local
  if w.interaction == 'dot' and s.fused_interaction:
    f, d = w.num_features, w.bottom_mlp[-1]
    flops = 2.0 * f * f * d  # the full product per sample, forward
    peak = peak_flops(dev, stack_lib.gemm_precision(s, w.dense_precision))
    nbytes = b * (f * d + width) * elem
    fwd = smooth_max(b * flops / (peak * dev.gemm_efficiency), nbytes / bw)
    bwd = smooth_max(
      2.0 * b * flops / (peak * dev.gemm_efficiency), 2.0 * nbytes / bw
    )
    return fwd + dev.kernel_overhead, bwd + dev.kernel_overhead
  passes = 3 * w.dcn_layers if w.interaction == 'dcnv2' else 1
  nbytes = 2.0 * b * width * passes * elem
  fwd = gemm[0] + nbytes / bw + dev.kernel_overhead
  bwd = gemm[1] + 2.0 * nbytes / bw + dev.kernel_overhead
  return fwd, bwd


def dense_optimizer_time(p: Platform, w: wl.Workload, s: Stack):
  """Seconds of the dense optimizer update on one rank: it streams
  weights, gradients and state once (fp32 master weights, plus the 16-bit
  copy under mixed precision)."""
  dev, bw = dense_device(p)
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  mixed = 2.0 if w.dense_precision in ('bf16', 'fp16') else 0.0
  nbytes = wl.dense_param_count(w) * (12.0 + 8.0 * state + mixed)
  return nbytes / bw + dev.kernel_overhead


def dense_hbm_bytes(w: wl.Workload, p: Platform, s: Stack):
  """Bytes per rank for the dense model, its optimizer and activations."""
  st = setup(p, w, s)
  g = gemm_table(w)
  params = wl.dense_param_count(w)
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  mixed = 2.0 if w.dense_precision in ('bf16', 'fp16') else 0.0
  weights = params * (4.0 + 4.0 + 4.0 * state + mixed)  # w, grad, state
  elem = dense_elem_bytes(w)
  pooled = w.num_features * w.bottom_mlp[-1] * elem
  bottom = g['component'] == 0
  acts = st.local * (
    float(np.sum(g['per_sample_elems'][~bottom])) * elem + 3 * pooled
  )
  # Bottom-MLP activations at the samples it runs; with the bottom MLP on
  # rank 0 (whole batch) every rank is charged them: at most a few
  # hundred MB, against tens of GB of HBM.
  acts = (
    acts + st.bottom_batch * float(np.sum(g['per_sample_elems'][bottom])) * elem
  )
  return weights + acts


# ---- embedding tables -------------------------------------------------------


@functools.cache
def table_arrays(
  w: wl.Workload, plan_static: tuple, granules: tuple = (64, 64)
) -> dict[str, np.ndarray]:
  """Static per-table arrays (length T); `granules` are the (HBM, DDR)
  access sizes in bytes."""
  sharding, column_shards, _ = plan_static
  rows = np.array([t.rows for t in w.tables], dtype=np.float64)
  dim = np.array([t.dim for t in w.tables], dtype=np.float64)
  pool = np.array([t.pooling for t in w.tables], dtype=np.float64)
  row_bytes = np.array([t.row_bytes for t in w.tables], dtype=np.float64)
  state_elems = np.array(
    [wl.optimizer_state_elems_per_row(w.optimizer, t.dim) for t in w.tables],
    dtype=np.float64,
  )
  masks = {
    s: np.array([x == s for x in sharding], dtype=np.float64)
    for s in (
      'table_wise',
      'row_wise',
      'table_row_wise',
      'column_wise',
      'data_parallel',
    )
  }
  shards = 1.0 + masks['column_wise'] * (column_shards - 1.0)
  shard_dim = dim / shards
  penalty = np.where(
    shard_dim >= FULL_BLOCK_DIM,
    1.0,
    np.where(shard_dim >= FULL_BLOCK_DIM / 2, HALF_BLOCK_PENALTY, 1.0),
  )
  penalty = np.where(
    shard_dim < FULL_BLOCK_DIM / 2, QUARTER_BLOCK_PENALTY, penalty
  )

  def touched(granule):
    # Bytes moved per lookup (gather) and per row update at `granule`.
    gather, update = [], []
    for t, k in zip(w.tables, shards, strict=True):
      k = int(k)
      g = k * wl.granule_bytes(t.row_bytes / k, granule)
      st = 4 * wl.optimizer_state_elems_per_row(w.optimizer, t.dim)
      # Adam keeps two state vectors; each is touched separately.
      vectors = 2 if w.optimizer == 'adam' else 1
      s = vectors * k * wl.granule_bytes(st / vectors / k, granule)
      s = s if st else 0.0
      gather.append(g)
      update.append(2.0 * (g + s))  # read and write row and state
    return np.array(gather), np.array(update)

  return {
    'rows': rows,
    'dim': dim,
    'pool': pool,
    'pool_exponent': np.maximum(pool, 1.0),
    'row_bytes': row_bytes,
    'table_bytes': rows * (row_bytes + 4.0 * state_elems),
    # Copies of each id sent forward: one per column shard of a
    # column-wise table, one otherwise.
    'id_copies': shards,
    # FBGEMM's penalty for shards narrower than its 128-wide block.
    'block_penalty': penalty,
    'touched_hbm': touched(granules[0]),
    'touched_ddr': touched(granules[1]),
    **masks,
  }


def hbm_hits(w: wl.Workload, frac):
  """Share of lookups served by the hottest `frac` of each table's rows:
  hit(f) = 1 - (1 - f)^k, k = `popularity_skew`."""
  return 1.0 - (1.0 - frac) ** w.popularity_skew


@functools.cache
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
  x, wt = np.polynomial.legendre.leggauss(n)
  return 0.5 * (x + 1.0), 0.5 * wt  # on [0, 1]


def distinct_rows(rows, lookups, skew: float, lo, hi):
  """Expected distinct rows touched among the rows ranked in [lo, hi).

  `lookups` draws over `rows` rows whose popularity follows the cache
  curve hit(f) = 1 - (1 - f)^k: the row at rank fraction x is drawn with
  probability k (1 - x)^(k - 1) / rows per lookup. A row is touched
  unless every draw misses it:
    distinct = rows * integral_lo^hi [1 - exp(-lookups k (1 - x)^(k-1)
    / rows)] dx,
  by Gauss-Legendre quadrature. Uniform traffic (k = 1) gives the
  classical rows (1 - exp(-lookups / rows)) over the whole table. Shapes
  broadcast (per table).
  """
  if skew == 1.0:  # uniform: the integrand is constant
    rate = safe_div(jnp.asarray(lookups), jnp.asarray(rows))
    return rows * -jnp.expm1(-rate) * (jnp.asarray(hi) - jnp.asarray(lo))
  t, wt = _gauss_legendre(_QUAD_NODES)
  lo = jnp.asarray(lo)[..., None]
  hi = jnp.asarray(hi)[..., None]
  x = lo + (hi - lo) * t
  density = skew * jnp.maximum(1.0 - x, 0.0) ** (skew - 1.0)
  rate = safe_div(jnp.asarray(lookups)[..., None], jnp.asarray(rows)[..., None])
  touched = -jnp.expm1(-rate * density)
  return rows * jnp.sum(wt * touched, axis=-1) * (hi - lo)[..., 0]


def busiest_rank(load, whole, ranks, order):
  """Load of the busiest of `ranks` ranks that hold whole tables.

  `load` (..., T) is each table's load (several loads at once along the
  leading axes), `whole` (T,) masks the tables placed whole (static), and
  `order` ((..., T) or (T,), static) orders the tables from the largest
  load down. A greedy planner cannot beat the packing bounds: every
  rank's share sum/R, and for each j the (jR + 1) largest whole tables,
  of which some rank holds j + 1, so at least (j + 1) times the
  (jR + 1)-th largest. (26 equal tables on 8 ranks: 4 on one rank, not
  3.25.) The bounds combine by a smooth maximum; j runs to
  `_MAX_PACKING_BOUNDS` - 1 (beyond, the share bound dominates but for
  very uneven tables). The largest table is the exact maximum (j = 0);
  for j >= 1 the ordered loads of the whole tables are read at the
  position jR by a Catmull-Rom spline over the four nearest tables: the
  loads themselves at whole positions, continuously differentiable in R
  between them (a linear interpolation has a corner at every integer R,
  where every buildable design sits). Positions past the last table
  saturate smoothly (softplus) and read zero. The order is static, not a
  sort of the traced loads (a sort per design halved the batched model's
  speed): `load_orders` derives it from the plan's HBM fractions when
  they are concrete and from the tables' static sizes otherwise.
  """
  whole = np.asarray(whole) > 0.5
  idx = np.flatnonzero(whole)
  x = jnp.asarray(load)[..., idx]
  t = len(idx)
  total = jnp.sum(x, axis=-1) / ranks
  bounds = [total[..., None], jnp.max(x, axis=-1)[..., None]]
  j = np.arange(1, min(t, _MAX_PACKING_BOUNDS), dtype=np.float64)
  if len(j):
    # The order of the whole tables alone, as positions within `idx`.
    where = np.full(len(whole), -1)
    where[idx] = np.arange(t)
    order = np.broadcast_to(np.asarray(order), jnp.shape(load))
    kept = where[order]
    kept = kept[kept >= 0].reshape(order.shape[:-1] + (t,))
    ordered = jnp.take_along_axis(x, kept, axis=-1)
    zeros = jnp.zeros(x.shape[:-1] + (3,), x.dtype)
    # Padded: the largest once before position 0, zeros after the last.
    padded = jnp.concatenate([ordered[..., :1], ordered, zeros], axis=-1)
    gap = float(t) - j * ranks
    pos = float(t) - 0.25 * jax.nn.softplus(4.0 * gap)  # smooth min(jR, T)
    pos = jnp.maximum(pos, 0.0)
    below = jnp.floor(pos)
    u = pos - below
    i = below.astype(jnp.int32) + 1  # index of position `below` in padded
    p0, p1 = padded[..., i - 1], padded[..., i]
    p2, p3 = padded[..., i + 1], padded[..., i + 2]
    at = p1 + 0.5 * u * (
      (p2 - p0)
      + u
      * (
        (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3) + u * (3.0 * (p1 - p2) + p3 - p0)
      )
    )
    bounds.append((j + 1.0) * jnp.maximum(at, 0.0))
  return smooth_max(jnp.concatenate(bounds, axis=-1), axis=-1)


def per_rank(load, t: dict, st: Setup, orders):
  """Load of the busiest rank for per-table `load` (..., T), by sharding.

  Whole tables (table-wise) pack by `busiest_rank` over the ranks that
  hold tables, in the static `orders` ((..., T) or (T,); see
  `load_orders`); table-row-wise tables split over one node's ranks (at
  least the largest / ranks per node); other shardings spread evenly.
  Positively homogeneous in `load`, so per-table seconds and per-table
  bytes over a common rate give the same answer.
  """
  tw, twrw = t['table_wise'], t['table_row_wise']
  spread = jnp.sum(load * (1.0 - tw - twrw), axis=-1) / st.table_ranks
  out = spread
  if np.any(tw):  # static: the plan's sharding
    out = out + busiest_rank(load, tw, st.table_ranks, orders)
  if np.any(twrw):  # static: the plan's sharding
    # p = 64: on one node the two bounds tie (one table), where p = 8
    # would overstate the load by 9%; p = 64 by 1%.
    out = out + smooth_max(
      jnp.sum(load * twrw, axis=-1) / st.table_ranks,
      jnp.max(load * twrw, axis=-1) / st.per_node,
      p=64,
    )
  return out


def _distinct_np(rows, lookups, skew: float, frac):
  """numpy `distinct_rows` over the hottest `frac` of each table."""
  rows = np.maximum(rows, 1.0)
  if skew == 1.0:
    return rows * frac * -np.expm1(-lookups / rows)
  t, wt = _gauss_legendre(_QUAD_NODES)
  x = frac[..., None] * t
  density = skew * np.maximum(1.0 - x, 0.0) ** (skew - 1.0)
  touched = -np.expm1(-(lookups / rows)[..., None] * density)
  return rows * np.sum(wt * touched, axis=-1) * frac


def load_orders(w: wl.Workload, plan: Plan, s: Stack, t: dict) -> dict:
  """Static orders of the tables, largest first, for `busiest_rank`:
  `gather` (lookups served from HBM x bytes each), `update` (the bytes
  `update_bytes` moves on the stack's update path), `cast` (pooled bytes)
  and `bytes` (bytes in HBM). The plan's HBM fractions enter when they
  are concrete (a plan made by `codesign.planner`); traced fractions (a
  search) order by the tables' sizes with every row in HBM."""
  frac = plan.hbm_fraction
  if isinstance(frac, jax.core.Tracer):
    frac = np.ones(len(w.tables))
  frac = np.asarray(frac, np.float64)
  frac = t['data_parallel'] + (1.0 - t['data_parallel']) * frac
  hit = 1.0 - (1.0 - frac) ** w.popularity_skew
  lookups = w.global_batch * t['pool'] * hit
  gather_b, update_b = t['touched_hbm']
  distinct = _distinct_np(
    t['rows'], w.global_batch * t['pool'], w.popularity_skew, frac
  )
  bags = w.global_batch * (1.0 - (1.0 - hit) ** t['pool_exponent'])
  update = np.asarray(
    update_bytes(s, t, lookups, distinct, t['touched_hbm'], bags)
  )

  def order(x):
    return np.argsort(-x, kind='stable')

  return {
    'gather': order(lookups * gather_b * t['block_penalty']),
    'update': order(update * t['block_penalty']),
    'cast': order(t['dim']),
    'bytes': order(frac * t['table_bytes']),
  }


class Lookups(NamedTuple):
  """Per-table lookup traffic of one step, shape (T,) each.

  frac: share of rows in HBM (1 for data-parallel tables, 0 on a CPU
  trainer); hit: lookups served by HBM; hbm, ddr: lookups per tier;
  distinct_hbm, distinct_ddr: distinct rows updated per tier.
  """

  frac: jax.Array
  hit: jax.Array
  hbm: jax.Array
  ddr: jax.Array
  distinct_hbm: jax.Array
  distinct_ddr: jax.Array


def lookups(w: wl.Workload, plan: Plan, t: dict, st: Setup, row_scale):
  dp = t['data_parallel']
  if st.cpu_trainer:
    frac = jnp.zeros_like(plan.hbm_fraction)
  else:
    frac = dp + (1.0 - dp) * plan.hbm_fraction
  hit = hbm_hits(w, frac)
  n = st.batch * t['pool']
  rows = t['rows'] * row_scale
  k = w.popularity_skew
  d_hbm = distinct_rows(rows, n, k, 0.0, frac)
  d_ddr = distinct_rows(rows, n, k, frac, 1.0)
  # On a CPU trainer every table, data-parallel ones included, is in DDR.
  ddr_share = 1.0 if st.cpu_trainer else 1.0 - dp
  return Lookups(
    frac=frac,
    hit=hit,
    hbm=n * hit,
    ddr=n * (1.0 - hit) * ddr_share,
    distinct_hbm=d_hbm,
    distinct_ddr=d_ddr * ddr_share,
  )


def embedding_rate_factor(s: Stack, t: dict):
  """Per-table divisor of the hardware rate: the stack's efficiency, one
  kernel per table, FBGEMM block penalties. Shape (T,)."""
  kernel = (
    1.0 if s.embedding_kernel == 'fused' else stack_lib.PER_TABLE_EFFICIENCY
  )
  return t['block_penalty'] / (s.embedding_efficiency * kernel)


def update_bytes(s: Stack, t: dict, lk_lookups, lk_distinct, touched, bags):
  """Bytes moved per table (T,) to apply one step's row gradients.

  `lk_lookups` and `lk_distinct` are the lookups and distinct rows of
  the tier, `touched` its (gather, update) bytes per row, `bags` the
  pooled vectors per table (samples). By `stack.update_path`:
  - fused (FBGEMM TBE, HugeCTR): sort the ids, read each bag's pooled
    gradient once, read-modify-write each distinct row and its
    optimizer state once;
  - sparse_grad (PyTorch sparse gradients, coalesced, then the
    optimizer): write one gradient row per lookup, read and write them
    again to sort by row, read them to sum per row and write the sums,
    then read-modify-write each distinct row and its state;
  - scatter (XLA scatter-add): every lookup read-modify-writes its row
    and state, no sort.
  """
  gather_b, update_b = touched
  if s.update_path == 'scatter':
    return lk_lookups * update_b
  sort = lk_lookups * s.id_bytes * 2.0 * SORT_PASSES
  if s.update_path == 'fused':
    grads = bags * t['dim'] * 4.0
    return sort + grads + lk_distinct * update_b
  return (
    sort + 4.0 * lk_lookups * gather_b + lk_distinct * (gather_b + update_b)
  )


def pooled_cast_bytes(s: Stack, t: dict, st: Setup, payload: int):
  """Bytes per table (T,) of casting pooled embeddings to the payload
  precision in a pass of their own (`stack.pooled_cast`), one way: read
  in the table precision and write in the payload's (forward), the
  reverse backward. None where the kernel writes the payload precision
  itself or the two precisions agree. `st` None gives bytes per sample
  (to tell whether any move)."""
  if not s.pooled_cast or (st is not None and st.cpu_trainer):
    return None
  elem = t['row_bytes'] / t['dim']
  batch = 1.0 if st is None else st.batch
  moved = batch * t['dim'] * (elem + payload) * (elem != payload)
  if not np.any(moved):
    return None
  return moved * (1.0 - t['data_parallel'])


def hbm_loads(s: Stack, t: dict, lk: Lookups, st: Setup, payload: int):
  """Per-table bytes (T,) of each kind of HBM work, by name: `gather`
  (lookups x bytes), `update` (`update_bytes`), `cast` (pooled cast, when
  there is one) and `resident` (rows held in HBM; data-parallel tables
  apart). Gather and update carry the stack's rate factor
  (`embedding_rate_factor`)."""
  gather_b, _ = t['touched_hbm']
  factor = embedding_rate_factor(s, t)
  bags = st.batch * (1.0 - t['data_parallel'])
  if not st.cpu_trainer:
    bags = bags * (1.0 - (1.0 - lk.hit) ** t['pool_exponent'])
  rmw = update_bytes(s, t, lk.hbm, lk.distinct_hbm, t['touched_hbm'], bags)
  out = {'gather': lk.hbm * gather_b * factor, 'update': rmw * factor}
  cast = pooled_cast_bytes(s, t, st, payload)
  if cast is not None:
    out['cast'] = cast
  if not st.cpu_trainer:
    out['resident'] = lk.frac * t['table_bytes'] * (1.0 - t['data_parallel'])
  return out


ORDER_OF = {
  'gather': 'gather',
  'update': 'update',
  'cast': 'cast',
  'resident': 'bytes',
}


def busiest_loads(loads: dict, t: dict, st: Setup) -> dict:
  """The busiest rank's share of each per-table load (`hbm_loads`), all
  packed in one `per_rank` call (each in its own order)."""
  names = list(loads)
  orders = np.stack([t['orders'][ORDER_OF[k]] for k in names])
  packed = per_rank(jnp.stack([loads[k] for k in names]), t, st, orders)
  return {k: packed[i] for i, k in enumerate(names)}


def embedding_hbm(p, t, st: Setup, busiest: dict):
  """(gather, update) seconds of the HBM-resident lookups on the busiest
  rank (`busiest_loads`), each with its share of the pooled cast at the
  streaming rate. Data-parallel tables update their whole replica
  densely."""
  acc = p.accelerator
  gather = busiest['gather'] / (acc.hbm_bandwidth * acc.gather_efficiency)
  dp_dense = jnp.sum(t['data_parallel'] * t['table_bytes'] * 2.0)
  dp_on_hbm = 0.0 if st.cpu_trainer else dp_dense
  update = (busiest['update'] + dp_on_hbm) / (
    acc.hbm_bandwidth * acc.update_efficiency
  )
  if 'cast' in busiest:
    cast_s = busiest['cast'] / (acc.hbm_bandwidth * STREAM_EFFICIENCY)
    gather, update = gather + cast_s, update + cast_s
  return gather, update


class DdrTerms(NamedTuple):
  """Seconds of the DDR-resident lookups: on the CPU sockets (`cpu_*`)
  or read by the accelerators over the host link (`uvm_*`)."""

  cpu_gather: jax.Array
  cpu_update: jax.Array
  uvm_gather: jax.Array
  uvm_update: jax.Array


def host_link_rate(p: Platform):
  """Bytes/s from one node's host memory to its accelerators."""
  return smooth_min(
    p.accelerators_per_node * p.host_link.bandwidth,
    p.sockets_per_node * p.cpu.pcie_bandwidth,
  )


def embedding_ddr(p, w, plan, s, t, lk: Lookups, st: Setup, row_scale):
  """Seconds of the DDR-resident lookups and updates (whole cluster).

  Without UVM caching the plan's `cpu_lookup_fraction` c of them run on
  the CPU sockets, the rest are read row by row by the accelerators over
  the host link (at its random-access efficiency). With UVM caching
  (`stack.uvm_caching`) the accelerators fetch every miss over the host
  link at the stack's fill efficiency and write updated rows back.
  """
  cpu = p.cpu
  ddr_gather_b, _ = t['touched_ddr']
  gather_bytes = jnp.sum(lk.ddr * ddr_gather_b)
  bags = st.batch * (1.0 - (1.0 if st.cpu_trainer else t['data_parallel']))
  bags = bags * (1.0 - lk.hit ** t['pool_exponent'])
  moved = jnp.sum(
    update_bytes(s, t, lk.ddr, lk.distinct_ddr, t['touched_ddr'], bags)
  )
  sockets = p.nodes * p.sockets_per_node
  ddr_rate = sockets * cpu.ddr_bandwidth * cpu.gather_efficiency
  ddr_update_rate = sockets * cpu.ddr_bandwidth * cpu.update_efficiency
  zero = jnp.zeros(())
  if st.cpu_trainer:  # each socket also streams its replica of dp tables
    dp_dense = jnp.sum(t['data_parallel'] * t['table_bytes'] * 2.0)
    return DdrTerms(
      cpu_gather=gather_bytes / ddr_rate,
      cpu_update=moved / ddr_update_rate
      + dp_dense / (cpu.ddr_bandwidth * cpu.update_efficiency),
      uvm_gather=zero,
      uvm_update=zero,
    )
  link = p.nodes * host_link_rate(p)
  if s.uvm_caching:
    fill = link * s.uvm_fill_efficiency
    return DdrTerms(
      cpu_gather=zero,
      cpu_update=zero,
      uvm_gather=smooth_max(gather_bytes / fill, gather_bytes / ddr_rate),
      uvm_update=smooth_max(moved / fill, moved / ddr_update_rate),
    )
  c = plan.cpu_lookup_fraction
  uvm_rate = link * p.host_link.random_access_efficiency
  # The (1 - c) share stays outside the smooth max: inside, at c = 1 both
  # arguments hit the TINY floor and the gradient in c vanishes.
  return DdrTerms(
    cpu_gather=c * gather_bytes / ddr_rate,
    cpu_update=c * moved / ddr_update_rate,
    uvm_gather=(1.0 - c)
    * gather_bytes
    * smooth_max(1.0 / uvm_rate, 1.0 / ddr_rate),
    uvm_update=(1.0 - c)
    * moved
    * smooth_max(1.0 / uvm_rate, 1.0 / ddr_update_rate),
  )


def pooled_to_host(p, w, plan, s, t, lk: Lookups, st: Setup, payload: int):
  """(host link, socket links) seconds, one direction, of the pooled
  vectors the CPU sockets produce for the accelerators: one per sample
  and table unless all of its lookups hit HBM. None with UVM caching or
  on a CPU trainer."""
  if st.cpu_trainer or s.uvm_caching:
    return jnp.zeros(()), jnp.zeros(())
  c = plan.cpu_lookup_fraction
  all_hit = lk.hit ** t['pool_exponent']
  pooled_bytes = t['dim'] * payload
  pooled = (
    c
    * jnp.sum(
      (1.0 - t['data_parallel']) * st.batch * pooled_bytes * (1.0 - all_hit)
    )
    / p.nodes
  )
  cpu, sockets = p.cpu, p.sockets_per_node
  upi = sockets * cpu.socket_links * cpu.socket_link_bandwidth / 2.0
  host = pooled / host_link_rate(p) + p.host_link.latency
  links = pooled * safe_div(sockets - 1.0, sockets) / upi
  return host, links


# ---- collectives ------------------------------------------------------------


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
    * float(np.sum((1.0 - dp) * t['pool'] * t['id_copies']))
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


# ---- host side --------------------------------------------------------------


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
    `mlp_elementwise`); DCN-v2 cross layers 5 each.
  - Embeddings: one fused kernel forward and one backward with the
    optimizer (TBE, HugeCTR, NVIDIA's fused gather); per table, the
    stack's `per_table_kernels` (see `codesign.stack_presets`).
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
  g = gemm_table(w)
  per_gemm = 1.0 + g['bwd_kernels']
  gemm = {
    k: float(np.sum(per_gemm * (g['component'] == i)))
    for i, k in enumerate(('bottom_mlp', 'interaction', 'top_mlp'))
  }
  ew = float(MLP_KERNELS[s.mlp_fusion])
  fused_dot = w.interaction == 'dot' and s.fused_interaction
  if fused_dot:  # one kernel each way replaces the batched GEMMs
    gemm['interaction'] = 0.0
  if w.interaction == 'dot':
    inter = 2.0 if s.fused_interaction else 6.0
  elif w.interaction == 'dcnv2':
    inter = 5.0 * w.dcn_layers
  else:
    inter = 2.0
  sharded = bool(np.any(t['data_parallel'] < 1.0))
  if s.embedding_kernel == 'fused':
    emb = 2.0
  else:
    emb = float(s.per_table_kernels * w.num_tables)
  if s.uvm_caching:
    emb += 2.0  # cache lookup and insert
  layers = len(w.bottom_mlp) + len(w.top_mlp)
  # A weight and a bias per layer; U, V and a bias per cross layer.
  tensors = 2 * layers + (3 * w.dcn_layers if w.interaction == 'dcnv2' else 0)
  if s.fused_dense_optimizer:
    opt = 2.0
  else:
    opt = float(OPTIMIZER_KERNELS_PER_TENSOR[w.optimizer] * tensors)
  mixed = w.dense_precision in ('bf16', 'fp16')
  casts = tensors if s.mlp_fusion == 'none' else 0.0  # autocast
  amp = (KERNELS_AMP + casts) if mixed else 0.0
  if pooled_cast_bytes(s, t, None, payload) is not None:
    amp += 2.0
  misc = KERNELS_LOSS + KERNELS_DATA
  collectives = float(
    (s.input_dist_collectives + 2 if sharded else 0)
    + allreduce_calls(w, s, t, plan)
  )
  every = {
    'bottom_mlp': gemm['bottom_mlp'] + ew * len(w.bottom_mlp),
    'interaction': gemm['interaction'] + inter,
    'top_mlp': gemm['top_mlp'] + ew * len(w.top_mlp),
    'optimizer': opt,
    'embedding': emb,
    'collectives': collectives,
    'other': amp + misc,
  }
  zero = dict.fromkeys(HOST_GROUPS, 0.0)
  if s.graph_scope == 'none':
    host = every
  elif s.graph_scope == 'forward_backward':
    # The optimizer, the loss scaler's update and the data copies stay
    # outside the graph (NVIDIA's DLRM main.py).
    scaler = KERNELS_AMP if mixed else 0.0
    host = {**zero, 'optimizer': opt, 'other': scaler + KERNELS_DATA}
  else:
    host = zero
  # Gaps of the GEMMs, the MLP elementwise passes, the interaction's own
  # kernel each way and the dense optimizer are charged by their terms.
  return Counts(
    device_kernels=inter - 2.0 + emb + opt - 1.0 + amp + misc,
    host_ops=host,
    collectives=collectives,
  )


def host_time(s: Stack, counts: Counts):
  """Host seconds per step: the floor plus every eager operator."""
  return s.step_floor + sum(counts.host_ops.values()) * s.op_host_time


def compose(device, device_by_group: dict, s: Stack, counts: Counts, st):
  """Step seconds from the device time and the host's work.

  `device_by_group` maps each of `HOST_GROUPS` to the device seconds of
  that work. The host dispatches each group's operators
  (`counts.host_ops` x `op_host_time`) and spends `step_floor` outside
  them. Two limits bound the step:
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
  host_g = {k: counts.host_ops[k] * s.op_host_time for k in HOST_GROUPS}
  host = s.step_floor + sum(host_g.values())
  if st.cpu_trainer:
    return device + host
  serial = s.step_floor + host_g['collectives']
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


# ---- memory and the bill ----------------------------------------------------


def memory(p, w, s, t, lk: Lookups, st: Setup, dense_mem, busiest: dict):
  """(required, available) bytes per tier: HBM per accelerator (the
  busiest rank's resident rows, `busiest_loads`), DDR per node. With UVM
  caching the tables stay whole in DDR and HBM holds the cached rows
  besides."""
  tb = t['table_bytes']  # already scaled by row_scale (see evaluate)
  dp = t['data_parallel']
  cpu, acc = p.cpu, p.accelerator
  ddr_avail = p.sockets_per_node * cpu.ddr_capacity
  if st.cpu_trainer:
    a = st.per_node
    # Sharded tables spread over the nodes; every socket holds a replica
    # of each data-parallel table.
    ddr_req = jnp.sum(tb * (1.0 - dp)) / p.nodes + a * (
      jnp.sum(tb * dp) + dense_mem
    )
    return {'hbm': jnp.zeros(()), 'ddr': ddr_req}, {
      'hbm': jnp.zeros(()),
      'ddr': ddr_avail,
    }
  hbm_req = busiest['resident'] + jnp.sum(dp * tb) + dense_mem
  hbm_avail = acc.hbm_capacity * (1.0 - s.hbm_reserve)
  in_ddr = (1.0 - dp) if s.uvm_caching else (1.0 - lk.frac)
  ddr_req = jnp.sum(in_ddr * tb) / p.nodes
  return {'hbm': hbm_req, 'ddr': ddr_req}, {'hbm': hbm_avail, 'ddr': ddr_avail}


def capex_and_power(p: Platform):
  """(USD, W) of the whole cluster at TDP."""
  cpu, acc = p.cpu, p.accelerator
  sockets, accels = p.sockets_per_node, p.accelerators_per_node
  n_acc = 0.0 if p.trainer == 'cpu' else accels
  fab_bw = p.fabric.links_per_accelerator * p.fabric.link_bandwidth
  nic_bw = p.nic.count * p.nic.bandwidth
  node_usd = (
    p.node_price
    + sockets * (cpu.price + cpu.ddr_capacity * cpu.ddr_price)
    + n_acc * (acc.price + acc.hbm_capacity * acc.hbm_price)
    + n_acc * fab_bw * p.fabric.bandwidth_price
    + nic_bw * p.nic.bandwidth_price
  )
  node_w = (
    p.node_power
    + sockets * (cpu.power + cpu.ddr_capacity * cpu.ddr_power)
    + n_acc * (acc.power + fab_bw * p.fabric.bandwidth_power)
    + nic_bw * p.nic.bandwidth_power
  )
  return p.nodes * node_usd, p.nodes * node_w


__all__ = ['TINY']
