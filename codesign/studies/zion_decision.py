"""Would the search have proposed Zion? The paper's decision, recomputed.

The library part of `experiments.zion_decision`, with no file I/O and no
printing. The Zion paper (Naumov et al., arXiv 2003.09518) answered the
question of 2019: embedding tables had outgrown the HBM of an 8-GPU node,
so Facebook built Zion, 8 CPU sockets with large DDR for the tables plus 8
accelerators. The proposal search (`codesign.studies.proposal.run`) is
asked twice: era '2019', catalog parts available by 2019 (V100s; Skylake
and Cascade Lake Xeons, EPYC Rome) on a Zion-era workload (`zion_2019`:
1 TB of fp32 tables, 3.9x the HBM of an 8-V100 node); era 'today', every
part on a workload of today's size (`neo_12t`: 12e12 parameters, 24 TB
in fp16). Each proposal comes with its throughput elasticities
(`codesign.studies.sweeps.elasticities`: why it is what it is) and beside the
presets of its era on the same workload (auto plan; `era_presets`: Zion,
Big Basin and DGX-2 in 2019, ZionEX, DGX H100 and B200, GH200 and GB200
NVL72 today; each era searches every system class its parts allow,
today's superchips and NVLink domains among them). The verdict: is the
2019 proposal Zion-like, an accelerator node with at least `min_sockets`
CPU sockets whose DDR holds more of the tables than its HBM? A NO comes
with the evidence (Zion against the proposal); each era's break-even
line says what would flip it (`break_even`).

The default question, an architect's of 2019: the most samples/s per USD
of capex (a fleet buys many of whatever is chosen) for a job whose
cluster stays within a budget of the order of a Zion cluster ($1M: 4 Zion
nodes at the model's $253k), today of a ZionEX pod ($4M; the model prices
16 ZionEX nodes at $3.5M).

Software: Zion was built for DDR-resident tables looked up by its CPU
sockets; TorchRec's UVM caching (the default stack's; TorchRec was
released in 2022) reaches DDR only over PCIe. With `cpu_lookups_2019` the
2019 era runs the stack with UVM caching off, so that the searched plan
chooses how much DDR traffic the sockets serve
(`plan.cpu_lookup_fraction`); today runs the stack as it is.

Units: USD, W, samples/s, GB (1e9 B) where a key says so; elasticities
are % per %.
"""

import dataclasses
import time
from collections.abc import Callable

import numpy as np

from codesign.core import interrupts
from codesign.core.errors import InputError
from codesign.model import report
from codesign.search import part_tables
from codesign.spec import catalog, schema
from codesign.spec import platform_presets as presets_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.studies import proposal, robustness, sensitivity, shared, sweeps

ERAS = ('2019', 'today')
SKEWS = robustness.SKEW_VALUES
YEAR_2019 = 2019
# Presets compared by default: the systems of 2019 and before beside
# the 2019 proposal, today's systems (superchips and NVLink domains
# among them) beside today's.
PRESETS = (
  'zion',
  'big_basin',
  'dgx2_v100',
  'zionex',
  'dgx_h100',
  'dgx_b200',
  'gh200',
  'gb200_nvl72',
)


def era_presets(names, era: str) -> tuple[str, ...]:
  """The presets of `names` that belong to `era`: built by 2019 for the
  2019 era, later for today's (`platform_presets.YEARS`)."""
  out = []
  for name in names:
    year = presets_lib.YEARS.get(name, YEAR_2019 + 1)
    if (year <= YEAR_2019) == (era == '2019'):
      out.append(name)
  return tuple(out)


OBJECTIVES = ('throughput', 'throughput_per_usd', 'throughput_per_watt')
# Keys of `run`'s result that are not part of result.json: wall seconds,
# and the resolved inputs (config.json's workload and stack sections).
EXTRA_KEYS = ('timing', 'inputs')
GB = 1e9
# The figures of a platform kept in `proposals` and `comparisons`.
FIGURES = ('throughput_samples_per_s', 'capex_usd', 'power_w')
FIGURES += ('perf_per_usd', 'objective_value', 'bottleneck')


