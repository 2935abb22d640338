"""How a workload runs on a platform: the execution plan.

Continuous choices are pytree leaves (optimizable); discrete ones are static.
"""

import dataclasses

import numpy as np

from codesign import workload as wl
from codesign.errors import InputError
from codesign.hardware import Platform
from codesign.pytree import dataclass, field

# table_wise: each table whole on one rank; row_wise: every table's rows
# over all ranks; table_row_wise: each table on one node, its rows over
# that node's ranks; column_wise: column shards over ranks; data_parallel:
# replicated on every rank.
SHARDINGS = (
  'table_wise',
  'row_wise',
  'table_row_wise',
  'column_wise',
  'data_parallel',
)
COMM_PRECISIONS = ('fp32', 'bf16', 'fp16', 'fp8')


@dataclass
class Plan:
  """Where the tables live and how the step is scheduled.

  Attributes:
    hbm_fraction: shape (T,); the fraction of each table's rows (the
      hottest ones) held in accelerator HBM, the rest in host DDR. A
      continuous relaxation in [0, 1]. Data-parallel tables are always
      wholly in HBM; on a CPU trainer everything is in DDR.
    cpu_lookup_fraction: share of DDR-resident lookups that the CPU sockets
      execute (pooled results cross PCIe); the rest are read row by row by
      the accelerators over PCIe (UVM). In [0, 1].
    overlap: how much communication overlaps compute, in [0, 1]: 0 runs
      them back to back, 1 fully overlaps them (smooth max).
    sharding: per table, one of SHARDINGS (static).
    column_shards: shards per column-wise table (static).
    comm_precision: precision of all-to-all and allreduce payloads (static).
  """

  hbm_fraction: np.ndarray = field(doc='(T,) fraction of rows in HBM')
  cpu_lookup_fraction: float = field(doc='DDR lookups run on CPUs')
  overlap: float = field(doc='communication/compute overlap')
  sharding: tuple[str, ...] = field(static=True, doc='per table')
  column_shards: int = field(static=True, doc='shards per column-wise table')
  comm_precision: str = field(static=True, doc='payload precision')


def _reserve_bytes_per_accelerator(w: wl.Workload, p: Platform) -> float:
  """HBM kept for the dense model and activations (concrete numbers)."""
  from codesign import cost_model

  return float(cost_model.dense_hbm_bytes(w, p))


def make(
  w: wl.Workload,
  p: Platform,
  placement: str = 'auto',
  sharding: str = 'auto',
  comm_precision: str = 'fp32',
) -> Plan:
  """A plan from named choices.

  placement: `auto` keeps in HBM the largest uniform fraction of every
  table such that the cost model's HBM requirement (tables with their
  optimizer state, the busiest table-wise rank, the dense model and
  activations) stays within 95% of the HBM, and spills the rest to DDR;
  `hbm` keeps every table in HBM; `ddr` keeps every table in host DDR.
  sharding: one of SHARDINGS for every table, or `auto`: table-wise, except
  for tables table-wise cannot balance, which are split: table-row-wise on
  several nodes (rows over one node's ranks, so that partial sums are
  reduced over the node's fabric, not the NICs), row-wise on one node
  (where the two are the same). The cost model picks the fastest feasible
  plan of four candidates: split the tables whose HBM share exceeds a
  quarter of the free HBM of one accelerator; split those and also the
  tables whose lookup traffic exceeds half of one rank's fair share (at
  scale the busiest whole table, not the NICs, sets the step); split
  none; every table column-wise (balanced, at the price of sending every
  id to each of its column shards). A CPU trainer takes the first.
  """
  if placement not in ('auto', 'hbm', 'ddr'):
    raise InputError(
      f'unknown placement {placement!r}; valid choices: auto, hbm, ddr'
    )
  if sharding not in SHARDINGS + ('auto',):
    raise InputError(
      f'unknown sharding {sharding!r}; valid choices: auto, '
      + ', '.join(SHARDINGS)
    )
  t = w.num_tables
  ranks = float(p.nodes) * float(p.accelerators_per_node)
  free = 0.95 * float(p.accelerator.hbm_capacity)
  free -= _reserve_bytes_per_accelerator(w, p)
  if placement == 'hbm' or p.trainer == 'cpu':
    frac = 1.0
  elif placement == 'ddr':
    frac = 0.0
  else:
    frac = min(1.0, max(0.0, free * ranks / wl.embedding_bytes(w)))
  if sharding != 'auto':
    return _build(w, p, (sharding,) * t, frac, placement, comm_precision)
  state = wl.optimizer_state_elems_per_row
  per_table = [
    frac * tb.rows * (tb.row_bytes + 4 * state(w.optimizer, tb.dim))
    for tb in w.tables
  ]
  big = 'table_row_wise' if float(p.nodes) > 1.0 else 'row_wise'
  by_size = tuple(big if b > 0.25 * free else 'table_wise' for b in per_table)
  if p.trainer == 'cpu':
    return _build(w, p, by_size, frac, placement, comm_precision)
  traffic = [tb.pooling * tb.row_bytes for tb in w.tables]  # per sample
  fair = sum(traffic) / ranks
  by_traffic = tuple(
    big if s == big or x > 0.5 * fair else 'table_wise'
    for s, x in zip(by_size, traffic, strict=True)
  )
  candidates = (by_size, by_traffic, ('table_wise',) * t, ('column_wise',) * t)
  plans = [
    _build(w, p, s, frac, placement, comm_precision)
    for s in dict.fromkeys(candidates)  # distinct, in order
  ]
  if len(plans) == 1:
    return plans[0]
  from codesign import cost_model, hardware

  hw = hardware.as_arrays(p)

  def rank(pl):  # feasible first, then faster
    r = cost_model.evaluate(hw, w, pl)
    return (not bool(r.feasible), float(r.step_time))

  return min(plans, key=rank)


