"""The tiny platform, stack and workload of the model's known-answer
tests (tests/model/), with their numbers worked by hand.

A tiny DLRM runs on a tiny platform of round numbers under a tiny software
stack. Each test writes the term's formula out in plain Python from the
numbers below (nothing here calls `codesign.spec.workload` or the cost model's
helpers to get the answer), then compares it with what `evaluate` (or the
term's own function in `codesign.model.terms`) reports.

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

import numpy as np
import pytest

from codesign.model import cost_model
from codesign.model import terms as ct
from codesign.spec import hardware
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Accelerator, CpuSocket, Fabric, HostLink, Nic
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

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
# Each NIC's PCIe slot, host time per posted message, switch latency and
# ports (terms.collectives).
NIC_SLOT, POST, SW_LAT, RADIX = 16e9, 1e-6, 0.2e-6, 64.0

LINK = LINKS * LINK_BW * LINK_EFF  # 80 GB/s per accelerator
# 20 GB/s of line rate per node, no more than the 2 slots (32 GB/s) and,
# with GPUDirect, the 4 accelerators' host links (64 GB/s) carry.
NIC = smin(smin(NICS * NIC_BW * NIC_EFF, NICS * NIC_SLOT), 4 * HOST_BW)
NIC_LINE_SLOT = smin(NICS * NIC_BW * NIC_EFF, NICS * NIC_SLOT)


def net_alpha(nodes):
  """NIC latency plus 2 switch latencies per tier above the leaf; tiers
  log_{k/2}(n), at least 1 (p = 16)."""
  reach = math.log(nodes) / math.log(RADIX / 2)
  tiers = (1.0 + reach**16) ** (1 / 16) if reach > 0 else 1.0
  return NIC_LAT + 2 * (tiers - 1) * SW_LAT


def a2a_latency(nodes, a, flat=True):
  """Network latency of one all-to-all call: one message's latency at
  NCCL's Simple overhead (14 - 2.7 us) on more than one node, and the
  posts: one per remote rank (flat) or per remote node."""
  several = 1 - math.exp(-4 * (nodes - 1))
  posts = a * (nodes - 1) if flat else nodes - 1
  return several * (net_alpha(nodes) + 11.3e-6) + posts * POST


def allreduce_by_hand(b, a, nodes, ar_bw, nic, alpha, nvls=False, sharp=False):
  """(intra, inter) seconds of one allreduce of b bytes: NCCL's ring and
  tree, Simple and LL, (SHARP, NVLS), each its bandwidth and latency
  terms (tuning.cc); the time is the p-norm minimum (p = 32) of the
  totals offset by 1 ns, split as the options split theirs, weighted by
  ((t_min + 1 ns) / (t + 1 ns))^32 (1 ps added to both parts)."""
  several = 1 - math.exp(-4 * (nodes - 1))
  log_n = math.log2(nodes)
  net = net_alpha(nodes)
  ring_i = 2 * (a - 1) / a * b / ar_bw
  ring_e = 2 * (nodes - 1) / nodes * b / nic
  plateau = 1 + 0.4 * several
  algos = {
    'ring_simple': (
      ring_i + plateau * 2 * nodes * (a - 1) * (alpha + 2.8e-6),
      ring_e + plateau * 2 * (nodes - 1) * (net + 11.3e-6),
    ),
    'tree_simple': (
      ring_i / 0.92 + 2 * (a - 1) * (alpha + 3.4e-6),
      ring_e / 0.92 + 2 * log_n * (net + 11.3e-6),
    ),
    'ring_ll': (
      ring_i / 0.5 + 2 * nodes * (a - 1) * alpha,
      ring_e / 0.5 + 2 * (nodes - 1) * net,
    ),
    'tree_ll': (
      ring_i / 0.92 * 3.8 + 2 * (a - 1) * alpha,
      ring_e / 0.92 * 3.8 + 2 * log_n * (net + 2.3e-6),
    ),
  }
  if sharp:
    algos['collnet'] = (
      ring_i + 2 * (alpha + 3.1e-6 + (a - 1) * 0.4e-6),
      several * (b / (0.85 * nic) + net + 28.3e-6),
    )
  if nvls:
    algos['nvls'] = (
      ring_i / 1.7 + alpha + 24.4e-6,
      ring_e / 0.92 + 2 * log_n * (net + 18.2e-6),
    )
  return choose(algos)


def choose(algos):
  """NCCL's choice by hand: the p-norm minimum (p = 32) of the totals
  offset by 1 ns, split as the options split theirs, weighted by
  ((t_min + 1 ns) / (t + 1 ns))^32 (1 ps added to both parts)."""
  totals = {k: i + e + 1e-9 for k, (i, e) in algos.items()}
  time = max(sum(t**-32 for t in totals.values()) ** (-1 / 32) - 1e-9, 0.0)
  wts = {k: (min(totals.values()) / t) ** 32 for k, t in totals.items()}
  share = (sum(wts[k] * algos[k][0] for k in algos) + 1e-12) / (
    sum(wts[k] * (totals[k] - 1e-9) for k in algos) + 1e-12
  )
  return time * share, time * (1 - share)


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
    fp32_gemm_efficiency=ACC_EFF,
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
    slot_bandwidth=NIC_SLOT,
    post_overhead=POST,
    switch_latency=SW_LAT,
    switch_radix=RADIX,
    switch_port_price=1e-7,  # 100 USD per GB/s of switch port
    switch_port_power=1e-9,  # 1 W per GB/s of switch port
    link_price=2e-7,  # 200 USD per GB/s of link
    link_power=2e-9,  # 2 W per GB/s of link
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


def trapezoid(f, lo, hi, n=100_001):
  x = np.linspace(lo, hi, n)
  y = f(x)
  return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2)


def plan_static(plan):
  return (plan.sharding, plan.column_shards, plan.comm_precision)


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
  the per-peer alphas inside the node (a - 1), the all-to-all's network
  latency (`a2a_latency`) and the software `latency` (on more than one
  rank)."""
  nodes = ranks / a
  several = 1 - math.exp(-4 * (ranks - 1))
  ids = B * id_bytes * lookups / ranks
  v_intra = ids * (a - 1) / ranks
  intra_s = intra(v_intra) + calls * ((a - 1) * alpha + latency * several)
  inter = ids * (ranks - a) / ranks * a / nic + calls * a2a_latency(nodes, a)
  return intra_s, inter


def dp_workload(rows=100_000):
  return tiny_workload(
    tables=(wl.Table(rows, DIM, 1.0),) + tiny_workload().tables[1:]
  )


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
