"""Known answers, worked by hand, for every term of `cost_model.evaluate`.

A tiny DLRM runs on a tiny platform of round numbers under a tiny software
stack. Each test writes the term's formula out in plain Python from the
numbers below (nothing here calls `codesign.workload` or the cost model's
helpers to get the answer), then compares it with what `evaluate` (or the
term's own function in `codesign.terms`) reports.

The tiny workload W0: 3 fp32 tables of dim 16 (a 64 B row, exactly one
memory transaction) with 1000, 2000 and 4000 rows and 1, 2 and 4 lookups
per sample; 4 dense features; bottom MLP 4-8-16; dot interaction over
F = 3 + 1 = 4 vectors, whose output is 16 + 4 * 3 / 2 = 22 wide; top MLP
22-8-1; global batch B = 8192; SGD.

The tiny platform: 2 nodes x (2 CPU sockets + 4 accelerators), so R = 8
ranks and a local batch b = B / R = 1024. Numbers in `tiny_platform`.

The tiny stack (`tiny_stack`): the whole step is one CUDA graph (no host
operators), the host runs ahead of the device (host_overlap 1: the step is
smax(device, host)), a 100 us host floor per step, fused embedding
kernels at the hardware's own rates, the bias and ReLU in the GEMM
epilogue (one pass backward per layer output, no extra kernels), an
unfused dot interaction, every lookup read-modify-writes its row
(`scatter`: the update moves twice the gathered bytes, as the model did
before the stack existed), 4 B ids in one collective, no software latency
per collective, one allreduce call. Tests change one choice at a time.

Embedding rows of 16 columns are narrower than FBGEMM's 64-column quarter
block, so HBM gathers and updates run at the hardware rate / 1.75
(TorchRec planner QUARTER_BLOCK_PENALTY) throughout.

Smooth maxima in the model are p-norms with p = 8:
smax(x, y) = (x^8 + y^8)^(1/8), smin(x, y) = 1 / smax(1/x, 1/y); the
share of peers reached over the fabric and the table-row-wise balance use
p = 64 (smin64, smax64).

Tests marked xfail state documented (or physically required) behaviour
that the code does not have; each reason says what differs.
"""

import dataclasses
import math

import jax
import numpy as np
import pytest

from codesign import cost_model, hardware
from codesign import stack as stack_lib
from codesign import terms as ct
from codesign import workload as wl
from codesign.hardware import Accelerator, CpuSocket, Fabric, HostLink, Nic
from codesign.plan import Plan
from codesign.stack import Stack

P = 8.0
REL = 1e-10  # float64 agreement of two ways to do the same arithmetic


def smax(*xs):
  """Smooth maximum by hand: the p-norm, p = 8."""
  return sum(x**P for x in xs) ** (1.0 / P)


def smin(*xs):
  """Smooth minimum by hand: 1 / smax(1 / x)."""
  return 1.0 / smax(*(1.0 / x for x in xs))


def smax64(*xs):
  """The sharper smooth maximum, p = 64."""
  top = max(xs)  # scaled, as the model does, so x^64 cannot overflow
  return top * sum((x / top) ** 64 for x in xs) ** (1.0 / 64)


def smin64(*xs):
  """1 / smax64(1 / x)."""
  return 1.0 / smax64(*(1.0 / x for x in xs))


def sigmoid(x):
  return 1.0 / (1.0 + math.exp(-x))


# ---- the tiny platform ------------------------------------------------------
ACC_FLOPS = {'fp32': 10e12, 'tf32': 20e12, 'bf16': 40e12}  # FLOP/s
HBM_BW = 1e12  # B/s
HBM_CAP = 10e9  # B
ACC_EFF, ACC_HALF, ACC_GATHER, ACC_KERNEL = 0.8, 32.0, 0.5, 1e-6
CPU_FLOPS, CPU_BF16 = 1e12, 2e12
DDR_BW, DDR_CAP = 100e9, 100e9  # per socket
SOCKET_LINKS, SOCKET_LINK_BW = 2.0, 20e9
CPU_PCIE = 40e9  # per socket
CPU_EFF, CPU_HALF, CPU_GATHER, CPU_KERNEL = 0.5, 16.0, 0.5, 10e-6
LINKS, LINK_BW, LINK_LAT, LINK_EFF = 4.0, 25e9, 1e-6, 0.8
HOST_BW, HOST_LAT, UVM_EFF = 16e9, 2e-6, 0.1  # per accelerator
NICS, NIC_BW, NIC_LAT, NIC_EFF = 2.0, 12.5e9, 5e-6, 0.8

LINK = LINKS * LINK_BW * LINK_EFF  # 80 GB/s per accelerator
NIC = NICS * NIC_BW * NIC_EFF  # 20 GB/s per node
STREAM = 0.8  # elementwise passes stream at 80% of the memory bandwidth
PENALTY = 1.75  # FBGEMM quarter-block penalty: 16 columns < 64


def tiny_platform(
  trainer='accelerator',
  topology='switch',
  nodes=2.0,
  sockets=2.0,
  accels=4.0,
  nic_attach='accelerator',
  **acc_changes,
):
  cpu = CpuSocket(
    name='tiny-cpu',
    peak_flops_fp32=CPU_FLOPS,
    peak_flops_bf16=CPU_BF16,
    ddr_bandwidth=DDR_BW,
    ddr_capacity=DDR_CAP,
    socket_links=SOCKET_LINKS,
    socket_link_bandwidth=SOCKET_LINK_BW,
    pcie_bandwidth=CPU_PCIE,
    gemm_efficiency=CPU_EFF,
    gemm_half_size=CPU_HALF,
    gather_efficiency=CPU_GATHER,
    update_efficiency=CPU_GATHER,
    kernel_overhead=CPU_KERNEL,
    price=1000.0,
    ddr_price=5e-9,  # 5 USD/GB
    power=200.0,
    ddr_power=1e-10,  # 0.1 W/GB
    access_granularity=64,
    sources=(),
  )
  acc = Accelerator(
    name='tiny-acc',
    peak_flops_fp32=ACC_FLOPS['fp32'],
    peak_flops_tf32=ACC_FLOPS['tf32'],
    peak_flops_bf16=ACC_FLOPS['bf16'],
    hbm_bandwidth=HBM_BW,
    hbm_capacity=HBM_CAP,
    gemm_efficiency=ACC_EFF,
    gemm_half_size=ACC_HALF,
    gather_efficiency=ACC_GATHER,
    update_efficiency=ACC_GATHER,
    kernel_overhead=ACC_KERNEL,
    price=10000.0,
    hbm_price=20e-9,  # 20 USD/GB
    power=300.0,
    access_granularity=64,
    sources=(),
  )
  acc = dataclasses.replace(acc, **acc_changes)
  fabric = Fabric(
    topology=topology,
    links_per_accelerator=LINKS,
    link_bandwidth=LINK_BW,
    latency=LINK_LAT,
    efficiency=LINK_EFF,
    bandwidth_price=5e-9,  # 5 USD per GB/s
    bandwidth_power=5e-11,  # 0.05 W per GB/s
    sources=(),
  )
  host = HostLink(
    bandwidth=HOST_BW,
    latency=HOST_LAT,
    random_access_efficiency=UVM_EFF,
    sources=(),
  )
  nic = Nic(
    attach=nic_attach,
    count=NICS,
    bandwidth=NIC_BW,
    latency=NIC_LAT,
    efficiency=NIC_EFF,
    bandwidth_price=1e-7,  # 100 USD per GB/s
    bandwidth_power=1e-9,  # 1 W per GB/s
    sources=(),
  )
  return hardware.Platform(
    name='tiny',
    trainer=trainer,
    nodes=nodes,
    sockets_per_node=sockets,
    accelerators_per_node=accels,
    cpu=cpu,
    accelerator=acc,
    fabric=fabric,
    host_link=host,
    nic=nic,
    node_price=5000.0,
    node_power=500.0,
    sources=(),
  )


def with_links(p, links):
  return dataclasses.replace(
    p, fabric=dataclasses.replace(p.fabric, links_per_accelerator=links)
  )


# ---- the tiny stack ---------------------------------------------------------
STEP_FLOOR = 100e-6  # host seconds per step
OP_HOST = 10e-6  # host seconds per eager operator
UVM_FILL = 0.5  # share of the host link for UVM cache misses


def tiny_stack(**changes):
  s = Stack(
    name='tiny',
    graph_scope='step',
    bottom_mlp='data_parallel',
    fused_interaction=False,
    mlp_fusion='epilogue',
    fused_dense_optimizer=True,
    embedding_kernel='fused',
    per_table_kernels=5,
    update_path='scatter',
    payload_precision='dense',
    pooled_cast=False,
    id_bytes=4,
    input_dist_collectives=1,
    uvm_caching=False,
    tf32=False,
    allreduce_bucket_bytes=1e10,
    step_floor=STEP_FLOOR,
    op_host_time=OP_HOST,
    collective_latency=0.0,
    host_overlap=1.0,
    embedding_efficiency=1.0,
    uvm_fill_efficiency=UVM_FILL,
    hbm_reserve=0.0,
    comm_overlap=0.0,
    sources=(),
  )
  return stack_lib.validate(dataclasses.replace(s, **changes))