@dataclasses.dataclass(frozen=True)
class Settings:
  """The two searches and the verdict (the flags of
  `experiments.zion_decision`, same names).

  Attributes:
    workload_2019, workload_today: each era's workload: a `Workload`, a
      preset name or a workload JSON file.
    objective: one of `OBJECTIVES` (see `proposal.Settings`).
    budget_2019_usd, budget_today_usd: capex limit of each era's cluster,
      USD (0: none).
    max_nodes: largest number of nodes of either search.
    starts, steps, seed, sharding, trainers, systems: of each search
      (`proposal.Settings`; an era searches the system classes its parts
      allow).
    stack: a `Stack`, a preset name or a stack JSON file, for both eras.
    cpu_lookups_2019: run the 2019 era with the stack's UVM caching off
      (DDR rows looked up by the CPU sockets, as Zion was built for).
    presets: platform presets compared, each in the era of its year
      (`platform_presets.YEARS`: 2019 and before in 2019, later today),
      with the auto plan.
    top_fields: how many of the largest throughput elasticities to report.
    min_sockets: CPU sockets per node from which a node counts as
      Zion-like (4: ZionEX's count; Zion has 8).
  """

  workload_2019: str | wl.Workload = 'zion_2019'
  workload_today: str | wl.Workload = 'neo_12t'
  objective: str = 'throughput_per_usd'
  budget_2019_usd: float = 1e6
  budget_today_usd: float = 4e6
  max_nodes: int = 36
  starts: int = 64
  steps: int = 300
  seed: int = 0
  sharding: str = 'search'
  trainers: tuple[str, ...] = ('accelerator', 'cpu')
  systems: tuple[str, ...] = proposal.Settings.systems
  stack: str | stack_lib.Stack = 'torchrec'
  cpu_lookups_2019: bool = True
  presets: tuple[str, ...] = PRESETS
  top_fields: int = 3
  min_sockets: int = 4

  def __post_init__(self):
    if self.objective not in OBJECTIVES:
      raise InputError(
        f'--objective must be one of {", ".join(OBJECTIVES)}, got '
        f'{self.objective!r}'
      )
    for key in ('budget_2019_usd', 'budget_today_usd'):
      if not getattr(self, key) >= 0:
        raise InputError(f'--{key} must not be negative')
    shared.at_least(self, 1, 'max_nodes', 'starts', 'steps', 'top_fields')
    if not 1 <= self.min_sockets <= 8:
      raise InputError(
        f'--min_sockets must be between 1 and 8, got {self.min_sockets}'
      )


def newest_part_year() -> int:
  """The year of the newest catalog part, NIC line rates included
  (`part_tables.NIC_YEARS`): what 'today' means for parts."""
  raw = catalog.raw()
  parts = (
    int(x['year']) for t in ('accelerators', 'cpus') for x in raw[t].values()
  )
  nics = (part_tables.NIC_YEARS[r] for r in part_tables.nic_rates())
  return max(*parts, *nics)


def era_stack(settings: Settings, era: str) -> stack_lib.Stack:
  """The stack of an era: `settings.stack`, in 2019 without UVM caching
  when `cpu_lookups_2019` (renamed `<name>_cpu_lookups`)."""
  s = shared.load_stack(settings.stack)
  if era == '2019' and settings.cpu_lookups_2019 and s.uvm_caching:
    s = dataclasses.replace(s, name=f'{s.name}_cpu_lookups', uvm_caching=False)
  return s


def hardware_name(pj: dict) -> str:
  """A platform (JSON) in a few characters, with its DDR and NICs:
  '2x(2S 1,024GB+8 H100; 4x400G NIC)'."""
  return shared.design_name(shared.platform_design(pj))


