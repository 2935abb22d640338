"""What a proposal rests on: the workload assumptions that decide it, and
whether it stays the best candidate when its uncertain numbers move.

`assumptions` gathers the workload numbers that decide a proposal
(popularity skew, pooling, table bytes against the proposal's HBM, global
batch) with where each comes from. `check` re-ranks candidate designs (the
proposal, other designs the search found, presets) under perturbations of
those numbers, by the cost model alone (no new search):
- a price (`perturbations`): every part of a candidate whose price is
  uncertain (`part_tables.low_confidence_price`; a price the user set is
  theirs and stays) x0.7 and x1.3 one at a time, then all of them at once.
  A price moves only the capex (`terms.capex_and_power`): step time and
  plans do not depend on prices, so the throughput stays.
- the popularity skew at each of SKEW_VALUES but its own (1.2 to 16,
  inside the model's bounds): every candidate keeps its sharding and its
  other plan fields,
  and its HBM fractions are re-fitted by the planner's rule (hottest
  bytes first, `refit_hbm`), as hotter or flatter traffic moves which
  rows the HBM should hold.
A candidate competes under a perturbation if it is within the limits
there; the candidates are those within the limits at the nominal numbers.

No I/O, no printing.
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from codesign.model import planner, report, terms
from codesign.search import design_space as ds
from codesign.search import gradient, part_tables
from codesign.spec import catalog, hardware
from codesign.spec import plan as plan_lib
from codesign.spec import workload as wl
from codesign.spec import workload_presets as wp
from codesign.spec.stack import Stack
from codesign.studies import shared

PRICE_FACTORS = (0.7, 1.3)
# The popularity skews every proposal is judged at beside its own: from
# nearly uniform traffic (1.2: the hottest 20% of rows get 24% of
# lookups) to very skewed (16: 97%); no preset's skew is measured
# (`workload_presets`), so a proposal must say how it fares across them.
SKEW_VALUES = (1.2, 2.0, 4.0, 8.0, 16.0)
# Distinct designs of the search beside the proposal that compete.
FOUND_DESIGNS = 4
# Shares of a plan's HBM bytes tried, in turn, when a new skew moves them
# (`refit_hbm`).
REFIT_SHARES = (1.0, 0.99, 0.97, 0.93, 0.85, 0.7, 0.5, 0.25, 0.0)
# Perturbations whose winner the sentence names (the rest: result.json).
NAMED_FLIPS = 3
METHOD = (
  'candidates within the limits at the nominal numbers, re-ranked by the '
  'objective under each perturbation (cost model only); a price (uncertain '
  'ones: catalog confidence low, or no catalog price) x0.7 and x1.3 one at '
  'a time and all at once, which moves the capex only; popularity_skew '
  '1.2, 2, 4, 8 and 16 (but its own), with each plan keeping its sharding '
  'and the bytes it holds '
  'in HBM, re-distributed hottest first by the planner (planner.water_fill;'
  ' fewer bytes where they no longer fit: refit_hbm)'
)


@dataclasses.dataclass(frozen=True)
class Candidate:
  """A design that competes with the proposal.

  Attributes:
    name: how sentences name it ('proposal', a preset, a design's shape).
    kind: 'proposal', 'found' (by the search) or 'preset'.
    platform: the concrete platform, at the run's prices.
    plan: its plan (searched, or the preset's auto plan).
    figures: its `report.to_result` figures at the nominal numbers.
  """

  name: str
  kind: str
  platform: hardware.Platform
  plan: plan_lib.Plan
  figures: dict


def _origin(w: wl.Workload) -> str:
  """Where the workload's numbers come from, in a few words."""
  if w.name in wp.WORKLOADS and w == wp.get(w.name):
    return f'{w.name} default'
  return 'as given'


def assumptions(w: wl.Workload, p: hardware.Platform, plan) -> dict:
  """The workload numbers that decide a proposal on platform `p` with
  `plan`: popularity skew (and the share of lookups the hottest 20% of
  rows get), pooling per table, the table bytes (with optimizer state)
  against the proposal's HBM and what the plan keeps there, global batch,
  the Zipf exponent of the hottest rows (0: none given);
  `origin` says whether they are a preset's defaults, and `skew_basis`
  where a default skew comes from (`workload_presets.SKEW_BASIS`; None:
  an assumption, such as zion_scale's 8 and the uniform 1 of most
  presets)."""
  k = float(w.popularity_skew)
  pooling = np.array([t.pooling for t in w.tables], dtype=np.float64)
  tb = planner.table_bytes(w)
  frac = np.asarray(plan.hbm_fraction, dtype=np.float64)
  dp = np.array([s == 'data_parallel' for s in plan.sharding], np.float64)
  accelerators = 0.0 if p.trainer == 'cpu' else float(p.accelerators_per_node)
  if p.trainer == 'cpu':
    frac = np.zeros_like(frac)
  in_hbm = dp + (1.0 - dp) * frac
  hits = 1.0 - (1.0 - in_hbm) ** k
  origin = _origin(w)
  return {
    'origin': origin,
    'skew_basis': wp.SKEW_BASIS.get(w.name) if 'default' in origin else None,
    'popularity_skew': k,
    'hottest_20pct_rows_lookup_share': 1.0 - 0.8**k,
    'pooling_mean_per_table': float(pooling.mean()),
    'pooling_max_per_table': float(pooling.max()),
    'table_bytes_with_optimizer_state': float(tb.sum()),
    'proposal_hbm_bytes': float(p.nodes)
    * accelerators
    * float(p.accelerator.hbm_capacity),
    'table_bytes_share_in_hbm': float(np.sum(in_hbm * tb) / np.sum(tb)),
    'lookup_share_from_hbm': float(np.sum(hits * pooling) / pooling.sum()),
    'global_batch': int(w.global_batch),
    'zipf_exponent': float(w.zipf_exponent),
  }


def assumptions_line(a: dict) -> str:
  """The `assumptions` dict as one printed line."""
  origin = a['origin']
  skew = origin
  if 'default' in origin:
    skew += f', {a["skew_basis"] or "an assumption"}'
  return (
    f'assumptions: popularity_skew {a["popularity_skew"]:g} ({skew}: the '
    f'hottest 20% of rows get {a["hottest_20pct_rows_lookup_share"]:.0%} '
    f'of lookups); pooling {a["pooling_mean_per_table"]:.3g} mean, '
    f'{a["pooling_max_per_table"]:.3g} max lookups per table per sample '
    f'({origin}); tables {a["table_bytes_with_optimizer_state"] / 1e9:,.0f}'
    f' GB with optimizer state vs {a["proposal_hbm_bytes"] / 1e9:,.0f} GB '
    f'of HBM in the proposal, whose plan keeps '
    f'{a["table_bytes_share_in_hbm"]:.0%} of the table bytes there '
    f'({a["lookup_share_from_hbm"]:.0%} of lookups); global batch '
    f'{a["global_batch"]:,} ({origin})' + _zipf_clause(a, origin)
  )


def _zipf_clause(a: dict, origin: str) -> str:
  """The Zipf exponent of the hottest rows, where the workload gives one
  (it sets HugeCTR's hybrid-embedding split, `terms.hybrid`)."""
  if not a.get('zipf_exponent'):
    return ''
  return (
    f'; Zipf exponent {a["zipf_exponent"]:g} of the hottest rows '
    f"({origin}; it sets the hybrid embedding's frequent rows)"
  )


def _short(part: str) -> str:
  """'EPYC-7742 (Rome)' -> 'EPYC-7742'; accelerator names stay whole."""
  return part.split(' ')[0]


def _parts_of(p: hardware.Platform) -> list[str]:
  """The catalog parts of a platform whose price counts in its capex."""
  raw = catalog.raw()
  names = [p.cpu.name]
  if p.trainer == 'accelerator':
    names.insert(0, p.accelerator.name)
  return [n for n in names if n in raw['accelerators'] or n in raw['cpus']]


def perturbations(
  candidates: list[Candidate], w: wl.Workload, prices=()
) -> tuple[list[dict], list[str]]:
  """(perturbations, left out): the uncertain prices of the candidates'
  parts (not those `prices` sets) x each of PRICE_FACTORS, one at a time
  and (with several parts) all at once; where a candidate has several
  nodes, the network's prices (NICs, switches, links) x each of
  PRICE_FACTORS; the popularity skew at each of SKEW_VALUES but the
  workload's own. Left out: one sentence per skew outside the model's
  bounds."""
  given = dict(prices)
  parts = []
  for c in candidates:
    for n in _parts_of(c.platform):
      uncertain = part_tables.low_confidence_price(n) and n not in given
      if uncertain and n not in parts:
        parts.append(n)
  out = []
  for n in parts:
    for f in PRICE_FACTORS:
      name = f'{_short(n)} price {100 * (f - 1):+.0f}%'
      out.append({'name': name, 'kind': 'price', 'parts': [n], 'factor': f})
  if len(parts) > 1:
    for f in PRICE_FACTORS:
      out.append(
        {
          'name': f'every uncertain price {100 * (f - 1):+.0f}%',
          'kind': 'price',
          'parts': list(parts),
          'factor': f,
        }
      )
  if any(float(c.platform.nodes) > 1.0 for c in candidates):
    for f in PRICE_FACTORS:
      out.append(
        {
          'name': f'network price {100 * (f - 1):+.0f}%',
          'kind': 'network_price',
          'factor': f,
        }
      )
  left_out = []
  lo, hi = wl.BOUNDS['popularity_skew']
  own = float(w.popularity_skew)
  for k in SKEW_VALUES:
    if k == own:
      continue
    name = f'popularity_skew {k:g}'
    if lo <= k <= hi:
      f = k / own
      out.append(
        {'name': name, 'kind': 'popularity_skew', 'factor': f, 'value': k}
      )
    else:
      left_out.append(f"{name} is outside the model's {lo:g} to {hi:g}")
  return out, left_out


def worst_skew(rob: dict) -> dict | None:
  """The proposal's objective at the popularity skew where it fares worst
  (of `perturbations`' skews, within the limits there), against its
  nominal value: `skew`, `value`, `nominal`, `change` (relative); None
  without skew perturbations."""
  nominal = rob['candidates'][0]['objective_value']
  rows = [
    r
    for r in rob['perturbations']
    if r['kind'] == 'popularity_skew' and r['proposal_value'] is not None
  ]
  if not rows or nominal is None:
    return None
  up = rob.get('maximize', True)
  pick = (min if up else max)(rows, key=lambda r: r['proposal_value'])
  return {
    'skew': pick['value'],
    'value': pick['proposal_value'],
    'nominal': nominal,
    'change': pick['proposal_value'] / nominal - 1.0,
  }


def _repriced(c: Candidate, prices: dict) -> dict:
  """The figures of `c` with its parts at `prices` (part -> USD)."""
  p = part_tables.priced(c.platform, tuple(sorted(prices.items())))
  capex, _ = terms.capex_and_power(p)
  capex = float(capex)
  # The system around the trainers (readers, storage, front-end network)
  # keeps its own prices (`whole_system.json`).
  bill = c.figures.get('system', {}).get('bill', {})
  capex += sum(b['usd'] for b in bill.values())
  thr = c.figures['throughput_samples_per_s']
  return {**c.figures, 'capex_usd': capex, 'perf_per_usd': thr / capex}


def refit_hbm(w: wl.Workload, p, stack: Stack, plan) -> np.ndarray:
  """HBM fractions of `plan` re-fitted for workload `w` (another skew) on
  platform `p`: the table bytes the plan holds in HBM, re-distributed by
  the planner's hottest-bytes-first rule (`planner.water_fill`) for `w`'s
  hotness, or, where the busiest rank's HBM (`planner.hbm_required`) no
  longer holds them, the largest of REFIT_SHARES of those bytes that it
  holds: a few memory terms instead of the planner's forty-step fit
  (`planner.fit_hbm`), which places up to about 1% more on zion_scale's
  presets."""
  dp = np.array([x == 'data_parallel' for x in plan.sharding], np.float64)
  frac = np.asarray(plan.hbm_fraction, np.float64)
  held = float(np.sum(frac * planner.table_bytes(w) * (1.0 - dp)))
  avail = planner.hbm_available(p, stack)
  for share in REFIT_SHARES:
    frac = planner.water_fill(w, share * held, dp)
    if planner.hbm_required(w, p, stack, plan.sharding, frac) <= avail:
      return frac
  return frac


def _reskewed(
  c: Candidate, w: wl.Workload, stack: Stack | dict, system=None
) -> dict:
  """The figures of `c` on workload `w` (another skew), its HBM fractions
  re-fitted (`refit_hbm`); `stack` may map trainer -> stack; `system`:
  the system around the trainers (`report.design_figures`)."""
  if isinstance(stack, dict):
    stack = stack[c.platform.trainer]
  plan = c.plan
  if c.platform.trainer != 'cpu':
    frac = refit_hbm(w, c.platform, stack, plan)
    plan = dataclasses.replace(plan, hbm_fraction=frac)
  return report.design_figures(c.platform, w, plan, stack, system)


def network_repriced(p: hardware.Platform, factor: float):
  """`p` with its NICs, switches and links (`terms.network_bill`) at
  `factor` times their prices: assumptions of low and medium confidence
  (`platform_presets` NIC_*, SWITCH_*, LINK_*)."""
  nic = dataclasses.replace(
    p.nic,
    bandwidth_price=factor * p.nic.bandwidth_price,
    switch_port_price=factor * p.nic.switch_port_price,
    link_price=factor * p.nic.link_price,
  )
  return dataclasses.replace(p, nic=nic)


def figures_under(
  pert, candidates, w, stack, prices, system=None
) -> list[dict]:
  """The candidates' figures under one perturbation (a `perturbations`
  dict): repriced parts or network, or another popularity skew (the
  system around the trainers, `system`, evaluated again)."""
  if pert['kind'] == 'network_price':
    moved = [
      dataclasses.replace(
        c, platform=network_repriced(c.platform, pert['factor'])
      )
      for c in candidates
    ]
    return [_repriced(c, dict(prices)) for c in moved]
  if pert['kind'] == 'price':
    moved = dict(prices)
    for n in pert['parts']:
      moved[n] = pert['factor'] * part_tables.price_usd(n, prices)
    return [_repriced(c, moved) for c in candidates]
  w2 = dataclasses.replace(w, popularity_skew=pert['value'])
  return [_reskewed(c, w2, stack, system) for c in candidates]


def _ranking(values, objective: str, capex, tolerance=None) -> list[int]:
  """Positions of the candidates within the limits (value not None), the
  proposal rule's choice first (`shared.decide`: for throughput
  objectives the cheapest within the tolerance of the fastest, down to
  the knee); ties keep the candidates' order (the proposal first)."""
  return shared.decide(values, capex, objective, tolerance)


def check(
  candidates: list[Candidate],
  perturbations_: list[dict],
  w: wl.Workload,
  stack: Stack | dict,
  score: Callable[[dict], float | None],
  objective: str,
  prices=(),
  tolerance: float | None = None,
  system=None,
) -> dict:
  """Whether candidates[0] (the proposal) stays the best under each
  perturbation (a `perturbations` dict).

  Args:
    candidates: the proposal first, then its competitors, at the run's
      prices (`prices`, the user's) and workload `w`.
    perturbations_: what to move.
    w, stack: the workload and the stack (or trainer -> stack).
    score: figures -> objective value, None when not within the limits.
    objective: the objective (`gradient.OBJECTIVES`): the best is the
      proposal rule's choice (`shared.decide`).
    prices: the part prices the user set (`part_tables.Prices`).
    tolerance: for throughput objectives, the rule's tolerance (None: the
      fastest is the best).
    system: the system around the trainers, or None
      (`whole_system.WholeSystem`).

  Returns:
    The `robustness` dict of result.json: `method`, `candidates` (name,
    kind, nominal objective), `nominal_best`, per perturbation its `best`,
    `proposal_stays_best`, the proposal's and the best's objective and
    the `ranking`; `proposal_stays_best` (a count), `perturbation_count`,
    `share` (None without perturbations) and `sentence`.
  """
  names = [c.name for c in candidates]
  nominal = [score(c.figures) for c in candidates]

  def capex(figs):
    return [f['capex_usd'] for f in figs]

  figs0 = [c.figures for c in candidates]
  order = _ranking(nominal, objective, capex(figs0), tolerance)
  rows = []
  for pert in perturbations_:
    figs = figures_under(pert, candidates, w, stack, prices, system)
    values = [score(f) for f in figs]
    rank = _ranking(values, objective, capex(figs), tolerance)
    rows.append(
      {
        **pert,
        'best': names[rank[0]] if rank else None,
        'proposal_stays_best': bool(rank) and rank[0] == 0,
        'proposal_value': values[0],
        'best_value': values[rank[0]] if rank else None,
        'ranking': [names[i] for i in rank],
      }
    )
  stays = sum(r['proposal_stays_best'] for r in rows)
  out = {
    'method': METHOD,
    'candidates': [
      {
        'name': c.name,
        'kind': c.kind,
        'objective_value': v,
        'throughput_samples_per_s': c.figures['throughput_samples_per_s'],
        'capex_usd': c.figures['capex_usd'],
      }
      for c, v in zip(candidates, nominal, strict=True)
    ],
    'nominal_best': names[order[0]] if order else None,
    'perturbations': rows,
    'proposal_stays_best': int(stays),
    'perturbation_count': len(rows),
    'share': stays / len(rows) if rows else None,
    'maximize': gradient.maximized(objective),
  }
  out['worst_skew'] = worst_skew(out)
  out['sentence'] = sentence(out)
  return out


def sentence(rob: dict) -> str:
  """One sentence: the share of perturbations under which the proposal
  stays best, and the winner under the first few where it does not."""
  kinds = [c['kind'] for c in rob['candidates']]
  others = (
    f'{kinds.count("found")} other designs the search found and '
    f'{kinds.count("preset")} presets within the limits'
  )
  n = rob['perturbation_count']
  if not n:
    return f'no perturbation applies (candidates: the proposal, {others})'
  head, verb = '', 'stays'
  if rob['nominal_best'] != 'proposal':
    head = (
      f'at the nominal numbers the best candidate is {rob["nominal_best"]}, '
      'not the proposal; '
    )
    verb = 'is'
  text = (
    f'{head}the proposal {verb} best against {others} under '
    f'{rob["proposal_stays_best"]} of {n} perturbations '
    f'({100 * rob["share"]:.0f}%)'
  )
  flips = [r for r in rob['perturbations'] if not r['proposal_stays_best']]
  for r in flips[:NAMED_FLIPS]:
    if r['best'] is None:
      text += f'; under {r["name"]} no candidate is within the limits'
    else:
      text += f'; under {r["name"]} the best is {r["best"]}'
  if len(flips) > NAMED_FLIPS:
    text += f'; {len(flips) - NAMED_FLIPS} more in result.json robustness'
  worst = rob.get('worst_skew')
  if worst:
    text += (
      f'; its worst popularity_skew of {", ".join(map(_g, SKEW_VALUES))} is '
      f'{worst["skew"]:g}: {100 * worst["change"]:+.0f}% of its objective'
    )
  return text


def _g(x: float) -> str:
  return f'{x:g}'


def found_designs(problem, res, score, limit: int = FOUND_DESIGNS):
  """Candidates from the search: up to `limit` distinct buildable designs
  it evaluated (`search.Result.top_index`), best first, feasible and
  within the limits (`score` not None), each of another shape or CPU than
  the proposal (its best) and than each other: variants that differ only
  in DDR or NICs are left out, so the candidates differ in kind. Each is
  named by its shape ('2x(2S+8 H100)'), with its CPU where the proposal
  or another of them has the same shape."""
  space = problem.space
  w, stack = problem.workload, problem.stack

  def kind(idx):
    d = ds.describe_index(space, idx)
    return shared.design_name(d), d['cpu']

  seen = [kind(res.best_index)]
  found = []
  for idx, pz, ok in zip(
    res.top_index, res.top_plan_z, res.top_feasible, strict=True
  ):
    if len(found) == limit:
      break
    if not ok or kind(idx) in seen:
      continue
    p, plan = gradient.buildable(problem, idx, pz)
    fig = report.design_figures(p, w, plan, stack, problem.system)
    if score(fig) is not None:
      seen.append(kind(idx))
      found.append((p, plan, fig))
  shapes = [name for name, _ in seen]
  out = []
  for (name, cpu), (p, plan, fig) in zip(seen[1:], found, strict=True):
    if shapes.count(name) > 1:
      name += f' {_short(cpu)}'
    out.append(Candidate(name, 'found', p, plan, fig))
  return out
