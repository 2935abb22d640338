"""Known answers, worked by hand, for every term of `cost_model.evaluate`.

A tiny DLRM runs on a tiny platform of round numbers. Each test writes the
term's formula out in plain Python from the numbers below (nothing here
calls `codesign.workload` or the cost model's helpers), then compares it
with what `evaluate` reports.

The tiny workload W0: 3 fp32 tables of dim 16 (a 64 B row, exactly one
memory transaction) with 1000, 2000 and 4000 rows and 1, 2 and 4 lookups
per sample; 4 dense features; bottom MLP 4-8-16; dot interaction over
F = 3 + 1 = 4 vectors, whose output is 16 + 4 * 3 / 2 = 22 wide; top MLP
22-8-1; global batch B = 8192; SGD.

The tiny platform: 2 nodes x (2 CPU sockets + 4 accelerators), so R = 8
ranks and a local batch b = B / R = 1024. Numbers in `tiny_platform`.

Smooth maxima in the model are p-norms with p = 8:
smax(x, y) = (x^8 + y^8)^(1/8), smin(x, y) = 1 / smax(1/x, 1/y).
"""

import dataclasses
import math

import numpy as np
import pytest

from codesign import cost_model, hardware
from codesign import workload as wl
from codesign.hardware import Accelerator, CpuSocket, Fabric, HostLink, Nic
from codesign.plan import Plan

P = 8.0
REL = 1e-10  # float64 agreement of two ways to do the same arithmetic


def smax(*xs):
  """Smooth maximum by hand: the p-norm, p = 8."""
  return sum(x**P for x in xs) ** (1.0 / P)


def smin(*xs):
  """Smooth minimum by hand: 1 / smax(1 / x)."""
  return 1.0 / smax(*(1.0 / x for x in xs))


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
STEP_OVERHEAD = 100e-6


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
    step_overhead=STEP_OVERHEAD,
    sources=(),
  )


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


def hand_dense(b, peak, elem, eff0, half, bw, kernel, layers=LAYERS, ew=22):
  """(fwd, bwd) seconds per component of a dense part on one rank.

  Each GEMM is a roofline: max(FLOPs / (peak x efficiency), bytes / bw),
  efficiency = eff0 x m/(m+h) x k/(k+h) x n/(n+h) with m the batch for MLP
  layers; bytes = elem x (b x activations + weights), twice that
  backward; plus one kernel overhead per kernel. The interaction also
  reads and writes `ew` elements per sample (W0: its 22-wide output) once
  forward, twice backward.
  """
  out = {'bottom': [0.0, 0.0], 'inter': [0.0, 0.0], 'top': [0.0, 0.0]}
  for comp, m, k, n, ffwd, fbwd, acts, weights, kernels in layers:
    m = b if m == 1 else m
    eff = eff0 * m / (m + half) * k / (k + half) * n / (n + half)
    nbytes = elem * (b * acts + weights)
    out[comp][0] += smax(b * ffwd / (peak * eff), nbytes / bw) + kernel
    out[comp][1] += (
      smax(b * fbwd / (peak * eff), 2 * nbytes / bw) + kernels * kernel
    )
  ew_bytes = 2 * b * ew * elem  # read and written
  out['inter'][0] += ew_bytes / bw + kernel
  out['inter'][1] += 2 * ew_bytes / bw + kernel
  return out


def make_plan(frac=(1.0, 1.0, 1.0), sharding='table_wise', **kw):
  sharding = (sharding,) * 3 if isinstance(sharding, str) else sharding
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


