"""How much NIC bandwidth keeps scale-out efficient, and where time goes.

The library part of `experiments.scale_out`, with no file I/O and no
printing. For each node count the platform gets that many nodes (weak
scaling: the batch per node of the workload on the given platform stays;
strong: the global batch stays) and the auto plan for that size. Scaling
efficiency is throughput / (nodes x single-node throughput). The NIC
bandwidth per accelerator needed to keep efficiency at or above the target
is found by multisection in log bandwidth over one batched evaluation per
round (NICs per node as in the platform; their line rate varies). The
breakdown of the step at the platform's own NIC bandwidth shows where time
goes as nodes grow.

Units: NIC bandwidth in Gb/s (1e9 bit/s) per accelerator at the boundary
(bytes/s per NIC inside), times in seconds, throughput in samples/s,
efficiency as a fraction (1.0 = linear scaling).
"""

import dataclasses
from collections.abc import Callable

import numpy as np

from codesign.calibration import public_cases
from codesign.core.errors import InputError
from codesign.model import cost_model, planner, report
from codesign.spec import hardware, stack_presets
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.studies import shared, sweeps, training_time

# Keys of `run`'s result that are not part of result.json (kept out so that
# result.json stays as it was before they existed); `table` uses them.
EXTRA_KEYS = ('why_infeasible',)
# A component is drawn and tabled if it reaches this share of the summed
# components at some node count.
SHOWN_SHARE = 0.005


@dataclasses.dataclass(frozen=True)
class Settings:
  """What to scale (the flags of `experiments.scale_out`).

  A bad value raises `InputError` naming the setting as its flag
  (`--nodes`), since each field is the flag of the same name.

  Attributes:
    workload: a `Workload`, or a preset name / JSON file.
    platform: an accelerator `Platform` (its node count is replaced by
      each of `nodes`), or a preset name / JSON file.
    stack: a `Stack`, or a preset name / stack JSON file.
    nodes: node counts, strictly increasing from 1 (the efficiency
      reference), at most 1024.
    scaling: `weak` (keep the batch per node of workload on platform) or
      `strong` (keep the global batch).
    target: scaling efficiency to keep, in (0, 1].
    min_nic_gbit_per_s: lowest per-NIC line rate searched, Gb/s.
    max_nic_gbit_per_s: highest per-NIC line rate searched, Gb/s (both
      within the hardware bounds, 8 to 8000 Gb/s).
    sharding: `auto` (the `plan.make` rule), `hybrid` (HugeCTR's hybrid
      embedding, for a stack that runs it: `terms.hybrid`) or one of
      `plan.SHARDINGS`,
      for every table.
    rounds: rounds of 32-fold multisection in log bandwidth (>= 1).
    with_failures: `auto` (above 64 accelerators), `true` or `false`:
      the time to train counts the goodput (`training_time`).
    checkpoint: `full` or `incremental` (Check-N-Run).
    samples: samples to train, for a workload without a samples-to-target
      curve (`model.convergence`).
  """

  workload: str | wl.Workload = 'zion_scale'
  platform: str | Platform = 'zionex'
  stack: str | stack_lib.Stack = 'torchrec'
  nodes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
  scaling: str = 'weak'
  target: float = 0.8
  min_nic_gbit_per_s: float = 10.0
  max_nic_gbit_per_s: float = 8000.0
  sharding: str = 'auto'
  rounds: int = 3
  with_failures: str = 'auto'
  checkpoint: str = 'full'
  samples: float = 1e9

  def __post_init__(self):
    counts = list(self.nodes)
    if not counts or counts[0] != 1:
      raise InputError('--nodes must start at 1 (the efficiency reference)')
    if any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
      raise InputError('--nodes must be strictly increasing')
    if counts[-1] > 1024:
      raise InputError(f'--nodes may not exceed 1024, got {counts[-1]}')
    if self.scaling not in ('weak', 'strong'):
      raise InputError(
        f'--scaling must be weak or strong, got {self.scaling!r}'
      )
    if self.sharding not in ('auto', 'hybrid', *plan_lib.SHARDINGS):
      raise InputError(
        '--sharding must be auto, hybrid or one of '
        f'{", ".join(plan_lib.SHARDINGS)}, got {self.sharding!r}'
      )
    if not 0 < self.target <= 1:
      raise InputError(f'--target must lie in (0, 1], got {self.target}')
    lo_b, hi_b = (x * 8 / 1e9 for x in hardware.BOUNDS['nic.bandwidth'])
    lo, hi = self.min_nic_gbit_per_s, self.max_nic_gbit_per_s
    if not lo_b <= lo < hi <= hi_b:
      raise InputError(
        f'--min_nic_gbit_per_s and --max_nic_gbit_per_s need {lo_b:g} <= '
        f'min < max <= {hi_b:g}, got {lo:g} and {hi:g}'
      )
    if self.rounds < 1:
      raise InputError(f'--rounds must be at least 1, got {self.rounds}')