# ---- the tiny workload ------------------------------------------------------
B = 8192
ROWS = (1000, 2000, 4000)
POOL = (1.0, 2.0, 4.0)
DIM = 16


def tiny_workload(**changes):
  w = wl.Workload(
    name='tiny',
    tables=tuple(wl.Table(r, DIM, p) for r, p in zip(ROWS, POOL)),
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    interaction='dot',
    global_batch=B,
  )
  return dataclasses.replace(w, **changes)


# Dense parameters of W0: 4*8+8 + 8*16+16 + 22*8+8 + 8*1+1.
DENSE_PARAMS = 40 + 144 + 184 + 9
BOTTOM_PARAMS = 40 + 144
# Output widths of the MLP layers: bottom 8 + 16, top 8 + 1.
BOTTOM_WIDTHS, TOP_WIDTHS = 24, 9
# Kernels per step of W0 under the tiny stack that no other term charges:
# 6 of the unfused dot interaction (less its own 1 each way charged by
# the interaction term), 2 fused embedding kernels, 2 of the fused dense
# optimizer (less the 1 its term charges), 4 of the loss, 3 data copies:
# 4 + 2 + 1 + 4 + 3.
TINY_GAPS = 14
# The GEMMs of one sample of W0, in order. For MLP layers the batch is the
# GEMM's m; the dot interaction is a (4 x 16)(16 x 4) product per sample.
# (component, m, k, n, fwd FLOPs, bwd FLOPs, activation elements read and
#  written per sample, weight elements, backward kernels)
LAYERS = (
  # first layer: 2 k n + n forward; weight gradient and bias only backward
  ('bottom', 1, 4, 8, 2 * 32 + 8, 2 * 32 + 8, 4 + 8, 32, 1),
  ('bottom', 1, 8, 16, 2 * 128 + 16, 4 * 128 + 16, 8 + 16, 128, 2),
  # the product reads both operands per sample: 4*16 + 16*4 in, 4*4 out
  ('inter', 4, 16, 4, 2 * 256, 4 * 256, 64 + 16 + 64, 0, 2),
  ('top', 1, 22, 8, 2 * 176 + 8, 4 * 176 + 8, 22 + 8, 176, 2),
  ('top', 1, 8, 1, 2 * 8 + 1, 4 * 8 + 1, 8 + 1, 8, 2),
)
ACT_ELEMS = sum(layer[6] for layer in LAYERS)  # 219 per sample


def hand_dense(
  b, peak, elem, eff0, half, bw, kernel, layers=LAYERS, ew=22, bottom_b=None
):
  """(fwd, bwd) seconds per component of the GEMMs of a dense part on one
  rank (without the MLPs' elementwise passes, `hand_ew`).

  Each GEMM is a roofline: max(FLOPs / (peak x efficiency), bytes / bw),
  efficiency = eff0 x m/(m+h) x k/(k+h) x n/(n+h) with m the batch for MLP
  layers; bytes = elem x (b x activations + weights), twice that
  backward; plus one kernel overhead per kernel. The bottom MLP runs
  `bottom_b` samples (default b). The (unfused) interaction also reads
  and writes `ew` elements per sample (W0: its 22-wide output) once
  forward, twice backward.
  """
  out = {'bottom': [0.0, 0.0], 'inter': [0.0, 0.0], 'top': [0.0, 0.0]}
  for comp, m, k, n, ffwd, fbwd, acts, weights, kernels in layers:
    bb = bottom_b if (comp == 'bottom' and bottom_b is not None) else b
    m = bb if m == 1 else m
    eff = eff0 * m / (m + half) * k / (k + half) * n / (n + half)
    nbytes = elem * (bb * acts + weights)
    out[comp][0] += smax(bb * ffwd / (peak * eff), nbytes / bw) + kernel
    out[comp][1] += (
      smax(bb * fbwd / (peak * eff), 2 * nbytes / bw) + kernels * kernel
    )
  ew_bytes = 2 * b * ew * elem  # read and written
  out['inter'][0] += ew_bytes / bw + kernel
  out['inter'][1] += 2 * ew_bytes / bw + kernel
  return out


# Passes over each MLP layer's output per sample and kernels per layer, by
# the stack's mlp_fusion: nn.Linear + nn.ReLU (none): bias-add copy, ReLU
# read and write forward, ReLU-gradient read, read, write and bias-gradient
# read backward = 7 passes, 3 kernels; one fused kernel each way
# (elementwise): 2 + 3 = 5 passes, 2 kernels; in the GEMM (epilogue): the
# saved activation mask read backward = 1 pass, no kernel.
EW = {'none': (7, 3), 'elementwise': (5, 2), 'epilogue': (1, 0)}


def hand_ew(b, fusion, widths, elem, bw, kernel, layers=2):
  """Seconds of an MLP's elementwise passes: b samples x passes x output
  widths x elem bytes at 80% of the bandwidth, and the unfused kernels."""
  passes, kernels = EW[fusion]
  return b * passes * widths * elem / (STREAM * bw) + layers * kernels * kernel


def hand_busiest(loads, ranks, in_order=False):
  """The packing bounds of `busiest_rank` by hand: smax of the share bound
  sum / R, the largest load (j = 0, exact) and, for j = 1 .. 3 (j < T),
  (j + 1) x the loads sorted largest first (or as given, `in_order`) read
  at the position pos = T - softplus(4 (T - jR)) / 4 (jR, saturating
  smoothly at T) by the Catmull-Rom spline through the loads at
  floor(pos) - 1 .. floor(pos) + 2 (the largest before position 0, 0 past
  the end): p1 + u/2 ((p2 - p0) + u ((2 p0 - 5 p1 + 4 p2 - p3) + u (3 (p1 -
  p2) + p3 - p0))), u = pos - floor(pos), floored at 0. At a whole
  position it reads that load exactly."""
  x = list(loads) if in_order else sorted(loads, reverse=True)
  t = len(x)

  def at(k):
    return x[max(k, 0)] if k < t else 0.0

  bounds = [sum(x) / ranks, max(x)]
  for j in range(1, min(t, 4)):
    gap = t - j * ranks
    pos = max(t - 0.25 * math.log1p(math.exp(4.0 * gap)), 0.0)
    c = math.floor(pos)
    u = pos - c
    p0, p1, p2, p3 = at(c - 1), at(c), at(c + 1), at(c + 2)
    read = p1 + 0.5 * u * (
      (p2 - p0)
      + u * ((2 * p0 - 5 * p1 + 4 * p2 - p3) + u * (3 * (p1 - p2) + p3 - p0))
    )
    bounds.append((j + 1) * max(read, 0.0))
  return smax(*bounds)


def make_plan(frac=(1.0, 1.0, 1.0), sharding='table_wise', **kw):
  sharding = (sharding,) * len(frac) if isinstance(sharding, str) else sharding
  fields = dict(
    hbm_fraction=np.asarray(frac, dtype=np.float64),
    cpu_lookup_fraction=1.0,
    overlap=0.0,
    sharding=tuple(sharding),
    column_shards=4,
    comm_precision='fp32',
  )
  fields.update(kw)
  return Plan(**fields)


def run(p, w, plan, s=None, row_scale=1.0):
  s = tiny_stack() if s is None else s
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, s, row_scale)
  f = lambda x: float(np.asarray(x))  # noqa: E731
  return {
    'breakdown': {k: f(v) for k, v in r.breakdown.items()},
    'step': f(r.step_time),
    'throughput': f(r.throughput),
    'required': {k: f(v) for k, v in r.memory_required.items()},
    'available': {k: f(v) for k, v in r.memory_available.items()},
    'margin': f(r.feasibility_margin),
    'feasible': bool(np.asarray(r.feasible)),
    'capex': f(r.capex),
    'power': f(r.power),
    'perf_per_usd': f(r.perf_per_usd),
    'perf_per_watt': f(r.perf_per_watt),
    'bottleneck': r.bottleneck,
  }


def close(got, want, rel=REL):
  assert got == pytest.approx(want, rel=rel, abs=0.0), (got, want)


def arrays(p):
  return hardware.as_arrays(p)


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


# ---- embedding terms in HBM ------------------------------------------------


