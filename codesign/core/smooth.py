"""Gradient-safe replacements for max, min and division.

The cost model never branches on traced values. Maxima of times are smooth
p-norms: smooth_max(a, b) = (a^p + b^p)^(1/p) for positive a, b. The p-norm is
scale-free (seconds or microseconds give the same relative error), exceeds the
true max by at most 2^(1/p) - 1 (9% at p = 8, at a tie) and is exact when one
term dominates. Inputs are rescaled by their (gradient-stopped) maximum so that
small times do not underflow in float32.
"""

import functools

import jax
import jax.numpy as jnp

# Sharpness of the smooth max used for rooflines and overlap. A power of two
# lets the p-th power and root be multiplications and square roots, which
# keeps the batched cost model fast (no exp/log per term).
DEFAULT_P = 8
# Floor for denominators and p-norm arguments (SI units: ~1e-30 is far below
# any time, byte or FLOP count the model meets).
TINY = 1e-30


def smooth_max(*xs, p: float = DEFAULT_P, axis=None):
  """Smooth maximum of positive arrays (broadcast), or along `axis` of one."""
  if axis is None and len(xs) == 2:
    return _smooth_max2(*xs, p)
  return _smooth_max_n(xs, p, axis)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _smooth_max_n(xs, p, axis):
  if axis is None:
    x = jnp.stack(jnp.broadcast_arrays(*xs))
    axis = 0
  else:
    (x,) = xs
  x = jnp.maximum(x, TINY)
  scale = jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
  total = jnp.sum(_power(x / scale, p), axis=axis, keepdims=True)
  return jnp.squeeze(_root(total, p) * scale, axis=axis)


@functools.partial(jax.jit, static_argnums=2)
def _smooth_max2(a, b, p):
  """(a^p + b^p)^(1/p) of two positive arrays, elementwise (no stacking,
  which batched evaluation pays for in memory traffic): both are divided
  by the gradient-stopped larger one. (Multiplying by its reciprocal
  instead lets XLA's simplifier reorder (a x 1/m)^p into a^p x (1/m)^p,
  which under- and overflows in float32: 0 x inf.)"""
  a, b = jnp.maximum(a, TINY), jnp.maximum(b, TINY)
  scale = jax.lax.stop_gradient(jnp.maximum(a, b))
  return _root(_power(a / scale, p) + _power(b / scale, p), p) * scale


def _power(x, p):
  return x**p if isinstance(p, int) else x ** float(p)  # int: multiplies


def _root(x, p):
  """x ** (1 / p), by repeated square roots when p is a power of two."""
  if isinstance(p, int) and p > 0 and p & (p - 1) == 0:
    while p > 1:
      x = jnp.sqrt(x)
      p //= 2
    return x
  return x ** (1.0 / p)


def smooth_min(*xs, p: float = DEFAULT_P, axis=None):
  """Smooth minimum of positive arrays: 1 / smooth_max(1 / x)."""
  return _smooth_min(xs, p, axis)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _smooth_min(xs, p, axis):
  inv = [1.0 / jnp.maximum(x, TINY) for x in xs]
  return 1.0 / smooth_max(*inv, p=p, axis=axis)


def safe_div(num, den, floor: float = TINY):
  """num / den with the denominator floored at `floor` (no inf, no NaN).

  Where the denominator can reach zero inside the bounds (e.g. A - 1 peers
  at A = 1), pass a physical floor such as 0.5 so that the derivative of
  the quotient stays small rather than about 1 / floor^2.
  """
  return num / jnp.maximum(den, floor)


def overlap(a, b, fraction, p: float = DEFAULT_P):
  """Time of two activities that overlap by `fraction` in [0, 1].

  0 runs them back to back (a + b); 1 overlaps them fully (smooth max).
  """
  return (1.0 - fraction) * (a + b) + fraction * smooth_max(a, b, p=p)


def softplus_margin(x, scale=1.0):
  """Smooth one-sided penalty: about max(x, 0), differentiable at 0."""
  return scale * jax.nn.softplus(x / scale)
