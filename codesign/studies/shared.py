"""What the study modules share: loading inputs given by name, checks of
settings, short design names, the sentences that explain an infeasible
design or a "NO", what "% of step" means, and plain CSV values.

No file I/O beyond reading a named input; nothing prints.
"""

import numpy as np

from codesign.boundary import inputs
from codesign.core.errors import InputError
from codesign.model import planner, report
from codesign.search import buildability, gradient
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform

# Printed under every table with a "% of step" column: the cost model sums
# each component alone (`CostReport.breakdown`) and overlaps them after, so
# the shares of one step can add to more than 100%.
OVERLAP_NOTE = (
  '% of step: each component alone over the step time; components are '
  'summed before overlap, so the shares can add to more than 100%.'
)


def platform(x) -> Platform:
  """A `Platform`, or a preset name / JSON file loaded without overrides."""
  return x if isinstance(x, Platform) else inputs.load_platform(str(x))


def plan(x, w, p, s) -> plan_lib.Plan:
  """A `Plan`, or `auto` / `hbm` / `ddr` / a plan JSON file for (w, p, s)."""
  return x if isinstance(x, plan_lib.Plan) else inputs.load_plan(x, w, p, s)


def why_infeasible(
  hbm_required: float,
  hbm_available: float,
  ddr_required: float,
  ddr_available: float,
) -> str:
  """Which memory tier overflows, in one clause ("out of HBM: 95.0 GB
  needed of 80.0 GB per accelerator"). Bytes in, GB (1e9 B) out; HBM is
  per accelerator, DDR per node, as in `CostReport.memory_required`."""
  parts = []
  for tier, req, avail, per in (
    ('HBM', hbm_required, hbm_available, 'accelerator'),
    ('DDR', ddr_required, ddr_available, 'node'),
  ):
    if req > avail:
      parts.append(
        f'out of {tier}: {req / 1e9:,.1f} GB needed of {avail / 1e9:,.1f} '
        f'GB per {per}'
      )
  return '; '.join(parts) or 'a memory tier overflows'


# Units of each search objective, as the tables print them and as CSV
# column suffixes (no '/' or '$' in a column name).
OBJECTIVE_UNITS = {
  'throughput': 'samples/s',
  'throughput_per_usd': 'samples/s/$',
  'throughput_per_watt': 'samples/s/W',
  'time_to_train': 's',
  'throughput_per_tco': 'samples/s/$TCO',
  'capex': '$',
  'power': 'W',
}
OBJECTIVE_COLUMN_UNITS = {
  'throughput': 'samples_per_s',
  'throughput_per_usd': 'samples_per_s_per_usd',
  'throughput_per_watt': 'samples_per_s_per_w',
  'time_to_train': 's',
  'throughput_per_tco': 'samples_per_s_per_tco_usd',
}


def load_workload(workload) -> wl.Workload:
  """A `Workload` as is (validated), or a preset name or JSON file."""
  if isinstance(workload, wl.Workload):
    return wl.validate(workload)
  return inputs.load_workload(str(workload))


def load_stack(stack) -> stack_lib.Stack:
  """A `Stack` as is (validated), or a preset name or JSON file."""
  if isinstance(stack, stack_lib.Stack):
    return stack_lib.validate(stack)
  return inputs.load_stack(str(stack))


def at_least(settings, minimum: int, *names: str) -> None:
  """Raises InputError unless every setting `names` is >= `minimum`.
  Settings are named as the launchers' flags (the same words)."""
  for name in names:
    value = getattr(settings, name)
    if value < minimum:
      raise InputError(f'--{name} must be at least {minimum}, got {value}')


def accelerator_short(name: str) -> str:
  """'H100-SXM5-80GB' -> 'H100'; 'NVIDIA H100 ...' -> 'NVIDIA'."""
  return name.split(' ')[0].split('-')[0]