@pytest.mark.parametrize('sharding', ['table_wise', 'row_wise', 'column_wise'])
def test_embedding_hbm_terms(sharding):
  r = run(tiny_platform(), tiny_workload(), make_plan(sharding=sharding))
  bd = r['breakdown']
  ranks = 8
  # Every table in HBM: B x pooling lookups per table, 64 B each (a 16 x 4 B
  # row is exactly one 64 B transaction).
  loads = [B * pool * 64 for pool in POOL]  # bytes per table per step
  total = sum(loads)
  if sharding == 'table_wise':
    # Whole tables per rank: the busiest rank carries at least the largest
    # table (2 MiB) although the mean is only total / 8: imbalance. (The
    # other packing bounds, j = 1, 2 < T = 3, read past the tables: the
    # positions 8 and 16 saturate at 3, where the spline reads nothing.)
    busiest = hand_busiest(loads, ranks)
    close(busiest, smax(total / ranks, max(loads)), rel=1e-6)
  elif sharding == 'row_wise':
    busiest = total / ranks  # rows spread evenly
  else:
    # 4 column shards of 4 elements = 16 B each; each still costs a full
    # 64 B transaction, so a lookup moves 4 x 64 B, spread evenly.
    busiest = 4 * total / ranks
  # 16 (or 4) columns: the quarter-block penalty slows the kernel 1.75x.
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], busiest / rate)
  # scatter update: read and write each looked-up row (no optimizer state).
  close(bd['embedding_update_hbm'], 2 * busiest / rate)
  # Nothing lives in DDR.
  assert bd['embedding_gather_ddr'] < 1e-25
  assert bd['embedding_update_ddr'] < 1e-25


def test_table_wise_imbalance_against_row_wise():
  w = tiny_workload()
  tw = run(tiny_platform(), w, make_plan())['breakdown']
  rw = run(tiny_platform(), w, make_plan(sharding='row_wise'))['breakdown']
  # Largest table: 4 lookups of 64 B per sample; mean over 8 ranks:
  # (1 + 2 + 4) x 64 / 8 per sample. Ratio about 4 x 8 / 7 (the bounds
  # past the 3 tables read nothing).
  ratio = hand_busiest([1, 2, 4], 8) / (7 / 8)
  close(ratio, smax(7 / 8, 4) / (7 / 8), rel=1e-6)
  close(tw['embedding_gather_hbm'] / rw['embedding_gather_hbm'], ratio)
  assert ratio > 4.5


def test_busiest_rank_packing_bounds():
  """`busiest_rank`: the smooth max of the share bound sum / R, the
  largest table (j = 0) and, for j = 1 .. J-1 (J = 4), (j + 1) x the
  ordered loads read at the position jR by a Catmull-Rom spline over the
  four nearest tables (`hand_busiest`)."""
  assert ct.embedding._MAX_PACKING_BOUNDS == 4
  # 26 equal tables on 8 ranks: some rank holds 4 (26 > 3 x 8), not 3.25.
  # Bounds: 26/8, 1 x 1st, 2 x 9th, 3 x 17th, 4 x 25th largest (equal
  # neighbours: the spline reads 1).
  x = np.ones(26)
  got = float(ct.busiest_rank(x, np.ones(26), 8.0, np.arange(26)))
  close(got, smax(26 / 8, 1, 2, 3, 4))
  assert 4.0 < got < 4.2
  # 9 equal tables on 8 ranks: some rank holds 2 (9 > 8); the spline
  # reads the 9th table exactly at the whole position 8 (up to the
  # softplus saturation, 0.25 ln(1 + e^4) - 1 = 0.0045 below 8, and the
  # spline's overshoot towards the zero past the end).
  got = float(ct.busiest_rank(np.ones(9), np.ones(9), 8.0, np.arange(9)))
  close(got, hand_busiest([1.0] * 9, 8.0))
  assert 2.0 < got < 2.01
  # One huge table: the busiest rank holds it (the mean is 103 / 8); the
  # positions 8, 16, 24 saturate at the end, where the spline reads 0.
  x = np.array([1.0, 100.0, 1.0, 1.0])
  got = float(ct.busiest_rank(x, np.ones(4), 8.0, np.array([1, 0, 2, 3])))
  close(hand_busiest(list(x), 8.0), got)
  close(got, smax(103 / 8, 100.0), rel=1e-6)
  # Tables not placed whole (the mask) are left out of the order too:
  # loads 1, 1, 1.
  mask = np.array([1, 0, 1, 1.0])
  got = float(ct.busiest_rank(x, mask, 8.0, np.array([0, 2, 3, 1])))
  close(got, hand_busiest([1.0, 1.0, 1.0], 8.0))
  close(got, smax(3 / 8, 1.0), rel=1e-6)
  # The j = 0 bound is the exact maximum whatever the order.
  got = float(ct.busiest_rank(x, np.ones(4), 8.0, np.arange(4)))
  close(got, hand_busiest(list(x), 8.0, in_order=True))
  assert got >= 100.0
  # Fractional R over 4, 3, 2, 1: R = 1.5 and 1.25, by hand.
  x = np.array([4.0, 3.0, 2.0, 1.0])
  for r in (1.5, 1.25, 2.0):
    got = float(ct.busiest_rank(x, np.ones(4), r, np.arange(4)))
    close(got, hand_busiest(list(x), r))
  # At R = 2 the bounds read whole positions exactly: the 3rd largest (2)
  # for j = 1; j = 2 and 3 reach past the end (positions 4 and 6).
  close(
    float(ct.busiest_rank(x, np.ones(4), 2.0, np.arange(4))),
    smax(10 / 2, 4.0, 2 * 2.0),
    rel=1e-4,  # the softplus saturation moves position 2 by 8e-5
  )
  # Several loads at once along a leading axis, in one order ...
  got = ct.busiest_rank(np.stack([x, 2 * x]), np.ones(4), 1.5, np.arange(4))
  close(float(got[1]), 2 * hand_busiest(list(x), 1.5))
  # ... or each in its own: the second load reversed, read in its order.
  orders = np.stack([np.arange(4), np.arange(4)[::-1]])
  got = ct.busiest_rank(np.stack([x, x[::-1]]), np.ones(4), 1.5, orders)
  close(float(got[0]), float(got[1]))
  close(float(got[1]), hand_busiest(list(x), 1.5))


@pytest.mark.parametrize('r', [2.0, 3.0, 8.0])
def test_busiest_rank_is_smooth_in_the_rank_count(r):
  # 9 equal tables and smaller ones: on 8 ranks one rank holds 2 of the 9
  # (the bound 2 x the 9th largest); just below R = 8 the 9th position
  # lies between equal tables, just above between unequal ones. The
  # B-spline's derivative is continuous at every integer position: the
  # derivatives from both sides agree, and with jax.grad at R.
  x = np.array([1.0] * 9 + [0.5, 0.4, 0.3, 0.2, 0.1])
  order = np.arange(len(x))

  def f(r):
    return ct.busiest_rank(x, np.ones(len(x)), r, order)

  left = float(jax.grad(f)(r - 1e-6))
  right = float(jax.grad(f)(r + 1e-6))
  at = float(jax.grad(f)(r))
  assert left == pytest.approx(right, rel=1e-4, abs=1e-9)
  assert at == pytest.approx(right, rel=1e-4, abs=1e-9)


@pytest.mark.parametrize('tables, r', [(8, 8.0), (26, 13.0)])
def test_busiest_rank_is_smooth_where_jr_reaches_the_last_table(tables, r):
  x = np.ones(tables)
  order = np.arange(tables)

  def f(r):
    return ct.busiest_rank(x, np.ones(tables), r, order)

  left = float(jax.grad(f)(r - 1e-7))
  right = float(jax.grad(f)(r + 1e-7))
  assert left == pytest.approx(right, rel=1e-5, abs=1e-9)


def test_busiest_rank_in_the_step():
  # 26 equal tables (1000 rows, dim 16, 1 lookup) table-wise on 8 ranks:
  # the gather of the busiest rank is smax(26/8, 1, 2, 3, 4) tables' worth,
  # against 26/8 row-wise.
  w = wl.Workload(
    name='equal',
    tables=tuple(wl.Table(1000, DIM, 1.0) for _ in range(26)),
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    global_batch=B,
  )
  frac = (1.0,) * 26
  tw = run(tiny_platform(), w, make_plan(frac))['breakdown']
  rw = run(tiny_platform(), w, make_plan(frac, 'row_wise'))['breakdown']
  one = B * 64 * PENALTY / (HBM_BW * ACC_GATHER)  # one table's gather
  close(tw['embedding_gather_hbm'], smax(26 / 8, 1, 2, 3, 4) * one)
  close(rw['embedding_gather_hbm'], 26 / 8 * one)


def hot_small_workload(copies=1):
  """`copies` x table A (100 rows, 10 lookups per sample) and `copies` x
  table B (10^6 rows, 5 lookups), all fp32 dim 16."""
  return wl.Workload(
    name='hot_small',
    tables=(wl.Table(100, DIM, 10.0),) * copies
    + (wl.Table(1_000_000, DIM, 5.0),) * copies,
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    global_batch=B,
  )


# Fused update bytes of the hot-small tables: sort 32 B per lookup (4 B
# ids, 4 radix passes read and written), each bag's fp32 gradient (64 B),
# each distinct row read and written (128 B): A has only ~100 distinct
# rows, B ~B x 5.
HOT_A = 32 * B * 10 + 64 * B + 128 * 100 * (1 - math.exp(-B * 10 / 100))
HOT_B = 32 * B * 5 + 64 * B + 128 * 1e6 * (1 - math.exp(-B * 5 / 1e6))


