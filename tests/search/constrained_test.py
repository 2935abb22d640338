"""The search's loop (`codesign.search.constrained`) on a problem known by
hand: a quadratic with one linear constraint."""

import jax
import jax.numpy as jnp
import numpy as np

from codesign.search import constrained, gradient

CONFIG = gradient.Config(steps=6, al_every=2, learning_rate=0.1)
TARGET = jnp.array([0.9, 0.2, 0.6])


def _assess(z):
  """(loss, g, aux): distance to TARGET, and z0 + z1 <= 0.8."""
  loss = jnp.sum((z - TARGET) ** 2)
  g = jnp.stack([z[0] + z[1] - 0.8])
  return loss, g, 2.0 * loss


def _start():
  z0 = jnp.array([0.1, 0.5, 0.3])
  return constrained.init(CONFIG, z0, jnp.array([1.0, 1.0, 0.0]), 1)


def test_steps_then_assess_is_the_steps_and_the_assessment_where_they_end():
  length = 4
  state, m = jax.jit(
    lambda s: constrained.steps_then_assess(_assess, CONFIG, s, length)
  )(_start())
  plain, pm = jax.jit(
    lambda s: jax.lax.scan(
      lambda c, _: constrained.step(_assess, CONFIG, c), s, None, length
    )
  )(_start())
  # The state is that of `length` steps: the extra step does not move.
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(plain)):
    np.testing.assert_array_equal(a, b)
  assert int(state.step) == length
  assert m['loss'].shape == (length + 1,)
  for k in ('loss', 'aux', 'violation'):
    np.testing.assert_array_equal(m[k][:length], pm[k])
  # The last row is the assessment at the final z.
  loss, g, aux = _assess(state.z)
  np.testing.assert_allclose(m['loss'][length], loss, rtol=1e-12)
  np.testing.assert_allclose(m['aux'][length], aux, rtol=1e-12)
  np.testing.assert_allclose(
    m['violation'][length], max(float(g[0]), 0.0), rtol=1e-12, atol=1e-15
  )
  # The frozen coordinate (mask 0) never moved; the others did.
  assert state.z[2] == 0.3 and state.z[0] != 0.1
