"""The dense half of the step: GEMM rooflines with a tile-size
efficiency, the MLPs' elementwise passes, the dot or DCN-v2 interaction,
the dense optimizer and the dense model's HBM bytes."""

import functools

import numpy as np

from codesign.core.smooth import smooth_max
from codesign.model.terms.shared import (
  STREAM_EFFICIENCY,
  Setup,
  dense_device,
  dense_elem_bytes,
  gemm_rate,
  setup,
)
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.stack import Stack

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

# Width-long vectors read or written per sample by a DCN-v2 cross layer
# x' = x0 * (x U V + b) + x beside its GEMMs, keyed by
# `Stack.fused_interaction`: ((forward, backward) per layer, (forward,
# backward) once a step).
# - Eager PyTorch (TorchRec's LowRankCrossNet): the product and the sum
#   are a kernel each, each reading two vectors and writing one (6
#   forward); backward reads and writes twice that (12).
# - HugeCTR's MultiCrossLayer since v4.3 (`multi_cross_layer.cu`,
#   `MultiCrossForwardFunctorv2`, `MultiCrossBackwardFunctorv2`; the same
#   in v23.04 and v24.04): forward one `fused_matrix_elementwise_dot_add`
#   reads h, x0 and x and writes x' (4); backward one `fused_mul_fma3`
#   reads dy, x0, h and the dx accumulator and writes S0 and the
#   accumulator (6), and the GEMM that gives the layer's input gradient
#   reads dy as its C operand (1);
#   once a step, the accumulator's memset (1) and the final `matrix_add`
#   (3).
DCN_PASSES = {
  False: ((6.0, 12.0), (0.0, 0.0)),
  True: ((4.0, 7.0), (0.0, 4.0)),
}
# Elementwise kernels of the cross layers, the same way: eager, the
# product and the sum forward and three backward; HugeCTR, one fused
# kernel each way a layer and the memset and final add once.
DCN_KERNELS = {
  False: ((2.0, 3.0), (0.0, 0.0)),
  True: ((1.0, 1.0), (0.0, 2.0)),
}


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

  A roofline per GEMM: FLOPs at the rate of the units that run the
  precision the stack runs (`gemm_rate`: tensor cores or fp32 units; fp32
  becomes TF32 where the stack allows it) times a tile efficiency
  m/(m+h) k/(k+h) n/(n+h), against the bytes of its operands; plus one
  kernel overhead per kernel. Bottom-MLP GEMMs run `bottom_batch`
  samples, the others the local batch.
  """
  g = gemm_table(w)
  dev, bw = dense_device(p)
  rate = gemm_rate(dev, stack_lib.gemm_precision(s, w.dense_precision))
  elem = dense_elem_bytes(w)
  is_bottom = (g['component'] == 0).astype(np.float64)
  b = is_bottom * st.bottom_batch + (1.0 - is_bottom) * st.local
  m = g['batched'] * g['m'] + (1.0 - g['batched']) * b
  tiles = (
    _tile_efficiency(m, dev.gemm_half_size)
    * _tile_efficiency(g['k'], dev.gemm_half_size)
    * _tile_efficiency(g['n'], dev.gemm_half_size)
  )
  nbytes = elem * (b * g['per_sample_elems'] + g['fixed_elems'])
  fwd = smooth_max(b * g['fwd_flops'] / (rate * tiles), nbytes / bw)
  bwd = smooth_max(b * g['bwd_flops'] / (rate * tiles), 2.0 * nbytes / bw)
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
  backward; DCN-v2 cross layers stream `DCN_PASSES` width-long vectors
  a sample beside their GEMMs, fused or not (`Stack.fused_interaction`).
  """
  dev, bw = dense_device(p)
  elem = dense_elem_bytes(w)
  width = wl.interaction_output_width(w)
  b = st.local
  if w.interaction == 'dot' and s.fused_interaction:
    f, d = w.num_features, w.bottom_mlp[-1]
    flops = 2.0 * f * f * d  # the full product per sample, forward
    rate = gemm_rate(dev, stack_lib.gemm_precision(s, w.dense_precision))
    nbytes = b * (f * d + width) * elem
    fwd = smooth_max(b * flops / rate, nbytes / bw)
    bwd = smooth_max(2.0 * b * flops / rate, 2.0 * nbytes / bw)
    return fwd + dev.kernel_overhead, bwd + dev.kernel_overhead
  if w.interaction == 'dcnv2':
    passes = _per_step(w, DCN_PASSES[s.fused_interaction])
  else:
    passes = (2.0, 4.0)
  fwd, bwd = (
    t + b * width * n * elem / bw + dev.kernel_overhead
    for t, n in zip(gemm, passes, strict=True)
  )
  return fwd, bwd


def dcn_kernels(w: wl.Workload, s: Stack) -> tuple[float, float]:
  """(forward, backward) elementwise kernels per step of the DCN-v2 cross
  layers beside their GEMMs (`DCN_KERNELS`)."""
  return _per_step(w, DCN_KERNELS[s.fused_interaction])


def _per_step(w: wl.Workload, counts) -> tuple[float, float]:
  """(forward, backward) per step of a `DCN_PASSES` or `DCN_KERNELS`
  entry: per layer times the cross layers, plus once a step."""
  per_layer, per_step = counts
  return tuple(
    w.dcn_layers * f + g for f, g in zip(per_layer, per_step, strict=True)
  )


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