def test_busiest_update_is_at_least_the_largest_whole_table():
  # Table A has more lookups (traffic 640 B per sample against B's 320 B)
  # but B moves more than twice A's update bytes.
  s = tiny_stack(update_path='fused')
  bd = run(tiny_platform(), hot_small_workload(), make_plan((1.0, 1.0)), s)
  bd = bd['breakdown']
  rate = HBM_BW * ACC_GATHER / PENALTY
  assert HOT_B > 2 * HOT_A
  # A whole table lies on one rank: that rank updates at least B's bytes
  # (the j = 0 bound is the exact maximum whatever the static order).
  assert bd['embedding_update_hbm'] >= HOT_B / rate * (1 - 1e-9)


def test_busiest_update_packs_the_update_loads_in_their_order():
  s = tiny_stack(update_path='fused')
  plan = make_plan((1.0,) * 18)
  bd = run(tiny_platform(), hot_small_workload(9), plan, s)['breakdown']
  rate = HBM_BW * ACC_GATHER / PENALTY
  busiest = hand_busiest([HOT_A] * 9 + [HOT_B] * 9, 8)
  close(bd['embedding_update_hbm'], busiest / rate, rel=1e-9)


def test_busiest_rank_packs_only_the_whole_tables_in_order():
  # 13 tables row-wise with 2 lookups per sample (spread over the 8
  # ranks), then 13 table-wise with 1: some rank holds 2 of the 13 whole
  # tables (13 > 8), none needs to hold 3 (13 < 17).
  w = wl.Workload(
    name='mixed',
    tables=(wl.Table(1000, DIM, 2.0),) * 13 + (wl.Table(1000, DIM, 1.0),) * 13,
    num_dense=4,
    bottom_mlp=(8, 16),
    top_mlp=(8, 1),
    global_batch=B,
  )
  plan = make_plan((1.0,) * 26, ('row_wise',) * 13 + ('table_wise',) * 13)
  bd = run(tiny_platform(), w, plan)['breakdown']
  one = B * 64  # one table-wise table's gather bytes
  busiest = 13 * 2 * one / 8 + hand_busiest([one] * 13, 8)
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], busiest / rate)


@pytest.mark.parametrize(
  'optimizer, gather, update',
  [
    # table A: 18 x 4 B = 72 B rows -> two 64 B transactions (128 B);
    # table B: 8 x 4 B = 32 B rows -> one transaction (64 B).
    # update = 2 x (row + state), each rounded up to transactions.
    ('sgd', (128, 64), (2 * 128, 2 * 64)),
    # one fp32 per element: 72 B -> 128 B and 32 B -> 64 B
    ('adagrad', (128, 64), (2 * (128 + 128), 2 * (64 + 64))),
    # one fp32 per row: 4 B -> one 64 B transaction
    ('rowwise_adagrad', (128, 64), (2 * (128 + 64), 2 * (64 + 64))),
    # two moments touched separately: 2 x 128 B and 2 x 64 B
    ('adam', (128, 64), (2 * (128 + 256), 2 * (64 + 128))),
  ],
)
def test_access_granularity_and_optimizer_state(optimizer, gather, update):
  w = wl.Workload(
    name='granular',
    tables=(wl.Table(500, 18), wl.Table(300, 8)),
    num_dense=4,
    bottom_mlp=(8,),
    top_mlp=(4, 1),
    interaction='cat',
    global_batch=B,
    optimizer=optimizer,
  )
  plan = make_plan(frac=(1.0, 1.0), sharding=('table_wise',) * 2)
  bd = run(tiny_platform(), w, plan)['breakdown']
  rate = HBM_BW * ACC_GATHER / PENALTY  # 18 and 8 columns: both < 64

  def busiest(per_lookup):  # one lookup per sample per table
    return hand_busiest([B * x for x in per_lookup], 8)

  close(bd['embedding_gather_hbm'], busiest(gather) / rate)
  close(bd['embedding_update_hbm'], busiest(update) / rate)
  # Dense optimizer: 12 B per parameter plus a read and a write of each
  # fp32 state element (adagrad and rowwise: 1 per parameter, adam: 2).
  # Parameters: 4*8+8 + (8+18+8)*4+4 + 4*1+1 = 185.
  state = {'sgd': 0, 'adagrad': 1, 'rowwise_adagrad': 1, 'adam': 2}
  per_param = 12 + 8 * state[optimizer]
  close(bd['dense_optimizer'], 185 * per_param / HBM_BW + ACC_KERNEL)


def test_each_tier_has_its_own_access_granularity():
  # HBM read in 32 B sectors, DDR in 64 B cache lines: a 72 B row costs
  # 96 B from HBM and 128 B from DDR. Half of each table in each tier.
  w = wl.Workload(
    name='granular',
    tables=(wl.Table(500, 18), wl.Table(300, 18)),
    num_dense=4,
    bottom_mlp=(8,),
    top_mlp=(4, 1),
    interaction='cat',
    global_batch=B,
  )
  plan = make_plan(frac=(0.5, 0.5), sharding=('row_wise',) * 2)
  p = tiny_platform(access_granularity=32)
  bd = run(p, w, plan)['breakdown']
  lookups = 2 * B * 0.5  # per tier: 2 tables x B lookups x half
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_gather_hbm'], lookups * 96 / 8 / rate)
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER  # all DDR lookups on the CPUs
  close(bd['embedding_gather_ddr'], lookups * 128 / ddr_rate)


@pytest.mark.parametrize(
  'dim, shards, penalty',
  [
    (128, 1, 1.0),  # a full 128-column block
    (256, 4, 1.15),  # 4 column shards of 64: half block
    (100, 1, 1.15),  # 64 <= 100 < 128: half-block penalty
    (64, 1, 1.15),
    (63, 1, 1.75),  # below 64: quarter-block penalty
    (512, 4, 1.0),  # 4 column shards of 128
  ],
)
def test_block_penalty_and_embedding_rate(dim, shards, penalty):
  # FBGEMM runs a row in blocks of 128 columns (TorchRec planner:
  # HALF_BLOCK_PENALTY 1.15 below 128 columns, QUARTER_BLOCK_PENALTY 1.75
  # below 64), by the width of each shard.
  sharding = 'column_wise' if shards > 1 else 'row_wise'
  w = wl.Workload(
    name='wide',
    tables=(wl.Table(1000, dim, 1.0),),
    num_dense=4,
    bottom_mlp=(8,),
    top_mlp=(4, 1),
    interaction='cat',
    global_batch=B,
  )
  t = ct.table_arrays(w, ((sharding,), 4, 'fp32'), (64, 64))
  close(float(t['block_penalty'][0]), penalty)
  # One lookup per sample, spread over 8 ranks: each shard's 4 x dim /
  # shards bytes, rounded up to 64 B, at 0.5 x 1 TB/s / penalty.
  shard_bytes = 64 * math.ceil(4 * dim / shards / 64)
  rate = HBM_BW * ACC_GATHER / penalty
  bd = run(tiny_platform(), w, make_plan((1.0,), sharding))['breakdown']
  close(bd['embedding_gather_hbm'], B * shards * shard_bytes / 8 / rate)
  # The stack's embedding efficiency and a per-table kernel (half the rate
  # of a fused one, TorchRec planner DENSE vs FUSED) divide the rate.
  s = tiny_stack(embedding_efficiency=0.4, embedding_kernel='per_table')
  bd2 = run(tiny_platform(), w, make_plan((1.0,), sharding), s)['breakdown']
  for k in ('embedding_gather_hbm', 'embedding_update_hbm'):
    close(bd2[k], bd[k] / (0.4 * 0.5))


# ---- distinct rows and the row updates -------------------------------------


@pytest.mark.parametrize(
  'rows, lookups, lo, hi',
  [
    (1000.0, 8192.0, 0.0, 1.0),
    (1e6, 5e3, 0.0, 1.0),
    (4000.0, 32768.0, 0.25, 1.0),
    (2000.0, 100.0, 0.0, 0.5),
  ],
)
def test_distinct_rows_uniform(rows, lookups, lo, hi):
  # k = 1: every row is equally likely; a row is missed by all `lookups`
  # draws with probability (1 - 1/rows)^lookups ~ exp(-lookups / rows).
  want = rows * (1 - math.exp(-lookups / rows)) * (hi - lo)
  close(float(ct.distinct_rows(rows, lookups, 1.0, lo, hi)), want)


def trapezoid(f, lo, hi, n=100_001):
  x = np.linspace(lo, hi, n)
  y = f(x)
  return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2)