def run(p, w, plan):
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan)
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
  close(r['dense_bottom_mlp'], sum(d['bottom']))
  close(r['dense_interaction'], sum(d['inter']))
  close(r['dense_top_mlp'], sum(d['top']))
  # Optimizer: read weight and gradient, write weight (3 x 4 B fp32 master
  # copy); mixed precision also writes the 2 B bf16 copy. SGD: no state.
  per_param = 12 + (2 if precision == 'bf16' else 0)
  close(r['dense_optimizer'], DENSE_PARAMS * per_param / HBM_BW + ACC_KERNEL)
  close(r['overhead'], STEP_OVERHEAD)
  # HBM: the table-wise tables (64 B rows), fp32 weight and gradient (plus
  # the 16-bit copy in mixed precision) and activations of b samples: 219
  # GEMM elements and 3 copies of the 4 x 16 pooled vectors, elem B each.
  tables = [rows * 64 for rows in ROWS]
  dense = DENSE_PARAMS * (8 + (2 if precision == 'bf16' else 0))
  dense += b * (ACT_ELEMS + 3 * 4 * DIM) * elem
  hbm = smax(sum(tables) / 8, max(tables)) + dense
  close(report['required']['hbm'], hbm)


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
  for comp, key in (('bottom', 'bottom_mlp'), ('inter', 'interaction')):
    close(bd['dense_' + key], sum(d[comp]))
  close(bd['dense_top_mlp'], sum(d['top']))
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
  close(bd['dense_top_mlp'], sum(d['top']))


def test_small_gemms_are_below_peak():
  # Doubling the GEMM-efficiency half size lowers every efficiency factor,
  # so every dense term grows: shape-dependent efficiency is live.
  w = tiny_workload()
  base = run(tiny_platform(), w, make_plan())['breakdown']
  slow = run(tiny_platform(gemm_half_size=64.0), w, make_plan())['breakdown']
  for k in ('dense_bottom_mlp', 'dense_interaction', 'dense_top_mlp'):
    assert slow[k] > base[k]


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
    # table (2 MiB) although the mean is only total / 8: imbalance.
    busiest = smax(total / ranks, max(loads))
  elif sharding == 'row_wise':
    busiest = total / ranks  # rows spread evenly
  else:
    # 4 column shards of 4 elements = 16 B each; each still costs a full
    # 64 B transaction, so a lookup moves 4 x 64 B, spread evenly.
    busiest = 4 * total / ranks
  rate = HBM_BW * ACC_GATHER
  close(bd['embedding_gather_hbm'], busiest / rate)
  # SGD update: read and write each touched row (no optimizer state).
  close(bd['embedding_update_hbm'], 2 * busiest / rate)
  # Nothing lives in DDR.
  assert bd['embedding_gather_ddr'] < 1e-25
  assert bd['embedding_update_ddr'] < 1e-25


def test_table_wise_imbalance_against_row_wise():
  w = tiny_workload()
  tw = run(tiny_platform(), w, make_plan())['breakdown']
  rw = run(tiny_platform(), w, make_plan(sharding='row_wise'))['breakdown']
  # Largest table: 4 lookups of 64 B per sample; mean over 8 ranks:
  # (1 + 2 + 4) x 64 / 8 per sample. Ratio 4 x 8 / 7, barely smoothed.
  ratio = smax(7 / 8, 4) / (7 / 8)
  close(tw['embedding_gather_hbm'] / rw['embedding_gather_hbm'], ratio)
  assert ratio > 4.5


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
  rate = HBM_BW * ACC_GATHER

  def busiest(per_lookup):  # one lookup per sample per table
    loads = [B * x for x in per_lookup]
    return smax(sum(loads) / 8, max(loads))

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
  close(bd['embedding_gather_hbm'], lookups * 96 / 8 / (HBM_BW * ACC_GATHER))
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER  # all DDR lookups on the CPUs
  close(bd['embedding_gather_ddr'], lookups * 128 / ddr_rate)


# ---- tables partly in host DDR ------------------------------------------


