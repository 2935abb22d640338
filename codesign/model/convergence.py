"""Samples to the accuracy target against the global batch.

A larger batch needs more samples to reach the same accuracy. The curve
is the critical-batch model of McCandlish et al. (2018, "An empirical
model of large-batch training", arXiv 1812.06162): the samples to a
target grow linearly with the batch,

  E(B) = E_min (1 + B / B_noise)   (epochs),

so that the steps fall as S_min (1 + B_noise / B). Below B_noise (the
knee) a larger batch costs few extra samples; past it each doubling of
the batch nearly doubles them, and more nodes under weak scaling stop
shortening the time to train. E_min and B_noise are fitted (least
squares on the relative error) to MLPerf's reference convergence points
(`codesign/data/convergence.json`: the mean epochs to the target over
the seeds of each reference batch, each point with its source); a batch
outside the reference batches is extrapolation (`Point.extrapolated`).
The curve is smooth in the batch and works on traced numbers.
"""

import dataclasses
import functools
import json

import numpy as np

from codesign.core.paths import DATA_DIR


@functools.cache
def raw() -> dict:
  """`codesign/data/convergence.json` as read."""
  return json.loads((DATA_DIR / 'convergence.json').read_text())


@dataclasses.dataclass(frozen=True)
class Curve:
  """A workload's samples-to-target curve.

  Attributes:
    workload: the workload preset's name.
    e_min: epochs to the target at a vanishing batch.
    b_noise: the knee, samples (the batch at which E = 2 E_min).
    samples_per_epoch: samples of one epoch of its dataset.
    batches: the reference batches, ascending.
    epochs: the mean epochs to the target at each.
    target: the accuracy target in words.
    source: where the points come from.
  """

  workload: str
  e_min: float
  b_noise: float
  samples_per_epoch: float
  batches: tuple
  epochs: tuple
  target: str
  source: str

  def epochs_at(self, batch):
    """Epochs to the target at global batch `batch` (may be traced)."""
    return self.e_min * (1.0 + batch / self.b_noise)

  def samples_at(self, batch):
    """Samples to the target at global batch `batch` (may be traced)."""
    return self.epochs_at(batch) * self.samples_per_epoch


def fit(batches, epochs) -> tuple[float, float]:
  """(E_min, B_noise) of E = E_min (1 + B / B_noise) through the points,
  least squares on the relative error (a linear fit of E = a + b B with
  each row over its E)."""
  b = np.asarray(batches, np.float64)
  e = np.asarray(epochs, np.float64)
  rows = np.stack([np.ones_like(b), b], axis=1) / e[:, None]
  (a, slope), *_ = np.linalg.lstsq(rows, np.ones_like(e), rcond=None)
  return float(a), float(a / slope)


def names() -> tuple[str, ...]:
  """The workloads that have a curve."""
  return tuple(raw()['workloads'])


@functools.cache
def curve(workload: str) -> Curve | None:
  """The curve of workload preset `workload`, or None without points."""
  d = raw()['workloads'].get(workload)
  if d is None:
    return None
  pts = sorted(d['points'], key=lambda q: q['batch'])
  batches = tuple(float(q['batch']) for q in pts)
  epochs = tuple(float(q['epochs']) for q in pts)
  e_min, b_noise = fit(batches, epochs)
  data = raw()['datasets'][d['dataset']]
  return Curve(
    workload,
    e_min,
    b_noise,
    float(data['samples_per_epoch']),
    batches,
    epochs,
    d['target'],
    d['source'],
  )


def leave_one_out(workload: str) -> list[dict]:
  """Each reference point predicted by the curve fitted on the others:
  batch, epochs, predicted epochs and the relative error."""
  c = curve(workload)
  out = []
  for i, (b, e) in enumerate(zip(c.batches, c.epochs, strict=True)):
    keep = [j for j in range(len(c.batches)) if j != i]
    e_min, b_noise = fit(
      [c.batches[j] for j in keep], [c.epochs[j] for j in keep]
    )
    pred = e_min * (1.0 + b / b_noise)
    out.append(
      {'batch': b, 'epochs': e, 'predicted': pred, 'error': pred / e - 1.0}
    )
  return out


def point(workload: str, batch: float) -> dict | None:
  """What the curve says at global batch `batch`: samples and epochs to
  the target, the knee, the reference range and whether `batch` lies
  outside it (`extrapolated`); None for a workload without a curve."""
  c = curve(workload)
  if c is None:
    return None
  lo, hi = c.batches[0], c.batches[-1]
  return {
    'global_batch': float(batch),
    'epochs_to_target': float(c.epochs_at(batch)),
    'samples_to_target': float(c.samples_at(batch)),
    'knee_batch': c.b_noise,
    'past_knee': float(batch) > c.b_noise,
    'reference_batches': [lo, hi],
    'extrapolated': not lo <= float(batch) <= hi,
    'target': c.target,
    'curve': f'E(B) = {c.e_min:.4g} (1 + B / {c.b_noise:,.0f}) epochs',
    'source': c.source,
  }


def sentence(pt: dict) -> str:
  """One line of a `point`: the samples to the target at the batch, the
  curve, its knee and whether the batch is extrapolated."""
  lo, hi = pt['reference_batches']
  where = (
    f'EXTRAPOLATED beyond the reference batches {lo:,.0f}-{hi:,.0f}'
    if pt['extrapolated']
    else f'within the reference batches {lo:,.0f}-{hi:,.0f}'
  )
  knee = 'past' if pt['past_knee'] else 'below'
  return (
    f'convergence: {pt["samples_to_target"]:,.4g} samples to '
    f'{pt["target"]} at global batch {pt["global_batch"]:,.0f} '
    f'({pt["epochs_to_target"]:.3f} epochs; {pt["curve"]}, {knee} its '
    f'knee at {pt["knee_batch"]:,.0f}; {where})'
  )
