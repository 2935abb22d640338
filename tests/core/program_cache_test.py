"""Programs kept on disk by their export: the same bits as the plain
jit, read back without tracing, keyed by what they are traced from, and
a damaged file exported again."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core import program_cache


class Pair(NamedTuple):  # an output pytree JAX cannot serialize by itself
  total: jax.Array
  scaled: jax.Array


def _fn(x, y):
  return Pair(jnp.sum(jnp.sin(x) * y, axis=-1), {'a': x * 2.0 + y})


@pytest.fixture
def cache(tmp_path, monkeypatch):
  """A cache directory of the test's own."""
  folder = tmp_path / program_cache.FOLDER
  monkeypatch.setattr(program_cache, '_folder', lambda: folder)
  return folder


def _args():
  rng = np.random.default_rng(0)
  return (jnp.asarray(rng.random((4, 3))), jnp.asarray(rng.random((4, 3))))


def test_same_bits_as_jit_and_read_back_without_tracing(cache, monkeypatch):
  args = _args()
  want = jax.jit(_fn)(*args)
  got = program_cache.exported(_fn, ('fn', 1))(*args)
  assert isinstance(got, Pair) and set(got.scaled) == {'a'}
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  (path,) = cache.iterdir()
  # A later run (a new function, nothing in memory) reads the file and
  # never traces.

  def no_trace(*_):
    raise AssertionError('traced again')

  monkeypatch.setattr(program_cache, '_flat_export', no_trace)
  again = program_cache.exported(_fn, ('fn', 1))(*args)
  for a, b in zip(jax.tree.leaves(again), jax.tree.leaves(want), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert list(cache.iterdir()) == [path]


def test_the_key_follows_static_inputs_structure_shapes_and_sources(
  monkeypatch,
):
  args = _args()
  base = program_cache.file_key(('fn', 1), args)
  assert program_cache.file_key(('fn', 1), args) == base
  assert program_cache.file_key(('fn', 2), args) != base
  wider = (jnp.zeros((4, 5)), jnp.zeros((4, 5)))
  assert program_cache.file_key(('fn', 1), wider) != base
  assert program_cache.file_key(('fn', 1), {'x': args[0], 'y': args[1]}) != base
  monkeypatch.setattr(program_cache, 'source_digest', lambda: 'edited')
  assert program_cache.file_key(('fn', 1), args) != base


def test_equal_keys_are_one_file_whichever_parts_are_shared():
  """pickle writes a repeated object once: a key whose equal strings are
  one object (a preset's) and one whose are two (read back from JSON)
  are one program."""
  word = 'torchrec'
  shared = ('fn', (word, word))
  apart = ('fn', (word, ''.join(['torch', 'rec'])))
  assert apart[1][1] is not word
  args = _args()
  assert program_cache.file_key(shared, args) == program_cache.file_key(
    apart, args
  )


def test_a_damaged_file_is_exported_again(cache):
  args = _args()
  program_cache.exported(_fn, ('fn', 3))(*args)
  (path,) = cache.iterdir()
  path.write_bytes(b'not a program')
  got = program_cache.exported(_fn, ('fn', 3))(*args)
  np.testing.assert_array_equal(
    np.asarray(got.total), np.asarray(jax.jit(_fn)(*args).total)
  )
  assert path.read_bytes() != b'not a program'


def test_cache_off_still_runs_the_export(monkeypatch):
  monkeypatch.setattr(program_cache, '_folder', lambda: None)
  args = _args()
  got = program_cache.exported(_fn, ('fn', 4))(*args)
  np.testing.assert_array_equal(
    np.asarray(got.scaled['a']), np.asarray(jax.jit(_fn)(*args).scaled['a'])
  )


def test_python_scalars_are_read_as_jit_reads_them(cache):
  """A Python float argument (a stack's or a plan's leaves) is a weakly
  typed array: the same bits as the plain jit, a float times a float32
  array stays float32 as under jit, and a strongly typed float64 is
  another program (float64 out, as under jit)."""
  x = jnp.asarray(np.linspace(0.1, 1.0, 5), jnp.float32)

  def fn(x, scale):
    return x * scale + jnp.sin(scale)

  want = jax.jit(fn)(x, 1.7)
  got = program_cache.exported(fn, ('fn', 5))(x, 1.7)
  assert got.dtype == want.dtype == jnp.float32
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  got = program_cache.exported(fn, ('fn', 5))(x, 2.5)  # the same program
  np.testing.assert_array_equal(
    np.asarray(got), np.asarray(jax.jit(fn)(x, 2.5))
  )
  assert len(list(cache.iterdir())) == 1
  strong = program_cache.exported(fn, ('fn', 5))(x, np.float64(2.5))
  assert strong.dtype == jax.jit(fn)(x, np.float64(2.5)).dtype == jnp.float64
  assert len(list(cache.iterdir())) == 2