def _summary(rows, settings, own_gbps, per_accel) -> list[str]:
  summary = []
  target = settings.target
  for r in rows[1:]:
    need = r['required_nic_gbit_per_s_per_accelerator']
    if r['required_status'] == 'unreachable':
      text = (
        f'{r["nodes"]} nodes: {target:.0%} efficiency is out of reach '
        f'(at most {r["efficiency_at_max_bandwidth"]:.0%} at '
        f'{settings.max_nic_gbit_per_s * per_accel:,.0f} Gb/s per '
        'accelerator)'
      )
    elif r['required_status'] == 'below_range':
      text = (
        f'{r["nodes"]} nodes: any NIC in the range keeps '
        f'{target:.0%} efficiency'
      )
    else:
      text = (
        f'{r["nodes"]} nodes: needs {need:,.1f} Gb/s per accelerator for '
        f'{target:.0%} efficiency'
      )
    summary.append(
      text + f'; with its own {own_gbps:,.0f} Gb/s: efficiency '
      f'{r["efficiency"]:.0%}, bottleneck {r["bottleneck"]}.'
    )
  return summary


def run(
  settings: Settings, progress: Callable[[str], None] | None = None
) -> tuple[dict, list[dict]]:
  """Scales the platform over the node counts.

  Args:
    settings: what to scale.
    progress: called with one line at the start of each node count (its
      plan and its evaluations may compile for several seconds).

  Returns:
    (result, metrics). result: the dict `experiments.scale_out` writes to
    result.json (workload, platform, scaling, sharding, target_efficiency,
    own_nic_gbit_per_s_per_accelerator, single_node_throughput_samples_per_s,
    per_node_count: one dict per node count with breakdown_s (seconds per
    component, before overlap) and breakdown_share (of their sum), the
    needed NIC bandwidth per accelerator and its status, summary lines,
    measured_cases: the public cases that match the inputs
    (`measured_cases`), scaling_stopped_by: the term that stops the
    scaling (`scaling_stop`)), plus `EXTRA_KEYS` (kept out of
    result.json): `why_infeasible`, per node count None or the
    overflowing tier in words. metrics: one dict per node count, as in
    metrics.jsonl.

  Raises:
    InputError: a CPU-trainer platform (no accelerators to share NICs).
  """
  progress = progress or (lambda line: None)
  request = _request(settings)  # inputs loaded, an accelerator platform
  rows, why, single, ref = _per_node_count(request, progress)
  own_gbps = request.own_bw / _TO_BPS * request.per_accel
  result = {
    'workload': request.w0.name,
    'platform': request.p0.name,
    'scaling': settings.scaling,
    'sharding': settings.sharding,
    'target_efficiency': settings.target,
    'own_nic_gbit_per_s_per_accelerator': own_gbps,
    'single_node_throughput_samples_per_s': single,
    'per_node_count': rows,
    'summary': _summary(rows, settings, own_gbps, request.per_accel),
    'measured_cases': measured_cases(request.w0, request.p0, request.stack),
    'scaling_stopped_by': scaling_stop(rows, settings.target, ref),
    'efficiency_reference': training_time.efficiency_reference(rows, ref),
    'time_to_train': training_time.section(
      rows,
      request.w0,
      request.p0,
      request.stack.name,
      training_time.system_of(settings.with_failures, settings.checkpoint),
      settings.samples,
    ),
    'why_infeasible': why,
  }
  return result, _metrics(rows)


# Gb/s to bytes/s.
_TO_BPS = 1e9 / 8.0


