"""Time to train as a cluster grows: the efficiency's reference, the
samples to the target at each batch, the goodput, and what stops it.

Used by `studies.scale_out` (no I/O, no printing but `lines`):
- `reference_index`: the efficiency of a node count is its throughput
  per node over the reference's; the reference is the smallest node
  count whose plan holds every table in HBM, so that a node that spills
  its tables to DDR does not make more nodes look faster than linear:
  holding them is reported apart as the capacity effect
  (`efficiency_reference`).
- `rows`: per node count the global batch, the batch per accelerator
  against the range the stack's published cases measured
  (`calibration.coverage.batch_range`), the samples to the accuracy
  target at that batch (`model.convergence`: MLPerf's reference points,
  extrapolation marked; a fixed count of samples for a workload without
  a curve), the goodput (`model.whole_system.goodput_of`) and the time to
  train, samples / (throughput x goodput).
- `verdict`: where the time to train stops falling: the node count of
  its minimum, whether it turns up after it, and the batch against the
  curve's knee (past it each doubling of the batch nearly doubles the
  samples, so more nodes under weak scaling buy little or nothing).
"""

import dataclasses

import numpy as np

from codesign.calibration import coverage
from codesign.model import convergence, whole_system
from codesign.spec import whole_system as ws

# A plan holds every table in HBM when its mean HBM share is this close
# to 1.
HOLDS = 1.0 - 1e-6
# The time to train "turns up" when a larger count takes this much
# longer than the best; it has "stopped falling" when a doubling of the
# nodes shortens it by less than this share.
TURN = 0.01
FLAT = 0.10


def reference_index(rows: list[dict]) -> int:
  """Index of the smallest node count whose plan holds every table in
  HBM (and fits), or 0 where none does or the first does."""
  for i, r in enumerate(rows):
    if r['feasible'] and r['hbm_fraction'] >= HOLDS:
      return i
  return 0


def efficiency_reference(rows: list[dict], ref: int) -> dict:
  """result.json's `efficiency_reference`: the reference's nodes and its
  throughput per node, why it is the reference, and the capacity effect
  (its throughput per node over the first count's) where it is not the
  first."""
  r0, rr = rows[0], rows[ref]
  per_node = rr['throughput_samples_per_s'] / rr['nodes']
  out = {
    'nodes': rr['nodes'],
    'per_node_samples_per_s': per_node,
    'capacity_effect': None,
    'why': f'{rr["nodes"]:,} node(s): the first count',
  }
  if ref > 0:
    effect = per_node / (r0['throughput_samples_per_s'] / r0['nodes'])
    out['capacity_effect'] = effect
    head = (
      f'{rr["nodes"]:,} nodes, the smallest count whose HBM holds every '
      f'table: {r0["nodes"]:,} node(s) keep '
      f'{100 * (1 - r0["hbm_fraction"]):.0f}% of the table bytes in DDR'
    )
    out['why'] = head + (
      f', and holding them in HBM is worth x{effect:,.2f} per node (the '
      'capacity effect, apart from the scaling); the counts below the '
      'reference spill: their efficiencies mix the two'
      if effect >= 1.0
      else f'; yet the reference runs x{effect:,.2f} the per-node rate of '
      f'{r0["nodes"]:,} node(s): its communication, not the HBM, decides '
      'there, and the efficiencies of the counts below it mix the two'
    )
  return out


def rows(result_rows, w, p0, stack_name: str, system, samples: float):
  """Per node count: global batch, batch per accelerator (and whether
  the stack's published cases measured it), samples to the target,
  goodput and time to train (`system`: the failures and checkpoint
  settings, `whole_system.WholeSystem`; `samples`: the samples to train
  for a workload without a curve)."""
  measured = coverage.batch_range(stack_name)
  accels = float(p0.accelerators_per_node)
  out = []
  for r in result_rows:
    batch = float(r['global_batch'])
    per_accel = batch / (r['nodes'] * accels)
    pt = convergence.point(w.name, batch)
    n = pt['samples_to_target'] if pt else samples
    p = dataclasses.replace(p0, nodes=float(r['nodes']))
    good = whole_system.goodput_of(p, w, system)
    out.append(
      {
        'nodes': r['nodes'],
        'global_batch': batch,
        'batch_per_accelerator': per_accel,
        'outside_measured_batch': measured is not None
        and not measured['lo'] <= per_accel <= measured['hi'],
        'samples_to_target': n,
        'extrapolated': bool(pt and pt['extrapolated']),
        'past_knee': bool(pt and pt['past_knee']),
        'goodput': good['goodput'],
        'time_to_train_s': n
        / (float(r['throughput_samples_per_s']) * good['goodput']),
      }
    )
  return out


def verdict(times: list[dict], workload: str) -> dict:
  """Where the time to train stops falling (`rows`): the best count, the
  count after which it turns up (None where it does not), the first
  count whose doubling gains less than `FLAT`, the knee and a
  sentence."""
  t = np.array([x['time_to_train_s'] for x in times])
  best = int(np.argmin(t))
  c = convergence.curve(workload)
  up = next(
    (
      times[i]['nodes']
      for i in range(best + 1, len(t))
      if t[i] > t[best] * (1 + TURN)
    ),
    None,
  )
  flat = next(
    (
      times[i]['nodes']
      for i in range(1, len(t))
      if t[i] > t[i - 1] * (1 - FLAT)
    ),
    None,
  )
  out = {
    'best_nodes': times[best]['nodes'],
    'best_time_to_train_s': float(t[best]),
    'turns_up_after_nodes': times[best]['nodes'] if up is not None else None,
    'flat_from_nodes': flat,
    'knee_batch': c.b_noise if c else None,
  }
  out['sentence'] = _sentence(out, times, c)
  return out


def _sentence(v: dict, times: list[dict], c) -> str:
  """The verdict in words."""
  best = next(x for x in times if x['nodes'] == v['best_nodes'])
  head = (
    f'Time to train is shortest at {v["best_nodes"]:,} nodes '
    f'({v["best_time_to_train_s"] / 60:,.1f} min, global batch '
    f'{best["global_batch"]:,.0f})'
  )
  if c is None:
    return head + ' (a fixed count of samples: the workload has no curve).'
  knee = next((x['nodes'] for x in times if x['past_knee']), None)
  knee_text = (
    f"; the global batch passes the curve's knee ({c.b_noise:,.0f}) at "
    f'{knee:,} nodes, past which each doubling of the batch nearly '
    'doubles the samples to the target'
    if knee is not None
    else f"; the batch stays below the curve's knee ({c.b_noise:,.0f})"
  )
  if v['turns_up_after_nodes'] is not None:
    what = ': it turns up past ' + _growth(best, times[-1])
  elif v['flat_from_nodes'] is not None:
    flat = next(x for x in times if x['nodes'] == v['flat_from_nodes'])
    what = (
      f': from {v["flat_from_nodes"]:,} nodes a doubling shortens it by '
      f'less than {FLAT:.0%}; from ' + _growth(flat, times[-1])
    )
  else:
    what = ': each doubling still shortens it'
  extra = ''
  if any(x['extrapolated'] for x in times):
    lo, hi = c.batches[0], c.batches[-1]
    extra = (
      f' The curve is EXTRAPOLATED beyond the reference batches '
      f'{lo:,.0f}-{hi:,.0f}.'
    )
  return head + what + knee_text + '.' + extra


def _growth(a: dict, b: dict) -> str:
  """From row `a` to row `b`: how the samples to the target and the
  throughput times the goodput grow, and which outgrows the other."""
  samples = b['samples_to_target'] / a['samples_to_target']
  rate = (b['samples_to_target'] / b['time_to_train_s']) / (
    a['samples_to_target'] / a['time_to_train_s']
  )
  who = (
    'the samples to the target grow faster than the throughput'
    if samples > rate
    else 'the throughput still grows faster than the samples'
  )
  return (
    f'{a["nodes"]:,} nodes: to {b["nodes"]:,} nodes the samples to the '
    f'target grow x{samples:,.2f} and the throughput times the goodput '
    f'x{rate:,.2f} (goodput {a["goodput"]:.3f} to {b["goodput"]:.3f}): '
    f'{who}'
  )


def lines(result: dict) -> list[str]:
  """The efficiency's reference, the time to train per node count and
  the verdict, as printed (a scale_out result with `time_to_train`)."""
  ref = result.get('efficiency_reference')
  out = []
  if ref is not None:
    out.append(f'efficiency reference: {ref["why"]}')
  times = result.get('time_to_train')
  if not times:
    return out
  out.append(
    f'{"nodes":>5s} {"global batch":>12s} {"batch/accel":>11s} '
    f'{"samples to target":>17s} {"goodput":>8s} {"time to train":>13s}'
  )
  for x in times['rows']:
    flags = []
    if x['outside_measured_batch']:
      flags.append("batch/accel outside the stack's measured range")
    if x['extrapolated']:
      flags.append('curve extrapolated')
    out.append(
      f'{x["nodes"]:>5,d} {x["global_batch"]:>12,.0f} '
      f'{x["batch_per_accelerator"]:>11,.0f} '
      f'{x["samples_to_target"]:>17,.4g} {x["goodput"]:>8.4f} '
      f'{x["time_to_train_s"] / 60:>10,.1f} min'
      + (f'  ({"; ".join(flags)})' if flags else '')
    )
  measured = times.get('measured_batch_per_accelerator')
  if measured:
    out.append(
      f'measured batch per accelerator of the stack: '
      f'{measured["lo"]:,.0f}-{measured["hi"]:,.0f} (cases '
      f'{", ".join(measured["cases"])})'
    )
  out.append(times['verdict']['sentence'])
  return out


def section(result_rows, w, p0, stack_name, system, samples) -> dict:
  """result.json's `time_to_train`: `rows`, the stack's measured batch
  per accelerator, the failures setting and the `verdict`."""
  times = rows(result_rows, w, p0, stack_name, system, samples)
  return {
    'rows': times,
    'with_failures': system.with_failures,
    'checkpoint': system.checkpoint,
    'measured_batch_per_accelerator': coverage.batch_range(stack_name),
    'verdict': verdict(times, w.name),
  }


def system_of(with_failures: str, checkpoint: str) -> ws.WholeSystem:
  """The `WholeSystem` of scale_out's settings (data local)."""
  return ws.from_settings(with_failures=with_failures, checkpoint=checkpoint)