def ddr_case():
  """W0 with skewed traffic, tables partly in DDR, 3/4 of DDR lookups on
  the CPU sockets."""
  w = tiny_workload(popularity_skew=2.0)
  plan = make_plan(frac=(0.5, 0.25, 0.0), cpu_lookup_fraction=0.75)
  return w, plan


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
  # Share of lookups that hit the rows in HBM, hit(f) = 1 - (1 - f)^2.
  hit = [1 - (1 - 0.5) ** 2, 1 - (1 - 0.25) ** 2, 0.0]
  assert hit == [0.75, 0.4375, 0.0]
  hbm_loads = [B * pool * h * 64 for pool, h in zip(POOL, hit)]
  ddr_lookups = B * (1 * 0.25 + 2 * 0.5625 + 4 * 1.0)  # B x pool x miss
  ddr_gather = 64 * ddr_lookups
  c = 0.75
  # HBM side: table-wise over 8 ranks.
  hbm_rate = HBM_BW * ACC_GATHER
  close(
    bd['embedding_gather_hbm'],
    smax(sum(hbm_loads) / 8, max(hbm_loads)) / hbm_rate,
  )
  # DDR side: the CPU sockets of both nodes gather c of the DDR lookups at
  # 2 nodes x 2 sockets x 100 GB/s x 0.5 = 200 GB/s; the accelerators read
  # the rest row by row over PCIe (UVM) at uvm_eff of the host link, and those
  # reads also load DDR (which matters when uvm_eff = 1).
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  host_node = smin(4 * HOST_BW, 2 * CPU_PCIE)  # 4 x 16 vs 2 x 40 GB/s
  uvm_rate = 2 * host_node * uvm_eff
  cpu_t = c * ddr_gather / ddr_rate
  uvm_t = smax((1 - c) * ddr_gather / uvm_rate, (1 - c) * ddr_gather / ddr_rate)
  close(bd['embedding_gather_ddr'], cpu_t + uvm_t)
  # Update: read and write the row (SGD).
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
  ddr_lookups = B * (1 * 0.25 + 2 * 0.5625 + 4 * 1.0)
  update_bytes = 2 * 64 * ddr_lookups  # SGD: read and write each row
  c = 0.75
  update_rate = 2 * 2 * DDR_BW * 0.2
  host_node = smin(4 * HOST_BW, 2 * CPU_PCIE)
  uvm_rate = 2 * host_node * UVM_EFF
  cpu_t = c * update_bytes / update_rate
  uvm_t = (1 - c) * update_bytes * smax(1 / uvm_rate, 1 / update_rate)
  close(bd['embedding_update_ddr'], cpu_t + uvm_t)


def test_memory_per_tier_and_margin():
  w, plan = ddr_case()
  r = run(tiny_platform(), w, plan)
  table_bytes = [rows * 64 for rows in ROWS]  # SGD: rows only
  on_hbm = [0.5 * table_bytes[0], 0.25 * table_bytes[1], 0.0]
  # HBM per accelerator: the busiest rank's table shards, the dense model
  # (weight and gradient, fp32) and activations: b x (219 GEMM elements +
  # 3 x 4 pooled vectors x 16) x 4 B.
  dense = DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  hbm = smax(sum(on_hbm) / 8, max(on_hbm)) + dense
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


# ---- communication ---------------------------------------------------------


def ids_terms(ranks, a, intra_bw, alpha, nic=1.0, lookups=sum(POOL)):
  """(intra, inter) seconds of the forward-only id all-to-all: each rank
  sends the 4 B ids of its B / R samples (`lookups` per sample over the
  sharded tables) to the ranks that hold the rows, spread over all ranks;
  the a ranks of a node share its NICs."""
  nodes = ranks / a
  ids = B * 4 * lookups / ranks
  intra = ids * (a - 1) / ranks / intra_bw + (a - 1) * alpha
  inter = ids * (ranks - a) / ranks * a / nic + (nodes - 1) * NIC_LAT
  return intra, inter


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
  link = LINKS * LINK_BW * LINK_EFF  # 80 GB/s per accelerator (switch)
  nic = NICS * NIC_BW * NIC_EFF  # 20 GB/s per node
  if nic_attach == 'socket':
    # NICs on the sockets: the node's traffic is staged through the host.
    nic = smin(nic, smin(4 * HOST_BW, 2 * CPU_PCIE))
  # Ids are int32 whatever the payload precision, forward only.
  ids_intra, ids_inter = ids_terms(8, 4, link, LINK_LAT, nic)
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / link + 3 * LINK_LAT))
  # The 4 ranks of a node share the node's NICs; 1 peer node.
  close(bd['alltoall_inter'], ids_inter + 2 * (v_inter * 4 / nic + 1 * NIC_LAT))
  # Dense gradients, ring allreduce: 2 (n - 1) / n of the bytes per rank.
  grad = DENSE_PARAMS * cb
  close(bd['allreduce_intra'], 2 * 3 / 4 * grad / link + 2 * 3 * LINK_LAT)
  close(bd['allreduce_inter'], 2 * 1 / 2 * grad / nic + 2 * 1 * NIC_LAT)