@dataclasses.dataclass(frozen=True)
class _Request:
  """The settings read and checked: what every phase of `run` starts from.

  Attributes:
    settings: the settings.
    w0, p0, stack: the workload, the platform (one node) and the stack.
    lo, hi: the NIC bandwidth range searched, bytes/s per NIC.
    per_accel: NICs per accelerator (NIC line rate -> per-accelerator
      share).
    own_bw: the platform's own NIC bandwidth, bytes/s per NIC.
  """

  settings: Settings
  w0: wl.Workload
  p0: Platform
  stack: stack_lib.Stack
  lo: float
  hi: float
  per_accel: float
  own_bw: float


def _request(settings: Settings) -> _Request:
  """The `_Request` of `settings`; raises `InputError` for a CPU-trainer
  platform (no accelerators to share NICs)."""
  w0 = shared.load_workload(settings.workload)
  p0 = shared.platform(settings.platform)
  stack = shared.load_stack(settings.stack)
  if p0.trainer == 'cpu':
    raise InputError(
      f'platform {p0.name} is a CPU trainer; NIC bandwidth per accelerator '
      'needs an accelerator platform'
    )
  nic_count = float(p0.nic.count)
  accels = float(p0.accelerators_per_node)
  return _Request(
    settings,
    w0,
    p0,
    stack,
    settings.min_nic_gbit_per_s * _TO_BPS,
    settings.max_nic_gbit_per_s * _TO_BPS,
    nic_count / accels,
    float(p0.nic.bandwidth),
  )


def _per_node_count(request: _Request, progress):
  """(rows, why, single, ref): result.json's `per_node_count`, per node
  count None or why it is infeasible, the first node count's throughput,
  and the index of the efficiencies' reference
  (`training_time.reference_index`: the smallest count whose HBM holds
  every table), whose throughput per node the efficiencies and the
  needed NIC bandwidth are judged against."""
  settings = request.settings
  sized = []
  for n in settings.nodes:
    progress(f'{n} nodes: auto plan, own NIC')
    p, w = sweeps.with_nodes(
      request.p0, request.w0, n, weak=settings.scaling == 'weak'
    )
    plan = planner.make(w, p, request.stack, sharding=settings.sharding)
    own = sweeps.nic_sweep(p, w, request.stack, plan, [request.own_bw])
    sized.append((n, p, w, plan, {k: v[0] for k, v in own.items()}))
  ref = training_time.reference_index(
    [
      {'feasible': bool(o['feasible']), 'hbm_fraction': _mean(pl)}
      for _, _, _, pl, o in sized
    ]
  )
  per_node = float(sized[ref][4]['throughput']) / sized[ref][0]
  rows, why = [], []
  for n, p, w, plan, own in sized:
    progress(f'{n} nodes: needed NIC bandwidth')
    need = sweeps.required_nic_bandwidth(
      p,
      w,
      request.stack,
      plan,
      per_node,
      settings.target,
      request.lo,
      request.hi,
      settings.rounds,
    )
    row = _row(request, n, w, plan, own, need, per_node)
    rows.append({**row, 'capex_breakdown': report.capex_breakdown(p)})
    why.append(None if own['feasible'] else _why_infeasible(own))
  return rows, why, float(sized[0][4]['throughput']), ref


def _mean(plan) -> float:
  return float(np.mean(plan.hbm_fraction))


def _row(request: _Request, n, w, plan, own, need, single) -> dict:
  """The per_node_count row of `n` nodes: the figures at the own NIC
  `own`, the step components and their shares, the needed NIC `need`."""
  per_accel, bw = request.per_accel, need['bandwidth']
  breakdown = dict(zip(cost_model.COMPONENTS, own['breakdown'], strict=True))
  total = float(np.sum(own['breakdown']))
  return {
    'nodes': n,
    'global_batch': w.global_batch,
    'feasible': bool(own['feasible']),
    'hbm_fraction': _mean(plan),
    'throughput_samples_per_s': own['throughput'],
    'efficiency': float(own['throughput']) / (n * single),
    'bottleneck': cost_model.COMPONENTS[int(own['bottleneck_index'])],
    'breakdown_s': breakdown,
    'breakdown_share': {k: v / total for k, v in breakdown.items()},
    'required_status': need['status'],
    'required_nic_gbit_per_s_per_accelerator': None
    if bw is None
    else bw / _TO_BPS * per_accel,
    'required_bracket_gbit_per_s_per_accelerator': [
      None if x is None else x / _TO_BPS * per_accel for x in need['bracket']
    ],
    'efficiency_at_max_bandwidth': need['efficiency_at_hi'],
  }