@pytest.mark.parametrize('skew', [2.0, 8.0])
@pytest.mark.parametrize('rate', [0.01, 1.0, 8.192, 100.0])
@pytest.mark.parametrize('lo, hi', [(0.0, 1.0), (0.0, 0.25), (0.25, 1.0)])
def test_distinct_rows_skewed(skew, rate, lo, hi):
  # The row at rank fraction x is drawn with probability k (1 - x)^(k - 1)
  # / rows per lookup (the density of hit(f) = 1 - (1 - f)^k), so it is
  # touched with probability 1 - exp(-lookups k (1 - x)^(k-1) / rows).
  # Reference: the trapezoid rule on 100k points. The model's 16-point
  # Gauss-Legendre rule agrees to 1e-9 up to 1 lookup per row; the
  # integrand steepens near x = 1 with more (3e-6 at 8 lookups per row and
  # k = 8, 2e-4 at 100 lookups per row and k = 2).
  rows = 4000.0
  lookups = rate * rows

  def touched(x):
    return -np.expm1(-lookups * skew * (1 - x) ** (skew - 1) / rows)

  want = rows * trapezoid(touched, lo, hi)
  got = float(ct.distinct_rows(rows, lookups, skew, lo, hi))
  close(got, want, rel={0.01: 1e-8, 1.0: 1e-8, 8.192: 1e-5, 100.0: 1e-3}[rate])
  # Never more distinct rows than rows in the range, nor than lookups.
  assert got <= rows * (hi - lo) * (1 + 1e-12) and got <= lookups * (1 + 1e-9)


@pytest.mark.parametrize(
  'path, id_bytes',
  [('scatter', 4), ('fused', 4), ('fused', 8), ('sparse_grad', 4)],
)
def test_update_bytes_per_update_path(path, id_bytes):
  # W0 wholly in HBM, row-wise (the load spreads over 8 ranks), uniform
  # traffic: table t sees n = B x pooling lookups touching
  # rows (1 - exp(-n / rows)) distinct rows. A lookup gathers 64 B; an SGD
  # row update reads and writes 64 B.
  s = tiny_stack(update_path=path, id_bytes=id_bytes)
  bd = run(tiny_platform(), tiny_workload(), make_plan(sharding='row_wise'), s)
  bd = bd['breakdown']
  total = 0.0
  for rows, pool in zip(ROWS, POOL):
    n = B * pool
    distinct = rows * (1 - math.exp(-n / rows))
    sort = n * id_bytes * 2 * 4  # 4 radix passes, each reads and writes ids
    if path == 'scatter':  # every lookup read-modify-writes its row
      moved = n * 128
    elif path == 'fused':
      # sort the ids, read each of the B bags' fp32 pooled gradient
      # (16 x 4 B), read-modify-write each distinct row once.
      moved = sort + B * 64 + distinct * 128
    else:
      # sparse gradient: write a row per lookup, read and write it to
      # sort, read it to sum (4 x 64 B per lookup), write the sums
      # (64 B per distinct row), then read-modify-write the rows.
      moved = sort + 4 * n * 64 + distinct * (64 + 128)
    total += moved
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_update_hbm'], total / 8 / rate)
  # Gathers do not depend on the update path.
  close(bd['embedding_gather_hbm'], B * 7 * 64 / 8 / rate)


def test_update_bytes_term():
  # The term alone on made-up per-table numbers, two tables: lookups L,
  # distinct rows D, (gather, update) bytes per row (g, u), bags G, dims.
  t = {'dim': np.array([16.0, 32.0])}
  lookups, distinct = np.array([100.0, 50.0]), np.array([40.0, 50.0])
  g, u = np.array([64.0, 128.0]), np.array([256.0, 512.0])
  bags = np.array([30.0, 20.0])
  for path, ids in (('fused', 8), ('sparse_grad', 4), ('scatter', 8)):
    s = tiny_stack(update_path=path, id_bytes=ids)
    got = np.asarray(ct.update_bytes(s, t, lookups, distinct, (g, u), bags))
    sort = lookups * ids * 8
    want = {
      'fused': sort + bags * t['dim'] * 4 + distinct * u,
      'sparse_grad': sort + 4 * lookups * g + distinct * (g + u),
      'scatter': lookups * u,
    }[path]
    np.testing.assert_allclose(got, want, rtol=REL)


# ---- pooled payloads -------------------------------------------------------


@pytest.mark.parametrize(
  'dense, stack_payload, comm, want',
  [
    ('fp32', 'dense', 'fp32', 4),  # dense follows the dense precision
    ('tf32', 'dense', 'fp32', 4),
    ('bf16', 'dense', 'fp32', 2),
    ('fp32', 'fp16', 'fp32', 2),  # the stack narrows
    ('fp32', 'fp32', 'bf16', 2),  # the plan narrows (quantized comms)
    ('bf16', 'fp32', 'fp32', 4),  # a wider stack payload is kept
    ('fp32', 'fp8', 'bf16', 1),  # the plan cannot widen it
  ],
)
def test_payload_precision(dense, stack_payload, comm, want):
  # The pooled all-to-all of table-wise W0 (each rank sends B x 3 x 16
  # elements / 8, 3/8 of them to its node's 3 other ranks) moves `want`
  # bytes per element; ids and the allreduce are unaffected by the stack's
  # payload (the allreduce follows the plan's comm_precision).
  w = tiny_workload(dense_precision=dense)
  s = tiny_stack(payload_precision=stack_payload)
  bd = run(tiny_platform(), w, make_plan(comm_precision=comm), s)['breakdown']
  ids_intra, _ = ids_terms(8, 4, switch, LINK_LAT, NIC)
  v_intra = B * 3 * DIM * want / 8 * 3 / 8
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / LINK + 3 * LINK_LAT))
  cb = 4 if comm == 'fp32' else 2
  grad = DENSE_PARAMS * cb
  close(bd['allreduce_intra'], 2 * 3 / 4 * grad / LINK + 6 * LINK_LAT)


@pytest.mark.parametrize('dense', ['bf16', 'fp32'])
def test_pooled_cast(dense):
  # A separate cast of the pooled vectors (fp32 tables) to the payload
  # precision: per table B vectors of 16 elements read at 4 B and written
  # at 2 B (bf16 payload), streamed at 80% of HBM bandwidth, forward and
  # again backward; spread over 8 ranks row-wise. fp32 payload: no cast.
  w = tiny_workload(dense_precision=dense)
  plan = make_plan(sharding='row_wise')
  off = run(tiny_platform(), w, plan)['breakdown']
  on = run(tiny_platform(), w, plan, tiny_stack(pooled_cast=True))['breakdown']
  payload = 2 if dense == 'bf16' else 4
  moved = 3 * B * 16 * (4 + payload) / 8 if payload != 4 else 0.0
  cast = moved / (STREAM * HBM_BW)
  for k in ('embedding_gather_hbm', 'embedding_update_hbm'):
    close(on[k] - off[k], cast, rel=1e-9 if cast else REL)
  # The cast's two kernels (one each way) as gaps, where bytes move.
  gaps = 2 * ACC_KERNEL if dense == 'bf16' else 0.0
  close(on['overhead'] - off['overhead'], gaps)
  # The term itself: bytes per table, None without a cast.
  p = arrays(tiny_platform())
  s = tiny_stack(pooled_cast=True)
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  got = ct.pooled_cast_bytes(s, t, ct.setup(p, w, s), payload)
  if payload == 4:
    assert got is None
  else:
    np.testing.assert_allclose(np.asarray(got), [B * 16 * 6] * 3, rtol=REL)
  # Without a setup: bytes per sample (whether any move at all).
  got = ct.pooled_cast_bytes(s, t, None, payload)
  if payload == 4:
    assert got is None
  else:
    np.testing.assert_allclose(np.asarray(got), [16 * 6] * 3, rtol=REL)
  assert ct.pooled_cast_bytes(tiny_stack(), t, ct.setup(p, w, s), 2) is None


def test_pooled_cast_to_the_same_precision_costs_nothing():
  w, plan = tiny_workload(), make_plan()  # fp32 tables, fp32 payload
  off = run(tiny_platform(), w, plan)
  on = run(tiny_platform(), w, plan, tiny_stack(pooled_cast=True))
  close(on['step'], off['step'])
  for k in cost_model.COMPONENTS:
    close(on['breakdown'][k], off['breakdown'][k])
  # A cast to the same precision launches nothing (PyTorch .half() of a
  # half tensor), in the graph or eagerly.
  assert counts(tiny_stack(pooled_cast=True)).device_kernels == TINY_GAPS
  eager = tiny_stack(pooled_cast=True, graph_scope='none')
  assert counts(eager).host_ops == EAGER


def plan_static(plan):
  return (plan.sharding, plan.column_shards, plan.comm_precision)


# ---- tables partly in host DDR ------------------------------------------


def ddr_case():
  """W0 with skewed traffic, tables partly in DDR, 3/4 of DDR lookups on
  the CPU sockets."""
  w = tiny_workload(popularity_skew=2.0)
  plan = make_plan(frac=(0.5, 0.25, 0.0), cpu_lookup_fraction=0.75)
  return w, plan


# Share of lookups that hit the rows in HBM, hit(f) = 1 - (1 - f)^2.
DDR_HIT = (0.75, 0.4375, 0.0)
DDR_LOOKUPS = B * (1 * 0.25 + 2 * 0.5625 + 4 * 1.0)  # B x pool x miss


