"""The cost of one synchronous DLRM training step on a platform.

`evaluate(platform, workload, plan)` is a pure, unjitted function of one
design: `jit`, `vmap` and `grad` belong to the caller. The workload is
static (Python numbers); platform and plan are pytrees of arrays.

The step, on R = nodes x accelerators_per_node ranks (sockets on a CPU
trainer) with global batch B and local batch b = B / R:

  forward:  all-to-all of row ids to the ranks that hold the rows ->
            embedding gathers (HBM on the accelerators, DDR on the CPU
            sockets or row by row over PCIe) -> pooled results to the
            accelerators (PCIe, socket links) -> all-to-all, overlapped with
            the bottom MLP -> interaction -> top MLP;
  backward: top MLP -> interaction -> all-to-all of pooled gradients ->
            embedding update (read-modify-write of rows and optimizer
            state), overlapped with the bottom MLP backward; the dense
            gradient allreduce overlaps the whole backward pass;
  then:     the dense optimizer update and a fixed framework overhead.

Each named term of `COMPONENTS` is reported in `breakdown` (seconds, not
yet overlapped). Rooflines and overlaps use smooth maxima and there is no
Python `if` on traced values, so gradients exist everywhere inside
`hardware.BOUNDS` with plan values in [0, 1]. Counts (sockets,
accelerators, links, NICs, nodes) are continuous here.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from codesign import workload as wl
from codesign.hardware import Platform
from codesign.plan import Plan
from codesign.pytree import dataclass
from codesign.smooth import TINY, overlap, safe_div, smooth_max, smooth_min

COMPONENTS = (
  'dense_bottom_mlp',
  'dense_interaction',
  'dense_top_mlp',
  'dense_optimizer',
  'embedding_gather_hbm',
  'embedding_gather_ddr',
  'embedding_update_hbm',
  'embedding_update_ddr',
  'host_transfer',
  'socket_links',
  'alltoall_intra',
  'alltoall_inter',
  'allreduce_intra',
  'allreduce_inter',
  'overhead',
)
TIERS = ('hbm', 'ddr')
# Bytes per embedding row id on the wire (int32, as codesign.dlrm uses).
ID_BYTES = 4
# Temperature of the soft minimum over the per-tier memory margins.
MARGIN_TEMPERATURE = 0.01


@dataclass
class CostReport:
  """What one training step costs. Scalars unless said otherwise; SI units.

  Attributes:
    step_time: seconds per synchronous step.
    throughput: samples per second.
    breakdown: component -> seconds (each term alone, before overlap).
    memory_required: tier -> bytes needed per accelerator (`hbm`) or per
      node (`ddr`).
    memory_available: tier -> bytes available, same units.
    feasibility_margin: soft minimum over tiers of 1 - required/available;
      positive when everything fits.
    feasible: boolean, every tier fits.
    capex: USD for the whole cluster.
    power: W for the whole cluster at TDP.
    perf_per_usd: samples/s per USD.
    perf_per_watt: samples/s per W.
    bottleneck_index: index into COMPONENTS of the largest term.
  """

  step_time: jax.Array
  throughput: jax.Array
  breakdown: dict
  memory_required: dict
  memory_available: dict
  feasibility_margin: jax.Array
  feasible: jax.Array
  capex: jax.Array
  power: jax.Array
  perf_per_usd: jax.Array
  perf_per_watt: jax.Array
  bottleneck_index: jax.Array

  @property
  def bottleneck(self) -> str:
    """Name of the largest component (concrete reports only)."""
    return COMPONENTS[int(self.bottleneck_index)]


def _dense_elem_bytes(w: wl.Workload) -> int:
  return wl.PRECISION_BYTES[w.dense_precision]


@functools.cache
def _gemm_table(w: wl.Workload) -> dict[str, np.ndarray]:
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


@functools.cache
def _table_arrays(
  w: wl.Workload, plan_static: tuple, granules: tuple = (64, 64)
) -> dict[str, np.ndarray]:
  """Static per-table arrays (length T); `granules` are the (HBM, DDR)
  access sizes in bytes."""
  sharding, column_shards, comm_precision = plan_static
  cb = wl.PRECISION_BYTES[comm_precision]
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

  def touched(granule):
    # Bytes moved per lookup (gather) and per row update at `granule`.
    gather, update = [], []
    for t, cw in zip(w.tables, masks['column_wise'], strict=True):
      shards = column_shards if cw else 1
      rb = t.row_bytes / shards
      g = shards * wl.granule_bytes(rb, granule)
      st = 4 * wl.optimizer_state_elems_per_row(w.optimizer, t.dim)
      # Adam keeps two state vectors; each is touched separately.
      vectors = 2 if w.optimizer == 'adam' else 1
      s = vectors * shards * wl.granule_bytes(st / vectors / shards, granule)
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
    'pooled_bytes': dim * cb,
    # Copies of each id sent forward: one per column shard of a
    # column-wise table, one otherwise.
    'id_copies': 1.0 + masks['column_wise'] * (column_shards - 1.0),
    'touched_hbm': touched(granules[0]),
    'touched_ddr': touched(granules[1]),
    **masks,
  }


def _peak_flops(device, precision: str):
  if precision in ('bf16', 'fp16'):
    return device.peak_flops_bf16
  if precision == 'tf32' and hasattr(device, 'peak_flops_tf32'):
    return device.peak_flops_tf32
  return device.peak_flops_fp32


def _ranks_per_node(p: Platform):
  if p.trainer == 'cpu':
    return p.sockets_per_node
  return p.accelerators_per_node


def _dense_device(p: Platform):
  """(device part, its memory bandwidth) that runs the dense part."""
  if p.trainer == 'cpu':
    return p.cpu, p.cpu.ddr_bandwidth
  return p.accelerator, p.accelerator.hbm_bandwidth


def _efficiency(dim, half):
  return dim / (dim + half)


def dense_times(p: Platform, w: wl.Workload):
  """Per-GEMM (forward, backward) seconds on one rank, shape (L,) each."""
  g = _gemm_table(w)
  ranks = p.nodes * _ranks_per_node(p)
  b = w.global_batch / ranks
  dev, bw = _dense_device(p)
  peak = _peak_flops(dev, w.dense_precision)
  elem = _dense_elem_bytes(w)
  m = g['batched'] * g['m'] + (1.0 - g['batched']) * b
  eff = dev.gemm_efficiency * (
    _efficiency(m, dev.gemm_half_size)
    * _efficiency(g['k'], dev.gemm_half_size)
    * _efficiency(g['n'], dev.gemm_half_size)
  )
  nbytes = elem * (b * g['per_sample_elems'] + g['fixed_elems'])
  fwd = smooth_max(b * g['fwd_flops'] / (peak * eff), nbytes / bw)
  bwd = smooth_max(b * g['bwd_flops'] / (peak * eff), 2.0 * nbytes / bw)
  fwd = fwd + dev.kernel_overhead
  bwd = bwd + g['bwd_kernels'] * dev.kernel_overhead
  return fwd, bwd


def _interaction_elementwise(p: Platform, w: wl.Workload):
  """Seconds per rank for the interaction's memory-bound element work."""
  ranks = p.nodes * _ranks_per_node(p)
  b = w.global_batch / ranks
  dev, bw = _dense_device(p)
  width = wl.interaction_output_width(w)
  passes = 3 * w.dcn_layers if w.interaction == 'dcnv2' else 1
  nbytes = 2.0 * b * width * passes * _dense_elem_bytes(w)
  return nbytes / bw + dev.kernel_overhead, 2.0 * nbytes / bw + (
    dev.kernel_overhead
  )


def dense_hbm_bytes(w: wl.Workload, p: Platform):
  """Bytes per rank for the dense model, its optimizer and activations."""
  g = _gemm_table(w)
  ranks = p.nodes * _ranks_per_node(p)
  b = w.global_batch / ranks
  params = wl.dense_param_count(w)
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  mixed = 2.0 if w.dense_precision in ('bf16', 'fp16') else 0.0
  weights = params * (4.0 + 4.0 + 4.0 * state + mixed)  # w, grad, state
  elem = _dense_elem_bytes(w)
  pooled = w.num_features * w.bottom_mlp[-1] * elem
  acts = b * (float(np.sum(g['per_sample_elems'])) * elem + 3.0 * pooled)
  return weights + acts


def _topology_factor(p: Platform):
  """Share of a rank's link bandwidth that an all-to-all can use."""
  f = p.fabric
  a = p.accelerators_per_node
  topo = f.topology
  if topo == 'switch':
    return jnp.ones_like(a)
  if topo == 'fully_connected':
    # A direct link (or more) to each peer; fewer links than peers relay.
    return smooth_min(1.0, safe_div(f.links_per_accelerator, a - 1.0, 0.5))
  if topo == 'ring':
    # Average hop distance on a bidirectional ring is about A / 4.
    return 1.0 / smooth_max(1.0, a / 4.0)
  if topo == 'hybrid_cube_mesh':
    # Hypercube average hop distance (log2 A / 2) * A / (A - 1); the cube
    # mesh's extra links are ignored (conservative).
    hops = 0.5 * jnp.log2(a) * safe_div(a, a - 1.0, 1.0)
    return 1.0 / smooth_max(1.0, hops)
  return jnp.ones_like(a)  # pcie_only: handled by the caller


