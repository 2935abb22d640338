"""Which platform trains a DLRM best as its embedding tables grow?

The library part of `experiments.compare_platforms`, with no file I/O and
no printing. Every table of a base workload is scaled by one factor so
that the embedding bytes (tables plus optimizer state) sweep log-spaced
sizes; each platform is evaluated with the auto plan (`planner.make`: the
hottest rows in the HBM the busiest rank has, the rest spilled to host
DDR). `run` returns, per platform, throughput, perf per dollar and perf per
watt at each size, where it starts spilling and where it becomes
infeasible (brackets narrowed by re-evaluating the model), which platform
leads each metric at each size with the crossovers, and whether the
GPU-only platforms lead while the tables fit in HBM and the large-memory
platforms beyond.

Units: sizes in GB (1e9 B) at the boundary, bytes inside; throughput in
samples/s, perf per dollar in samples/s per USD of capex, perf per watt in
samples/s per W at the wall.
"""

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from codesign.boundary import inputs
from codesign.core.errors import InputError
from codesign.model import cost_model, report
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.studies import shared, sweeps

# (key in `sweeps.size_sweep`, key in the result, label with its unit).
METRICS = (
  ('throughput', 'throughput_samples_per_s', 'throughput (samples/s)'),
  ('perf_per_usd', 'perf_per_usd', 'samples/s per USD of capex'),
  ('perf_per_watt', 'perf_per_watt', 'samples/s per W'),
)
# Column names of the CSV for each metric (units in the names).
_CSV_METRICS = (
  ('throughput_samples_per_s', 'throughput_samples_per_s'),
  ('perf_per_usd', 'samples_per_s_per_usd'),
  ('perf_per_watt', 'samples_per_s_per_w'),
)
# Keys of `run`'s result that are not part of result.json (kept out so that
# result.json stays as it was before they existed); `table` uses them.
EXTRA_KEYS = ('why_infeasible',)


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to sweep (the flags of `experiments.compare_platforms`).

  A bad value raises `InputError` naming the setting as its flag
  (`--points`), since each field is the flag of the same name.

  Attributes:
    workload: a `Workload` (its tables are scaled to each size), or a
      preset name / JSON file.
    platforms: name -> `Platform` (the names key the result), or a tuple of
      preset names / platform JSON files, loaded by name.
    gpu_platforms: which of `platforms` count as GPU-only servers (small
      host DDR) in the story; may be empty.
    large_memory_platforms: which of `platforms` count as large-memory
      Zion-like platforms in the story; may be empty.
    min_size_gb: smallest embedding size of the sweep, GB (1e9 B).
    max_size_gb: largest embedding size of the sweep, GB (1e9 B).
    points: log-spaced sizes in the sweep, ends included (>= 2).
    refine_steps: rounds of 32-fold multisection that locate spill onsets
      and capacity limits between grid points (0: grid points only).
    stack: a `Stack`, or a preset name / stack JSON file: it trains the
      accelerator platforms.
    cpu_stack: the same, for the CPU-trainer platforms (as propose's
      --cpu_stack): each platform is trained by the stack evaluate gives
      its trainer.
  """

  workload: str | wl.Workload = 'zion_scale'
  platforms: Mapping[str, Platform] | tuple[str, ...] = (
    'cpu_2s',
    'big_basin',
    'zion',
    'zionex',
    'dgx_a100_80gb',
    'dgx_h100',
  )
  gpu_platforms: tuple[str, ...] = ('big_basin', 'dgx_a100_80gb', 'dgx_h100')
  large_memory_platforms: tuple[str, ...] = ('zion', 'zionex')
  min_size_gb: float = 10.0
  max_size_gb: float = 10000.0
  points: int = 16
  refine_steps: int = 0
  stack: str | stack_lib.Stack = 'torchrec'
  cpu_stack: str | stack_lib.Stack = 'ipex_cpu'

  def __post_init__(self):
    if self.points < 2:
      raise InputError(f'--points must be at least 2, got {self.points}')
    if not 0 < self.min_size_gb < self.max_size_gb:
      raise InputError(
        '--min_size_gb and --max_size_gb need 0 < min < max, got '
        f'{self.min_size_gb} and {self.max_size_gb}'
      )
    if self.refine_steps < 0:
      raise InputError(
        f'--refine_steps must not be negative, got {self.refine_steps}'
      )
    names = list(self.platforms)
    if not names:
      raise InputError('--platforms needs at least one platform')
    if len(set(names)) != len(names):
      raise InputError('--platforms lists a platform twice')
    if not isinstance(self.platforms, Mapping):
      for name in names:  # an unknown name is named before the subsets
        inputs.platform_json(name)
    for flag in ('gpu_platforms', 'large_memory_platforms'):
      extra = [n for n in getattr(self, flag) if n not in names]
      if extra:
        raise InputError(
          f'--{flag} names {extra[0]!r}, which is not in --platforms'
        )


def _load_platforms(platforms) -> dict[str, Platform]:
  if isinstance(platforms, Mapping):
    return {n: shared.platform(p) for n, p in platforms.items()}
  return {n: shared.platform(n) for n in platforms}


def _thresholds(platforms, base, stacks, sizes, data, steps, progress):
  """Where each platform starts spilling and becomes infeasible.

  Returns:
    platform -> {'spill_onset': b, 'infeasible_from': b}, each b None (it
    never happens in the sweep) or a bracket [lo, hi] in bytes: the
    largest size known not to, the smallest known to (lo is None if it
    happens at the first size). Brackets start as grid intervals and are
    narrowed by `steps` rounds of `sweeps.refine`.
  """
  out = {}
  for name, p in platforms.items():
    d = data[name]
    found = {}
    for key, mask in (
      ('spill_onset', d['spilling']),
      ('infeasible_from', ~d['feasible']),
    ):
      j = sweeps.first_index(mask)
      if j is None:
        found[key] = None
        continue
      if j == 0:
        found[key] = [None, float(sizes[0])]
        continue

      def pred(s, p=p, key=key, stack=stacks[name]):
        r = sweeps.size_sweep(p, base, stack, s)
        return r['spilling'] if key == 'spill_onset' else ~r['feasible']

      if steps:
        progress(f'refining the {key.replace("_", " ")} of {name}')
      found[key] = list(sweeps.refine(pred, sizes[j - 1], sizes[j], steps))
    out[name] = found
  return out


def _leaders_and_crossovers(names, sizes, data, thresholds):
  """Leader of each metric at each size, and where the leader changes.

  A change caused by a capacity limit (the old leader becomes infeasible
  or the new one feasible inside the grid interval) is placed at that
  limit, which `_thresholds` located by re-evaluating the model. Any other
  change is placed where the two platforms' log-metric curves cross under
  log-linear interpolation between the grid points (approximate; the
  `between_gb` interval is exact).
  """
  feas = np.stack([data[n]['feasible'] for n in names])
  leaders, crossings = {}, {}
  for key, out_key, _ in METRICS:
    vals = np.stack([data[n][key] for n in names])
    lead = sweeps.leaders(vals, feas)
    leaders[out_key] = [None if i is None else names[i] for i in lead]
    found = []
    for c in sweeps.crossovers(lead, names, sizes):
      lo, hi = c['between']
      j = int(np.searchsorted(sizes, hi))
      lim = c['from'] and thresholds[c['from']]['infeasible_from']
      at, cause = None, 'curves cross (interpolated)'
      if lim and lim[0] is not None and lo <= lim[0] and lim[1] <= hi:
        at, cause = lim[1], f'{c["from"]} becomes infeasible'
      elif c['from'] is None or c['to'] is None:
        at, cause = hi, 'feasibility changes (grid point)'
      else:
        # log(metric_to / metric_from) is negative at lo, >= 0 at hi.
        ya = np.log(data[c['to']][key][j - 1] / data[c['from']][key][j - 1])
        yb = np.log(data[c['to']][key][j] / data[c['from']][key][j])
        t = float(np.clip(ya / (ya - yb), 0.0, 1.0)) if ya != yb else 1.0
        at = float(np.exp(np.log(lo) + t * (np.log(hi) - np.log(lo))))
      found.append(
        {
          'from': c['from'],
          'to': c['to'],
          'at_gb': at / 1e9,
          'between_gb': [lo / 1e9, hi / 1e9],
          'cause': cause,
        }
      )
    crossings[out_key] = found
  return leaders, crossings


def _story(data, leaders, gpu, big):
  """Does the sweep show GPU-only first, then large-memory platforms?"""
  if not gpu or not big:
    return {'checked': False, 'reason': 'no GPU-only or no large-memory set'}
  # Sizes at which every GPU-only platform still holds all tables in HBM,
  # and sizes at which none does (each spills or is infeasible).
  in_hbm = np.all(
    [(data[n]['hbm_fraction'] >= 1.0) & data[n]['feasible'] for n in gpu],
    axis=0,
  )
  beyond = np.all(
    [(data[n]['hbm_fraction'] < 1.0) | ~data[n]['feasible'] for n in gpu],
    axis=0,
  )
  out = {'checked': True}
  for _, key, _ in METRICS:
    lead = leaders[key]
    a = [lead[j] in gpu for j in np.flatnonzero(in_hbm)]
    b = [lead[j] in big for j in np.flatnonzero(beyond)]
    out[key] = {
      'points_all_gpu_in_hbm': len(a),
      'gpu_leads_there': int(sum(a)),
      'points_all_gpu_spill_or_fail': len(b),
      'large_memory_leads_there': int(sum(b)),
      'leaders_beyond': sorted({str(lead[j]) for j in np.flatnonzero(beyond)}),
    }
  drop = {}
  for n in gpu:
    d = data[n]
    ok = d['feasible'] & (d['hbm_fraction'] >= 1.0)
    sp = d['feasible'] & (d['hbm_fraction'] < 1.0)
    if ok.any() and sp.any():
      drop[n] = float(d['throughput'][sp].min() / d['throughput'][ok].max())
  out['gpu_worst_spilled_over_best_in_hbm_throughput'] = drop
  return out


def _bracket_text(b, what: str) -> str:
  if b is None:
    return f'never {what} in the sweep'
  lo, hi = b
  if lo is None:
    return f'{what} from the smallest size'
  if hi / lo < 1.02:
    return f'{what} from about {hi / 1e9:,.0f} GB'
  return f'{what} between {lo / 1e9:,.0f} and {hi / 1e9:,.0f} GB'


def _summary(names, thresholds, crossings, story) -> list[str]:
  lines = []
  for n in names:
    t = thresholds[n]
    lines.append(
      f'{n}: {_bracket_text(t["spill_onset"], "spills")}; '
      f'{_bracket_text(t["infeasible_from"], "infeasible")}.'
    )
  for _, key, label in METRICS:
    cs = crossings[key]
    if not cs:
      lines.append(f'{label}: no crossover in the sweep.')
    for c in cs:
      lines.append(
        f'{label}: leader changes from {c["from"]} to {c["to"]} at '
        f'{c["at_gb"]:,.0f} GB ({c["cause"]}).'
      )
  if story.get('checked'):
    for _, key, label in METRICS:
      s = story[key]
      lines.append(
        f'{label}: a GPU-only platform leads at {s["gpu_leads_there"]} of '
        f'{s["points_all_gpu_in_hbm"]} sizes where all GPU-only platforms '
        f'hold the tables in HBM; a large-memory platform leads at '
        f'{s["large_memory_leads_there"]} of '
        f'{s["points_all_gpu_spill_or_fail"]} sizes where every GPU-only '
        f'platform spills or fails (leaders there: '
        f'{", ".join(s["leaders_beyond"]) or "none"}).'
      )
  return lines


def _gb(bracket):
  if bracket is None:
    return None
  return [None if b is None else b / 1e9 for b in bracket]


def _why_infeasible(d: dict) -> list:
  """Per size point: None where feasible, else which tier overflows."""
  return [
    None
    if ok
    else shared.why_infeasible(
      d['hbm_required'][j],
      d['hbm_available'][j],
      d['ddr_required'][j],
      d['ddr_available'][j],
    )
    for j, ok in enumerate(d['feasible'])
  ]


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Sweeps the embedding size on every platform and compares them.

  Args:
    settings: what to sweep.
    progress: called with one line at the start of each platform's sweep
      and of each refinement (each may compile for several seconds).

  Returns:
    (result, metrics). result: the dict `experiments.compare_platforms`
    writes to result.json (workload, base_embedding_gb, sizes_gb of shape
    (points,), platforms: name -> per-size arrays of shape (points,) and
    brackets in GB, leaders, crossovers, story, summary lines), plus
    `EXTRA_KEYS` (kept out of result.json): `why_infeasible`, name ->
    per size None or the overflowing tier in words. metrics: one dict per
    size (step, size_gb, `<platform>/<metric>`), as in metrics.jsonl.
  """
  progress = progress or (lambda line: None)
  base = shared.load_workload(settings.workload)
  by_trainer = {
    'accelerator': shared.load_stack(settings.stack),
    'cpu': shared.load_stack(settings.cpu_stack),
  }
  platforms = _load_platforms(settings.platforms)
  stacks = {n: by_trainer[p.trainer] for n, p in platforms.items()}
  sizes = sweeps.log_space(
    settings.min_size_gb * 1e9, settings.max_size_gb * 1e9, settings.points
  )
  data = {}
  for name, p in platforms.items():
    progress(f'sweeping {len(sizes)} sizes on {name}')
    data[name] = sweeps.size_sweep(p, base, stacks[name], sizes)
  names = list(platforms)
  thresholds = _thresholds(
    platforms, base, stacks, sizes, data, settings.refine_steps, progress
  )
  leaders, crossings = _leaders_and_crossovers(names, sizes, data, thresholds)
  story = _story(
    data,
    leaders,
    list(settings.gpu_platforms),
    list(settings.large_memory_platforms),
  )
  summary = _summary(names, thresholds, crossings, story)

  result = {
    'workload': base.name,
    'base_embedding_gb': wl.embedding_bytes(base) / 1e9,
    'sizes_gb': sizes / 1e9,
    'platforms': {n: _platform_row(data[n], thresholds[n]) for n in names},
    'leaders': leaders,
    'crossovers': crossings,
    'story': story,
    'summary': summary,
    'stacks': {n: stacks[n].name for n in names},
    'why_infeasible': {n: _why_infeasible(data[n]) for n in names},
  }
  return result, _metrics(names, sizes, data)