@pytest.mark.parametrize('uvm_eff', [UVM_EFF, 1.0])
def test_embedding_ddr_host_and_socket_terms(uvm_eff):
  w, plan = ddr_case()
  p = tiny_platform()
  p = dataclasses.replace(
    p,
    host_link=dataclasses.replace(
      p.host_link, random_access_efficiency=uvm_eff
    ),
  )
  bd = run(p, w, plan)['breakdown']
  assert DDR_HIT == tuple(1 - (1 - f) ** 2 for f in (0.5, 0.25, 0.0))
  hbm_loads = [B * pool * h * 64 for pool, h in zip(POOL, DDR_HIT)]
  ddr_gather = 64 * DDR_LOOKUPS
  c = 0.75
  # HBM side: table-wise over 8 ranks. The packing order comes from the
  # plan's (concrete) HBM fractions: the 2000-row table first (0.875 B
  # lookups from HBM), then the 1000-row one (0.75 B), then the 4000-row
  # one (none): the busiest rank holds the first, 4.3x the mean.
  hbm_rate = HBM_BW * ACC_GATHER / PENALTY
  busiest = hand_busiest(hbm_loads, 8)
  assert busiest > 4 * sum(hbm_loads) / 8
  close(bd['embedding_gather_hbm'], busiest / hbm_rate)
  # DDR side: the CPU sockets of both nodes gather c of the DDR lookups at
  # 2 nodes x 2 sockets x 100 GB/s x 0.5 = 200 GB/s; the accelerators read
  # the rest row by row over PCIe (UVM) at uvm_eff of the host link, and those
  # reads also load DDR (which matters when uvm_eff = 1).
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  host_node = smin(4 * HOST_BW, 2 * CPU_PCIE)  # 4 x 16 vs 2 x 40 GB/s
  uvm_rate = 2 * host_node * uvm_eff
  cpu_t = c * ddr_gather / ddr_rate
  uvm_t = (1 - c) * ddr_gather * smax(1 / uvm_rate, 1 / ddr_rate)
  close(bd['embedding_gather_ddr'], cpu_t + uvm_t)
  # Update (scatter, SGD): read and write each looked-up row.
  close(bd['embedding_update_ddr'], 2 * (cpu_t + uvm_t))
  # Pooled vectors the sockets send to the accelerators: one 64 B vector
  # per sample and table unless all its lookups hit HBM (hit^pooling).
  all_hit = [0.75**1, 0.4375**2, 0.0**4]
  pooled = c * sum(B * 64 * (1 - a) for a in all_hit) / 2  # per node
  host_1 = pooled / host_node + HOST_LAT
  close(bd['host_transfer'], 2 * host_1)  # forward and backward
  # Half of the vectors (those on the other socket) cross a socket link:
  # 2 sockets x 2 links x 20 GB/s, halved (each link joins two sockets).
  upi = 2 * 2 * SOCKET_LINK_BW / 2
  close(bd['socket_links'], 2 * pooled * (1 / 2) / upi)


def test_packing_order_of_traced_fractions():
  # `load_orders` orders by the plan's HBM fractions when they are
  # concrete; traced (under jit, as in a search) it orders by the tables'
  # sizes alone, as if wholly in HBM: the 4000-row table (4 lookups) first,
  # the 1000-row one last. The HBM loads of the DDR case in that order are
  # 0, 0.875 and 0.75 B x 64 B: the largest stays exact (j = 0), the
  # positions 8 and 16 saturate past the tables and read nothing.
  w, plan = ddr_case()
  p, s = hardware.as_arrays(tiny_platform()), tiny_stack()
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  orders = ct.load_orders(w, plan, s, t)
  np.testing.assert_array_equal(orders['gather'], [1, 0, 2])
  np.testing.assert_array_equal(orders['bytes'], [0, 1, 2])

  def gather(frac):
    traced = dataclasses.replace(plan, hbm_fraction=frac)
    return cost_model.evaluate(p, w, traced, s).breakdown[
      'embedding_gather_hbm'
    ]

  got = float(jax.jit(gather)(plan.hbm_fraction))
  loads = [B * pool * h * 64 for pool, h in zip(POOL, DDR_HIT)]
  busiest = hand_busiest(loads[::-1], 8, in_order=True)
  close(busiest, smax(sum(loads) / 8, max(loads)), rel=1e-6)
  close(got, busiest / (HBM_BW * ACC_GATHER / PENALTY))


def test_updates_use_their_own_efficiency():
  """Row read-modify-write runs at update_efficiency, gathers at
  gather_efficiency: with update efficiencies of 0.2 (CPU) and 0.25
  (accelerator), only the update terms change."""
  w, plan = ddr_case()
  base = tiny_platform()
  p = dataclasses.replace(
    base,
    cpu=dataclasses.replace(base.cpu, update_efficiency=0.2),
    accelerator=dataclasses.replace(base.accelerator, update_efficiency=0.25),
  )
  bd0 = run(base, w, plan)['breakdown']
  bd = run(p, w, plan)['breakdown']
  for k in ('embedding_gather_hbm', 'embedding_gather_ddr', 'host_transfer'):
    close(bd[k], bd0[k])
  close(
    bd['embedding_update_hbm'], bd0['embedding_update_hbm'] * ACC_GATHER / 0.25
  )
  # DDR side by hand, as in test_embedding_ddr_host_and_socket_terms with
  # the update rate of the sockets at 0.2.
  update_bytes = 2 * 64 * DDR_LOOKUPS  # scatter, SGD: read and write a row
  c = 0.75
  update_rate = 2 * 2 * DDR_BW * 0.2
  host_node = smin(4 * HOST_BW, 2 * CPU_PCIE)
  uvm_rate = 2 * host_node * UVM_EFF
  cpu_t = c * update_bytes / update_rate
  uvm_t = (1 - c) * update_bytes * smax(1 / uvm_rate, 1 / update_rate)
  close(bd['embedding_update_ddr'], cpu_t + uvm_t)


def test_fused_update_in_ddr_uses_the_distinct_rows_of_the_ddr_rows():
  # Fused update, skew k = 2, all DDR lookups on the CPUs (c = 1): the
  # sockets sort the DDR lookups' ids, read the pooled gradient of every
  # bag with at least one DDR lookup (1 - hit^pooling of the B bags), and
  # read-modify-write the distinct rows among the coldest 1 - f of each
  # table, rows x integral_f^1 [1 - exp(-n k (1-x)^(k-1) / rows)] dx.
  w, plan = ddr_case()
  plan = dataclasses.replace(plan, cpu_lookup_fraction=1.0)
  s = tiny_stack(update_path='fused')
  bd = run(tiny_platform(), w, plan, s)['breakdown']
  moved = 0.0
  for rows, pool, f, hit in zip(ROWS, POOL, (0.5, 0.25, 0.0), DDR_HIT):
    n = B * pool

    def touched(x, n=n, rows=rows):
      return -np.expm1(-n * 2 * (1 - x) / rows)

    distinct = rows * trapezoid(touched, f, 1.0)
    lookups = n * (1 - hit)
    bags = B * (1 - hit**pool)
    moved += lookups * 4 * 8 + bags * 64 + distinct * 128
  update_rate = 2 * 2 * DDR_BW * CPU_GATHER
  close(bd['embedding_update_ddr'], moved / update_rate, rel=1e-6)


def test_uvm_caching_fill_traffic_and_memory():
  # UVM caching: the plan's HBM fraction is a cache of the hottest rows;
  # every miss crosses the host link at the stack's fill efficiency (0.5)
  # (and loads DDR); the CPU sockets do nothing, no pooled vectors cross
  # PCIe, whatever the plan's cpu_lookup_fraction.
  w, plan = ddr_case()
  s = tiny_stack(uvm_caching=True)
  r = run(tiny_platform(), w, plan, s)
  bd = r['breakdown']
  gather = 64 * DDR_LOOKUPS
  fill = 2 * smin(4 * HOST_BW, 2 * CPU_PCIE) * UVM_FILL  # both nodes
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  close(bd['embedding_gather_ddr'], smax(gather / fill, gather / ddr_rate))
  moved = 2 * gather  # scatter, SGD
  close(bd['embedding_update_ddr'], smax(moved / fill, moved / ddr_rate))
  assert bd['host_transfer'] == 0.0 and bd['socket_links'] == 0.0
  # Cache lookup and insert: 2 more kernel gaps.
  close(bd['overhead'], (TINY_GAPS + 2) * ACC_KERNEL)
  # Memory: the tables stay whole in DDR (7000 x 64 B over 2 nodes); HBM
  # holds the cached rows as without caching.
  close(r['required']['ddr'], sum(ROWS) * 64 / 2)
  no_cache = run(tiny_platform(), w, plan)
  close(r['required']['hbm'], no_cache['required']['hbm'])
  close(no_cache['required']['ddr'], (0.5 * 1000 + 0.75 * 2000 + 4000) * 32)
  # Data-parallel tables are whole in HBM, never in DDR.
  dp = dataclasses.replace(
    plan, sharding=('data_parallel', 'table_wise', 'table_wise')
  )
  close(run(tiny_platform(), w, dp, s)['required']['ddr'], 6000 * 64 / 2)