def _why_infeasible(own: dict) -> str:
  """The overflowing memory tier of figures `own`, in words."""
  return shared.why_infeasible(
    own['hbm_required'],
    own['hbm_available'],
    own['ddr_required'],
    own['ddr_available'],
  )


def _metrics(rows: list[dict]) -> list[dict]:
  """metrics.jsonl: one dict per node count."""
  return [
    {
      'step': i,
      'nodes': r['nodes'],
      'efficiency': r['efficiency'],
      'throughput_samples_per_s': r['throughput_samples_per_s'],
      'required_nic_gbit_per_s_per_accelerator': r[
        'required_nic_gbit_per_s_per_accelerator'
      ],
      **{f'share/{k}': v for k, v in r['breakdown_share'].items()},
    }
    for i, r in enumerate(rows)
  ]


# ---- measured public cases and the term that stops the scaling -------------


def matching_cases(
  workload: wl.Workload, platform: Platform, stack: stack_lib.Stack
) -> list[public_cases.CaseKey]:
  """The public cases (`calibration_cases.json`) measured on what is
  scaled: a case matches when it ran the platform preset of the same name
  (`public_cases.CASES`; so `dgx_h100`, not every H100 system), every
  accelerator of its nodes, the workload preset of the same name and a
  release of the same stack (`stack_presets.family`). Its batch,
  precision, release and plan stay the case's own."""
  family = stack_presets.family(stack.name)
  return [
    k
    for k in public_cases.case_keys()
    if k.platform == platform.name
    and k.devices == round(float(platform.accelerators_per_node))
    and k.workload == workload.name
    and stack_presets.family(k.stack) == family
  ]


def measured_cases(
  workload: wl.Workload, platform: Platform, stack: stack_lib.Stack
) -> list[dict]:
  """result.json's `measured_cases`: per matching (case, precision)
  (`matching_cases`) its nodes, batch, the measured samples/s with the
  file's source, and the model's samples/s for that case as
  `public_cases.predict` makes it with the shipped fit
  (`public_cases.shipped_values`, which has seen every case: an
  in-sample judgement; `experiments.calibrate` judges out of sample) at
  the case's own batch, plan and platform (not the study's overrides),
  and at the sourced priors (`model_samples_per_s_at_priors`: no fitted
  number, so no case seen). Nothing is fitted to them. Efficiencies are
  against the matching one-node case of the same precision, measured and
  modelled alike (None without one)."""
  keys = {k.case_id: k for k in matching_cases(workload, platform, stack)}
  if not keys:
    return []
  values = public_cases.shipped_values()
  points = []
  for c in public_cases.load(ids=tuple(keys)):
    r = public_cases.predict(c, values)
    nodes = keys[c.case_id].nodes
    batch = c.workload.global_batch
    measured = batch / c.measured
    model = float(r.throughput)
    points.append(
      {
        'case': c.name,
        'case_id': c.case_id,
        'source': keys[c.case_id].src,
        'hardware': c.hardware,
        'nodes': nodes,
        'global_batch': batch,
        'batch_per_accelerator': batch / (nodes * keys[c.case_id].devices),
        'dense_precision': c.workload.dense_precision,
        'measured_samples_per_s': measured,
        'model_samples_per_s': model,
        'model_error': model / measured - 1.0,
        'model_samples_per_s_at_priors': float(
          public_cases.predict(c).throughput
        ),
        'model_bottleneck': cost_model.COMPONENTS[int(r.bottleneck_index)],
      }
    )
  return _with_efficiency(points)


def _with_efficiency(points: list[dict]) -> list[dict]:
  """`points` with the reference case and both efficiencies added."""
  out = []
  for p in points:
    ref = next(
      (
        q
        for q in points
        if q['nodes'] == 1 and q['dense_precision'] == p['dense_precision']
      ),
      None,
    )
    eff = {'reference_case': None, 'measured_efficiency': None}
    eff['model_efficiency'] = None
    if ref is not None:
      eff = {
        'reference_case': ref['case'],
        'measured_efficiency': p['measured_samples_per_s']
        / (p['nodes'] * ref['measured_samples_per_s']),
        'model_efficiency': p['model_samples_per_s']
        / (p['nodes'] * ref['model_samples_per_s']),
      }
    out.append({**p, **eff})
  return out