def _platform_row(d: dict, thresholds: dict) -> dict:
  """result.json's entry of one platform: its sweep `d` per size, capex,
  power and the spill and capacity brackets in GB."""
  return {
    'throughput_samples_per_s': d['throughput'],
    'perf_per_usd': d['perf_per_usd'],
    'perf_per_watt': d['perf_per_watt'],
    'step_time_s': d['step_time'],
    'feasible': d['feasible'],
    'spilling': d['spilling'],
    'hbm_fraction': d['hbm_fraction'],
    'bottleneck': [cost_model.COMPONENTS[i] for i in d['bottleneck_index']],
    'capex_usd': float(d['capex'][0]),
    'power_w': float(d['power'][0]),
    'hbm_required_bytes': d['hbm_required'],
    'ddr_required_bytes': d['ddr_required'],
    'spill_onset_bracket_gb': _gb(thresholds['spill_onset']),
    'infeasible_bracket_gb': _gb(thresholds['infeasible_from']),
  }


def _metrics(names: list[str], sizes, data: dict) -> list[dict]:
  """metrics.jsonl: one dict per size (step, size_gb, `<platform>/<metric>`)."""
  metrics = []
  for j, size in enumerate(sizes):
    row = {'step': j, 'size_gb': size / 1e9}
    for n in names:
      for key, out_key, _ in METRICS:
        row[f'{n}/{out_key}'] = data[n][key][j]
      row[f'{n}/feasible'] = data[n]['feasible'][j]
      row[f'{n}/hbm_fraction'] = data[n]['hbm_fraction'][j]
    metrics.append(row)
  return metrics