def test_memory_per_tier_and_margin():
  w, plan = ddr_case()
  r = run(tiny_platform(), w, plan)
  table_bytes = [rows * 64 for rows in ROWS]  # SGD: rows only
  on_hbm = [0.5 * table_bytes[0], 0.25 * table_bytes[1], 0.0]
  # HBM per accelerator: the busiest rank's table shards, the dense model
  # (weight and gradient, fp32) and activations: b x (219 GEMM elements +
  # 3 x 4 pooled vectors x 16) x 4 B. The tables pack in the order of
  # their bytes in HBM (the plan's fractions): a rank holds 32 kB.
  dense = DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  hbm = hand_busiest(on_hbm, 8) + dense
  close(r['required']['hbm'], hbm)
  close(r['available']['hbm'], HBM_CAP)
  # DDR per node: what is not in HBM, split over 2 nodes.
  ddr = sum(t - h for t, h in zip(table_bytes, on_hbm)) / 2
  close(r['required']['ddr'], ddr)
  close(r['available']['ddr'], 2 * DDR_CAP)
  assert r['feasible']
  # Soft minimum of the per-tier margins 1 - required / available at
  # temperature 0.01, shifted so that two equal margins give that margin.
  m = [1 - ddr / (2 * DDR_CAP), 1 - hbm / HBM_CAP]
  t = 0.01
  soft = -t * math.log(sum(math.exp(-x / t) for x in m)) + t * math.log(2)
  close(r['margin'], soft)
  # A smaller HBM that the shards overflow: infeasible, negative margin.
  small = run(tiny_platform(hbm_capacity=0.5 * hbm), w, plan)
  assert not small['feasible'] and small['margin'] < 0
  close(small['required']['hbm'], hbm)


def test_hbm_reserve():
  # The stack keeps 25% of HBM free: 7.5 GB available per accelerator; a
  # design that needs 8 GB then overflows.
  w, plan = ddr_case()
  r = run(tiny_platform(), w, plan, tiny_stack(hbm_reserve=0.25))
  close(r['available']['hbm'], 0.75 * HBM_CAP)
  need = r['required']['hbm']
  p = tiny_platform(hbm_capacity=need / 0.8)
  assert run(p, w, plan)['feasible']
  assert not run(p, w, plan, tiny_stack(hbm_reserve=0.25))['feasible']


# ---- communication ---------------------------------------------------------


def switch(v):
  """Seconds for one accelerator to send v bytes to its node's peers over
  the switch: every peer is directly linked at 4 x 25 GB/s x 0.8."""
  return v / LINK


def ids_terms(
  ranks,
  a,
  intra,
  alpha,
  nic=1.0,
  lookups=sum(POOL),
  id_bytes=4,
  calls=1,
  latency=0.0,
):
  """(intra, inter) seconds of the forward-only id all-to-all: each rank
  sends the `id_bytes` ids of its B / R samples (`lookups` per sample over
  the sharded tables) to the ranks that hold the rows, spread over all
  ranks; `intra(v)` is the seconds to send v bytes inside the node; the a
  ranks of a node share its NICs; each of the `calls` collectives pays
  the per-peer alphas (a - 1 inside the node, nodes - 1 across) and the
  software `latency` (on more than one rank)."""
  nodes = ranks / a
  several = 1 - math.exp(-4 * (ranks - 1))
  ids = B * id_bytes * lookups / ranks
  v_intra = ids * (a - 1) / ranks
  intra_s = intra(v_intra) + calls * ((a - 1) * alpha + latency * several)
  inter = ids * (ranks - a) / ranks * a / nic + calls * (nodes - 1) * NIC_LAT
  return intra_s, inter


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
    nic = smin(nic, smin(4 * HOST_BW, 2 * CPU_PCIE))
  # Ids are int32 whatever the payload precision, forward only.
  ids_intra, ids_inter = ids_terms(8, 4, switch, LINK_LAT, nic)
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / LINK + 3 * LINK_LAT))
  # The 4 ranks of a node share the node's NICs; 1 peer node.
  close(bd['alltoall_inter'], ids_inter + 2 * (v_inter * 4 / nic + 1 * NIC_LAT))
  # Dense gradients, ring allreduce: 2 (n - 1) / n of the bytes per rank.
  grad = DENSE_PARAMS * cb
  close(bd['allreduce_intra'], 2 * 3 / 4 * grad / LINK + 2 * 3 * LINK_LAT)
  close(bd['allreduce_inter'], 2 * 1 / 2 * grad / nic + 2 * 1 * NIC_LAT)


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
  # rest goes through the host at the node's host bandwidth over the 8
  # accelerators, smin(8 x 16, 2 x 40 GB/s) / 8, at the same time.
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
  relay = smin(8 * HOST_BW, 2 * CPU_PCIE) / 8
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
  ar_bw = direct
  close(
    bd['allreduce_intra'],
    2 * 7 / 8 * DENSE_PARAMS * 4 / ar_bw + 2 * 7 * alpha,
  )
  # The term alone.
  fab = ct.fabric(
    arrays(p), tiny_stack(), ct.setup(arrays(p), tiny_workload(), tiny_stack())
  )
  close(float(ct.intra_node_seconds(1e6, fab)), intra(1e6))


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
  pooled_inter = send * 4 / 8 * 4 / NIC + NIC_LAT
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
  # Two more calls: 2 x (3 peers x 1 us) inside the node, 2 x 5 us across.
  close(
    three['alltoall_intra'] - one['alltoall_intra'], 2 * 3 * LINK_LAT, rel=1e-6
  )
  close(three['alltoall_inter'] - one['alltoall_inter'], 2 * NIC_LAT, rel=1e-6)
  # The allreduce likewise, per bucket: 2 x 3 alphas inside, 2 x 1 across.
  w = dp_workload()
  plan = make_plan(sharding=('data_parallel', 'table_wise', 'table_wise'))
  one = run(tiny_platform(), w, plan, tiny_stack())['breakdown']
  seven = tiny_stack(allreduce_bucket_bytes=1e6)  # 7 buckets
  seven = run(tiny_platform(), w, plan, seven)['breakdown']
  close(
    seven['allreduce_intra'] - one['allreduce_intra'],
    6 * 2 * 3 * LINK_LAT,
    rel=1e-6,
  )
  close(
    seven['allreduce_inter'] - one['allreduce_inter'],
    6 * 2 * NIC_LAT,
    rel=1e-6,
  )


def dp_workload(rows=100_000):
  return tiny_workload(
    tables=(wl.Table(rows, DIM, 1.0),) + tiny_workload().tables[1:]
  )


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
  # Every bucket is a ring of its own: 2 (a - 1) alphas inside the node,
  # 2 (nodes - 1) across, and the software latency.
  close(
    bd['allreduce_intra'],
    2 * 3 / 4 * grad / LINK + calls * (6 * LINK_LAT + 10e-6 * several),
  )
  close(bd['allreduce_inter'], grad / NIC + calls * 2 * NIC_LAT)


def test_alltoall_on_pcie_only():
  p = tiny_platform(topology='pcie_only', nodes=1.0, accels=8.0)
  bd = run(p, tiny_workload(), make_plan())['breakdown']
  # No fabric: the 8 accelerators share the node's host bandwidth,
  # smin(8 x 16, 2 x 40 GB/s), at the host-link latency.
  bw = smin(8 * HOST_BW, 2 * CPU_PCIE) / 8
  v_intra = B * 3 * DIM * 4 / 8 * 7 / 8
  ids_intra, _ = ids_terms(8, 8, lambda v: v / bw, HOST_LAT)
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / bw + 7 * HOST_LAT))
  ar = 2 * 7 / 8 * DENSE_PARAMS * 4 / bw + 2 * 7 * HOST_LAT
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
    ids_inter + 2 * (send * 4 / 8 * 4 / NIC + NIC_LAT),
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
    bd['alltoall_inter'], ids_inter + 2 * (send * 4 / 8 * 4 / NIC + NIC_LAT)
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
  close(bd['alltoall_inter'], ids_inter + 2 * (v_inter * 4 / NIC + NIC_LAT))
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
  rw_bytes = ((rw2['alltoall_inter'] - ids) / 2 - NIC_LAT) * NIC
  twrw_bytes = ((twrw2['alltoall_inter'] - ids) / 2 - NIC_LAT) * NIC
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
  close(bd['allreduce_intra'], 2 * 3 / 4 * grad / LINK + 6 * LINK_LAT)
  close(bd['allreduce_inter'], grad / NIC + 2 * NIC_LAT)
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
  inter = send * (ranks - a) / ranks * a / NIC + (nodes - 1) * NIC_LAT
  close(bd['alltoall_inter'], ids_inter + 2 * inter)
  # The allreduce leaves out the 184 bottom-MLP parameters.
  grad = (DENSE_PARAMS - BOTTOM_PARAMS) * 4
  close(
    bd['allreduce_intra'],
    2 * (a - 1) / a * grad / LINK + 2 * (a - 1) * LINK_LAT,
  )
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


