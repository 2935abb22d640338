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

from codesign.core.errors import InputError
from codesign.model import cost_model, planner, report
from codesign.spec import hardware
from codesign.spec import plan as plan_lib
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.studies import shared, sweeps

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
    sharding: `auto` (the `plan.make` rule) or one of `plan.SHARDINGS`,
      for every table.
    rounds: rounds of 32-fold multisection in log bandwidth (>= 1).
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
    if self.sharding != 'auto' and self.sharding not in plan_lib.SHARDINGS:
      raise InputError(
        f'--sharding must be auto or one of {", ".join(plan_lib.SHARDINGS)},'
        f' got {self.sharding!r}'
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
    needed NIC bandwidth per accelerator and its status, summary lines),
    plus `EXTRA_KEYS` (kept out of result.json): `why_infeasible`, per
    node count None or the overflowing tier in words. metrics: one dict per
    node count, as in metrics.jsonl.

  Raises:
    InputError: a CPU-trainer platform (no accelerators to share NICs).
  """
  progress = progress or (lambda line: None)
  request = _request(settings)  # inputs loaded, an accelerator platform
  rows, why, single = _per_node_count(request, progress)
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
  """(rows, why, single): result.json's `per_node_count`, per node count
  None or why it is infeasible, and the first node count's throughput
  (the reference of the efficiencies)."""
  settings = request.settings
  rows, why, single = [], [], None
  for n in settings.nodes:
    progress(f'{n} nodes: auto plan, own NIC, needed NIC bandwidth')
    p, w = sweeps.with_nodes(
      request.p0, request.w0, n, weak=settings.scaling == 'weak'
    )
    plan = planner.make(w, p, request.stack, sharding=settings.sharding)
    own = sweeps.nic_sweep(p, w, request.stack, plan, [request.own_bw])
    own = {k: v[0] for k, v in own.items()}
    if single is None:
      single = float(own['throughput'])
    need = sweeps.required_nic_bandwidth(
      p,
      w,
      request.stack,
      plan,
      single,
      settings.target,
      request.lo,
      request.hi,
      settings.rounds,
    )
    row = _row(request, n, w, plan, own, need, single)
    rows.append({**row, 'capex_breakdown': report.capex_breakdown(p)})
    why.append(None if own['feasible'] else _why_infeasible(own))
  return rows, why, single


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
    'hbm_fraction': float(np.mean(plan.hbm_fraction)),
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
    f'{"efficiency":>10s} {"step ms":>9s} {"needed NIC Gb/s/accel":>26s}  '
    f'{"bottleneck (% of step)":30s} feasible',
  ]
  for i, r in enumerate(rows):
    step = step_time_s(r)
    share = r['breakdown_s'][r['bottleneck']] / step
    feasible = 'yes' if r['feasible'] else f'NO: {why[i] or "see memory"}'
    lines.append(
      f'{r["nodes"]:>5d} {r["global_batch"]:>12,d} '
      f'{float(r["throughput_samples_per_s"]):>13,.0f} '
      f'{r["efficiency"]:>10.0%} {step * 1e3:>9.3f} '
      f'{_needed_text(r, i == 0):>26s}  '
      f'{r["bottleneck"] + f" ({share:.0%})":30s} {feasible}'
    )
  lines.append(shared.OVERLAP_NOTE)
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
