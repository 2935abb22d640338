"""What to upgrade next: elasticities of throughput and perf per dollar.

The library part of `experiments.sensitivity`, with no file I/O and no
printing. For one workload on one platform, one reverse-mode pass gives
d log(metric) / d log(field) for every continuous platform field (the %
change of throughput, and of samples/s per USD, per 1% change of the
field; counts such as nodes and accelerators are relaxed to reals). The
fields are ranked by the size of their throughput elasticity (direction:
raise a positive one, lower a negative one), and the top `check_top` are
checked against central finite differences in log space.

With `replan` a plan that spills tables to DDR re-derives its HBM
fractions by the planner's rule as the platform changes (more free HBM
holds more rows; `planner.fit_hbm_traced`), so HBM capacity shows its
worth; without it the plan is frozen.

Units: elasticities are dimensionless (% per %); field values are in SI
units (bytes, bytes/s, FLOP/s, W, USD) under `value_si`, field names carry
the unit of their JSON key (`accelerator.hbm_capacity_gb`).
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from codesign.core import units
from codesign.core.errors import InputError
from codesign.model import cost_model, report
from codesign.spec import hardware
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.studies import shared, sweeps

# Rows of the printed ranking.
TABLE_ROWS = 15


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to differentiate (the flags of `experiments.sensitivity`).

  A bad value raises `InputError` naming the setting as its flag
  (`--check_top`), since each field is the flag of the same name.

  Attributes:
    workload: a `Workload`, or a preset name / JSON file.
    platform: a `Platform`, or a preset name / JSON file.
    plan: a `Plan` for (workload, platform), or `auto`, `hbm`, `ddr` or a
      plan JSON file.
    stack: a `Stack`, or a preset name / stack JSON file.
    replan: re-derive a spilling plan as the platform changes (HBM
      capacity then counts); False freezes the plan.
    check_top: how many of the largest throughput elasticities to check by
      finite differences (1 to the number of platform fields).
    fd_rel_step: relative step h of the finite differences, field x
      exp(+-h), in (0, 0.1).
    fd_tolerance: largest accepted relative gap between autodiff and
      finite differences (> 0; 0.02 is 2%).
  """

  workload: str | wl.Workload = 'zion_scale'
  platform: str | Platform = 'zion'
  plan: str | plan_lib.Plan = 'auto'
  stack: str | stack_lib.Stack = 'torchrec'
  replan: bool = True
  check_top: int = 3
  fd_rel_step: float = 1e-4
  fd_tolerance: float = 0.02

  def __post_init__(self):
    # check_top's upper bound needs the platform: checked in `run`.
    if self.check_top < 1:
      raise InputError(f'--check_top must be at least 1, got {self.check_top}')
    if not 0 < self.fd_rel_step < 0.1:
      raise InputError(
        f'--fd_rel_step must lie in (0, 0.1), got {self.fd_rel_step}'
      )
    if not self.fd_tolerance > 0:
      raise InputError(
        f'--fd_tolerance must be positive, got {self.fd_tolerance}'
      )


def _unit(path: str) -> str | None:
  """The boundary unit (`codesign.core.units`) of a platform field, from its
  `unit` metadata; None for a plain number."""
  cls = hardware.Platform
  parts = path.split('.')
  for part in parts[:-1]:
    cls = {f.name: f.type for f in dataclasses.fields(cls)}[part]
  field = {f.name: f for f in dataclasses.fields(cls)}[parts[-1]]
  return field.metadata.get('unit')


def boundary_key(path: str) -> str:
  """'accelerator.hbm_capacity' -> 'accelerator.hbm_capacity_gb' (the
  field's JSON key, with the unit of its `unit` metadata)."""
  unit = _unit(path)
  return path + (f'_{unit}' if unit else '')


def _all_paths(cls=hardware.Platform, prefix: str = '') -> list[str]:
  """Every leaf field path of a platform class ('accelerator.hbm_capacity')."""
  out = []
  for f in dataclasses.fields(cls):
    if dataclasses.is_dataclass(f.type):
      out += _all_paths(f.type, f'{prefix}{f.name}.')
    else:
      out.append(prefix + f.name)
  return out


def _rank(paths, values, e, row: int, limit: int) -> list[dict]:
  order = np.argsort(-np.abs(e[row]), kind='stable')
  out = []
  for i in order[:limit]:
    if e[row, i] == 0:
      break
    out.append(
      {
        'field': boundary_key(paths[i]),
        'value_si': values[i],
        'elasticity': e[row, i],
        'direction': 'raise' if e[row, i] > 0 else 'lower',
      }
    )
  return out


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Elasticities of throughput and perf per USD, checked numerically.

  Args:
    settings: the design and the check.
    progress: called with one line at the start of the reverse-mode pass
      and of the finite differences (each compiles for several seconds).

  Returns:
    (result, metrics). result: the dict `experiments.sensitivity` writes
    to result.json (workload, platform, stack, design: its figures as
    `report.to_result`, hbm_fraction, replan_applied, elasticities: field
    -> value_si, throughput, perf_per_usd; upgrade_for_throughput and
    upgrade_for_perf_per_usd rankings, finite_difference_check,
    finite_difference_ok). metrics: empty (this study has no steps).

  Raises:
    InputError: check_top above the number of platform fields.
  """
  progress = progress or (lambda line: None)
  w, p, stack, plan = _design(settings)
  progress('elasticities of every platform field (one reverse-mode pass)')
  paths, values, e = sweeps.elasticities(
    p, w, stack, plan, replan=settings.replan
  )
  checks = _checks(settings, (w, p, stack, plan), paths, e, progress)
  base = report.to_result(cost_model.evaluate_design(p, w, plan, stack))
  result = {
    'workload': w.name,
    'platform': p.name,
    'stack': stack.name,
    'design': base,
    # The plan's HBM fraction, not the fit factor: a --from_config replay
    # reads the fitted plan from config.json and must give the same bytes.
    'hbm_fraction': float(np.mean(plan.hbm_fraction)),
    'replan_applied': bool(settings.replan and sweeps.replan_applies(p, plan)),
    'elasticities': {
      boundary_key(k): {
        'value_si': values[i],
        'throughput': e[0, i],
        'perf_per_usd': e[1, i],
      }
      for i, k in enumerate(paths)
    },
    'upgrade_for_throughput': _rank(paths, values, e, 0, len(paths)),
    'upgrade_for_perf_per_usd': _rank(paths, values, e, 1, len(paths)),
    'finite_difference_check': checks,
    'finite_difference_ok': all(c['ok'] for c in checks),
  }
  return result, []


def _design(settings: Settings) -> tuple:
  """(w, p, stack, plan) of the settings; raises `InputError` when
  check_top is not between 1 and the number of platform fields."""
  w = shared.load_workload(settings.workload)
  p = shared.platform(settings.platform)
  stack = shared.load_stack(settings.stack)
  plan = shared.plan(settings.plan, w, p, stack)
  num_fields = len(hardware.leaf_paths(p))
  if not 1 <= settings.check_top <= num_fields:
    raise InputError(
      f'--check_top must be between 1 and {num_fields}, got '
      f'{settings.check_top}'
    )
  return w, p, stack, plan


def _checks(settings: Settings, design: tuple, paths, e, progress) -> list:
  """The finite-difference check of the `check_top` largest throughput
  elasticities `e` of `design` (w, p, stack, plan): per field and metric
  the autodiff and numerical values, their relative gap and whether it
  is within the tolerance."""
  w, p, stack, plan = design
  top = list(np.argsort(-np.abs(e[0]), kind='stable')[: settings.check_top])
  progress(f'finite differences of the top {len(top)} fields')
  fd = sweeps.finite_difference(
    p,
    w,
    stack,
    plan,
    [paths[i] for i in top],
    replan=settings.replan,
    rel_step=settings.fd_rel_step,
  )
  checks = []
  for j, i in enumerate(top):
    for row, metric in ((0, 'throughput'), (1, 'perf_per_usd')):
      ad, num = float(e[row, i]), float(fd[row, j])
      gap = abs(ad - num) / max(abs(num), 1e-12)
      checks.append(
        {
          'field': boundary_key(paths[i]),
          'metric': metric,
          'autodiff': ad,
          'finite_difference': num,
          'relative_gap': gap,
          'ok': gap <= settings.fd_tolerance,
        }
      )
  return checks


def ranked_fields(result: dict, limit: int) -> list[str]:
  """The `limit` fields of largest |throughput elasticity|, largest first
  (zeros included, unlike the upgrade ranking), for the bar plot."""
  items = list(result['elasticities'].items())
  thr = np.array([float(v['throughput']) for _, v in items])
  order = np.argsort(-np.abs(thr), kind='stable')[:limit]
  return [items[i][0] for i in order]


def _feasible_text(design: dict) -> str:
  if design['feasible']:
    return 'yes'
  m = design['memory']
  return 'NO: ' + shared.why_infeasible(
    m['hbm']['required_bytes'],
    m['hbm']['available_bytes'],
    m['ddr']['required_bytes'],
    m['ddr']['available_bytes'],
  )


def table(result: dict) -> str:
  """The design's figures, the upgrade ranking and the finite-difference
  checks, as plain text."""
  base = result['design']
  lines = [
    f'{result["workload"]} on {result["platform"]}: '
    f'{base["throughput_samples_per_s"]:,.0f} samples/s, bottleneck '
    f'{base["bottleneck"]}, feasible: {_feasible_text(base)}',
    f'{"what to upgrade next":44s} {"d log thr":>10s} {"d log perf/$":>12s}',
  ]
  for row in result['upgrade_for_throughput'][:TABLE_ROWS]:
    k = row['field']
    lines.append(
      f'{row["direction"]:5s} {k:38s} {row["elasticity"]:+10.4f} '
      f'{result["elasticities"][k]["perf_per_usd"]:+12.4f}'
    )
  lines.append(
    'd log: % change of throughput (samples/s) or of samples/s per USD '
    'per 1% change of the field'
  )
  for c in result['finite_difference_check']:
    ok = 'ok' if c['ok'] else 'NOT OK: gap above the tolerance'
    lines.append(
      f'check {c["field"]} ({c["metric"]}): autodiff {c["autodiff"]:+.6f}, '
      f'finite difference {c["finite_difference"]:+.6f}, gap '
      f'{100 * c["relative_gap"]:.4f}% ({ok})'
    )
  return '\n'.join(lines)


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """Every platform field as CSV, ranked by |throughput elasticity|: its
  value in the unit its name ends with (`_gb`: 1e9 B) and in SI units,
  and both elasticities (% per %)."""
  header = [
    'rank',
    'field',
    'value_in_field_unit',
    'value_si',
    'throughput_elasticity_pct_per_pct',
    'perf_per_usd_elasticity_pct_per_pct',
  ]
  fields = ranked_fields(result, len(result['elasticities']))
  unit_of = {boundary_key(p): _unit(p) for p in _all_paths()}
  rows = []
  for rank, k in enumerate(fields, start=1):
    v = result['elasticities'][k]
    unit = unit_of.get(k)
    value = units.from_si(v['value_si'], unit) if unit else v['value_si']
    row = [rank, k, value, v['value_si'], v['throughput'], v['perf_per_usd']]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows
