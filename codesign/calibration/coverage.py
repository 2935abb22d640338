"""Which published measurements stand behind a design: the calibration
cases (`calibration_cases.json`, `public_cases`) of a stack, an
accelerator family (or a CPU trainer's CPU generation) and a node count,
and what a design lies outside of.

A figure the cost model gives for a design no case resembles is an
extrapolation: `coverage` names the nearest cases and says which of the
design's stack, hardware family and node count no case has measured.
"""

import functools
import json

import numpy as np

from codesign.calibration import public_cases
from codesign.core.paths import DATA_DIR
from codesign.spec import platform_presets, stack_presets

# Cases whose leave-one-case-out errors set a design's band.
NEAREST = 3
# The band holds at least this share of errors: it is at least the
# split-conformal quantile of every case's |leave-one-case-out error|
# (`conformal_quantile`). The model's error is not only local (a design
# near cases the model fits well can still miss as others did), so no
# band claims more than the share of cases the model has shown it can
# predict that well.
QUANTILE = 0.8


def conformal_quantile(values, share: float) -> float:
  """The ceil((n + 1) share)-th smallest of n values (the largest when
  that rank passes n): a new value exchangeable with them lies at or
  below it with probability at least `share` (split conformal prediction:
  Lei et al. 2018, "Distribution-free predictive inference for
  regression", JASA 113(523), section 2.2). numpy's interpolated quantile
  of n values holds a new one only about (n - 1) share + 1 times in n + 1:
  77% for 80% of 18 cases."""
  ordered = np.sort(np.asarray(values, dtype=float))
  rank = int(np.ceil((len(ordered) + 1) * share))
  return float(ordered[min(rank, len(ordered)) - 1])


def family(part: str) -> str:
  """An accelerator's family ('H100-SXM5-80GB' -> 'H100'; 'GB200-...' ->
  'GB200'), or a CPU's generation ('Xeon-Platinum-8480+ (Sapphire
  Rapids-SP)' -> 'Sapphire Rapids-SP')."""
  if '(' in part:
    return part.split('(', 1)[1].rstrip(')')
  return part.split('-', 1)[0]


@functools.cache
def cases() -> tuple[dict, ...]:
  """Every calibration case as {id, stack, family, trainer, nodes}."""
  out = []
  for c in public_cases.case_keys():
    p = platform_presets.get(c.platform)
    cpu = p.trainer == 'cpu'
    named = public_cases.CASES[c.case_id].cpu
    own = named[0] if named else p.cpu.name
    out.append(
      {
        'id': c.case_id,
        # The preset, whatever its release (`hugectr` of `hugectr@2021`).
        'stack': stack_presets.family(c.stack),
        'family': family(own if cpu else p.accelerator.name),
        'trainer': p.trainer,
        'nodes': c.nodes,
      }
    )
  return tuple(out)


@functools.cache
def loo_errors() -> dict[str, float]:
  """case id -> the relative error of its predicted step time with the
  numbers fitted on the other cases (`data/stack_fit.json` `loo_errors`,
  written by `experiments.calibrate`); {} where the file has none."""
  data = json.loads((DATA_DIR / 'stack_fit.json').read_text())
  return {k: float(v) for k, v in data.get('loo_errors', {}).items()}


def coverage(
  stack: str,
  part: str,
  trainer: str,
  nodes: float,
  without: str | None = None,
  errors: dict | None = None,
) -> dict:
  """The cases behind a design of `stack` on `part` (its accelerator, or a
  CPU trainer's CPU) and `nodes` nodes.

  Args:
    stack, part, trainer, nodes: the design.
    without: a case left out (to judge the band on the cases themselves).
    errors: case id -> leave-one-case-out error (default: the shipped
      fit's, `loo_errors`).

  Returns:
    dict: `nearest` (`NEAREST` case ids: those of this stack and family,
    then of this stack, then of this family; the nearest node counts
    first), `flags` (sentences: no case of this stack; of this family
    with this stack; a node count beyond the stack's cases),
    `extrapolated` (any flag), `band` (the relative half-width of the
    band on the step time: the largest leave-one-case-out error of the
    nearest cases, at least the conformal `QUANTILE` of every case's
    (`conformal_quantile`), and where
    the design is extrapolated the largest of every case's; None without
    the errors).
  """
  fam = family(part)
  stack = stack_presets.family(stack)
  every = [c for c in cases() if c['id'] != without]
  own = [c for c in every if c['stack'] == stack]
  both = [c for c in own if c['family'] == fam and c['trainer'] == trainer]
  same_fam = [c for c in every if c['family'] == fam and c not in both]
  rest = [c for c in own if c not in both]

  def near(pool):
    return sorted(pool, key=lambda c: (abs(c['nodes'] - nodes), c['id']))

  pool = (near(both) + near(rest) + near(same_fam))[:NEAREST]
  flags = []
  if not own:
    flags.append(f'no calibration case runs {stack}')
  elif not both:
    flags.append(f'no calibration case runs {stack} on {fam}')
  if own:
    most = max(c['nodes'] for c in own)
    if nodes > most:
      flags.append(
        f'{nodes:g} nodes: the {stack} cases span at most {most:g} '
        f'node{"s" if most > 1 else ""}'
      )
  return {
    'nearest': [c['id'] for c in pool],
    'flags': flags,
    'extrapolated': bool(flags),
    'band': _band(pool, every, bool(flags), errors),
  }