def design_name(design: dict, short: bool = True) -> str:
  """A design (`design_space.describe_index`, or `platform_design` of a
  platform) in a few characters: nodes x (sockets S with the node's DDR
  + accelerators per node, the part; NICs per node x line rate), e.g.
  '2x(2S 1,024GB+8 H100; 4x400G NIC)'; a node without accelerators reads
  '2x(2S 512GB CPU; 1x100G NIC)'. DDR and NICs where the design gives
  them; the part's short name (`accelerator_short`) unless not `short`."""
  s = design['sockets_per_node']
  sockets = f'{_count(s)}S'
  if design.get('ddr_per_socket_gb') is not None:
    sockets += f' {s * design["ddr_per_socket_gb"]:,.0f}GB'
  nic = ''
  if design.get('nic_count') is not None:
    rate = design['nic_bandwidth_gbit_per_s']
    nic = f'; {_count(design["nic_count"])}x{_count(rate)}G NIC'
  nodes = f'{_count(design["nodes"])}x'
  if design['accelerators_per_node'] <= 0:
    return f'{nodes}({sockets} CPU{nic})'
  acc = design['accelerator']
  acc = accelerator_short(acc) if short else acc
  return (
    f'{nodes}({sockets}+{_count(design["accelerators_per_node"])} {acc}{nic})'
  )


def _count(x) -> str:
  """A count as printed: whole as it is, relaxed to 3 digits."""
  x = float(x)
  return f'{x:.0f}' if x.is_integer() else f'{x:.3g}'


def platform_design(pj: dict) -> dict:
  """The `design_name` fields of a platform's JSON (`schema`)."""
  return {
    'nodes': pj['nodes'],
    'sockets_per_node': pj['sockets_per_node'],
    'accelerators_per_node': (
      pj['accelerators_per_node'] if pj['trainer'] == 'accelerator' else 0
    ),
    'accelerator': pj['accelerator']['name'],
    'ddr_per_socket_gb': pj['cpu']['ddr_capacity_gb'],
    'nic_count': pj['nic']['count'],
    'nic_bandwidth_gbit_per_s': pj['nic']['bandwidth_gbit_per_s'],
  }


def limits_words(limits: dict) -> str:
  """A search's limits (a result's `limits`) in words with units."""
  budget, power, rack = (
    limits.get(k) for k in ('budget_usd', 'power_w', 'rack_w')
  )
  out = [
    f'capex at most ${budget:,.0f}' if budget else 'no capex budget',
    f'power at most {power:,.0f} W' if power else 'no power limit',
    f'{rack / 1e3:g} kW per rack (--rack_kw)' if rack else 'no rack limit',
  ]
  if limits.get('max_nodes'):
    out.append(f'at most {limits["max_nodes"]:,} nodes')
  if limits.get('samples'):
    out.append(f'time to train counts {limits["samples"]:,.0f} samples')
  if limits.get('energy_usd_per_w'):
    out.append(
      f'energy {limits["energy_usd_per_w"]:.2f} USD per W of maximum power '
      'over the TCO life'
    )
  return '; '.join(out)


def time_to_train_note(samples: float, flag: bool) -> str:
  """What a table's time-to-train column counts: `samples` from the
  --samples flag (`flag`), else the default (no workload names one)."""
  if flag:
    return f'to train: {samples:,.0f} samples (--samples) / samples/s'
  return (
    f'to train: {report.DEFAULT_TRAIN_SAMPLES:,.0f} samples / samples/s '
    f'({report.TRAIN_SAMPLES_NOTE})'
  )


def preset_figures(
  w: wl.Workload, p: Platform, stack: stack_lib.Stack, system=None
):
  """(plan, figures) of a preset as every script shows it by default, as
  evaluate does: the auto plan (`planner.make`: the hottest rows in the
  HBM the stack allows, the planner's fastest sharding per table) and
  `report.design_figures` (`report.to_result` keys, `rack_unit_w`; with
  a `system`, the whole system's figures: readers, storage, goodput)."""
  plan = planner.make(w, p, stack)
  return plan, report.design_figures(p, w, plan, stack, system)


def system_of(pj: dict) -> str:
  """The system class of a platform JSON (`design_space.SYSTEMS`, or
  `cpu`): a superchip's accelerators reach their host over NVLink-C2C, a
  PCIe card's peers over PCIe (bridged pairs or PCIe only), a board's
  over a switch or mesh."""
  if pj['trainer'] != 'accelerator':
    return 'cpu'
  if pj['host_link'].get('kind') == 'c2c':
    return 'superchip'
  if pj['fabric']['topology'] in ('bridged_pairs', 'pcie_only'):
    return 'pcie'
  return 'board'


def why_not(fig: dict, budget_usd=None, power_w=None, rack_w=None) -> str:
  """Why figures `fig` (a `report.to_result` dict) are not acceptable:
  over the capex budget (by how much, USD), over the power limit (W), a
  node or domain over a rack's power (`fig['rack_unit_w']`, `rack_w`)
  or, where there is a rack rule, its rack units (`rack_unit_u` over
  `rack_space_u`),
  tables that do not fit in HBM or DDR; '' when none applies. A limit of
  None or 0 is no limit."""
  reasons = []
  if budget_usd and fig['capex_usd'] > budget_usd:
    over = fig['capex_usd'] - budget_usd
    reasons.append(f'over the capex budget by ${over:,.0f}')
  if power_w and fig['power_w'] > power_w:
    reasons.append(f'over the power limit by {fig["power_w"] - power_w:,.0f} W')
  if rack_w and fig.get('rack_unit_w', 0.0) > rack_w:
    reasons.append(
      f'one node (or scale-up domain) draws {fig["rack_unit_w"] / 1e3:.1f} '
      f"kW, over a rack's {rack_w / 1e3:g} kW"
    )
  if rack_w and fig.get('rack_unit_u', 0.0) > fig.get('rack_space_u', 1e9):
    reasons.append(
      f'one node (or scale-up domain) takes {fig["rack_unit_u"]:g}U, over '
      f'the {fig["rack_space_u"]:g}U its rack holds for nodes'
    )
  if not fig['feasible']:
    tiers = [t.upper() for t in fig['overflowing_tiers']] or ['memory']
    reasons.append(f'tables do not fit in {"/".join(tiers)}')
  return '; '.join(reasons)


def why_not_rows(g, limit_kind: str, limit: float, capex, power) -> str:
  """The same reason from a multi-task search's constraint rows g (C,):
  g[0] is the limit row (capex in USD or power in W over `limit`, minus
  1, as `limit_kind` says); then, per workload, HBM, DDR, the rack and
  the buildability rows (`buildability.TRACED`; `search.violations`
  without capex and power). '' when no row is positive. Workloads are numbered
  from 1 when there are several (the growth factors)."""
  g = np.asarray(g)
  reasons = []
  if g[0] > 0:
    if limit_kind == 'capex':
      reasons.append(f'over the capex budget by ${capex - limit:,.0f}')
    else:
      reasons.append(f'over the power limit by {power - limit:,.0f} W')
  names = ('HBM', 'DDR', 'rack', 'rack_space') + buildability.TRACED
  rows = g[1:].reshape(-1, len(names))
  for j, row in enumerate(rows):
    where = f' (workload {j + 1})' if len(rows) > 1 else ''
    tiers = [n for n, v in zip(names[:2], row[:2], strict=True) if v > 0]
    if tiers:
      reasons.append(f'tables do not fit in {"/".join(tiers)}{where}')
    if row[2] > 0:
      reasons.append(f"one node over a rack's power{where}")
    if row[3] > 0:
      reasons.append(f"one node over a rack's rack units{where}")
    rules = [n for n, v in zip(names[4:], row[4:], strict=True) if v > 0]
    if rules:
      what = ' and '.join(buildability.TRACED_WHAT[n] for n in rules)
      reasons.append(f'not buildable: beyond {what}{where}')
  return '; '.join(reasons)