def zion_likeness(pj: dict, fig: dict, min_sockets: int) -> dict:
  """Whether a platform (JSON) with figures `fig` is Zion-like: a node of
  accelerators with at least `min_sockets` CPU sockets whose DDR holds
  more table bytes than its HBM (what its plan puts there, GB per node),
  with the reason of each test."""
  accel = pj['trainer'] == 'accelerator' and pj['accelerators_per_node'] >= 1
  sockets = pj['sockets_per_node']
  mem = fig['memory']
  ddr_gb = mem['ddr']['required_bytes'] / GB
  hbm_gb = (
    mem['hbm']['required_bytes'] * pj['accelerators_per_node'] / GB
    if accel
    else 0.0
  )
  ddr_cap = pj['cpu']['ddr_capacity_gb'] * sockets
  checks = {
    'accelerators': accel,
    'sockets': sockets >= min_sockets,
    'ddr_holds_tables': ddr_gb > hbm_gb,
  }
  reasons = [
    f'{pj["accelerators_per_node"]:g} accelerators per node'
    if accel
    else 'no accelerators (a CPU trainer)',
    f'{sockets:g} CPU sockets per node '
    + ('>=' if checks['sockets'] else '<')
    + f' {min_sockets}',
    f'its DDR holds {ddr_gb:,.0f} GB per node (of {ddr_cap:,.0f} GB), '
    + ('more' if checks['ddr_holds_tables'] else 'no more')
    + f' than its HBM ({hbm_gb:,.0f} GB used)',
  ]
  return {
    'zion_like': all(checks.values()),
    'checks': checks,
    'sockets_per_node': sockets,
    'ddr_per_node_gb': ddr_cap,
    'ddr_used_per_node_gb': ddr_gb,
    'hbm_used_per_node_gb': hbm_gb,
    'reasons': reasons,
  }


def elasticities(pj, plj, w, stack, top: int) -> dict:
  """Throughput and perf/$ elasticities of a proposal (platform and plan
  JSON), the HBM fractions re-derived as the platform moves: the `top`
  largest by throughput (but nodes), and that of sockets per node."""
  p = schema.platform_from_json(pj)
  plan = schema.plan_from_json(plj, w)
  paths, _, e = sweeps.elasticities(p, w, stack, plan, replan=True)

  def row(i):
    return {
      'field': sensitivity.boundary_key(paths[i]),
      'throughput': float(e[0, i]),
      'perf_per_usd': float(e[1, i]),
    }

  # Nodes at a fixed global batch: at one node its elasticity is the
  # first inter-node traffic, not a lever of the design; left out.
  order = [
    i
    for i in np.argsort(-np.abs(e[0]), kind='stable')
    if paths[i] != 'nodes' and e[0, i] != 0
  ]
  return {
    'top': [row(i) for i in order[:top]],
    'sockets_per_node': row(paths.index('sockets_per_node')),
  }


def _era_run(settings, era, w, stack, progress, on_step=None):
  """proposal.run for one era: (its result, history); `on_step` (or
  None) hears its searches' steps with `era` in their metrics."""
  budget = getattr(settings, f'budget_{era}_usd')
  ps = proposal.Settings(
    workload=w,
    objective=settings.objective,
    budget_usd=budget or None,
    max_nodes=settings.max_nodes,
    starts=settings.starts,
    steps=settings.steps,
    seed=settings.seed,
    sharding=settings.sharding,
    trainers=tuple(settings.trainers),
    systems=tuple(settings.systems),
    presets=era_presets(settings.presets, era),
    stack=stack,
    available_by=YEAR_2019 if era == '2019' else None,
    # The Zion paper's question is the trainers': the data on them and no
    # failures counted, as it compared them (the system's reader and
    # storage nodes are today's parts, not 2019's).
    readers='local',
    with_failures='false',
  )

  def era_step(step, m):
    on_step(step, {**m, 'era': era})

  return proposal.run(
    ps,
    progress=lambda line: progress(f'{era}: {line}'),
    on_step=None if on_step is None else era_step,
  )


def _workload_entry(w: wl.Workload) -> dict:
  s = wl.summary(w)
  return {
    'name': w.name,
    'tables': s['tables'],
    'rows': sum(t.rows for t in w.tables),
    'embedding_params': s['embedding_params'],
    'embedding_gb_with_state': s['embedding_bytes_with_state'] / GB,
    'table_precisions': sorted({t.precision for t in w.tables}),
    'dense_precision': w.dense_precision,
    'popularity_skew': w.popularity_skew,
    'global_batch': w.global_batch,
    'source': w.source,
  }