def table(result: dict) -> str:
  """Throughput of every platform at every size (spilling and infeasible
  points marked, with why), then the summary, as plain text."""
  names = list(result['platforms'])
  why = result.get('why_infeasible', {})
  width = {n: max(14, len(n) + 2) for n in names}
  stacks = result.get('stacks', {})
  lines = [
    f'{result["workload"]}: throughput (samples/s) with the tables scaled, '
    "auto plan per platform (as evaluate), each trained by its trainer's "
    'stack (' + ', '.join(f'{n} {s}' for n, s in stacks.items()) + ')',
    f'{"tables GB":>12s}'
    + ''.join(f'{n:>{width[n]}s}' for n in names)
    + f'  {"to train":>9s}  leader',
  ]
  samples = report.DEFAULT_TRAIN_SAMPLES
  for j, size in enumerate(result['sizes_gb']):
    cells = []
    for n in names:
      d = result['platforms'][n]
      mark = '' if d['feasible'][j] else ' x'
      mark = mark or (' ~' if d['spilling'][j] else '  ')
      cells.append(
        f'{d["throughput_samples_per_s"][j]:>{width[n] - 2},.0f}{mark}'
      )
    lead = result['leaders']['throughput_samples_per_s'][j]
    ttt = '-'
    if lead:
      thr = result['platforms'][lead]['throughput_samples_per_s'][j]
      ttt = report.time_to_train_text(thr, samples)
    lines.append(
      f'{size:>12,.1f}'
      + ''.join(cells)
      + f'  {ttt:>9s}  {lead or "none feasible"}'
    )
  lines.append('~: spilling to host DDR; x: infeasible (value for reference)')
  lines.append(
    shared.time_to_train_note(samples, flag=False) + ', at the leader'
  )
  for n in names:
    reasons = why.get(n) or []
    j = next((k for k, r in enumerate(reasons) if r), None)
    if j is not None:
      lines.append(f'x {n} from {result["sizes_gb"][j]:,.1f} GB: {reasons[j]}')
  lines.append('')
  lines.extend(result['summary'])
  return '\n'.join(lines)


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """The sweep as CSV: one row per size; per platform its metrics,
  feasible and spilling; the leader of each metric (empty: none
  feasible)."""
  names = list(result['platforms'])
  header = ['embedding_size_gb']
  for n in names:
    header += [f'{n}/{col}' for _, col in _CSV_METRICS]
    header += [f'{n}/step_time_s', f'{n}/hbm_fraction']
    header += [f'{n}/spilling', f'{n}/feasible']
  header += [f'leader/{col}' for _, col in _CSV_METRICS]
  rows = []
  for j, size in enumerate(result['sizes_gb']):
    row = [size]
    for n in names:
      d = result['platforms'][n]
      row += [d[key][j] for key, _ in _CSV_METRICS]
      row += [d['step_time_s'][j], d['hbm_fraction'][j]]
      row += [d['spilling'][j], d['feasible'][j]]
    row += [result['leaders'][key][j] for key, _ in _CSV_METRICS]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows
