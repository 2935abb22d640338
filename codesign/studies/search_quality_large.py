"""The large space of `search_quality`: designs judged where the optimum
is unknown.

The large space is the small one (buildable platforms, plan mode `auto`)
with each table's sharding searched among `plan_space.CHOICES`
(`plan_space.SEARCH`): platforms x 4^T designs for T tables, 4^T times
the small space, far too many to enumerate. Its reference is the best
design any entry (ENTRIES: the searches, and the small space's
exhaustive optimum evaluated in the large space, which is one of its
designs) found; gaps are to that reference, so they are lower bounds
on the gaps to the unknown optimum.

Pure functions of search results (no searching, no I/O): `entry`,
`optimum_in_large`, `size`, `judge`, `summary`, `table_lines`,
`csv_table`. Units: objective values in
`shared.OBJECTIVE_UNITS[objective]`; gaps in percent of the reference.
"""

import math
import statistics

import numpy as np

from codesign.search import design_space, gradient, plan_space
from codesign.studies import shared

# What the reference is the best of: the three searches at equal
# evaluations and the small space's exhaustive optimum.
ENTRIES = ('gradient', 'random', 'cma_es', 'small_space_optimum')
# Values within this relative distance of the reference tie for it: the
# same design evaluated in the small and in the large space differs by
# up to 5e-11 (float64 rounding through the sharding weights; measured on
# the default workloads), so ties are numerical, not judged.
TIE_REL = 1e-9
SIZE_COLUMNS = (
  'design_space_size',
  'design_space_size_log10',
  'size_factor_over_small',
)


def gap_pct(problem, reference, found):
  """Percent by which `found` is worse than `reference` (None: nothing
  feasible found)."""
  if found is None:
    return None
  if gradient.maximized(problem.objective):
    return 100.0 * (reference - found) / reference
  return 100.0 * (found - reference) / reference


def sharding_tables(space, plan_z) -> dict:
  """Tables per sharding of a design whose sharding weights are one-hot
  (every table's heaviest sharding)."""
  k = len(plan_space.CHOICES)
  z = np.asarray(plan_z)[plan_space.leaf_count(space) :]
  choice = np.argmax(z.reshape(space.num_tables, k), axis=1)
  return {
    name: int(np.sum(choice == i))
    for i, name in enumerate(plan_space.CHOICES)
    if np.any(choice == i)
  }


def entry(problem, res) -> dict:
  """A search's best design in the large space (`res`, a
  `search.Result`): value (None: not feasible), evaluations, platform,
  tables per sharding."""
  entry = {
    'value': res.best_value if res.best_feasible else None,
    'feasible': res.best_feasible,
    'evaluations': res.evaluations,
    'platform': design_space.describe_index(problem.space, res.best_index),
    'sharding_tables': sharding_tables(problem.space, res.best_plan_z),
  }
  if res.continuous_value is not None:
    entry['continuous_value'] = res.continuous_value
  return entry


def optimum_in_large(problem, small_problem, exh, block: int = 256) -> dict:
  """The small space's exhaustive optimum `exh` (one sharding for every
  table) as a design of the large space of `problem`, evaluated there
  (`block`: designs per vmapped block, as `search.evaluate_indices`)."""
  small = small_problem.space
  choice = plan_space.CHOICES.index(small.sharding)
  plan_z = plan_space.uniform_sharding(
    problem.space, np.zeros(problem.space.num_plan), choice
  )
  ev = gradient.evaluate_indices(
    problem, exh.best_index[None], plan_z[None], block=block
  )
  value, feasible = float(ev['value'][0]), bool(ev['feasible'][0])
  return {
    'value': value if feasible else None,
    'feasible': feasible,
    'evaluations': small.size,
    'value_in_small_space': exh.best_value if exh.best_feasible else None,
    'relative_difference': abs(value - exh.best_value) / abs(exh.best_value),
    'platform': design_space.describe_index(small, exh.best_index),
    'sharding_tables': {small.sharding: small.num_tables},
  }


def size(space) -> dict:
  """The large space's size: platforms x 4^T, as floats and log10 (the
  exact integer has up to T x 0.6 digits)."""
  shardings = len(plan_space.CHOICES) ** space.num_tables
  return {
    'design_space_size': float(space.size * shardings),
    'design_space_size_log10': math.log10(space.size * shardings),
    'platforms': space.size,
    'tables': space.num_tables,
    'size_factor_over_small': float(shardings),
    'size_factor_over_small_log10': math.log10(shardings),
  }


def judge(problem, entries) -> dict:
  """The reference (best value of any entry), each entry's gap to it,
  which entries reach it (`best`) and by how much they lead the next
  (`margin_pct`: the runner-up's gap; None when no other found a
  feasible design)."""
  values = {m: e['value'] for m, e in entries.items() if e['value'] is not None}
  if not values:
    for e in entries.values():
      e['gap_pct'] = None
    return {'reference': None, 'best': [], 'margin_pct': None}
  pick = max if gradient.maximized(problem.objective) else min
  ref = pick(values.values())
  for e in entries.values():
    e['gap_pct'] = gap_pct(problem, ref, e['value']) if ref else None
    if ref and 'continuous_value' in e:  # negative: the relaxation beat it
      e['continuous_gap_pct'] = gap_pct(problem, ref, e['continuous_value'])
  best = [m for m, v in values.items() if abs(v - ref) <= TIE_REL * abs(ref)]
  rest = [entries[m]['gap_pct'] for m in values if m not in best]
  return {
    'reference': ref,
    'best': best,
    'margin_pct': min(rest) if rest else None,
  }


def _median(xs):
  return statistics.median(xs) if xs else None


def summary(per: dict) -> dict:
  """Wins per entry, median gaps, and the gradient search's gap where
  another method found the best design."""
  names = [m for m in ENTRIES if any(m in v for v in per.values())]
  # An entry a row lacks (the small space's optimum beside a superchip
  # space, which the small space does not hold) is not counted for it.
  rows = {m: [v[m] for v in per.values() if m in v] for m in names}
  gaps = {
    m: [e['gap_pct'] for e in rows[m] if e['gap_pct'] is not None]
    for m in names
  }
  lost = {
    name: {
      'best': v['best'],
      'gradient_gap_pct': v['gradient']['gap_pct'],
      'gradient_continuous_gap_pct': v['gradient'].get('continuous_gap_pct'),
    }
    for name, v in per.items()
    if 'gradient' not in v['best']
  }
  diffs = [
    v['small_space_optimum']['relative_difference']
    for v in per.values()
    if 'small_space_optimum' in v
  ]
  return {
    'workloads': len(per),
    'wins': {m: sum(m in v['best'] for v in per.values()) for m in names},
    'median_gap_pct': {m: _median(gaps[m]) for m in names},
    'max_gap_pct': {m: max(gaps[m], default=None) for m in names},
    'no_feasible_design': {m: len(rows[m]) - len(gaps[m]) for m in names},
    'gradient_not_best': lost,
    'min_size_factor_over_small': min(
      v['size_factor_over_small'] for v in per.values()
    ),
    'min_design_space_size_log10': min(
      v['design_space_size_log10'] for v in per.values()
    ),
    'small_space_optimum_max_relative_difference': max(diffs, default=None),
  }


def fmt(x, width=9, digits=3):
  return f'{x:{width}.{digits}f}' if x is not None else f'{"none":>{width}s}'


def table_lines(result: dict) -> list[str]:
  large = result['large_space']
  per = large['per_workload']
  names = [m for m in ENTRIES if any(m in v for v in per.values())]
  short = {'small_space_optimum': 'small opt %'}
  width = max([18, *(len(name) for name in per)])
  lines = [
    'large space (each table sharded by one of '
    f'{", ".join(large["sharding_choices"])}: platforms x 4^T designs); '
    f'gaps in % of the reference, {large["reference"]}; same evaluations '
    "for every search (the gradient search's)",
    f'{"workload":{width}s} {"log10 size":>10s} {"x small":>9s} '
    f'{"reference":>12s} '
    + ' '.join(f'{short.get(m, m + " %"):>11s}' for m in names)
    + f" {'evals':>8s}  best (lead: the runner-up's gap %)",
  ]
  for name, v in per.items():
    ref = v['reference']
    margin = v['margin_pct']
    lead = f'{margin:.3g}' if margin is not None else 'none'
    lines.append(
      f'{name:{width}s} {v["design_space_size_log10"]:10.1f} '
      f'{v["size_factor_over_small"]:9.2e} '
      f'{ref if ref is not None else float("nan"):12.6g} '
      + ' '.join(fmt(v[m]['gap_pct'] if m in v else None, 11) for m in names)
      + f' {v["gradient"]["evaluations"]:8,d}  '
      + f'{"+".join(v["best"]) or "none"} ({lead})'
    )
  s = large['summary']
  lines.append(
    'best on: '
    + ', '.join(f'{m} {n}' for m, n in s['wins'].items())
    + f' of {s["workloads"]} workloads; median gap %: '
    + ', '.join(f'{m} {fmt(g, 0)}' for m, g in s['median_gap_pct'].items())
  )
  for name, x in s['gradient_not_best'].items():
    lines.append(
      f'{name}: {"+".join(x["best"]) or "nothing"} found the best design; '
      f'the gradient search is {fmt(x["gradient_gap_pct"], 0)}% below it '
      f'(its relaxed design {fmt(x["gradient_continuous_gap_pct"], 0)}%; '
      'negative: above it)'
    )
  return lines


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows) of the large space: one row per workload: its size
  (float and log10) and factor over the small space, the reference, each
  entry of ENTRIES's value and gap in percent (empty where the
  small space was not run), the best entries (joined by '+'), their lead
  in percent, the evaluations of each search."""
  unit = shared.OBJECTIVE_COLUMN_UNITS[result['objective']]
  header = ['workload', *SIZE_COLUMNS, f'reference_{unit}']
  for m in ENTRIES:
    header += [f'{m}_{unit}', f'{m}_gap_pct']
  header += ['best', 'margin_pct', 'evaluations']
  rows = []
  for name, v in result['large_space']['per_workload'].items():
    row = [name, *(v[k] for k in SIZE_COLUMNS), v['reference']]
    for m in ENTRIES:
      e = v.get(m, {})
      row += [e.get('value'), e.get('gap_pct')]
    row += ['+'.join(v['best']), v['margin_pct'], v['gradient']['evaluations']]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows
