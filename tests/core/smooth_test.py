"""The smooth maxima under jit in float32, at the scales the model meets
(seconds from 1e-9 to 1e3, bytes to 1e15): finite, and equal to the
p-norm. XLA's simplifier once turned (a / m)^8 written as (a x 1/m)^8
into a^8 x (1/m)^8, which is 0 x inf in float32 for a ~ 1e-7."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core.smooth import smooth_max, smooth_min


@pytest.mark.parametrize('scale', [1e-9, 3e-7, 1e-3, 1.0, 1e3, 1e12, 1e15])
def test_smooth_max_in_float32_under_jit(scale):
  a = jnp.asarray(np.array([1.0, 0.05, 1.0, 3.0]) * scale, jnp.float32)
  b = jnp.asarray(np.array([0.05, 1.0, 1.0, 1e-6]) * scale, jnp.float32)
  got = np.asarray(jax.jit(smooth_max)(a, b), np.float64)
  a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
  want = (a64**8 + b64**8) ** (1 / 8)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  grad = jax.jit(jax.grad(lambda x, y: jnp.sum(smooth_max(x, y)), (0, 1)))
  for g in grad(a, b):
    assert np.all(np.isfinite(np.asarray(g)))
  lo = np.asarray(jax.jit(smooth_min)(a, b), np.float64)
  np.testing.assert_allclose(
    lo, 1 / (1 / a64**8 + 1 / b64**8) ** (1 / 8), rtol=1e-5
  )