def scaling_stop(rows: list[dict], target: float, ref: int = 0) -> dict:
  """result.json's `scaling_stopped_by`: at the first node count after
  the efficiencies' reference (`ref`, an index of `rows`) whose
  efficiency falls below `target`, the step component that grew most
  beyond what linear scaling leaves it (its time at the first node count
  times the change in batch per node: unchanged under weak scaling),
  with its share of the step and its time at both counts. `component`
  and `nodes` are None when every node count keeps the target."""
  first = rows[ref]
  below = next((r for r in rows[ref + 1 :] if r['efficiency'] < target), None)
  if below is None:
    return {
      'nodes': None,
      'component': None,
      'sentence': f'Efficiency stays at or above {target:.0%} up to '
      f'{rows[-1]["nodes"]:,} nodes: nothing stops the scaling here.',
    }
  ideal = (below['global_batch'] / below['nodes']) / (
    first['global_batch'] / first['nodes']
  )
  t0 = {k: float(v) for k, v in first['breakdown_s'].items()}
  t1 = {k: float(v) for k, v in below['breakdown_s'].items()}
  excess = {k: t1[k] - t0[k] * ideal for k in t1}
  k = max(excess, key=excess.get)
  step = step_time_s(below)
  out = {
    'nodes': below['nodes'],
    'efficiency': below['efficiency'],
    'target_efficiency': target,
    'component': k,
    'share_of_step': t1[k] / step,
    'step_s': step,
    'from_nodes': first['nodes'],
    'from_s': t0[k],
    'to_s': t1[k],
    'linear_scaling_s': t0[k] * ideal,
    'growth': t1[k] / t0[k] if t0[k] > 0 else None,
    'nic_restores_target': below['required_status'] != 'unreachable',
    # The next components that grew beyond linear scaling, largest first.
    'also_grew_s': {
      j: excess[j]
      for j in sorted(excess, key=excess.get, reverse=True)[1:3]
      if excess[j] > 0
    },
  }
  out['beyond'] = _beyond(below, rows[-1])
  return {**out, 'sentence': _stop_sentence(out)}


def _beyond(stop: dict, last: dict) -> dict | None:
  """From the row where the scaling stopped to the last row: the step
  component that grew most beyond linear scaling (None when the last row
  is the stopping one)."""
  if last['nodes'] == stop['nodes']:
    return None
  ideal = (last['global_batch'] / last['nodes']) / (
    stop['global_batch'] / stop['nodes']
  )
  t0 = {k: float(v) for k, v in stop['breakdown_s'].items()}
  t1 = {k: float(v) for k, v in last['breakdown_s'].items()}
  k = max(t1, key=lambda j: t1[j] - t0[j] * ideal)
  return {
    'from_nodes': stop['nodes'],
    'to_nodes': last['nodes'],
    'component': k,
    'from_s': t0[k],
    'to_s': t1[k],
    'efficiency': last['efficiency'],
    'share_of_step': t1[k] / step_time_s(last),
  }


def _stop_sentence(s: dict) -> str:
  """The verdict of `scaling_stop`'s dict `s`, in words."""
  growth = f', x{s["growth"]:,.1f}' if s['growth'] is not None else ''
  linear = ''
  if abs(s['linear_scaling_s'] - s['from_s']) > 1e-12:
    linear = f'; linear scaling leaves {s["linear_scaling_s"] * 1e3:,.3f} ms'
  nic = (
    'a faster NIC restores it'
    if s['nic_restores_target']
    else 'no NIC in the searched range restores it'
  )
  also = ', '.join(
    f'{k} +{v * 1e3:,.3f} ms' for k, v in s['also_grew_s'].items()
  )
  also = f' Next: {also}.' if also else ''
  b = s['beyond']
  if b is not None:
    also += (
      f' From {b["from_nodes"]:,} to {b["to_nodes"]:,} nodes the most '
      f'beyond linear scaling: {b["component"]}, {b["from_s"] * 1e3:,.3f}'
      f' to {b["to_s"] * 1e3:,.3f} ms ({b["share_of_step"]:.0%} of the '
      f'step; efficiency {b["efficiency"]:.0%} at {b["to_nodes"]:,}).'
    )
  return (
    f'Scaling stops at {s["nodes"]:,} nodes (efficiency '
    f'{s["efficiency"]:.0%} < {s["target_efficiency"]:.0%}; {nic}), '
    f'stopped by {s["component"]}: {s["to_s"] * 1e3:,.3f} ms against '
    f'{s["from_s"] * 1e3:,.3f} ms at {s["from_nodes"]:,} node(s){growth}'
    f'{linear}; {s["share_of_step"]:.0%} of the '
    f'{s["step_s"] * 1e3:,.3f} ms step (components before overlap).' + also
  )


