"""The cases behind a design and its band (`codesign.calibration.coverage`):
on the calibration cases themselves, each case's band computed without
it covers its own out-of-sample error in at least 80% of cases, with a
median half-width of at most 25%; a design no case resembles is flagged
and gets the widest band."""

import statistics

from codesign.calibration import coverage, public_cases
from codesign.spec import platform_presets


def _part(key) -> str:
  p = platform_presets.get(key.platform)
  if p.trainer == 'cpu':
    named = public_cases.CASES[key.case_id].cpu
    return named[0] if named else p.cpu.name
  return p.accelerator.name


def test_each_case_band_without_it_covers_its_error():
  errors = coverage.loo_errors()
  keys = public_cases.case_keys()
  assert {k.case_id for k in keys} == set(errors)
  covered, halves = [], []
  for k in keys:
    trainer = platform_presets.get(k.platform).trainer
    cov = coverage.coverage(k.stack, _part(k), trainer, k.nodes, k.case_id)
    assert k.case_id not in cov['nearest']
    covered.append(cov['band'] >= abs(errors[k.case_id]))
    halves.append(cov['band'])
  assert sum(covered) / len(covered) >= 0.8, covered
  assert statistics.median(halves) <= 0.25


def test_a_design_no_case_resembles_is_flagged_with_the_widest_band():
  cov = coverage.coverage('hugectr', 'GB200-B200-186GB', 'accelerator', 18)
  assert cov['extrapolated'] and len(cov['flags']) == 2
  assert 'hugectr on GB200' in cov['flags'][0]
  assert '18 nodes' in cov['flags'][1]
  assert cov['band'] == max(abs(e) for e in coverage.loo_errors().values())
  near = coverage.coverage('hugectr', 'A100-SXM4-80GB', 'accelerator', 8)
  assert not near['extrapolated'] and near['nearest'][0] == 'C10'
  assert near['band'] < cov['band']
  band = coverage.band_of(1e6, near['band'])
  assert band['low_samples_per_s'] < 1e6 < band['high_samples_per_s']
  assert 'EXTRAPOLATED' in coverage.sentence(cov, 1e6)
  assert 'within what they measured' in coverage.sentence(near, 1e6)