def _band(pool, every, extrapolated: bool, errors=None) -> float | None:
  """The band's relative half-width: the largest |leave-one-case-out
  error| of `pool`, at least the conformal `QUANTILE` of `every` case's,
  and the largest of them all where the design is extrapolated."""
  err = loo_errors() if errors is None else errors

  def sizes(cs):
    return [abs(err[c['id']]) for c in cs if c['id'] in err]

  near, all_ = sizes(pool), sizes(every)
  if not near or not all_:
    return None
  half = max(max(near), conformal_quantile(all_, QUANTILE))
  return max(all_) if extrapolated else half


def case_part(key: public_cases.CaseKey, p) -> str:
  """The part a case's coverage is judged on: its accelerator, or a CPU
  trainer's CPU (the one its description names, else the preset's)."""
  if p.trainer == 'cpu':
    named = public_cases.CASES[key.case_id].cpu
    return named[0] if named else p.cpu.name
  return p.accelerator.name


def band_check(errors: dict | None = None) -> dict:
  """How far the band holds on the cases themselves: each case's band
  computed without it (its own error left out of the quantile and the
  nearest cases) against its leave-one-case-out error. Returns `covered`
  (cases whose band holds their error), `cases` and `median_half_width`.
  `errors`: as `coverage` (default: the shipped fit's)."""
  err = loo_errors() if errors is None else errors
  covered, halves = 0, []
  for k in public_cases.case_keys():
    p = platform_presets.get(k.platform)
    cov = coverage(k.stack, case_part(k, p), p.trainer, k.nodes, k.case_id, err)
    if cov['band'] is None or k.case_id not in err:
      continue
    covered += int(cov['band'] >= abs(err[k.case_id]))
    halves.append(cov['band'])
  return {
    'covered': covered,
    'cases': len(halves),
    'median_half_width': float(np.median(halves)) if halves else None,
  }


def band_of(throughput: float, half: float | None) -> dict | None:
  """The throughput band of a figure with a relative half-width on its
  step time: (low, high) samples/s."""
  if half is None:
    return None
  return {
    'half_width': half,
    'low_samples_per_s': throughput / (1.0 + half),
    'high_samples_per_s': throughput / max(1.0 - half, 1e-6),
  }


def sentence(cov: dict, throughput: float | None = None) -> str:
  """A coverage as one line (with the band of `throughput`, if given)."""
  near = ', '.join(cov['nearest']) or 'none'
  band = ''
  if cov.get('band') is not None:
    band = f'band +-{100 * cov["band"]:.0f}% of the step time'
    if throughput:
      b = band_of(throughput, cov['band'])
      band += (
        f' ({b["low_samples_per_s"]:,.0f} to {b["high_samples_per_s"]:,.0f}'
        ' samples/s)'
      )
    band += ' from the leave-one-case-out errors of '
  if not cov['flags']:
    return f'calibration: {band}nearest cases {near}; within what they measured'
  return (
    f'calibration: EXTRAPOLATED ({"; ".join(cov["flags"])}); {band}nearest '
    f'cases {near}'
  )


@functools.cache
def batch_range(stack: str) -> dict | None:
  """The batch per accelerator (or socket) the calibration cases of
  `stack` ran: lo, hi and the cases, or None for a stack no case ran; a
  run outside it is beyond what the published measurements saw."""
  data = json.loads((DATA_DIR / 'calibration_cases.json').read_text())
  batch = {c['id']: c['global_batch'] for c in data['cases']}
  rows = [
    (batch[k.case_id] / (k.nodes * k.devices), k.case_id)
    for k in public_cases.case_keys()
    if stack_presets.family(k.stack) == stack_presets.family(stack)
  ]
  if not rows:
    return None
  return {
    'lo': min(b for b, _ in rows),
    'hi': max(b for b, _ in rows),
    'cases': sorted({c for _, c in rows}),
  }
