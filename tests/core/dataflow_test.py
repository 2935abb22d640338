"""Tests of codesign.core.dataflow."""

import jax
import jax.numpy as jnp

from codesign.core import dataflow


def test_names_the_arguments_the_outputs_read():
  def fn(a, b, c):
    unused = b * 3.0  # computed, never returned
    del unused
    return a * 2.0 + jnp.sin(c['x'])

  got = dataflow.arguments_read(fn, 1.0, 2.0, {'x': 3.0, 'y': 4.0})
  assert got == {0, 2}


def test_loops_and_jitted_programs_are_followed_inside():
  """A loop's carry reads what reaches it over any number of steps (c
  reaches the returned carry through the other one, a step late); what
  the loop's count reads reaches every carry; a jitted program handed an
  argument it ignores does not read it; a constant reads nothing."""

  @jax.jit
  def first(x, ignored):
    del ignored
    return x * 2.0

  def fori(a, b, c, d):
    def body(i, carry):
      x, y = carry
      return x + y, y + c

    x, _ = jax.lax.fori_loop(0, 3, body, (first(b, a), 0.0))
    return x

  assert dataflow.arguments_read(fori, 1.0, 2.0, 3.0, 4.0) == {1, 2}

  def until(a, b):
    return jax.lax.while_loop(lambda x: x < a, lambda x: x + 1.0, b)

  assert dataflow.arguments_read(until, 1.0, 2.0) == {0, 1}
  assert dataflow.arguments_read(lambda a: jnp.zeros(3), 1.0) == set()