def _compare(era, res, settings) -> list[dict]:
  """The proposal and each preset of one era as comparison rows."""
  prop = res['proposal']
  rows = [('proposal', prop['platform'], prop)]
  for r in res['presets']:
    pj = schema.platform_to_json(presets_lib.get(r['name']))
    rows.append((r['name'], pj, r))
  out = []
  for name, pj, fig in rows:
    out.append(
      {
        'era': era,
        'platform': name,
        'hardware': hardware_name(pj),
        'plan': 'searched' if name == 'proposal' else 'auto',
        **{k: fig[k] for k in FIGURES},
        'within_limits': fig['within_limits'],
        'why_not': proposal.why_not(fig, res['limits']),
        'zion_like': zion_likeness(pj, fig, settings.min_sockets)['zion_like'],
        'vs_proposal_throughput': fig['throughput_samples_per_s']
        / prop['throughput_samples_per_s'],
        'vs_proposal_objective': fig['objective_value']
        / prop['objective_value'],
      }
    )
  return out


def _proposal_entry(era, w, stack, res, settings, elast) -> dict:
  prop, cont = res['proposal'], res['continuous_optimum']
  pj, auto = prop['platform'], prop['with_auto_plan']
  return {
    'era': era,
    'parts_available_by': YEAR_2019 if era == '2019' else newest_part_year(),
    'workload': w.name,
    'stack': stack.name,
    'uvm_caching': stack.uvm_caching,
    'budget_usd': res['limits']['budget_usd'],
    'hardware': hardware_name(pj),
    'platform': pj,
    'plan': prop['plan'],
    **{k: prop[k] for k in FIGURES},
    'with_auto_plan': {
      k: auto[k]
      for k in ('throughput_samples_per_s', 'perf_per_usd', 'bottleneck')
    },
    'zion_like': zion_likeness(pj, prop, settings.min_sockets),
    'elasticities': elast,
    'continuous_optimum': {
      **{k: cont[k] for k in ('feasible', *FIGURES)},
      **cont['relaxed_axes'],
    },
  }


def _zion_evidence(result: dict, p19: dict) -> str:
  """Zion's figures against the 2019 proposal's, in a sentence."""
  for c in result['comparisons']:
    if c['era'] == '2019' and c['platform'] == 'zion':
      why_not = f', {c["why_not"]}' if c['why_not'] else ''
      return (
        f'under the model, on {p19["workload"]} Zion ({c["hardware"]}) '
        f'trains {c["throughput_samples_per_s"]:,.0f} samples/s for '
        f'${c["capex_usd"]:,.0f} ({c["perf_per_usd"]:.3g} samples/s per $, '
        f'bottleneck {c["bottleneck"]}{why_not}); the proposal '
        f'{p19["throughput_samples_per_s"]:,.0f} for ${p19["capex_usd"]:,.0f}'
        f' ({p19["perf_per_usd"]:.3g} per $, bottleneck '
        f'{p19["bottleneck"]}): Zion reaches '
        f"{c['vs_proposal_objective']:.2f}x the proposal's "
        + result['objective']
      )
  return 'Zion was not among the presets compared'


def verdict(result: dict) -> dict:
  """YES/NO: is the 2019 proposal Zion-like; why (its tests, bottleneck,
  elasticities, the relaxed optimum's sockets); whether that agrees with
  the paper, and the evidence under the model (Zion against it)."""
  p19 = result['proposals'][0]
  z, el, cont = p19['zion_like'], p19['elasticities'], p19['continuous_optimum']
  pj, sock = p19['platform'], el['sockets_per_node']
  tops = ', '.join(f'{e["field"]} {e["throughput"]:+.2f}' for e in el['top'])
  why = (
    f'the 2019 proposal is {p19["hardware"]} ({pj["accelerator"]["name"]}, '
    f'{pj["cpu"]["name"]}): ' + '; '.join(z['reasons']) + '. '
    f'Its bottleneck is {p19["bottleneck"]}; its largest throughput '
    f'elasticities: {tops or "none"}; 1% more sockets per node gives '
    f'{sock["throughput"]:+.2f}% throughput and {sock["perf_per_usd"]:+.2f}'
    f'% samples/s per $; the relaxed (unbuildable) optimum has '
    f'{cont["sockets_per_node"]:.2f} sockets per node, CPU mixture '
    + ', '.join(f'{w:.2f} {n}' for n, w in cont['cpu_weights'].items())
  )
  return {
    'question': 'with parts available by 2019 and a Zion-era workload '
    'that exceeds the HBM of an 8-GPU node, is the proposal Zion-like '
    f'(an accelerator node with >= {result["min_sockets"]} CPU sockets '
    'whose DDR holds more of the tables than its HBM)?',
    'answer': 'YES' if z['zion_like'] else 'NO',
    'zion_like': z['zion_like'],
    'checks': z['checks'],
    'why': why,
    'agrees_with_paper': z['zion_like'],
    'paper': 'the Zion paper built 8 CPU sockets with large DDR plus 8 '
    'accelerators per node',
    'evidence': _zion_evidence(result, p19),
  }


