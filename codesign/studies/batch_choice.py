"""The global batch as a decision of a time-to-train proposal.

A larger batch runs more samples a second on the same hardware but needs
more samples to reach the accuracy target (`model.convergence`). For the
proposed platform, `choose` evaluates the workload at `FACTORS` times
its global batch (each with its auto plan, and the system around the
trainers), and takes the batch of the shortest time to train among
those that fit, stay within the limits and keep the batch per
accelerator inside the range the stack's published cases measured
(`calibration.coverage.batch_range`: a constraint; where no batch is
inside it, the shortest of the others, flagged). Used by
`studies.proposal` for `time_to_train` (no I/O).
"""

import dataclasses
from collections.abc import Callable

from codesign.calibration import coverage
from codesign.model import convergence, planner, report

FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


def _batch(w, ranks: float, factor: float) -> int:
  """`factor` times the workload's batch, a whole multiple of `ranks`."""
  per = max(1, round(w.global_batch * factor / ranks))
  return int(per * ranks)


def rows(p, w, stack, system, score: Callable[[dict], object]) -> list:
  """Per batch of `FACTORS`: the batch, per accelerator, the samples to
  the target, the throughput, the time to train, whether it fits and is
  within the limits (`score` not None), and whether the stack's cases
  measured its batch per accelerator."""
  c = convergence.curve(w.name)
  ranks = float(p.nodes) * float(p.accelerators_per_node)
  measured = coverage.batch_range(stack.name)
  out = []
  for f in FACTORS:
    b = _batch(w, ranks, f)
    wb = dataclasses.replace(w, global_batch=b)
    fig = report.design_figures(
      p, wb, planner.make(wb, p, stack), stack, system
    )
    samples = float(c.samples_at(b))
    out.append(
      {
        'global_batch': b,
        'batch_per_accelerator': b / ranks,
        'samples_to_target': samples,
        'throughput_samples_per_s': fig['throughput_samples_per_s'],
        'time_to_train_s': samples / fig['throughput_samples_per_s'],
        'within_limits': score(fig) is not None,
        'inside_measured': measured is None
        or measured['lo'] <= b / ranks <= measured['hi'],
        'extrapolated': not c.batches[0] <= b <= c.batches[-1],
      }
    )
  return out


def choose(p, w, stack, system, score) -> dict | None:
  """result.json's `batch`: `rows`, the chosen batch and a sentence; None
  for a workload without a samples-to-target curve or a CPU trainer."""
  if convergence.curve(w.name) is None or p.trainer == 'cpu':
    return None
  table = rows(p, w, stack, system, score)
  ok = [r for r in table if r['within_limits']]
  inside = [r for r in ok if r['inside_measured']]
  pool = inside or ok or table
  best = min(pool, key=lambda r: r['time_to_train_s'])
  at = table[FACTORS.index(1.0)]
  return {
    'rows': table,
    'chosen_global_batch': best['global_batch'],
    'chosen_time_to_train_s': best['time_to_train_s'],
    'workload_batch_time_to_train_s': at['time_to_train_s'],
    'measured_batch_per_accelerator': coverage.batch_range(stack.name),
    'sentence': _sentence(best, table, bool(inside)),
  }


def _sentence(best: dict, table: list, inside: bool) -> str:
  """The decision in words."""
  cells = ', '.join(
    f'{r["global_batch"]:,}: {r["time_to_train_s"] / 60:,.1f} min'
    + ('' if r['inside_measured'] else ' (unmeasured batch/accel)')
    for r in table
  )
  why = (
    'within the limits and the batch per accelerator the stack measured'
    if inside
    else 'FLAGGED: no batch keeps the batch per accelerator the stack measured'
  )
  extra = ' (curve extrapolated)' if best['extrapolated'] else ''
  return (
    f'batch: global batch {best["global_batch"]:,} trains fastest, '
    f'{best["time_to_train_s"] / 60:,.1f} min{extra}, {why}; time to train '
    f'at each batch: {cells}'
  )