@pytest.mark.parametrize(
  'topology, links, factor',
  [
    ('switch', 4.0, 1.0),
    # a link to each of the 7 peers; the smooth min of 1 and 7/7
    ('fully_connected', 7.0, smin(1.0, 7.0 / 7.0)),
    # 3 links for 7 peers: traffic relays, 3/7 of the bandwidth
    ('fully_connected', 3.0, smin(1.0, 3.0 / 7.0)),
    # average hop distance of a bidirectional ring of 8 is 8/4 = 2
    ('ring', 4.0, 1.0 / smax(1.0, 8.0 / 4.0)),
    # hypercube of 8: average hops (log2 8 / 2) x 8 / 7 = 12/7
    ('hybrid_cube_mesh', 4.0, 1.0 / smax(1.0, 0.5 * 3.0 * 8.0 / 7.0)),
  ],
)
def test_alltoall_topology_factor(topology, links, factor):
  p = tiny_platform(topology=topology, nodes=1.0, accels=8.0)
  p = dataclasses.replace(
    p, fabric=dataclasses.replace(p.fabric, links_per_accelerator=links)
  )
  bd = run(p, tiny_workload(), make_plan())['breakdown']
  send = B * 3 * DIM * 4 / 8
  v_intra = send * 7 / 8
  bw = links * LINK_BW * LINK_EFF * factor
  ids_intra, _ = ids_terms(8, 8, bw, LINK_LAT)
  close(bd['alltoall_intra'], ids_intra + 2 * (v_intra / bw + 7 * LINK_LAT))
  # One node: nothing crosses the NICs.
  assert bd['alltoall_inter'] == 0.0
  assert bd['allreduce_inter'] == 0.0
  # The allreduce uses all links whatever the topology.
  ar = 2 * 7 / 8 * DENSE_PARAMS * 4 / (links * LINK_BW * LINK_EFF)
  close(bd['allreduce_intra'], ar + 2 * 7 * LINK_LAT)


def test_alltoall_on_pcie_only():
  p = tiny_platform(topology='pcie_only', nodes=1.0, accels=8.0)
  bd = run(p, tiny_workload(), make_plan())['breakdown']
  # No fabric: the 8 accelerators share the node's host bandwidth,
  # smin(8 x 16, 2 x 40 GB/s), at the host-link latency.
  bw = smin(8 * HOST_BW, 2 * CPU_PCIE) / 8
  v_intra = B * 3 * DIM * 4 / 8 * 7 / 8
  ids_intra, _ = ids_terms(8, 8, bw, HOST_LAT)
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
  link = LINKS * LINK_BW * LINK_EFF
  nic = NICS * NIC_BW * NIC_EFF
  # Each id still goes to exactly one rank (the one holding its row).
  ids_intra, ids_inter = ids_terms(8, 4, link, LINK_LAT, nic)
  close(
    bd['alltoall_intra'],
    ids_intra + 2 * (send * 3 / 8 / link + 3 * LINK_LAT),
  )
  close(
    bd['alltoall_inter'],
    ids_inter + 2 * (send * 4 / 8 * 4 / nic + NIC_LAT),
  )


def test_column_wise_sends_every_id_to_every_shard():
  bd = run(tiny_platform(), tiny_workload(), make_plan(sharding='column_wise'))[
    'breakdown'
  ]
  # Pooled vectors: the same bytes as table-wise (4 column shards of 4
  # elements instead of one 16-element vector). Ids: 4 copies of each.
  send = B * 3 * DIM * 4 / 8
  link = LINKS * LINK_BW * LINK_EFF
  nic = NICS * NIC_BW * NIC_EFF
  ids_intra, ids_inter = ids_terms(8, 4, link, LINK_LAT, nic, 4 * sum(POOL))
  close(
    bd['alltoall_intra'], ids_intra + 2 * (send * 3 / 8 / link + 3 * LINK_LAT)
  )
  close(
    bd['alltoall_inter'], ids_inter + 2 * (send * 4 / 8 * 4 / nic + NIC_LAT)
  )


