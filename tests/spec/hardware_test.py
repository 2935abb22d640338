"""`hardware.as_arrays`: remembered conversions are the conversions."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from codesign.spec import hardware, platform_presets


def _fresh(p, dtype=None):
  return jax.tree.map(lambda x: jnp.asarray(x, dtype=dtype), p)


def _same(a, b):
  la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
  assert jax.tree.structure(a) == jax.tree.structure(b)
  for x, y in zip(la, lb, strict=True):
    assert x.dtype == y.dtype and x.weak_type == y.weak_type
    assert np.array_equal(np.asarray(x), np.asarray(y))


def test_remembered_arrays_equal_a_fresh_conversion():
  p = platform_presets.get('dgx_h100')
  for _ in range(2):  # converted, then remembered
    _same(hardware.as_arrays(p), _fresh(p))
    _same(hardware.as_arrays(p, jnp.float32), _fresh(p, jnp.float32))
    with jax.enable_x64(True):  # the precision of Python floats changes
      _same(hardware.as_arrays(p), _fresh(p))
  assert hardware.as_arrays(p) is hardware.as_arrays(p)


def test_values_that_compare_equal_keep_their_own_arrays():
  p = platform_presets.get('dgx_h100')
  as_int = dataclasses.replace(p, nodes=2)
  as_float = dataclasses.replace(p, nodes=2.0)
  assert as_int == as_float  # 2 == 2.0: equal, yet other arrays
  assert hardware.as_arrays(as_int).nodes.dtype == jnp.asarray(2).dtype
  assert hardware.as_arrays(as_float).nodes.dtype == jnp.asarray(2.0).dtype
  zero = dataclasses.replace(
    p, fabric=dataclasses.replace(p.fabric, latency=0.0)
  )
  minus = dataclasses.replace(
    p, fabric=dataclasses.replace(p.fabric, latency=-0.0)
  )
  assert np.signbit(hardware.as_arrays(minus).fabric.latency)
  assert not np.signbit(hardware.as_arrays(zero).fabric.latency)


def test_inside_a_trace_the_arrays_are_the_traces_own():
  """Arrays made in a trace are its tracers: they are never remembered,
  so a later call (another trace, or none) gets arrays of its own."""
  # A platform no other test converts: its first conversion is in a trace.
  p = dataclasses.replace(platform_presets.get('dgx_h100'), nodes=7.25)

  def f(x):
    return hardware.as_arrays(p).nodes * x

  assert float(jax.jit(f)(2.0)) == 2.0 * 7.25
  leaves = jax.tree.leaves(hardware.as_arrays(p))
  assert not any(isinstance(v, jax.core.Tracer) for v in leaves)
  # An array leaf is converted as given, not remembered.
  q = dataclasses.replace(p, nodes=jnp.asarray(5.0))
  assert float(hardware.as_arrays(q).nodes) == 5.0