def evaluate(
  platform: Platform, workload: wl.Workload, plan: Plan, row_scale=1.0
):
  """Cost of one training step. Pure; jit/vmap/grad are the caller's.

  Args:
    platform: the hardware (`hardware.Platform`), leaves scalar arrays.
    workload: the static DLRM description.
    plan: the execution plan; `hbm_fraction` has shape (T,).
    row_scale: multiplies the rows of every table (scalar, may be traced).
      Rows enter the step only through sizes (memory, data-parallel
      traffic), so a sweep over model size can vmap this number and compile
      once instead of once per static workload.

  Returns:
    A `CostReport` of scalars (SI units).
  """
  p, w = platform, workload
  cpu_trainer = p.trainer == 'cpu'
  t = _table_arrays(
    w,
    (plan.sharding, plan.column_shards, plan.comm_precision),
    (p.accelerator.access_granularity, p.cpu.access_granularity),
  )
  t = {**t, 'table_bytes': t['table_bytes'] * row_scale}
  tw, rw, twrw, cw, dp = (
    t['table_wise'],
    t['row_wise'],
    t['table_row_wise'],
    t['column_wise'],
    t['data_parallel'],
  )
  batch = float(w.global_batch)
  nodes = p.nodes
  sockets = p.sockets_per_node
  accels = p.accelerators_per_node
  a = _ranks_per_node(p)
  ranks = nodes * a
  cpu, acc = p.cpu, p.accelerator
  cb = float(wl.PRECISION_BYTES[plan.comm_precision])

  # ---- dense compute ----------------------------------------------------
  fwd, bwd = dense_times(p, w)
  comp = _gemm_table(w)['component']
  part = {
    c: (comp == i).astype(np.float64)
    for i, c in enumerate(('bottom_mlp', 'interaction', 'top_mlp'))
  }
  ew_fwd, ew_bwd = _interaction_elementwise(p, w)
  bottom_fwd = jnp.sum(fwd * part['bottom_mlp'])
  bottom_bwd = jnp.sum(bwd * part['bottom_mlp'])
  inter_fwd = jnp.sum(fwd * part['interaction']) + ew_fwd
  inter_bwd = jnp.sum(bwd * part['interaction']) + ew_bwd
  top_fwd = jnp.sum(fwd * part['top_mlp'])
  top_bwd = jnp.sum(bwd * part['top_mlp'])
  dev, dev_bw = _dense_device(p)
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  mixed = 2.0 if w.dense_precision in ('bf16', 'fp16') else 0.0
  opt_bytes = wl.dense_param_count(w) * (12.0 + 8.0 * state + mixed)
  dense_opt = opt_bytes / dev_bw + dev.kernel_overhead

  # ---- embedding placement and traffic ------------------------------------
  if cpu_trainer:
    frac = jnp.zeros_like(plan.hbm_fraction)
  else:
    frac = dp + (1.0 - dp) * plan.hbm_fraction
  hit = 1.0 - (1.0 - frac) ** w.popularity_skew  # lookups served by HBM
  lookups = batch * t['pool']
  gather_b, update_b = t['touched_hbm']  # bytes moved per HBM lookup
  ddr_gather_b, ddr_update_b = t['touched_ddr']
  hbm_lookups = lookups * hit
  # On a CPU trainer every table, data-parallel ones included, is in DDR.
  ddr_lookups = lookups * (1.0 - hit) * (1.0 if cpu_trainer else 1.0 - dp)

  def per_rank(load):
    # Table-wise shards cannot split one table: the busiest rank carries at
    # least the largest table. Table-row-wise tables split over the ranks
    # of one node: at least the largest / a. Other shardings spread evenly.
    spread = jnp.sum(load * (1.0 - tw - twrw)) / ranks
    out = spread + smooth_max(jnp.sum(load * tw) / ranks, jnp.max(load * tw))
    if np.any(twrw):  # static: the plan's sharding
      # p = 64: on one node the two bounds tie (one table), where p = 8
      # would overstate the load by 9%; p = 64 by 1%.
      out = out + smooth_max(
        jnp.sum(load * twrw) / ranks, jnp.max(load * twrw) / a, p=64
      )
    return out

  gather_hbm = per_rank(hbm_lookups * gather_b) / (
    acc.hbm_bandwidth * acc.gather_efficiency
  )
  # Data-parallel tables get a dense update of the whole replica per rank.
  dp_dense_update = jnp.sum(dp * t['table_bytes'] * 2.0)
  dp_on_hbm = 0.0 if cpu_trainer else dp_dense_update
  update_hbm = (per_rank(hbm_lookups * update_b) + dp_on_hbm) / (
    acc.hbm_bandwidth * acc.update_efficiency
  )

  c = 1.0 if cpu_trainer else plan.cpu_lookup_fraction
  ddr_rate = nodes * sockets * cpu.ddr_bandwidth * cpu.gather_efficiency
  ddr_update_rate = nodes * sockets * cpu.ddr_bandwidth * cpu.update_efficiency
  host_node = smooth_min(
    accels * p.host_link.bandwidth, sockets * cpu.pcie_bandwidth
  )
  uvm_rate = nodes * host_node * p.host_link.random_access_efficiency
  ddr_gather_bytes = jnp.sum(ddr_lookups * ddr_gather_b)
  ddr_update_bytes = jnp.sum(ddr_lookups * ddr_update_b)
  gather_cpu = c * ddr_gather_bytes / ddr_rate
  update_cpu = c * ddr_update_bytes / ddr_update_rate
  if cpu_trainer:  # each socket streams its own replica of dp tables
    update_cpu = update_cpu + dp_dense_update / (
      cpu.ddr_bandwidth * cpu.update_efficiency
    )
    gather_uvm = update_uvm = jnp.zeros(())
  else:
    # The (1 - c) share stays outside the smooth max: inside, at c = 1 both
    # arguments hit the TINY floor and the gradient in c vanishes (it must
    # be -bytes x smax(1/uvm_rate, 1/ddr_rate)).
    uvm_s_per_byte = smooth_max(1.0 / uvm_rate, 1.0 / ddr_rate)
    uvm_update_s_per_byte = smooth_max(1.0 / uvm_rate, 1.0 / ddr_update_rate)
    gather_uvm = (1.0 - c) * ddr_gather_bytes * uvm_s_per_byte
    update_uvm = (1.0 - c) * ddr_update_bytes * uvm_update_s_per_byte

  # Pooled vectors that the CPU sockets produce for the accelerators: one
  # per sample and table unless all of its lookups hit HBM.
  all_hit = hit ** t['pool_exponent']
  pooled_cpu = (
    c
    * jnp.sum((1.0 - dp) * batch * t['pooled_bytes'] * (1.0 - all_hit))
    / nodes
  )
  upi_node = sockets * cpu.socket_links * cpu.socket_link_bandwidth / 2.0
  if cpu_trainer:
    host_1 = upi_1 = jnp.zeros(())
  else:
    host_1 = pooled_cpu / host_node + p.host_link.latency
    upi_1 = pooled_cpu * safe_div(sockets - 1.0, sockets) / upi_node

  # ---- all-to-all of pooled embeddings (one direction) -------------------
  d_spread = float(np.sum((tw + cw) * t['pooled_bytes']))
  d_rw = float(np.sum(rw * t['pooled_bytes']))
  d_twrw = float(np.sum(twrw * t['pooled_bytes']))
  # Bytes each rank sends, to destinations spread over all ranks: pooled
  # vectors of its whole tables (and column shards) and partial sums of its
  # row shards for the whole batch.
  send = batch * (d_spread / ranks + d_rw)
  v_intra = send * safe_div(a - 1.0, ranks)
  v_inter = send * safe_div(ranks - a, ranks)
  # Table-row-wise: the a ranks of the table's node reduce-scatter their
  # partial sums (B d (a - 1) bytes on the node's fabric per table); local
  # rank j then holds the sums of the samples of local rank j on every
  # node and sends them to those ranks ((nodes - 1) / nodes of B d per
  # table across nodes, as for a whole table). Averages over all ranks:
  v_intra = v_intra + batch * d_twrw * safe_div(a - 1.0, ranks)
  v_inter = v_inter + batch * d_twrw * safe_div(ranks - a, ranks * ranks)
  if cpu_trainer:
    links = cpu.socket_links
    intra_bw = (
      links
      * cpu.socket_link_bandwidth
      * smooth_min(1.0, safe_div(links, a - 1.0, 0.5))
    )
    alpha = cpu.kernel_overhead
    ar_bw = links * cpu.socket_link_bandwidth
  elif p.fabric.topology == 'pcie_only':
    intra_bw = host_node / accels
    alpha = p.host_link.latency
    ar_bw = intra_bw
  else:
    f = p.fabric
    ar_bw = f.links_per_accelerator * f.link_bandwidth * f.efficiency
    intra_bw = ar_bw * _topology_factor(p)
    alpha = f.latency
  nic_node = p.nic.count * p.nic.bandwidth * p.nic.efficiency
  if p.nic.attach == 'socket' and not cpu_trainer:
    nic_node = smooth_min(nic_node, host_node)  # staged through the host
  a2a_intra = v_intra / intra_bw + (a - 1.0) * alpha
  a2a_inter = v_inter * a / nic_node + (nodes - 1.0) * p.nic.latency
  # Ids go forward only, before the lookups: each rank sends its own
  # samples' ids of every sharded table to the ranks holding the rows
  # (each id once; to every column shard of a column-wise table).
  sharded = float(np.any(dp < 1.0))  # static: no exchange without tables
  ids = (
    batch
    * ID_BYTES
    * float(np.sum((1.0 - dp) * t['pool'] * t['id_copies']))
    / ranks
  )
  ids_intra = ids * safe_div(a - 1.0, ranks) / intra_bw + sharded * (
    (a - 1.0) * alpha
  )
  ids_inter = ids * safe_div(ranks - a, ranks) * a / nic_node + sharded * (
    (nodes - 1.0) * p.nic.latency
  )

  # ---- allreduce of dense gradients (and data-parallel tables) ---------
  grad_bytes = cb * (
    wl.dense_param_count(w)
    + row_scale * float(np.sum(dp * t['rows'] * t['dim']))
  )
  ar_intra = (
    2.0 * safe_div(a - 1.0, a) * grad_bytes / ar_bw + 2.0 * (a - 1.0) * alpha
  )
  ar_inter = 2.0 * safe_div(nodes - 1.0, nodes) * grad_bytes / nic_node + (
    2.0 * (nodes - 1.0) * p.nic.latency
  )

  # ---- composition -------------------------------------------------------
  o = plan.overlap
  emb_fwd = smooth_max(gather_hbm + gather_uvm, gather_cpu + host_1 + upi_1)
  sparse_fwd = ids_intra + ids_inter + emb_fwd + a2a_intra + a2a_inter
  t_fwd = overlap(sparse_fwd, bottom_fwd, o) + inter_fwd + top_fwd
  sparse_bwd = (
    a2a_intra
    + a2a_inter
    + smooth_max(update_hbm + update_uvm, host_1 + upi_1 + update_cpu)
  )
  t_bwd = top_bwd + inter_bwd + overlap(sparse_bwd, bottom_bwd, o)
  t_bwd = overlap(t_bwd, ar_intra + ar_inter, o)
  step = t_fwd + t_bwd + dense_opt + p.step_overhead

  breakdown = {
    'dense_bottom_mlp': bottom_fwd + bottom_bwd,
    'dense_interaction': inter_fwd + inter_bwd,
    'dense_top_mlp': top_fwd + top_bwd,
    'dense_optimizer': dense_opt,
    'embedding_gather_hbm': gather_hbm,
    'embedding_gather_ddr': gather_cpu + gather_uvm,
    'embedding_update_hbm': update_hbm,
    'embedding_update_ddr': update_cpu + update_uvm,
    'host_transfer': 2.0 * host_1,
    'socket_links': 2.0 * upi_1,
    'alltoall_intra': ids_intra + 2.0 * a2a_intra,
    'alltoall_inter': ids_inter + 2.0 * a2a_inter,
    'allreduce_intra': ar_intra,
    'allreduce_inter': ar_inter,
    'overhead': p.step_overhead * jnp.ones_like(step),
  }

  # ---- memory -------------------------------------------------------------
  tb = t['table_bytes']
  dense_mem = dense_hbm_bytes(w, p)
  if cpu_trainer:
    hbm_req = jnp.zeros(())
    hbm_avail = jnp.zeros(())
    ddr_req = jnp.sum(tb * (1.0 + dp * (a - 1.0))) / nodes + a * dense_mem
  else:
    on_hbm = frac * tb
    hbm_req = per_rank(on_hbm * (1.0 - dp)) + jnp.sum(dp * tb) + dense_mem
    hbm_avail = acc.hbm_capacity
    ddr_req = jnp.sum((1.0 - frac) * tb) / nodes
  ddr_avail = sockets * cpu.ddr_capacity
  margins = [1.0 - ddr_req / ddr_avail]
  fits = ddr_req <= ddr_avail
  if not cpu_trainer:
    margins.append(1.0 - hbm_req / hbm_avail)
    fits = fits & (hbm_req <= hbm_avail)
  margins = jnp.stack(margins)
  margin = -MARGIN_TEMPERATURE * jax.nn.logsumexp(-margins / MARGIN_TEMPERATURE)
  margin = margin + MARGIN_TEMPERATURE * jnp.log(float(len(margins)))

  # ---- capex and power ----------------------------------------------------
  n_acc = 0.0 if cpu_trainer else accels
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
  capex = nodes * node_usd
  power = nodes * node_w
  throughput = batch / jnp.maximum(step, TINY)
  stacked = jnp.stack([breakdown[k] for k in COMPONENTS])
  return CostReport(
    step_time=step,
    throughput=throughput,
    breakdown=breakdown,
    memory_required={'hbm': hbm_req, 'ddr': ddr_req},
    memory_available={'hbm': hbm_avail, 'ddr': ddr_avail},
    feasibility_margin=margin,
    feasible=fits,
    capex=capex,
    power=power,
    perf_per_usd=throughput / capex,
    perf_per_watt=throughput / power,
    bottleneck_index=jnp.argmax(stacked),
  )