def _build(w, p, shardings, frac, placement, comm_precision) -> Plan:
  """A plan with a uniform HBM fraction `frac`, fitted to the HBM when
  the placement is `auto`."""
  t = w.num_tables
  plan = Plan(
    hbm_fraction=np.full((t,), frac),
    cpu_lookup_fraction=1.0,
    overlap=0.5,
    sharding=shardings,
    column_shards=4,
    comm_precision=comm_precision,
  )
  if placement == 'auto' and p.trainer != 'cpu':
    plan = _fit_hbm(plan, w, p)
  return plan


def _fit_hbm(plan: Plan, w: wl.Workload, p: Platform) -> Plan:
  """Shrinks a uniform HBM fraction until 95% of the HBM holds it.

  The cost model's HBM requirement is affine in a uniform fraction f (the
  per-rank load is a positively homogeneous smooth max), so two
  evaluations, at f = 1 and f = 0, give it exactly.
  """
  from codesign import cost_model, hardware

  hw = hardware.as_arrays(p)
  t = w.num_tables

  def required(f):
    trial = dataclasses.replace(plan, hbm_fraction=np.full((t,), f))
    report = cost_model.evaluate(hw, w, trial)
    return float(report.memory_required['hbm'])

  fixed, full = required(0.0), required(1.0)
  budget = 0.95 * float(p.accelerator.hbm_capacity)
  per_unit = max(full - fixed, 1.0)
  frac = min(float(plan.hbm_fraction[0]), (budget - fixed) / per_unit)
  frac = max(0.0, frac)
  return dataclasses.replace(plan, hbm_fraction=np.full((t,), frac))


def validate(plan: Plan, w: wl.Workload) -> Plan:
  """Raises `InputError` with one sentence if `plan` does not fit `w`."""
  t = w.num_tables
  frac = np.asarray(plan.hbm_fraction)
  if frac.shape != (t,):
    raise InputError(
      f'plan.hbm_fraction needs one value per table ({t}), got shape '
      f'{frac.shape}'
    )
  if len(plan.sharding) != t:
    raise InputError(
      f'plan.sharding needs one entry per table ({t}), got {len(plan.sharding)}'
    )
  for i, s in enumerate(plan.sharding):
    if s not in SHARDINGS:
      raise InputError(
        f'unknown sharding {s!r} for table {i}; valid choices: '
        + ', '.join(SHARDINGS)
      )
  if plan.comm_precision not in COMM_PRECISIONS:
    raise InputError(
      f'unknown comm precision {plan.comm_precision!r}; valid choices: '
      + ', '.join(COMM_PRECISIONS)
    )
  if np.any(frac < 0) or np.any(frac > 1):
    raise InputError('plan.hbm_fraction values must lie in [0, 1]')
  for key in ('cpu_lookup_fraction', 'overlap'):
    v = float(getattr(plan, key))
    if not 0.0 <= v <= 1.0:
      raise InputError(f'plan.{key} must lie in [0, 1], got {v}')
  if plan.column_shards < 1:
    raise InputError('plan.column_shards must be at least 1')
  return plan
