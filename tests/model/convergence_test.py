"""The samples-to-target curve (`codesign.model.convergence`): every
MLPerf reference point reproduced within 10% when it is left out of the
fit; the fit's known answer on points made to lie on a line; more
samples at larger batches; extrapolation marked; smooth in the batch."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model import convergence


@pytest.mark.parametrize('name', convergence.names())
def test_each_published_point_within_10pct_left_out(name):
  rows = convergence.leave_one_out(name)
  assert len(rows) >= 3
  for r in rows:
    assert abs(r['error']) < 0.10, r


def test_fit_recovers_a_line_by_hand():
  # E = 0.5 (1 + B / 100,000): at 50k 0.75, 100k 1.0, 300k 2.0.
  e_min, b_noise = convergence.fit([5e4, 1e5, 3e5], [0.75, 1.0, 2.0])
  assert e_min == pytest.approx(0.5)
  assert b_noise == pytest.approx(1e5)


def test_dcnv2_curve_and_knee():
  c = convergence.curve('mlperf_dlrm_dcnv2')
  # Fitted on the six RCPs: E_min about 0.65 epochs, the knee about 320k.
  assert 0.6 < c.e_min < 0.7
  assert 2.5e5 < c.b_noise < 4e5
  assert c.samples_per_epoch == 4195197692
  assert c.epochs_at(c.b_noise) == pytest.approx(2 * c.e_min)


def test_larger_batches_need_more_samples_and_are_marked_beyond_range():
  p1 = convergence.point('mlperf_dlrm_dcnv2', 65536)
  p2 = convergence.point('mlperf_dlrm_dcnv2', 8_388_608)
  assert p2['samples_to_target'] > 10 * p1['samples_to_target']
  assert not p1['extrapolated'] and not p1['past_knee']
  assert p2['extrapolated'] and p2['past_knee']
  assert 'EXTRAPOLATED' in convergence.sentence(p2)


def test_no_curve_without_points():
  assert convergence.curve('zion_scale') is None
  assert convergence.point('zion_scale', 65536) is None


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.float64])
def test_smooth_in_the_batch(dtype):
  c = convergence.curve('mlperf_dlrm_v1')
  b = jnp.asarray(np.geomspace(1e3, 1e7, 30), dtype)
  g = jax.vmap(jax.grad(lambda x: c.samples_at(x) / 1e9))(b)
  assert np.all(np.isfinite(np.asarray(g))) and np.all(np.asarray(g) > 0)
