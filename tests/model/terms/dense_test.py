"""Known answers, worked by hand, for the model: dense terms.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import pytest

from codesign.model import terms as ct
from tests.model.fixtures import (
  ACC_EFF,
  ACC_FLOPS,
  ACC_HALF,
  ACC_KERNEL,
  ACT_ELEMS,
  BOTTOM_WIDTHS,
  DENSE_PARAMS,
  DIM,
  EW,
  HBM_BW,
  LAYERS,
  ROWS,
  STEP_FLOOR,
  TINY_GAPS,
  TOP_WIDTHS,
  B,
  arrays,
  close,
  hand_busiest,
  hand_dense,
  hand_ew,
  make_plan,
  run,
  smax,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)

# ---- dense terms --------------------------------------------------------


@pytest.mark.parametrize('precision', ['fp32', 'tf32', 'bf16'])
def test_dense_terms(precision):
  w = tiny_workload(dense_precision=precision)
  report = run(tiny_platform(), w, make_plan())
  r = report['breakdown']
  b = B / (2 * 4)  # local batch: 8192 samples over 2 nodes x 4 accelerators
  elem = 2 if precision == 'bf16' else 4  # bytes per activation/weight
  d = hand_dense(
    b, ACC_FLOPS[precision], elem, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL
  )
  # Epilogue fusion: one pass over each layer's output backward.
  ew_bottom = hand_ew(b, 'epilogue', BOTTOM_WIDTHS, elem, HBM_BW, ACC_KERNEL)
  ew_top = hand_ew(b, 'epilogue', TOP_WIDTHS, elem, HBM_BW, ACC_KERNEL)
  close(r['dense_bottom_mlp'], sum(d['bottom']) + ew_bottom)
  close(r['dense_interaction'], sum(d['inter']))
  close(r['dense_top_mlp'], sum(d['top']) + ew_top)
  # Optimizer: read weight and gradient, write weight (3 x 4 B fp32 master
  # copy); mixed precision also writes the 2 B bf16 copy. SGD: no state.
  per_param = 12 + (2 if precision == 'bf16' else 0)
  close(r['dense_optimizer'], DENSE_PARAMS * per_param / HBM_BW + ACC_KERNEL)
  # Kernel gaps: 14, plus the 3 loss-scaler kernels in mixed precision.
  gaps = TINY_GAPS + (3 if precision == 'bf16' else 0)
  close(r['overhead'], gaps * ACC_KERNEL)
  close(r['host'], STEP_FLOOR)  # one graph: no eager operators
  # HBM: the table-wise tables (64 B rows), fp32 weight and gradient (plus
  # the 16-bit copy in mixed precision) and activations of b samples: 219
  # GEMM elements and 3 copies of the 4 x 16 pooled vectors, elem B each.
  # The tables pack by `busiest_rank` (`hand_busiest`).
  tables = [rows * 64 for rows in ROWS]
  dense = DENSE_PARAMS * (8 + (2 if precision == 'bf16' else 0))
  dense += b * (ACT_ELEMS + 3 * 4 * DIM) * elem
  hbm = hand_busiest(tables, 8) + dense
  close(report['required']['hbm'], hbm)


def test_tf32_stack_runs_fp32_gemms_on_tf32_peak():
  # An fp32 model under a stack with TF32 on runs every GEMM (and the fused
  # interaction) at the TF32 peak, with fp32 (4 B) operands: the same
  # numbers as a tf32 model.
  p, plan = tiny_platform(), make_plan()
  on = run(p, tiny_workload(), plan, tiny_stack(tf32=True))['breakdown']
  tf32 = run(p, tiny_workload(dense_precision='tf32'), plan)['breakdown']
  d = hand_dense(1024, 20e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL)
  ew = hand_ew(1024, 'epilogue', BOTTOM_WIDTHS, 4, HBM_BW, ACC_KERNEL)
  close(on['dense_bottom_mlp'], sum(d['bottom']) + ew)
  for k in ('dense_bottom_mlp', 'dense_interaction', 'dense_top_mlp'):
    close(on[k], tf32[k])
  off = run(p, tiny_workload(), plan)['breakdown']
  assert off['dense_top_mlp'] > on['dense_top_mlp']
  # A CPU socket has no TF32 units: the flag changes nothing there.
  cpu = tiny_platform(trainer='cpu')
  a = run(cpu, tiny_workload(), plan, tiny_stack(tf32=True))['breakdown']
  b = run(cpu, tiny_workload(), plan)['breakdown']
  for k in ('dense_bottom_mlp', 'dense_interaction', 'dense_top_mlp'):
    close(a[k], b[k])
  # bf16 stays bf16 whatever the flag.
  w = tiny_workload(dense_precision='bf16')
  a = run(p, w, plan, tiny_stack(tf32=True))['breakdown']
  b = run(p, w, plan)['breakdown']
  close(a['dense_top_mlp'], b['dense_top_mlp'])


def test_fp32_gemms_run_on_the_fp32_units():
  # fp32 GEMMs (no TF32) run at the fp32 peak times the fp32 units' own
  # efficiency; 16-bit and TF32 GEMMs keep the tensor cores' ACC_EFF. On
  # a part without TF32 (its TF32 peak is its fp32 peak, as the catalog
  # writes a V100) TF32 GEMMs run on the fp32 units: the faster of the two.
  plan, b = make_plan(), 1024
  p = tiny_platform(fp32_gemm_efficiency=0.5)
  bd = run(p, tiny_workload(), plan)['breakdown']
  d = hand_dense(b, ACC_FLOPS['fp32'], 4, 0.5, ACC_HALF, HBM_BW, ACC_KERNEL)
  ew = hand_ew(b, 'epilogue', TOP_WIDTHS, 4, HBM_BW, ACC_KERNEL)
  close(bd['dense_top_mlp'], sum(d['top']) + ew)
  for precision in ('tf32', 'bf16'):
    w = tiny_workload(dense_precision=precision)
    got = run(p, w, plan)['breakdown']
    want = run(tiny_platform(), w, plan)['breakdown']
    for k in ('dense_bottom_mlp', 'dense_interaction', 'dense_top_mlp'):
      close(got[k], want[k])
  no_tf32 = tiny_platform(
    peak_flops_tf32=ACC_FLOPS['fp32'], fp32_gemm_efficiency=0.9
  )
  tf32 = run(no_tf32, tiny_workload(dense_precision='tf32'), plan)
  fp32 = run(no_tf32, tiny_workload(), plan)
  for k in ('dense_bottom_mlp', 'dense_interaction', 'dense_top_mlp'):
    close(tf32['breakdown'][k], fp32['breakdown'][k])


def test_dense_terms_dcnv2_and_cat():
  b = 1024
  # DCN-v2 with 2 cross layers of rank 3 over the concatenated 4 x 16 = 64
  # features: per layer a 64 -> 3 GEMM without bias, then 3 -> 64 with
  # bias; the top MLP reads the 64-wide result. Element work: 3 passes of
  # the 64-wide vector per cross layer.
  cross = (
    ('inter', 1, 64, 3, 2 * 192, 4 * 192, 64 + 3, 192, 2),
    ('inter', 1, 3, 64, 2 * 192 + 64, 4 * 192 + 64, 3 + 64, 192, 2),
  )
  top = (
    ('top', 1, 64, 8, 2 * 512 + 8, 4 * 512 + 8, 64 + 8, 512, 2),
    LAYERS[4],
  )
  layers = LAYERS[:2] + cross + cross + top
  w = tiny_workload(interaction='dcnv2', dcn_layers=2, dcn_rank=3)
  bd = run(tiny_platform(), w, make_plan())['breakdown']
  d = hand_dense(
    b, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL, layers, 64 * 6
  )
  ew_bottom = hand_ew(b, 'epilogue', BOTTOM_WIDTHS, 4, HBM_BW, ACC_KERNEL)
  ew_top = hand_ew(b, 'epilogue', TOP_WIDTHS, 4, HBM_BW, ACC_KERNEL)
  close(bd['dense_bottom_mlp'], sum(d['bottom']) + ew_bottom)
  close(bd['dense_interaction'], sum(d['inter']))
  close(bd['dense_top_mlp'], sum(d['top']) + ew_top)
  # 184 bottom + 2 x (192 + 256) cross + 520 + 9 top parameters.
  close(bd['dense_optimizer'], 1609 * 12 / HBM_BW + ACC_KERNEL)
  # HugeCTR's fused cross layers (MultiCrossLayer): per layer 4 vectors
  # forward (read h, x0, x; write x'), 6 + 1 backward (fused_mul_fma3
  # reads dy, x0, h and the accumulator and writes two; the dgrad GEMM
  # reads dy as C), and 1 + 3 once (memset, final add): 8 and 18 of the
  # 64-wide vectors in all. Kernels: 2 a layer and 2 once, against 5 a
  # layer eager, so 4 fewer gaps.
  fused = run(
    tiny_platform(), w, make_plan(), tiny_stack(fused_interaction=True)
  )['breakdown']
  d0 = hand_dense(b, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL, layers, 0)
  vectors = b * 64 * (8 + 18) * 4 / HBM_BW
  close(fused['dense_interaction'], sum(d0['inter']) + vectors)
  close(fused['overhead'], bd['overhead'] - 4 * ACC_KERNEL)
  # cat: no interaction GEMM, the top MLP reads 16 + 3 x 16 = 64 values,
  # the concatenation moves them once.
  w = tiny_workload(interaction='cat')
  bd = run(tiny_platform(), w, make_plan())['breakdown']
  d = hand_dense(
    b, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL, LAYERS[:2] + top, 64
  )
  close(bd['dense_interaction'], sum(d['inter']))
  close(bd['dense_top_mlp'], sum(d['top']) + ew_top)


def test_small_gemms_are_below_peak():
  # Doubling the GEMM-efficiency half size lowers every efficiency factor,
  # so every dense term grows: shape-dependent efficiency is live.
  w = tiny_workload()
  base = run(tiny_platform(), w, make_plan())['breakdown']
  slow = run(tiny_platform(gemm_half_size=64.0), w, make_plan())['breakdown']
  for k in ('dense_bottom_mlp', 'dense_interaction', 'dense_top_mlp'):
    assert slow[k] > base[k]


@pytest.mark.parametrize('fusion', ['none', 'elementwise', 'epilogue'])
@pytest.mark.parametrize('precision', ['fp32', 'bf16'])
def test_mlp_elementwise(fusion, precision):
  # Beyond its GEMMs each MLP layer's output is read and written `passes`
  # times per sample at 80% of HBM bandwidth, and each layer launches the
  # unfused kernels: none 7 passes and 3 kernels, elementwise 5 and 2,
  # epilogue 1 and 0. Bottom widths 8 + 16, top 8 + 1; b = 1024.
  w = tiny_workload(dense_precision=precision)
  s = tiny_stack(mlp_fusion=fusion)
  bd = run(tiny_platform(), w, make_plan(), s)['breakdown']
  elem = 2 if precision == 'bf16' else 4
  peak = ACC_FLOPS[precision]
  d = hand_dense(1024, peak, elem, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL)
  passes, kernels = EW[fusion]
  bottom = 1024 * passes * 24 * elem / (0.8 * HBM_BW) + 2 * kernels * 1e-6
  top = 1024 * passes * 9 * elem / (0.8 * HBM_BW) + 2 * kernels * 1e-6
  close(bd['dense_bottom_mlp'] - sum(d['bottom']), bottom, rel=1e-8)
  close(bd['dense_top_mlp'] - sum(d['top']), top, rel=1e-8)
  # The same from the term itself, split forward and backward: the
  # forward share of the passes (3/7, 2/5, 0) and of the kernels (1 of 3,
  # 1 of 2, none).
  p = arrays(tiny_platform())
  (bf, bb), (tf, tb) = ct.mlp_elementwise(p, w, s, ct.setup(p, w, s))
  share = {'none': 3 / 7, 'elementwise': 2 / 5, 'epilogue': 0.0}[fusion]
  k_fwd = {'none': 1, 'elementwise': 1, 'epilogue': 0}[fusion]
  for fwd, bwd, batch, widths in ((bf, bb, 1024, 24), (tf, tb, 1024, 9)):
    stream = batch * passes * widths * elem / (0.8 * HBM_BW)
    close(float(fwd), stream * share + 2 * k_fwd * 1e-6)
    close(float(bwd), stream * (1 - share) + 2 * (kernels - k_fwd) * 1e-6)
  # The elementwise kernels are charged here, not again as kernel gaps;
  # nn.Linear under autocast casts each of the 8 weight and bias tensors.
  casts = 8 if (fusion == 'none' and precision == 'bf16') else 0
  scaler = 3 if precision == 'bf16' else 0
  close(bd['overhead'], (TINY_GAPS + scaler + casts) * ACC_KERNEL)


def test_interaction_fused_and_unfused():
  w, plan, p = tiny_workload(), make_plan(), tiny_platform()
  b, f, dd, width = 1024, 4, 16, 22
  # Unfused: the batched (4 x 16)(16 x 4) GEMM per sample, then its
  # 22-wide output read and written once forward, twice backward.
  unfused = run(p, w, plan)['breakdown']
  d = hand_dense(b, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL)
  close(unfused['dense_interaction'], sum(d['inter']))
  # Fused (one kernel each way): 2 F^2 d FLOPs per sample forward, twice
  # that backward, at the GEMM efficiency without tile penalties, against
  # the F x d inputs and the output, b x (64 + 22) x 4 B, twice backward.
  fused = run(p, w, plan, tiny_stack(fused_interaction=True))['breakdown']
  flops = 2 * f * f * dd
  assert flops == 512
  nbytes = b * (f * dd + width) * 4
  fwd = smax(b * flops / (10e12 * 0.8), nbytes / HBM_BW) + ACC_KERNEL
  bwd = smax(2 * b * flops / (10e12 * 0.8), 2 * nbytes / HBM_BW) + ACC_KERNEL
  close(fused['dense_interaction'], fwd + bwd)
  # The unfused version's 6 cat/index kernels: 4 gaps beyond its own two;
  # the fused one has none.
  close(unfused['overhead'], TINY_GAPS * ACC_KERNEL)
  close(fused['overhead'], (TINY_GAPS - 4) * ACC_KERNEL)
  # The fused kernel under bf16 runs at the bf16 peak on 2 B elements.
  w16 = tiny_workload(dense_precision='bf16')
  bd = run(p, w16, plan, tiny_stack(fused_interaction=True))['breakdown']
  nbytes = b * (f * dd + width) * 2
  fwd = smax(b * flops / (40e12 * 0.8), nbytes / HBM_BW) + ACC_KERNEL
  bwd = smax(2 * b * flops / (40e12 * 0.8), 2 * nbytes / HBM_BW) + ACC_KERNEL
  close(bd['dense_interaction'], fwd + bwd)