def csv_value(x):
  """A value as a CSV cell: numpy scalars as Python numbers."""
  return x.item() if isinstance(x, np.generic) else x


def violation_sentence(problem: gradient.Problem, g) -> str:
  """Names the most violated constraint of g (len(search.CONSTRAINTS),)
  and by how much."""
  g = np.asarray(g)
  i = int(np.argmax(g))
  name = gradient.CONSTRAINTS[i]
  pct = 100.0 * float(g[i])
  if name == 'capex':
    what = f'the capex budget of ${problem.budget_usd:,.0f}'
  elif name == 'power':
    what = f'the power budget of {problem.power_w:,.0f} W'
  elif name == 'rack':
    what = f"a rack's {problem.rack_w / 1e3:g} kW (--rack_kw), by one node,"
  elif name == 'rack_space':
    what = "a rack's rack units (its class's height less its switches and "
    what += 'power), by one node,'
  else:
    what = {
      'hbm': 'the HBM capacity',
      'ddr': 'the DDR capacity',
      **buildability.TRACED_WHAT,
    }[name]
  return f'{what} is exceeded by {pct:.1f}%'


# ---- the one decision rule -------------------------------------------------

# Throughput objectives: the proposal is the cheapest candidate within the
# tolerance (--tolerance) of the fastest, then, while one costing at most
# KNEE_PRICE of its price is within the tolerance of it, the cheapest
# such: the last 10% of the money must buy the tolerance in throughput.
KNEE_PRICE = 0.9
THROUGHPUT_OBJECTIVES = ('throughput', 'time_to_train')


def rule_sentence(objective: str, tolerance: float | None) -> str:
  """The decision rule of a proposal for `objective`, one sentence."""
  if objective not in THROUGHPUT_OBJECTIVES or tolerance is None:
    best = 'least' if objective == 'time_to_train' else 'highest'
    return f'the candidate of the {best} {objective} within the limits'
  tol = f'{100 * tolerance:g}%'
  return (
    f'the cheapest candidate within {tol} of the fastest within the limits, '
    f'then, while one costing at most {KNEE_PRICE:g} of its price is within '
    f'{tol} of it, that one: the last {100 * (1 - KNEE_PRICE):.0f}% of the '
    f'money must buy {tol} more throughput'
  )


def decide(values, capex, objective: str, tolerance=None) -> list[int]:
  """The order the proposal rule (`rule_sentence`) puts candidates in:
  its choice first, then the others by objective (the cheaper first on
  ties). Candidates whose value is None (not within the limits) are left
  out; ties keep the candidates' order (the proposal first).

  Args:
    values: each candidate's objective value, or None.
    capex: each candidate's capex (USD).
    objective: the objective (`gradient.OBJECTIVES`).
    tolerance: for throughput objectives, the share of the fastest the
      cheapest candidate may give up (None: the fastest wins).
  """
  ok = [i for i, v in enumerate(values) if v is not None]
  up = gradient.maximized(objective)
  order = sorted(ok, key=lambda i: (-values[i] if up else values[i], capex[i]))
  if objective not in THROUGHPUT_OBJECTIVES or tolerance is None or not ok:
    return order
  thr = {i: values[i] if up else 1.0 / values[i] for i in ok}

  def cheapest(level, price=np.inf):
    near = [i for i in ok if thr[i] >= level and capex[i] <= price]
    return min(near, key=lambda i: (capex[i], -thr[i])) if near else None

  pick = cheapest((1.0 - tolerance) * max(thr.values()))
  while (
    nxt := cheapest((1.0 - tolerance) * thr[pick], KNEE_PRICE * capex[pick])
  ) is not None:
    pick = nxt
  return [pick] + [i for i in order if i != pick]
