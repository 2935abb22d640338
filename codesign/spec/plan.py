"""How a workload runs on a platform: the execution plan (data only).

Continuous choices are pytree leaves (optimizable); discrete ones are
static. `codesign.model.planner` builds named plans from the cost model.
"""

import numpy as np

from codesign.core.errors import raise_problems
from codesign.core.pytree import dataclass, field
from codesign.spec import workload as wl

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


def problems(plan: Plan, w: wl.Workload) -> list[str]:
  """Every reason `plan` does not fit `w`, one sentence each. Fields that
  are None (unreadable in a JSON file, reported there) are skipped."""
  out = []
  t = w.num_tables
  if plan.hbm_fraction is not None:
    frac = np.asarray(plan.hbm_fraction)
    if frac.shape != (t,):
      out.append(
        f'plan.hbm_fraction needs one value per table ({t}), got shape '
        f'{frac.shape}'
      )
    if not np.all((frac >= 0) & (frac <= 1)):  # NaN too
      out.append('plan.hbm_fraction values must lie in [0, 1]')
  if plan.sharding is not None:
    if len(plan.sharding) != t:
      out.append(
        f'plan.sharding needs one entry per table ({t}), got '
        f'{len(plan.sharding)}'
      )
    for i, s in enumerate(plan.sharding):
      if s not in SHARDINGS:
        out.append(
          f'unknown sharding {s!r} for table {i} (valid choices: '
          + ', '.join(SHARDINGS)
          + ')'
        )
  if plan.comm_precision is not None and (
    plan.comm_precision not in COMM_PRECISIONS
  ):
    out.append(
      f'unknown comm precision {plan.comm_precision!r} (valid choices: '
      + ', '.join(COMM_PRECISIONS)
      + ')'
    )
  for key in ('cpu_lookup_fraction', 'overlap'):
    if getattr(plan, key) is None:
      continue
    v = float(getattr(plan, key))
    if not 0.0 <= v <= 1.0:
      out.append(f'plan.{key} must lie in [0, 1], got {v}')
  if plan.column_shards is not None and plan.column_shards < 1:
    out.append('plan.column_shards must be at least 1')
  return out


def validate(plan: Plan, w: wl.Workload) -> Plan:
  """Raises `InputError` naming every problem if `plan` does not fit `w`
  (`problems`); returns `plan`."""
  raise_problems(problems(plan, w), what='plan')
  return plan