def summary(result: dict) -> list[str]:
  """The findings in sentences: each era's proposal, the verdict, and
  whether the model agrees with the paper."""
  out = []
  for p in result['proposals']:
    w = result['workloads'][p['era']]
    out.append(
      f'{p["era"]} (parts by {p["parts_available_by"]}, {p["workload"]}: '
      f'{w["embedding_gb_with_state"] / 1e3:,.1f} TB of tables): the search '
      f'proposes {p["hardware"]} ({p["platform"]["accelerator"]["name"]}, '
      f'{p["platform"]["cpu"]["name"]}), '
      f'{p["throughput_samples_per_s"]:,.0f} samples/s for '
      f'${p["capex_usd"]:,.0f} ({p["perf_per_usd"]:.3g} samples/s per $), '
      f'bottleneck {p["bottleneck"]}; Zion-like: '
      f'{"yes" if p["zion_like"]["zion_like"] else "no"}'
    )
  for p in result['proposals']:
    out.append(f'{p["era"]} {p["break_even"]["sentence"]}')
  v = result['verdict']
  out.append(f'Verdict: {v["answer"]}: {v["why"]}')
  agree = 'agrees with' if v['agrees_with_paper'] else 'disagrees with'
  out.append(f'The model {agree} the paper ({v["paper"]}): {v["evidence"]}')
  return out


def run(
  settings: Settings,
  progress: Callable[[str], None] | None = None,
  on_step: Callable[[int, dict], None] | None = None,
) -> tuple[dict, list[dict]]:
  """Both eras' searches, elasticities, comparisons and the verdict.

  Args:
    settings: the eras' workloads, the objective and budgets, the search.
    progress: called with one line per phase of each era (the search,
      compile included; the evaluations; the elasticities).
    on_step: called as on_step(step, metrics) after every chunk of each
      era's search steps (`proposal.run`'s, with `era` in metrics).

  Returns:
    (result, metrics). result: the dict `experiments.zion_decision`
    writes to result.json: `proposals` (one per era: era,
    parts_available_by, workload, stack, budget_usd, hardware, platform
    as in proposal.json, plan, throughput_samples_per_s, capex_usd,
    power_w, perf_per_usd, objective_value, bottleneck, with_auto_plan,
    zion_like with its tests, elasticities), `comparisons` (the proposal
    and each preset per era), `verdict`, `workloads`, `summary`, plus
    `timing` (wall seconds) and `inputs` (each era's workload and stack
    JSON, for config.json), not in result.json. metrics: the searches'
    history rows, `era` and `era_step` added, `step` counting all rows.

  Raises:
    InputError: bad settings or inputs (before any search), or an era
      whose limits no buildable platform meets (the sentence names it).
  """
  progress = progress or (lambda line: None)
  t_start = time.perf_counter()
  workloads, stacks = _eras_inputs(settings)
  proposals, comparisons, metrics, timing = [], [], [], {}
  # The eras run in two threads: most of an era is XLA compiling its own
  # programs (outside Python's lock), so one era's compiles overlap the
  # other's; each era is deterministic and the rows keep the eras' order.
  eras = interrupts.thread_map(
    lambda era: _era(
      settings, era, workloads[era], stacks[era], progress, on_step
    ),
    ERAS,
    workers=len(ERAS),
  )
  for era, (entry, compared, history, timing[era]) in zip(
    ERAS, eras, strict=True
  ):
    proposals.append(entry)
    comparisons += compared
    for row in history:
      r = dict(row)
      r['era_step'] = r.pop('step')
      metrics.append({'step': len(metrics), 'era': era, **r})
  result = {
    'objective': settings.objective,
    'objective_unit': shared.OBJECTIVE_UNITS[settings.objective],
    'min_sockets': settings.min_sockets,
    'top_fields': settings.top_fields,
    'workloads': {era: _workload_entry(workloads[era]) for era in ERAS},
    'proposals': proposals,
    'comparisons': comparisons,
    'search': _search_section(settings),
  }
  result['verdict'] = verdict(result)
  result['summary'] = summary(result)
  timing['total_wall_s'] = time.perf_counter() - t_start
  result['timing'] = timing
  result['inputs'] = _inputs_json(workloads, stacks)
  return result, metrics


def _eras_inputs(settings: Settings) -> tuple[dict, dict]:
  """(workloads, stacks): each era's workload and stack; raises
  `InputError` for an unknown preset before any search."""
  workloads = {
    era: shared.load_workload(getattr(settings, f'workload_{era}'))
    for era in ERAS
  }
  stacks = {era: era_stack(settings, era) for era in ERAS}
  for name in settings.presets:
    presets_lib.get(name)  # an unknown name fails before the searches
  return workloads, stacks


def _era(settings: Settings, era: str, w, s, progress, on_step=None):
  """(proposal, comparisons, history, timing) of one era: its proposal
  entry with the elasticities, the proposal beside each preset, the
  search's history rows and wall seconds; an era whose limits no
  buildable platform meets raises `InputError` naming it."""
  try:
    res, history = _era_run(settings, era, w, s, progress, on_step)
  except InputError as e:
    raise InputError(f'era {era} ({w.name}): {e}') from None
  progress(f'{era}: elasticities of the proposal (one reverse pass)')
  start = time.perf_counter()
  prop = res['proposal']
  el = elasticities(prop['platform'], prop['plan'], w, s, settings.top_fields)
  timing = {
    **res['timing'],
    'elasticities_wall_s': time.perf_counter() - start,
  }
  proposal = _proposal_entry(era, w, s, res, settings, el)
  compared = _compare(era, res, settings)
  proposal['break_even'] = break_even(res, compared, settings)
  return proposal, compared, history, timing


def break_even(res: dict, compared: list[dict], settings: Settings) -> dict:
  """What would flip an era's answer: the best preset within the limits
  whose Zion-likeness differs from the proposal's (else the best other
  preset), and the rise of the proposal's main part's price (its
  accelerator, or a CPU trainer's CPU) at which that preset's objective
  equals the proposal's (capex objectives; for throughput, the share of
  throughput the preset lacks); and the popularity skews of the
  proposal's robustness check under which another candidate wins.

  Returns:
    dict: `runner_up` (None when no preset is within the limits),
    `objective_ratio` (the runner-up's over the proposal's),
    `part`, `part_price_usd`, `price_rise` (the relative rise; None for
    throughput), `skew_flips` ({skew: winner}), `sentence`.
  """
  prop = compared[0]
  others = [c for c in compared[1:] if c['within_limits']]
  flipped = [c for c in others if c['zion_like'] != prop['zion_like']]
  pool = flipped or others
  runner = max(pool, key=lambda c: c['objective_value'], default=None)
  pj = res['proposal']['platform']
  part, count = _main_part(pj)
  price = part_tables.price_usd(part)
  flips = {
    r['value']: r['best']
    for r in res['robustness']['perturbations']
    if r['kind'] == 'popularity_skew' and not r['proposal_stays_best']
  }
  out = {
    'runner_up': runner['platform'] if runner else None,
    'objective_ratio': runner['vs_proposal_objective'] if runner else None,
    'part': part,
    'part_price_usd': price,
    'price_rise': None,
    'skew_flips': flips,
  }
  if runner and settings.objective == 'throughput_per_usd':
    extra = prop['throughput_samples_per_s'] / runner['objective_value']
    out['price_rise'] = (extra - prop['capex_usd']) / (count * price)
  out['sentence'] = _break_even_sentence(out, settings.objective)
  return out


def _main_part(pj: dict) -> tuple[str, float]:
  """(catalog part, count in the cluster) whose price decides a platform:
  its accelerators, or a CPU trainer's sockets."""
  if pj['trainer'] == 'accelerator':
    return pj['accelerator']['name'], pj['nodes'] * pj['accelerators_per_node']
  return pj['cpu']['name'], pj['nodes'] * pj['sockets_per_node']


def _break_even_sentence(b: dict, objective: str) -> str:
  if b['runner_up'] is None:
    head = 'no preset of the era is within the limits to flip it'
  elif b['price_rise'] is not None:
    rise, price = b['price_rise'], b['part_price_usd']
    verb = 'rises' if rise >= 0 else 'falls'
    head = (
      f"{b['runner_up']} ({b['objective_ratio']:.2f}x the proposal's "
      f'{objective}) wins once the {b["part"]} price {verb} '
      f'{100 * abs(rise):.0f}% (from ${price:,.0f} to '
      f'${price * (1 + rise):,.0f} each)'
    )
  else:
    head = (
      f'{b["runner_up"]} reaches {b["objective_ratio"]:.2f}x the '
      f"proposal's {objective}"
    )
  winners = {}
  for k, v in sorted(b['skew_flips'].items()):
    winners.setdefault(v, []).append(_g(k))
  tail = ''.join(
    f'; {v} wins at popularity_skew {", ".join(ks)}'
    for v, ks in winners.items()
  )
  tail = tail or f'; no popularity_skew of {", ".join(map(_g, SKEWS))} flips it'
  return 'break-even: ' + head + tail


def _g(x: float) -> str:
  return f'{x:g}'


def _search_section(settings: Settings) -> dict:
  """result.json's `search`: the searches' settings."""
  return {
    'starts': settings.starts,
    'steps': settings.steps,
    'seed': settings.seed,
    'sharding': settings.sharding,
    'max_nodes': settings.max_nodes,
    'wall_s': 'in timing.json (kept out so result.json is reproducible)',
  }


def _inputs_json(workloads: dict, stacks: dict) -> dict:
  """Each era's workload and stack JSON (for config.json)."""
  return {
    f'{section}_{era}': to_json(x[era])
    for section, to_json, x in (
      ('workload', schema.workload_to_json, workloads),
      ('stack', schema.stack_to_json, stacks),
    )
    for era in ERAS
  }


def _column(p: dict, w: dict, top: int) -> list[str]:
  """One era's proposal as the cells of its column."""
  pj, z, el = p['platform'], p['zion_like'], p['elasticities']
  cpu, sock, c = pj['cpu'], el['sockets_per_node'], p['continuous_optimum']
  fields = [f'{e["field"]} {e["throughput"]:+.3f}' for e in el['top']]
  return [
    f'{p["era"]}: parts by {p["parts_available_by"]}',
    f'{p["workload"]}: {w["embedding_gb_with_state"] / 1e3:,.2f} TB '
    f'{"/".join(w["table_precisions"])}, skew {w["popularity_skew"]:g}',
    p['stack'],
    f'${p["budget_usd"]:,.0f}' if p['budget_usd'] else 'none',
    p['hardware'],
    f'{pj["accelerators_per_node"]:g} x {pj["accelerator"]["name"]}',
    f'{pj["sockets_per_node"]:g} x {cpu["name"]}',
    f'{cpu["ddr_capacity_gb"]:,.0f} GB/socket, '
    f'{z["ddr_per_node_gb"]:,.0f} GB/node',
    f'{pj["nic"]["count"]:g} x {pj["nic"]["bandwidth_gbit_per_s"]:g} Gb/s',
    f'{p["throughput_samples_per_s"]:,.0f} (auto plan '
    f'{p["with_auto_plan"]["throughput_samples_per_s"]:,.0f})',
    f'{p["capex_usd"]:,.0f}',
    f'{p["perf_per_usd"]:.4g}',
    p['bottleneck'],
    f'{z["ddr_used_per_node_gb"]:,.0f} / {z["hbm_used_per_node_gb"]:,.0f}',
    f'{c["nodes"]:.2f}x({c["sockets_per_node"]:.2f}S+'
    f'{c["accelerators_per_node"]:.2f}), {c["perf_per_usd"]:.4g}/$',
    *(fields + [''] * top)[:top],
    f'{sock["throughput"]:+.3f} (perf/$ {sock["perf_per_usd"]:+.3f})',
    'YES' if z['zion_like'] else 'NO',
  ]