def smax64(*xs):
  """The sharper smooth maximum of table-row-wise balance: p = 64."""
  top = max(xs)  # scaled, as the model does, so x^64 cannot overflow
  return top * sum((x / top) ** 64 for x in xs) ** (1.0 / 64)


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
  rate = HBM_BW * ACC_GATHER
  close(bd['embedding_gather_hbm'], busiest / rate)
  close(bd['embedding_update_hbm'], 2 * busiest / rate)
  # All-to-all: each table's 4 ranks reduce-scatter B x 16 x 4 B partial
  # sums (3/4 of it leaves each rank), i.e. 3 x B x 64 B x 3 over the 8
  # ranks; then half of the B x 64 B results per table cross nodes, spread
  # over the 8 ranks, each node's 4 ranks sharing its NICs.
  pooled = B * 3 * DIM * 4
  link = LINKS * LINK_BW * LINK_EFF
  nic = NICS * NIC_BW * NIC_EFF
  ids_intra, ids_inter = ids_terms(8, 4, link, LINK_LAT, nic)
  close(
    bd['alltoall_intra'],
    ids_intra + 2 * (pooled * 3 / 8 / link + 3 * LINK_LAT),
  )
  v_inter = pooled * 4 / 64  # (R - a) / R^2
  close(bd['alltoall_inter'], ids_inter + 2 * (v_inter * 4 / nic + NIC_LAT))
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
  nic = NICS * NIC_BW * NIC_EFF
  link = LINKS * LINK_BW * LINK_EFF
  _, ids = ids_terms(8, 4, link, LINK_LAT, nic)  # the same for both
  rw_bytes = ((rw2['alltoall_inter'] - ids) / 2 - NIC_LAT) * nic
  twrw_bytes = ((twrw2['alltoall_inter'] - ids) / 2 - NIC_LAT) * nic
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
  link = LINKS * LINK_BW * LINK_EFF
  # Ids only for the sharded tables: 2 + 4 lookups per sample.
  ids_intra, _ = ids_terms(8, 4, link, LINK_LAT, lookups=6.0)
  close(
    bd['alltoall_intra'], ids_intra + 2 * (send * 3 / 8 / link + 3 * LINK_LAT)
  )
  # Allreduce: dense gradients plus the replicated table's 1000 x 16.
  grad = (DENSE_PARAMS + 1000 * DIM) * 4
  close(bd['allreduce_intra'], 2 * 3 / 4 * grad / link + 6 * LINK_LAT)
  nic = NICS * NIC_BW * NIC_EFF
  close(bd['allreduce_inter'], grad / nic + 2 * NIC_LAT)
  # Gathers: the replicated table's lookups spread over the ranks; the
  # other two are table-wise.
  tw_loads = [B * 2 * 64, B * 4 * 64]
  dp_load = B * 1 * 64
  rate = HBM_BW * ACC_GATHER
  busiest = dp_load / 8 + smax(sum(tw_loads) / 8, max(tw_loads))
  close(bd['embedding_gather_hbm'], busiest / rate)
  # Update: rows touched as usual, plus every rank rewrites the whole
  # replicated table (read and write 1000 x 64 B) after the allreduce.
  close(bd['embedding_update_hbm'], (2 * busiest + 2 * 1000 * 64) / rate)
  # Memory: the replicated table on every accelerator, nothing in DDR.
  dense = DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  tw_bytes = [2000 * 64, 4000 * 64]
  hbm = smax(sum(tw_bytes) / 8, max(tw_bytes)) + 1000 * 64 + dense
  close(r['required']['hbm'], hbm)
  assert r['required']['ddr'] == 0.0


# ---- composition, capex and power -----------------------------------------