def measured_lines(result: dict) -> list[str]:
  """The measured public cases beside the model, as printed."""
  points = result.get('measured_cases') or []
  if not points:
    return [
      'no public case measured this platform, workload and stack '
      '(codesign/data/calibration_cases.json)'
    ]
  out = [
    'public cases measured on this platform, workload and stack, at their '
    'own batch (model: the shipped fit, data/stack_fit.json, which has '
    'seen them; at priors: no fitted number; nothing is fitted here)',
    f'{"case":8s} {"nodes":>5s} {"batch/accel":>11s} {"measured/s":>13s} '
    f'{"model/s":>13s} {"error":>7s} {"at priors/s":>13s} '
    f'{"meas. eff":>9s} {"model eff":>9s}  source',
  ]
  for p in points:
    eff = [
      '-' if p[k] is None else f'{p[k]:.0%}'
      for k in ('measured_efficiency', 'model_efficiency')
    ]
    out.append(
      f'{p["case"]:8s} {p["nodes"]:>5,d} {p["batch_per_accelerator"]:>11,.0f}'
      f' {p["measured_samples_per_s"]:>13,.0f} '
      f'{p["model_samples_per_s"]:>13,.0f} {p["model_error"]:>+7.1%} '
      f'{p.get("model_samples_per_s_at_priors", np.nan):>13,.0f} '
      f'{eff[0]:>9s} {eff[1]:>9s}  {p["source"]}'
    )
  return out


def shown_components(result: dict) -> list[str]:
  """The components that reach `SHOWN_SHARE` of the summed step
  components at some node count, in `cost_model.COMPONENTS` order."""
  rows = result['per_node_count']
  return [
    k
    for k in cost_model.COMPONENTS
    if max(r['breakdown_share'][k] for r in rows) > SHOWN_SHARE
  ]


def step_time_s(row: dict) -> float:
  """Seconds per step of a per_node_count row (global batch / throughput)."""
  return row['global_batch'] / float(row['throughput_samples_per_s'])


def _needed_text(r: dict, first: bool) -> str:
  if first:
    return 'reference'
  need = r['required_nic_gbit_per_s_per_accelerator']
  if r['required_status'] == 'unreachable':
    return f'out of reach ({r["efficiency_at_max_bandwidth"]:.0%} at max)'
  if r['required_status'] == 'below_range':
    return f'<= {need:,.1f}'
  return f'{need:,.1f}'


def _count_lines(result: dict, rows: list, why: list) -> list[str]:
  """One line per node count: throughput, efficiency (against the
  reference, whose needed NIC reads `reference`), step, needed NIC,
  bottleneck and feasibility."""
  ref = (result.get('efficiency_reference') or {}).get(
    'nodes', rows[0]['nodes']
  )
  out = []
  for i, r in enumerate(rows):
    step = step_time_s(r)
    share = r['breakdown_s'][r['bottleneck']] / step
    feasible = 'yes' if r['feasible'] else f'NO: {why[i] or "see memory"}'
    thr = float(r['throughput_samples_per_s'])
    train = report.time_to_train_text(thr, report.DEFAULT_TRAIN_SAMPLES)
    out.append(
      f'{r["nodes"]:>5d} {r["global_batch"]:>12,d} {thr:>13,.0f} '
      f'{train:>9s} {r["efficiency"]:>10.0%} {step * 1e3:>9.3f} '
      f'{_needed_text(r, r["nodes"] == ref):>26s}  '
      f'{r["bottleneck"] + f" ({share:.0%})":30s} {feasible}'
    )
  return out