LABELS = (
  'era',
  'workload',
  'stack',
  'capex budget',
  'PROPOSAL',
  '  accelerators/node',
  '  CPU sockets/node',
  '  DDR',
  '  NICs per node',
  'throughput samples/s',
  'capex $',
  'samples/s per $',
  'bottleneck',
  'DDR / HBM used GB/node',
  'relaxed optimum',
)


def _side_by_side(result: dict) -> list[str]:
  """The two proposals, one column per era."""
  top = result['top_fields']
  a, b = (
    _column(p, result['workloads'][p['era']], top) for p in result['proposals']
  )
  labels = [
    *LABELS,
    *(f'elasticity {i + 1}' for i in range(top)),
    'sockets elasticity',
    'Zion-like',
  ]
  return [
    f'{label:24s} {x:44s} {y}' for label, x, y in zip(labels, a, b, strict=True)
  ]


def table(result: dict) -> str:
  """The proposals side by side, the comparison with the presets (the CSV
  table), the verdict with why and the evidence, as plain text."""
  unit = result['objective_unit']
  lines = [
    f'objective: {result["objective"]} ({unit}), each era within its '
    'capex budget',
    *_side_by_side(result),
    '(elasticity: % change of throughput per 1% change of the field; '
    'nodes at a fixed global batch)',
    '',
    f'{"era":6s} {"platform":10s} {"hardware":36s} {"samples/s":>12s} '
    f'{"to train":>9s} {"capex $":>12s} {unit:>12s} {"x prop.":>7s} '
    f'{"ok":>3s} {"Zion-like":>9s}  bottleneck',
  ]
  samples = report.DEFAULT_TRAIN_SAMPLES
  for c in result['comparisons']:
    ok = 'yes' if c['within_limits'] else 'NO'
    reason = f' ({c["why_not"]})' if c['why_not'] else ''
    thr = c['throughput_samples_per_s']
    lines.append(
      f'{c["era"]:6s} {c["platform"]:10s} {c["hardware"]:36s} '
      f'{thr:>12,.0f} {report.time_to_train_text(thr, samples):>9s} '
      f'{c["capex_usd"]:>12,.0f} '
      f'{c["objective_value"]:>12.4g} {c["vs_proposal_objective"]:>7.2f} '
      f'{ok:>3s} {"yes" if c["zion_like"] else "no":>9s}  '
      f'{c["bottleneck"]}{reason}'
    )
  lines.append(
    shared.time_to_train_note(samples, flag=False)
    + '; presets with the auto plan, as evaluate'
  )
  v = result['verdict']
  lines += [
    '',
    *(f'{p["era"]} {p["break_even"]["sentence"]}' for p in result['proposals']),
    f'QUESTION: {v["question"]}',
    f'VERDICT: {v["answer"]}: {v["why"]}.',
    f'The model {"agrees" if v["agrees_with_paper"] else "DISAGREES"} '
    f'with the paper ({v["paper"]}): {v["evidence"]}.',
  ]
  if 'timing' in result:
    t = result['timing']
    lines.append(
      'wall time: '
      + ', '.join(
        f'{era} search {t[era]["search_wall_s"]:.0f} s, evaluations '
        f'{t[era]["total_wall_s"] - t[era]["search_wall_s"]:.0f} s, '
        f'elasticities {t[era]["elasticities_wall_s"]:.0f} s'
        for era in ERAS
      )
      + f'; total {t["total_wall_s"]:.0f} s'
    )
  return '\n'.join(lines)


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """(header, rows): per era the proposal and each preset (the printed
  comparison table), objective in its unit."""
  names = {
    'perf_per_usd': 'samples_per_s_per_usd',
    'objective_value': 'objective_'
    + shared.OBJECTIVE_COLUMN_UNITS[result['objective']],
  }
  keys = ('era', 'platform', 'hardware', 'plan', *FIGURES[:-1])
  keys += ('vs_proposal_objective', 'within_limits', 'why_not', 'zion_like')
  keys += ('bottleneck',)
  header = [names.get(k, k) for k in keys]
  return header, [[c[k] for k in keys] for c in result['comparisons']]
