"""The cost of one synchronous DLRM training step on a platform.

`evaluate(platform, workload, plan, stack)` is a pure, unjitted function
of one design: `jit`, `vmap` and `grad` belong to the caller
(`evaluate_design` is its jit for one concrete design's report). The
workload is static (Python numbers); platform, plan and stack are pytrees
whose continuous leaves may be traced. The terms themselves are small
pure functions in `codesign.model.terms`; this module composes them.

The step, on R = nodes x accelerators_per_node ranks (sockets on a CPU
trainer) with global batch B and local batch b = B / R:

  forward:  all-to-all of row ids to the ranks that hold the rows ->
            embedding gathers (HBM on the accelerators, DDR on the CPU
            sockets, or over the host link: row by row, or as UVM cache
            misses) -> pooled results to the accelerators (PCIe, socket
            links) -> all-to-all, overlapped with the bottom MLP ->
            interaction -> top MLP;
  backward: top MLP -> interaction -> all-to-all of pooled gradients ->
            embedding update (read-modify-write of each distinct row and
            its optimizer state), overlapped with the bottom MLP
            backward; the dense gradient allreduce overlaps the whole
            backward pass;
  then:     the dense optimizer update.
This is the schedule a graph-captured stack runs, read from HugeCTR's
(NVIDIA-Merlin/HugeCTR HybridSparseEmbedding::train, stepped by
Model::train_overlapped's states): the embedding's forward and its
all-to-all start with the iteration and the bottom MLP's forward waits
for nothing else; the top MLP's forward waits for them; the backward
exchange starts once the top MLP's backward is done and runs beside the
bottom MLP's backward and the grouped gradient allreduce
(`overlap_ar_a2a_`, at MLPExchangeWgrad). Its inter-iteration overlap
prepares the next batch's indices during this step, not its exchanges.
That is the device time, plus the gaps of the kernels no term charges
(`overhead`). The host runs beside it: the stack's floor and its eager
operators (`host`); `terms.compose` combines the two.

Each named term of `COMPONENTS` is reported in `breakdown` (seconds, not
yet overlapped). Rooflines and overlaps use smooth maxima and there is no
Python `if` on traced values, so gradients exist everywhere inside
`hardware.BOUNDS` and `stack.BOUNDS` with plan values in [0, 1]. Counts
(sockets, accelerators, links, NICs, nodes) are continuous here.

Breakdown keys: `overhead` is the device-side launch gap of the kernels
no other term charges (before the software stack was an input it was the
platform's fixed per-step cost); `host` (new) is the host framework time
per step.
"""

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from codesign.core import program_cache
from codesign.core.pytree import dataclass
from codesign.core.smooth import TINY, overlap, smooth_max
from codesign.model import terms as ct
from codesign.spec import hardware
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

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
  'host',
)
TIERS = ('hbm', 'ddr')
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
    power: W for the whole cluster at the wall.
    perf_per_usd: samples/s per USD.
    perf_per_watt: samples/s per W.
    bottleneck_index: index into COMPONENTS of the largest term.
    ceiling_step_time: seconds per step with infinitely fast devices and
      links (`terms.host_time`: the stack's host floor, the
      loading of the rank's batch and eager operators), the least any
      hardware with this many ranks reaches with this stack.
    ceiling_throughput: samples per second at that step: the stack's
      ceiling on this many ranks.
    ceiling_loading_time: seconds of that step spent loading the rank's
      batch on the training thread (`terms.batch_loading_time`): the
      part of the ceiling that more ranks split.
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
  ceiling_step_time: jax.Array
  ceiling_throughput: jax.Array
  ceiling_loading_time: jax.Array

  @property
  def bottleneck(self) -> str:
    """Name of the largest component (concrete reports only)."""
    return COMPONENTS[int(self.bottleneck_index)]


@dataclasses.dataclass(frozen=True)
class Step:
  """One step's inputs and what every stage derives from them first.

  Attributes:
    platform, workload, plan, stack: the four inputs (`p`, `w`, `plan`,
      `s` in the terms).
    setup: `terms.Setup` (ranks, local batch, trainer kind).
    tables: the per-table arrays (`terms.table_arrays` or, relaxed,
      `terms.table_arrays_mixed`), with `orders` and row-scaled
      `table_bytes`.
    device: the device that runs the dense layers (`terms.dense_device`).
    payload: bytes per element of the pooled payloads.
    row_scale: multiplies every table's rows.
    skew: `evaluate`'s `skew`: None (the lookups follow the workload's
      popularity skew) or a traced one (`terms.lookups` reads it).
    nvls_share: `evaluate`'s `nvls_share` (`terms.fabric` reads it).
  """

  platform: Platform
  workload: wl.Workload
  plan: Plan
  stack: Stack
  setup: ct.Setup
  tables: dict
  device: object
  payload: int
  row_scale: object
  skew: object
  nvls_share: object = None


class Dense(NamedTuple):
  """Seconds of the dense layers: forward and backward of each part."""

  bottom_fwd: jax.Array
  bottom_bwd: jax.Array
  inter_fwd: jax.Array
  inter_bwd: jax.Array
  top_fwd: jax.Array
  top_bwd: jax.Array
  optimizer: jax.Array


class Embedding(NamedTuple):
  """The embedding stage: lookups, the busiest rank's loads, seconds."""

  lookups: ct.Lookups
  busiest: dict
  gather_hbm: jax.Array
  update_hbm: jax.Array
  ddr: ct.DdrTerms
  host_link: jax.Array  # pooled results over the host link, one way
  socket_link: jax.Array  # and over the socket links


class Comms(NamedTuple):
  """Seconds of the collectives, inside and across nodes."""

  ids_intra: jax.Array
  ids_inter: jax.Array
  a2a_intra: jax.Array  # pooled all-to-all, one direction
  a2a_inter: jax.Array
  ar_intra: jax.Array  # dense gradient allreduce
  ar_inter: jax.Array


class Host(NamedTuple):
  """Kernel counts, the device gaps they leave and the host's time."""

  counts: ct.Counts
  launch: jax.Array
  time: jax.Array


def evaluate(
  platform: Platform,
  workload: wl.Workload,
  plan: Plan,
  stack: Stack,
  row_scale=1.0,
  sharding_weights=None,
  skew=None,
  nvls_share=None,
  structure=None,
) -> CostReport:
  """Cost of one training step. Pure; jit/vmap/grad are the caller's.

  Args:
    platform: the hardware (`hardware.Platform`), leaves scalar arrays.
    workload: the static DLRM description.
    plan: the execution plan; `hbm_fraction` has shape (T,).
    stack: the software stack (`stack.Stack`), leaves scalar arrays or
      Python floats.
    row_scale: multiplies the rows of every table (scalar, may be traced).
      Rows enter the step only through sizes (memory, distinct rows,
      data-parallel traffic), so a sweep over model size can vmap this
      number and compile once instead of once per static workload.
    sharding_weights: None, or (T, len(terms.SEARCHED_SHARDINGS))
      per-table weights over the searched shardings (rows sum to 1, may
      be traced) that replace `plan.sharding`: a search's relaxed
      sharding (`terms.table_arrays_mixed`; a one-hot row is exactly its
      sharding).
    skew: None, or the popularity skew (scalar, may be traced) in place of
      the workload's: it enters the step only through the lookups
      (`terms.lookups`), so that one program serves every skew of a
      workload (`evaluate_design`). A traced skew takes the quadrature
      of `terms.distinct_rows` even at 1 (a workload's skew of 1 takes
      the closed form; the two agree to rounding).
    nvls_share: None, or (scalar, may be traced) the share in which the
      accelerators' switch reduces (NVLink SHARP): a search's relaxed
      mixture of parts whose fabric flag (`Fabric.in_switch_reduction`,
      static) says some do (`terms.fabric`); 1 is the flag as it is.
    structure: None, or the platform's wiring (topology, in-switch
      reduction, host link, NIC attachment) as numbers, read in place of
      its static fields (`terms.structure`: `evaluate_design` passes
      them, so that one program costs every accelerator platform).

  Returns:
    A `CostReport` of scalars (SI units).
  """
  c = step_context(
    platform,
    workload,
    plan,
    stack,
    row_scale,
    sharding_weights,
    skew,
    nvls_share,
    structure,
  )
  dense, emb, comms = _dense(c), _embedding(c), _collectives(c)
  host = _host(c)
  step, breakdown = _step_time(c, dense, emb, comms, host)
  return _report(c, step, breakdown, _memory(c, emb), host)


def evaluate_design(
  platform: Platform,
  workload: wl.Workload,
  plan: Plan,
  stack: Stack,
  row_scale=1.0,
) -> CostReport:
  """`evaluate` of one concrete design, compiled as one program.

  Op by op (`evaluate` unjitted), a design's report dispatches about 200
  small programs, each lowered and compiled (or read from the compile
  cache) on first use in a process: 3.7 s from an empty cache and 1.6 s
  from a warm one for criteo_kaggle on dgx_a100_80gb, against 1.0 s and
  0.27 s for this one program (2-core machine). Designs differing only in
  numbers share it: the platform's labels (names, sources) are dropped;
  the named shardings are passed as one-hot weights
  (`terms.table_arrays_mixed`, the same numbers), so that the planner's
  candidates share it (`planner.feasible_and_step_time`); and the
  popularity skew is an argument (`evaluate`'s `skew`), so that another
  skew of the workload (`studies.robustness`) is no new program; and an
  accelerator platform's wiring (topology, in-switch reduction, host
  link, NIC attachment) is an argument too (`terms.structure`), so that
  an SXM board, a superchip and a PCIe server share it; the stack's
  labels are dropped too, so releases that differ only in name share it.
  One program per workload (up to its skew), trainer, stack structure,
  column shards, communication precision, data-parallel tables and
  uniform traffic or not."""
  p, wiring = _design_platform(platform)
  w = workload
  fn = _design_jit(*_program_key(w, plan))
  return fn(
    p,
    stack_lib.unlabelled(stack),
    ct.one_hot_sharding(plan.sharding),
    (plan.hbm_fraction, plan.cpu_lookup_fraction, plan.overlap),
    row_scale,
    w.popularity_skew,
    wiring,
  )


def _design_platform(platform: Platform) -> tuple:
  """(the platform `evaluate_design`'s program takes, its wiring or None):
  numpy arrays (JAX arrays of Python numbers are weakly typed, and a weak
  argument would be another program, so every caller's platform comes to
  one), unlabelled, and an accelerator trainer's wiring as numbers with
  its fields canonical (`terms.structure`)."""
  p = hardware.unlabelled(hardware.as_numpy(platform))
  if p.trainer == 'cpu':
    return p, None
  return ct.structure.canonical(p), ct.structure.of(p)


def design_key(platform: Platform, workload: wl.Workload, plan: Plan):
  """What `evaluate_design` compiles one program per: the platform's
  structure as the program takes it (`_design_platform`), the workload
  (its skew shared), column shards, communication precision,
  data-parallel tables and uniform traffic or not. Designs with equal
  keys share a program."""
  p, _ = _design_platform(platform)
  return (jax.tree.structure(p), *_program_key(workload, plan))


def _program_key(w: wl.Workload, plan: Plan) -> tuple:
  """`_design_jit`'s arguments: `design_key` but the platform's."""
  uniform = float(w.popularity_skew) == 1.0
  return (
    w if uniform else dataclasses.replace(w, popularity_skew=_SHARED_SKEW),
    plan.column_shards,
    plan.comm_precision,
    ct.data_parallel_mask(plan.sharding),
    uniform,
  )


# The skew the key of `_design_jit` carries for every non-uniform skew
# (the program reads the real one from its argument; tests check that
# nothing reads this one).
_SHARED_SKEW = 2.0


@functools.cache
def _design_jit(w, column_shards, comm_precision, data_parallel, uniform):
  # The weights carry the sharding; the names only the replicated tables.
  names = tuple(
    'data_parallel' if d else ct.SEARCHED_SHARDINGS[0] for d in data_parallel
  )

  def run(p, s, weights, leaves, row_scale, skew, wiring):
    frac, cpu_lookup, overlap_ = leaves
    plan = Plan(
      hbm_fraction=frac,
      cpu_lookup_fraction=cpu_lookup,
      overlap=overlap_,
      sharding=names,
      column_shards=column_shards,
      comm_precision=comm_precision,
    )
    skew = None if uniform else skew
    return evaluate(p, w, plan, s, row_scale, weights, skew, structure=wiring)

  # Kept on disk (`program_cache`): every later run of a study asks the
  # same presets' programs again, and tracing one costs 3-5 s of a 2-core
  # machine where reading it back costs milliseconds. Where the process
  # has several devices, a plain jit: an exported program is compiled for
  # them (XLA's partitioner on), whose last bits differ from one device's.
  if jax.device_count() > 1:
    return jax.jit(run)
  key = ('evaluate_design', w, column_shards, comm_precision, data_parallel)
  return program_cache.exported(run, (*key, uniform))


def step_context(
  platform,
  workload,
  plan,
  stack,
  row_scale=1.0,
  sharding_weights=None,
  skew=None,
  nvls_share=None,
  structure=None,
) -> Step:
  """The `Step` of `evaluate`'s arguments: setup, tables and payload."""
  p, w, s = platform, workload, stack
  st = ct.setup(p, w, s, structure)
  granules = (p.accelerator.access_granularity, p.cpu.access_granularity)
  if sharding_weights is None:
    t = ct.table_arrays(
      w, (plan.sharding, plan.column_shards, plan.comm_precision), granules
    )
    orders = ct.load_orders(w, plan, s, t)
  else:
    dp = ct.data_parallel_mask(plan.sharding)
    t = ct.table_arrays_mixed(
      w, sharding_weights, plan.column_shards, granules, dp
    )
    orders = None  # relaxed masks: the packing bound sorts the loads
  t = {
    **t,
    'orders': orders,
    'table_bytes': t['table_bytes'] * row_scale,
    'row_scale': row_scale,
  }
  split = ct.hybrid.split(w, s, st)
  if split is not None:  # static: the stack's embedding
    # The infrequent share reorders the tables' loads: sort them traced.
    t.update(split._asdict(), orders=None)
  dev, _ = ct.dense_device(p)
  # Pooled payloads: the stack's precision, or the plan's if narrower
  # (quantized communication).
  payload = min(
    stack_lib.payload_bytes(s, w.dense_precision),
    wl.PRECISION_BYTES[plan.comm_precision],
  )
  return Step(p, w, plan, s, st, t, dev, payload, row_scale, skew, nvls_share)


def _dense(c: Step) -> Dense:
  """Bottom MLP, interaction, top MLP (GEMMs and elementwise passes) and
  the dense optimizer."""
  p, w, s, st = c.platform, c.workload, c.stack, c.setup
  fwd, bwd = ct.dense_times(p, w, s, st)
  comp = ct.gemm_table(w)['component']
  part = [(comp == i).astype(fwd.dtype) for i in range(3)]
  (bot_ew_f, bot_ew_b), (top_ew_f, top_ew_b) = ct.mlp_elementwise(p, w, s, st)
  bottom_fwd = jnp.sum(fwd * part[0]) + bot_ew_f
  bottom_bwd = jnp.sum(bwd * part[0]) + bot_ew_b
  top_fwd = jnp.sum(fwd * part[2]) + top_ew_f
  top_bwd = jnp.sum(bwd * part[2]) + top_ew_b
  inter_fwd, inter_bwd = ct.interaction_times(
    p, w, s, st, (jnp.sum(fwd * part[1]), jnp.sum(bwd * part[1]))
  )
  optimizer = ct.dense_optimizer_time(p, w, s)
  return Dense(
    bottom_fwd, bottom_bwd, inter_fwd, inter_bwd, top_fwd, top_bwd, optimizer
  )


def _embedding(c: Step) -> Embedding:
  """Lookups, the busiest rank's HBM work, DDR/UVM work and the pooled
  results' trip to the accelerators."""
  p, w, plan, s, t, st = (
    c.platform,
    c.workload,
    c.plan,
    c.stack,
    c.tables,
    c.setup,
  )
  lk = ct.lookups(w, plan, t, st, c.row_scale, c.skew)
  busiest = ct.busiest_loads(ct.hbm_loads(s, t, lk, st, c.payload), t, st)
  gather_hbm, update_hbm = ct.embedding_hbm(p, t, st, busiest)
  ddr = ct.embedding_ddr(p, w, plan, s, t, lk, st, c.row_scale)
  host_1, upi_1 = ct.pooled_to_host(p, w, plan, s, t, lk, st, c.payload)
  return Embedding(lk, busiest, gather_hbm, update_hbm, ddr, host_1, upi_1)


def _collectives(c: Step) -> Comms:
  """All-to-alls of ids and pooled payloads, the dense allreduce."""
  p, w, plan, s, t, st = (
    c.platform,
    c.workload,
    c.plan,
    c.stack,
    c.tables,
    c.setup,
  )
  fab = ct.fabric(p, s, st, c.nvls_share)
  a2a_intra, a2a_inter = ct.alltoall_pooled(w, s, t, st, fab, c.payload, p)
  ids_intra, ids_inter = ct.alltoall_ids(w, s, t, st, fab, p)
  calls = ct.allreduce_calls(w, s, t, plan)
  ar_intra, ar_inter = ct.allreduce_dense(
    ct.allreduce_bytes(w, s, t, plan, c.row_scale),
    calls,
    s,
    st,
    fab,
    p,
    ct.allreduce_elem_bytes(w, s, plan),
  )
  return Comms(ids_intra, ids_inter, a2a_intra, a2a_inter, ar_intra, ar_inter)


def _host(c: Step) -> Host:
  """Kernel counts, their launch gaps on the device, the host's time."""
  counts = ct.kernel_counts(c.workload, c.stack, c.tables, c.plan, c.payload)
  launch = counts.device_kernels * c.device.kernel_overhead
  return Host(counts, launch, ct.host_time(c.stack, counts, c.setup))


def _step_time(c: Step, d: Dense, e: Embedding, m: Comms, h: Host):
  """(step seconds, breakdown): the device's forward and backward with
  their overlaps, composed with the host; each component alone."""
  o = c.plan.overlap
  emb_fwd = smooth_max(
    e.gather_hbm + e.ddr.uvm_gather,
    e.ddr.cpu_gather + e.host_link + e.socket_link,
  )
  ids = ct.ids_on_critical_path(c.stack, m.ids_intra + m.ids_inter)
  sparse_fwd = ids + emb_fwd + m.a2a_intra + m.a2a_inter
  t_fwd = overlap(sparse_fwd, d.bottom_fwd, o) + d.inter_fwd + d.top_fwd
  sparse_bwd = (
    m.a2a_intra
    + m.a2a_inter
    + smooth_max(
      e.update_hbm + e.ddr.uvm_update,
      e.host_link + e.socket_link + e.ddr.cpu_update,
    )
  )
  t_bwd = d.top_bwd + d.inter_bwd + overlap(sparse_bwd, d.bottom_bwd, o)
  o_ar = o if c.stack.allreduce_overlap else 0.0
  t_bwd = overlap(t_bwd, m.ar_intra + m.ar_inter, o_ar)
  device = t_fwd + t_bwd + d.optimizer + h.launch
  device = ct.with_pipelined_ids(c.stack, device, m.ids_intra + m.ids_inter)
  step = ct.compose(device, _by_group(d, e, m, h), c.stack, h.counts, c.setup)
  return step, _breakdown(step, d, e, m, h)


def _by_group(d: Dense, e: Embedding, m: Comms, h: Host) -> dict:
  """Device seconds per group of work, as `terms.compose` weighs them."""
  return {
    'bottom_mlp': d.bottom_fwd + d.bottom_bwd,
    'interaction': d.inter_fwd + d.inter_bwd,
    'top_mlp': d.top_fwd + d.top_bwd,
    'optimizer': d.optimizer,
    'embedding': e.gather_hbm
    + e.update_hbm
    + e.ddr.uvm_gather
    + e.ddr.uvm_update,
    'collectives': m.ids_intra
    + m.ids_inter
    + 2.0 * (m.a2a_intra + m.a2a_inter)
    + m.ar_intra
    + m.ar_inter,
    'other': h.launch,
  }


def _breakdown(step, d: Dense, e: Embedding, m: Comms, h: Host) -> dict:
  """Each component of `COMPONENTS` alone, in seconds (not overlapped)."""
  return {
    'dense_bottom_mlp': d.bottom_fwd + d.bottom_bwd,
    'dense_interaction': d.inter_fwd + d.inter_bwd,
    'dense_top_mlp': d.top_fwd + d.top_bwd,
    'dense_optimizer': d.optimizer,
    'embedding_gather_hbm': e.gather_hbm,
    'embedding_gather_ddr': e.ddr.cpu_gather + e.ddr.uvm_gather,
    'embedding_update_hbm': e.update_hbm,
    'embedding_update_ddr': e.ddr.cpu_update + e.ddr.uvm_update,
    'host_transfer': 2.0 * e.host_link,
    'socket_links': 2.0 * e.socket_link,
    'alltoall_intra': m.ids_intra + 2.0 * m.a2a_intra,
    'alltoall_inter': m.ids_inter + 2.0 * m.a2a_inter,
    'allreduce_intra': m.ar_intra,
    'allreduce_inter': m.ar_inter,
    'overhead': h.launch * jnp.ones_like(step),
    'host': h.time * jnp.ones_like(step),
  }


def _memory(c: Step, e: Embedding):
  """(required, available, soft margin, fits): bytes per tier; the
  margin is a soft minimum over the tiers of 1 - required/available."""
  p, w, s, st = c.platform, c.workload, c.stack, c.setup
  dense_mem = ct.dense_hbm_bytes(w, p, s)
  required, available = ct.memory(
    p, w, s, c.tables, e.lookups, st, dense_mem, e.busiest
  )
  margins = [1.0 - required['ddr'] / available['ddr']]
  fits = required['ddr'] <= available['ddr']
  if not st.cpu_trainer:
    margins.append(1.0 - required['hbm'] / available['hbm'])
    fits = fits & (required['hbm'] <= available['hbm'])
  margins = jnp.stack(margins)
  margin = -MARGIN_TEMPERATURE * jax.nn.logsumexp(-margins / MARGIN_TEMPERATURE)
  margin = margin + MARGIN_TEMPERATURE * jnp.log(float(len(margins)))
  return required, available, margin, fits


def _report(c: Step, step, breakdown: dict, memory, h: Host) -> CostReport:
  """The `CostReport`: figures per step, per USD and per W, and the
  stack's ceiling (the host's time, `terms.host_time`)."""
  required, available, margin, fits = memory
  capex, power = ct.capex_and_power(c.platform)
  throughput = c.setup.batch / jnp.maximum(step, TINY)
  ceiling = h.time * jnp.ones_like(step)  # the host's work alone
  stacked = jnp.stack([breakdown[k] for k in COMPONENTS])
  return CostReport(
    step_time=step,
    throughput=throughput,
    breakdown=breakdown,
    memory_required=required,
    memory_available=available,
    feasibility_margin=margin,
    feasible=fits,
    capex=capex,
    power=power,
    perf_per_usd=throughput / capex,
    perf_per_watt=throughput / power,
    bottleneck_index=jnp.argmax(stacked),
    ceiling_step_time=ceiling,
    ceiling_throughput=c.setup.batch / jnp.maximum(ceiling, TINY),
    ceiling_loading_time=ct.batch_loading_time(c.stack, c.setup)
    * jnp.ones_like(step),
  )


def dense_hbm_bytes(w: wl.Workload, p: Platform, s: Stack):
  """Bytes per rank for the dense model, its optimizer and activations."""
  return ct.dense_hbm_bytes(w, p, s)
