"""The published cases and the leave-one-case-out protocol that judges the
fitted embedding efficiency against them."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign import public_cases as pc


@pytest.fixture(scope='module')
def cases():
  return pc.load()


def test_cases_use_nvidias_placement_and_fit_in_hbm(cases):
  assert [c.name for c in cases] == [
    'C1_amp', 'C1_tf32', 'C2_amp', 'C2_fp32',
    'C3_amp', 'C3_fp32', 'C4_amp', 'C4_fp32',
  ]  # fmt: skip
  for c in cases:
    assert set(c.plan.sharding) == {'table_wise'}
    np.testing.assert_array_equal(np.asarray(c.plan.hbm_fraction), 1.0)
    assert bool(pc.predict(c).feasible), c.name
  c2 = next(c for c in cases if c.case_id == 'C2')
  assert float(c2.platform.accelerators_per_node) == 8.0


def test_fitting_sets_never_hold_the_judged_case_or_other_software(cases):
  for held_out in ('C1', 'C2', 'C3', 'C4'):
    ids = pc.fitting_ids(cases, held_out)
    assert held_out not in ids and 'C4' not in ids and ids
  assert pc.fitting_ids(cases, None) == ['C1', 'C2', 'C3']


def test_fit_recovers_a_planted_efficiency_and_folds_stay_apart(cases):
  # "Measurements" made by the model itself with efficiency 0.23 on C1-C3,
  # and a wildly different value on C4, which no fold may fit on.
  planted = [
    dataclasses.replace(
      c,
      measured=float(
        pc.predict(c, 0.9 if c.case_id == 'C4' else 0.23).step_time
      ),
    )
    for c in cases
  ]
  r = pc.leave_one_case_out(planted)
  assert r['all']['efficiency'] == pytest.approx(0.23, rel=1e-2)
  for held_out, fold in r['folds'].items():
    assert held_out not in fold['fitted_on'] and 'C4' not in fold['fitted_on']
    assert fold['efficiency'] == pytest.approx(0.23, rel=1e-2)
  for c in planted:
    if c.case_id != 'C4':
      eff = r['folds'][c.case_id]['efficiency']
      pred = float(pc.predict(c, eff).step_time)
      assert pred == pytest.approx(c.measured, rel=1e-2)


def test_step_time_falls_smoothly_with_embedding_efficiency(cases):
  c = next(c for c in cases if c.name == 'C3_amp')

  def log_step(e):
    return jnp.log(pc.predict(c, e).step_time)

  e = jnp.float64(0.2)
  g = float(jax.grad(log_step)(e))
  h = 1e-5
  fd = float((log_step(e + h) - log_step(e - h)) / (2 * h))
  assert g < 0 and np.isfinite(g)
  assert g == pytest.approx(fd, rel=1e-5)
