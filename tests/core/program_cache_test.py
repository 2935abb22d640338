"""Programs kept on disk by their export: the same bits as the plain
jit, read back without tracing, keyed by what they are traced from; a
file that fails its checks (a flipped bit, another program's file, a
planted pickle) or fails to run is dropped and exported again, and none
runs code when read."""

import os
import pickle
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core import compile_cache, program_cache


class Pair(NamedTuple):  # an output pytree JAX cannot serialize by itself
  total: jax.Array
  scaled: jax.Array


def _fn(x, y):
  return Pair(jnp.sum(jnp.sin(x) * y, axis=-1), {'a': x * 2.0 + y})


@pytest.fixture
def cache(tmp_path, monkeypatch):
  """A cache directory of the test's own (and the events of the caches
  counted from zero)."""
  compile_cache.enable()
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


def _same_as_jit(got, args):
  want = jax.jit(_fn)(*args)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_damaged_file_is_exported_again(cache, capfd):
  args = _args()
  program_cache.exported(_fn, ('fn', 3))(*args)
  (path,) = cache.iterdir()
  good = path.read_bytes()
  rng = np.random.default_rng(1)
  for byte in rng.choice(len(good), 4, replace=False):
    flipped = bytearray(good)
    flipped[byte] ^= 1 << int(rng.integers(8))
    path.write_bytes(bytes(flipped))
    _same_as_jit(program_cache.exported(_fn, ('fn', 3))(*args), args)
    again = path.read_bytes()  # exported again and checked
    assert program_cache.decode(again, path.name)[1] == jax.tree.structure(
      jax.jit(_fn)(*args)
    )
  err = capfd.readouterr().err.strip().splitlines()
  assert len(err) == 1 and 'dropped a kept program' in err[0], err


class Payload:
  """What a planted pickle runs when unpickled: it writes a file."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (open, (str(self.marker), 'w'))


def test_a_planted_pickle_is_never_run(cache, tmp_path):
  args = _args()
  marker = tmp_path / 'pwned'
  pickle.loads(pickle.dumps(Payload(marker)))  # the payload works...
  assert marker.exists()
  marker.unlink()
  cache.mkdir(parents=True)
  path = cache / program_cache.file_key(('fn', 6), args)
  path.write_bytes(pickle.dumps((Payload(marker), b'x')))
  _same_as_jit(program_cache.exported(_fn, ('fn', 6))(*args), args)
  assert not marker.exists()  # ...and was not run
  assert path.read_bytes().startswith(program_cache.MAGIC)


def test_another_programs_file_under_this_key_is_dropped(cache):
  args = _args()
  other = (jnp.zeros((4, 3)), jnp.ones((4, 3)) * 3.0)
  program_cache.exported(_fn, ('fn', 7))(*args)
  program_cache.exported(_fn, ('fn', 8))(*other)
  mine = cache / program_cache.file_key(('fn', 7), args)
  theirs = cache / program_cache.file_key(('fn', 8), other)
  mine.write_bytes(theirs.read_bytes())  # valid, but not this program
  _same_as_jit(program_cache.exported(_fn, ('fn', 7))(*args), args)
  assert mine.read_bytes() != theirs.read_bytes()


def test_a_file_that_fails_to_run_is_exported_again(cache, monkeypatch):
  args = _args()
  program_cache.exported(_fn, ('fn', 9))(*args)
  real = program_cache.decode
  calls = []

  def broken(data, key_hex):
    exported_fn, tree = real(data, key_hex)
    calls.append(1)

    def fails(*_):
      raise RuntimeError('INTERNAL: a program that cannot run')

    return _Broken(exported_fn, fails), tree

  monkeypatch.setattr(program_cache, 'decode', broken)
  _same_as_jit(program_cache.exported(_fn, ('fn', 9))(*args), args)
  assert calls == [1]
  assert compile_cache.status()['events']['programs_dropped'] == 1


def test_threads_that_ask_at_once_share_one_export(cache):
  """Two threads calling a new program at the same moment: it is traced
  (exported) once, and both get its bits."""
  import threading

  traced = []
  both = threading.Barrier(2)

  def slow_trace(x, y):
    traced.append(1)
    time.sleep(0.2)  # tracing: the other thread asks meanwhile
    return _fn(x, y)

  run = program_cache.exported(slow_trace, ('fn', 12))
  args = _args()
  out = [None, None]

  def ask(i):
    both.wait()
    out[i] = run(*args)

  threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert traced == [1]
  for got in out:
    _same_as_jit(got, args)


class _Broken:
  """An export whose call fails (as a damaged program would)."""

  def __init__(self, exported_fn, call):
    self.out_avals = exported_fn.out_avals
    self.call = call


def test_a_fifo_in_its_place_turns_the_cache_off(cache, monkeypatch):
  off = []
  monkeypatch.setattr(compile_cache, 'turn_off', off.append)
  args = _args()
  cache.mkdir(parents=True)
  os.mkfifo(cache / program_cache.file_key(('fn', 10), args))
  _same_as_jit(program_cache.exported(_fn, ('fn', 10))(*args), args)
  assert len(off) == 1 and 'FIFO' in off[0]


def test_every_structure_kind_reads_back(cache):
  """The output structure is JSON: named tuples, dicts with int keys, None,
  lists and a registered dataclass (a Platform) read back equal."""
  from codesign.spec import platform_presets

  platform = platform_presets.get('big_basin')

  def fn(x):
    scaled = jax.tree.map(lambda v: v * x[0], platform)
    return [Pair(x, None), {3: x, 1: (x,)}, scaled]

  x = jnp.asarray([1.5, 2.0])
  first = program_cache.exported(fn, ('fn', 11))(x)
  again = program_cache.exported(fn, ('fn', 11))(x)  # read from disk
  assert jax.tree.structure(again) == jax.tree.structure(first)
  assert jax.tree.structure(first) == jax.tree.structure(jax.jit(fn)(x))


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
