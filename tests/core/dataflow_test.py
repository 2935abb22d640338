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


def test_a_loop_counts_whole_and_a_constant_reads_nothing():
  def fn(a, b, c):
    body = lambda i, x: x + a  # noqa: E731
    return jax.lax.fori_loop(0, 3, body, b), jnp.ones(2)

  assert dataflow.arguments_read(fn, 1.0, 2.0, 3.0) == {0, 1}
  assert dataflow.arguments_read(lambda a: jnp.zeros(3), 1.0) == set()