def table(result: dict) -> str:
  """Per node count: throughput, efficiency, needed NIC bandwidth, the
  bottleneck's share of the step and feasibility (with why); then the
  step components in ms and the summary, as plain text."""
  rows = result['per_node_count']
  why = result.get('why_infeasible') or [None] * len(rows)
  lines = [
    f'{result["workload"]} on {result["platform"]}, {result["scaling"]} '
    f'scaling, {result["sharding"]} sharding; own NIC '
    f'{result["own_nic_gbit_per_s_per_accelerator"]:,.0f} Gb/s per '
    f'accelerator; target efficiency {result["target_efficiency"]:.0%}',
    f'{"nodes":>5s} {"global batch":>12s} {"samples/s":>13s} '
    f'{"to train":>9s} {"efficiency":>10s} {"step ms":>9s} '
    f'{"needed NIC Gb/s/accel":>26s}  {"bottleneck (% of step)":30s} '
    'feasible',
  ]
  samples = report.DEFAULT_TRAIN_SAMPLES
  lines.extend(_count_lines(result, rows, why))
  lines.append(shared.OVERLAP_NOTE)
  lines.append(shared.time_to_train_note(samples, flag=False))
  lines.append('')
  lines.append('step components at the own NIC bandwidth, ms (before overlap)')
  lines.append(
    f'{"component":24s}' + ''.join(f'{r["nodes"]:>10d}' for r in rows)
  )
  for k in shown_components(result):
    lines.append(
      f'{k:24s}'
      + ''.join(f'{float(r["breakdown_s"][k]) * 1e3:>10.3f}' for r in rows)
    )
  lines.append(
    f'{"sum of components":24s}'
    + ''.join(
      f'{sum(float(v) for v in r["breakdown_s"].values()) * 1e3:>10.3f}'
      for r in rows
    )
  )
  lines.append(
    f'{"step time":24s}'
    + ''.join(f'{step_time_s(r) * 1e3:>10.3f}' for r in rows)
  )
  lines.append('')
  lines.extend(network_lines(rows))
  lines.append('')
  lines.extend(result['summary'])
  stop = result.get('scaling_stopped_by')
  if stop is not None:  # a result written before the verdict existed
    lines.append(stop['sentence'])
  extra = training_time.lines(result)
  if extra:
    lines.append('')
    lines.extend(extra)
  lines.append('')
  lines.extend(measured_lines(result))
  return '\n'.join(lines)


def network_lines(rows: list[dict]) -> list[str]:
  """Per node count the bill of the nodes and of the network apart
  (`report.capex_breakdown`): its tiers, switches per tier and links."""
  out = [
    f'{"nodes":>5s} {"capex $":>15s} {"network $":>13s} {"share":>6s}  '
    'switches per tier (links)'
  ]
  for r in rows:
    b = r.get('capex_breakdown')
    if b is None:  # a result written before the network was billed
      continue
    n = b['network']
    tiers = ' + '.join(f'{c:,} {t}' for t, c in n['switches_by_tier'].items())
    out.append(
      f'{r["nodes"]:>5d} {b["total_usd"]:>15,.0f} {n["usd"]:>13,.0f} '
      f'{n["usd"] / b["total_usd"]:>6.1%}  {tiers or "none"}'
      f' ({n["links"]:,} links)'
    )
  return out


def csv_table(result: dict) -> tuple[list[str], list[list]]:
  """The scale-out as CSV: one row per node count; each step component in
  seconds, before overlap."""
  header = [
    'nodes',
    'global_batch_samples',
    'feasible',
    'hbm_fraction',
    'throughput_samples_per_s',
    'step_time_s',
    'efficiency',
    'bottleneck',
    'required_status',
    'required_nic_gbit_per_s_per_accelerator',
    'required_lo_gbit_per_s_per_accelerator',
    'required_hi_gbit_per_s_per_accelerator',
    'efficiency_at_max_bandwidth',
    *(f'{k}_s' for k in cost_model.COMPONENTS),
  ]
  rows = []
  for r in result['per_node_count']:
    lo, hi = r['required_bracket_gbit_per_s_per_accelerator']
    row = [
      r['nodes'],
      r['global_batch'],
      r['feasible'],
      r['hbm_fraction'],
      r['throughput_samples_per_s'],
      step_time_s(r),
      r['efficiency'],
      r['bottleneck'],
      r['required_status'],
      r['required_nic_gbit_per_s_per_accelerator'],
      lo,
      hi,
      r['efficiency_at_max_bandwidth'],
      *(r['breakdown_s'][k] for k in cost_model.COMPONENTS),
    ]
    rows.append([shared.csv_value(x) for x in row])
  return header, rows
