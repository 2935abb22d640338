"""The cases behind a design and its band (`codesign.calibration.coverage`):
on the calibration cases themselves, each case's band computed without
it covers its own out-of-sample error in at least 80% of cases, with a
median half-width of at most 25%; a design no case resembles is flagged
and gets the widest band."""

import statistics

from codesign.calibration import coverage, public_cases
from codesign.spec import platform_presets


def _part(key) -> str:
  return coverage.case_part(key, platform_presets.get(key.platform))


def test_each_case_band_without_it_covers_its_error():
  errors = coverage.loo_errors()
  keys = public_cases.case_keys()
  assert {k.case_id for k in keys} == set(errors)
  halves = []
  for k in keys:
    trainer = platform_presets.get(k.platform).trainer
    cov = coverage.coverage(k.stack, _part(k), trainer, k.nodes, k.case_id)
    assert k.case_id not in cov['nearest']
    halves.append(cov['band'])
  check = coverage.band_check()
  assert check['cases'] == len(keys)
  assert check['covered'] / check['cases'] >= 0.8, check
  assert check['median_half_width'] == statistics.median(halves)
  assert check['median_half_width'] <= 0.25


def test_band_check_counts_a_case_its_neighbours_do_not_cover():
  """With every error at 10% every band is 10% and holds its case; one
  case at 50% is then the only one its band (made without it) misses,
  while the cases whose neighbours it is get its 50%."""
  ids = [k.case_id for k in public_cases.case_keys()]
  even = coverage.band_check(dict.fromkeys(ids, 0.1))
  assert even == {
    'covered': len(ids),
    'cases': len(ids),
    'median_half_width': 0.1,
  }
  odd = coverage.band_check({**dict.fromkeys(ids, 0.1), 'C12': -0.5})
  assert odd['covered'] == len(ids) - 1
  assert odd['median_half_width'] >= 0.1


def test_the_quantile_is_the_conformal_rank():
  """Of 18 errors, 80% is the 16th smallest (ceil(19 x 0.8)), not
  numpy's interpolation between the 14th and 15th; past the last rank it
  is the largest."""
  values = [float(v) for v in range(18, 0, -1)]
  assert coverage.conformal_quantile(values, 0.8) == 16.0
  assert coverage.conformal_quantile(values, 0.99) == 18.0
  assert coverage.conformal_quantile([0.3], 0.8) == 0.3


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