@pytest.mark.parametrize('o', [0.0, 0.5, 1.0])
def test_step_composition(o):
  w, plan = tiny_workload(), make_plan(frac=(1.0, 0.5, 0.0), overlap=o)
  r = run(tiny_platform(), w, plan)
  bd = r['breakdown']
  d = hand_dense(
    1024, ACC_FLOPS['fp32'], 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL
  )

  def ov(a, b):  # o overlapped: (1 - o)(a + b) + o smax(a, b)
    return (1 - o) * (a + b) + o * smax(a, b)

  # With every DDR lookup on the CPUs (c = 1) the terms split cleanly:
  # forward gathers from HBM race the CPU gathers plus their transfer.
  host, upi = bd['host_transfer'] / 2, bd['socket_links'] / 2
  # Ids go forward only; pooled vectors and their gradients both ways.
  link, nic = LINKS * LINK_BW * LINK_EFF, NICS * NIC_BW * NIC_EFF
  ids = sum(ids_terms(8, 4, link, LINK_LAT, nic))
  a2a = (bd['alltoall_intra'] + bd['alltoall_inter'] - ids) / 2
  sparse_fwd = smax(
    bd['embedding_gather_hbm'], bd['embedding_gather_ddr'] + host + upi
  )
  sparse_fwd += ids + a2a
  sparse_bwd = a2a + smax(
    bd['embedding_update_hbm'], host + upi + bd['embedding_update_ddr']
  )
  t_fwd = ov(sparse_fwd, d['bottom'][0]) + d['inter'][0] + d['top'][0]
  t_bwd = d['top'][1] + d['inter'][1] + ov(sparse_bwd, d['bottom'][1])
  t_bwd = ov(t_bwd, bd['allreduce_intra'] + bd['allreduce_inter'])
  step = t_fwd + t_bwd + bd['dense_optimizer'] + STEP_OVERHEAD
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
  close(bd['dense_bottom_mlp'], sum(d['bottom']))
  close(bd['dense_interaction'], sum(d['inter']))
  close(bd['dense_top_mlp'], sum(d['top']))
  close(bd['dense_optimizer'], DENSE_PARAMS * 12 / DDR_BW + CPU_KERNEL)
  # All 7 lookups per sample from DDR on 2 nodes x 2 sockets.
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  close(bd['embedding_gather_ddr'], B * 7 * 64 / ddr_rate)
  close(bd['embedding_update_ddr'], 2 * B * 7 * 64 / ddr_rate)
  assert bd['embedding_gather_hbm'] < 1e-25
  assert bd['embedding_update_hbm'] < 1e-25
  assert bd['host_transfer'] == 0.0 and bd['socket_links'] == 0.0
  # All-to-all between the sockets over 2 socket links of 20 GB/s (enough
  # links for the one peer socket: smin(1, 2/1)); per-op cost as latency.
  send = B * 3 * DIM * 4 / ranks
  link = SOCKET_LINKS * SOCKET_LINK_BW
  intra = link * smin(1.0, 2.0 / 1.0)
  nic = NICS * NIC_BW * NIC_EFF  # not staged: the sockets are the host
  ids_intra, ids_inter = ids_terms(4, 2, intra, CPU_KERNEL, nic)
  close(
    bd['alltoall_intra'], ids_intra + 2 * (send * 1 / 4 / intra + CPU_KERNEL)
  )
  close(
    bd['alltoall_inter'], ids_inter + 2 * (send * 2 / 4 * 2 / nic + NIC_LAT)
  )
  grad = DENSE_PARAMS * 4
  close(bd['allreduce_intra'], 2 * 1 / 2 * grad / link + 2 * CPU_KERNEL)
  close(bd['allreduce_inter'], 2 * 1 / 2 * grad / nic + 2 * NIC_LAT)
  # Memory: no HBM; each node holds half of the tables and one dense
  # model with activations per socket.
  assert r['required']['hbm'] == 0.0 and r['available']['hbm'] == 0.0
  dense = DENSE_PARAMS * 8 + b * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  close(r['required']['ddr'], sum(ROWS) * 64 / 2 + 2 * dense)
  close(r['available']['ddr'], 2 * DDR_CAP)
  # No accelerators or fabric are bought: 5000 + 2 x 1500 + NICs 2500.
  close(r['capex'], 2 * (5000 + 2 * 1500 + 2500))
  close(r['power'], 2 * (500 + 2 * 210 + 25))