# ---- the host side -------------------------------------------------------


def counts(s, w=None, plan=None, payload=None):
  """`kernel_counts` of W0 (or `w`) under `s`; the pooled payload is 2 B
  for a bf16 model (the tiny stack's payload follows the dense
  precision), 4 B otherwise."""
  w = tiny_workload() if w is None else w
  plan = make_plan(frac=(1.0,) * w.num_tables) if plan is None else plan
  if payload is None:
    payload = 2 if w.dense_precision == 'bf16' else 4
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  return ct.kernel_counts(w, s, t, plan, payload)


def host_ops(s, w=None, plan=None):
  return sum(counts(s, w, plan).host_ops.values())


# Eager operators of W0 per group of work without CUDA graphs, under the
# tiny stack: bottom MLP GEMMs 2 + 3; the dot GEMM 1 + 2 and its 6
# cat/index kernels; top MLP GEMMs 3 + 3; the fused optimizer 2; the fused
# embedding kernels 2; 4 collectives (1 id exchange, the pooled all-to-all
# each way, 1 allreduce); loss 4 and data copies 3.
EAGER = {
  'bottom_mlp': 5.0,
  'interaction': 9.0,
  'top_mlp': 6.0,
  'optimizer': 2.0,
  'embedding': 2.0,
  'collectives': 4.0,
  'other': 7.0,
}


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
  close(float(ct.host_time(s, counts(s))), host)
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
  close(bd['allreduce_intra'], 2 * 3 / 4 * grad / LINK + 6 * LINK_LAT)


# ---- composition, capex and power -----------------------------------------


# Forward shares of the MLPs' elementwise passes (terms.MLP_PASSES):
# none 3 of 7 (bias copy, ReLU read and write), elementwise 2 of 5, epilogue
# none (the mask is read backward). The model splits the whole elementwise
# time, kernel launches included, by them.
PASS_FWD = {'none': 3 / 7, 'elementwise': 2 / 5, 'epilogue': 0.0}
# Forward shares of the elementwise kernels as terms.MLP_KERNELS
# documents them: none 1 of 3 (ReLU forward; ReLU and bias gradients
# backward), elementwise 1 of 2, epilogue none.
KERNEL_FWD = {'none': 1 / 3, 'elementwise': 1 / 2, 'epilogue': 0.0}


def composed_step(bd, o, fusion='epilogue', bottom_b=1024):
  """The step from the breakdown terms, by hand, with the dense terms
  split forward and backward by hand: the MLPs' streaming time by the
  forward share of their passes (`PASS_FWD`), their kernel launches by
  `KERNEL_FWD`."""
  d = hand_dense(
    1024, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL, bottom_b=bottom_b
  )
  passes, kernels = EW[fusion]

  def split(b, widths):
    stream = b * passes * widths * 4 / (STREAM * HBM_BW)
    launch = 2 * kernels * ACC_KERNEL
    fk = KERNEL_FWD[fusion]
    fwd = PASS_FWD[fusion] * stream + fk * launch
    return fwd, stream + launch - fwd

  ew_b, ew_t = split(bottom_b, BOTTOM_WIDTHS), split(1024, TOP_WIDTHS)
  bottom = (d['bottom'][0] + ew_b[0], d['bottom'][1] + ew_b[1])
  top = (d['top'][0] + ew_t[0], d['top'][1] + ew_t[1])

  def ov(a, b):  # o overlapped: (1 - o)(a + b) + o smax(a, b)
    return (1 - o) * (a + b) + o * smax(a, b)

  # With every DDR lookup on the CPUs (c = 1) the terms split cleanly:
  # forward gathers from HBM race the CPU gathers plus their transfer.
  host, upi = bd['host_transfer'] / 2, bd['socket_links'] / 2
  # Ids go forward only; pooled vectors and their gradients both ways.
  ids = sum(ids_terms(8, 4, switch, LINK_LAT, NIC))
  a2a = (bd['alltoall_intra'] + bd['alltoall_inter'] - ids) / 2
  sparse_fwd = smax(
    bd['embedding_gather_hbm'], bd['embedding_gather_ddr'] + host + upi
  )
  sparse_fwd += ids + a2a
  sparse_bwd = a2a + smax(
    bd['embedding_update_hbm'], host + upi + bd['embedding_update_ddr']
  )
  t_fwd = ov(sparse_fwd, bottom[0]) + d['inter'][0] + top[0]
  t_bwd = top[1] + d['inter'][1] + ov(sparse_bwd, bottom[1])
  t_bwd = ov(t_bwd, bd['allreduce_intra'] + bd['allreduce_inter'])
  device = t_fwd + t_bwd + bd['dense_optimizer'] + bd['overhead']
  return smax(device, STEP_FLOOR)  # one graph, host_overlap 1


COMPOSITIONS = [
  (0.0, 'epilogue', False),
  (0.5, 'epilogue', False),
  (1.0, 'epilogue', False),
  (1.0, 'none', True),
  (0.5, 'elementwise', True),
]


def composition_case(fusion, one_device, o):
  s = tiny_stack(
    mlp_fusion=fusion,
    bottom_mlp='one_device' if one_device else 'data_parallel',
  )
  plan = make_plan(frac=(1.0, 0.5, 0.0), overlap=o)
  return run(tiny_platform(), tiny_workload(), plan, s), (
    B if one_device else 1024
  )


@pytest.mark.parametrize('o, fusion, one_device', COMPOSITIONS)
def test_step_composition(o, fusion, one_device):
  r, bottom_b = composition_case(fusion, one_device, o)
  bd = r['breakdown']
  step = composed_step(bd, o, fusion, bottom_b)
  close(r['step'], step)
  close(r['throughput'], B / step)
  assert r['bottleneck'] == max(bd, key=bd.get)


def test_capex_and_power():
  r = run(tiny_platform(), tiny_workload(), make_plan())
  # Per node: chassis 5000; 2 sockets x (1000 + 100 GB x 5 USD/GB);
  # 4 accelerators x (10000 + 10 GB x 20 USD/GB); fabric 4 accelerators x
  # 4 links x 25 GB/s x 5 USD per GB/s; NICs 2 x 12.5 GB/s x 100 USD per
  # GB/s.
  node_usd = 5000 + 2 * 1500 + 4 * 10200 + 4 * 100 * 5 + 25 * 100
  assert node_usd == 53300
  close(r['capex'], 2 * node_usd)
  # Per node: 500 W; 2 x (200 + 100 GB x 0.1 W/GB); 4 x (300 + 100 GB/s x
  # 0.05 W per GB/s); NICs 25 GB/s x 1 W per GB/s.
  node_w = 500 + 2 * 210 + 4 * 305 + 25
  close(r['power'], 2 * node_w)
  close(r['perf_per_usd'], r['throughput'] / (2 * node_usd))
  close(r['perf_per_watt'], r['throughput'] / (2 * node_w))


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

  ids_intra, ids_inter = ids_terms(4, 2, intra, CPU_KERNEL, NIC)
  close(
    bd['alltoall_intra'], ids_intra + 2 * (intra(send * 1 / 4) + CPU_KERNEL)
  )
  close(
    bd['alltoall_inter'], ids_inter + 2 * (send * 2 / 4 * 2 / NIC + NIC_LAT)
  )
  grad = DENSE_PARAMS * 4
  close(bd['allreduce_intra'], 2 * 1 / 2 * grad / direct + 2 * CPU_KERNEL)
  close(bd['allreduce_inter'], 2 * 1 / 2 * grad / NIC + 2 * NIC_LAT)
  # Kernel gaps at the socket's per-op cost; host and device add.
  close(bd['overhead'], TINY_GAPS * CPU_KERNEL)
  close(bd['host'], STEP_FLOOR)
  # Memory: no HBM; each node holds half of the tables and one dense
  # model with activations per socket.
  assert r['required']['hbm'] == 0.0 and r['available']['hbm'] == 0.0
  dense = DENSE_PARAMS * 8 + b * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  close(r['required']['ddr'], sum(ROWS) * 64 / 2 + 2 * dense)
  close(r['available']['ddr'], 2 * DDR_CAP)
  # No accelerators or fabric are bought: 5000 + 2 x 1500 + NICs 2500.
  close(r['capex'], 2 * (5000 + 2 * 1500 + 2500))
  close(r['power'], 2 * (500 + 2 * 210 + 25))


def test_cpu_trainer_replicates_data_parallel_tables_on_every_node():
  p = tiny_platform(trainer='cpu', nic_attach='socket')
  plan = make_plan(sharding=('data_parallel', 'table_wise', 'table_wise'))
  r = run(p, tiny_workload(), plan)
  dense = DENSE_PARAMS * 8 + 2048 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  # Per node: 2 replicas of table 0, half of tables 1 and 2, 2 dense models.
  want = 2 * 1000 * 64 + (2000 + 4000) * 64 / 2 + 2 * dense
  close(r['required']['ddr'], want)
