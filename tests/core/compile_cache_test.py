"""The persistent compilation cache: where it goes, off, what a run
records, and entries that cannot change or stop a run (damaged, special,
unwritable)."""

import errno
import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core import compile_cache
from codesign.core.errors import InputError

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_off_by_flag_or_environment(monkeypatch):
  assert compile_cache.resolve('off') is None
  assert compile_cache.resolve('OFF') is None
  monkeypatch.setenv(compile_cache.ENV_VAR, 'off')
  assert compile_cache.resolve() is None
  monkeypatch.setenv(compile_cache.ENV_VAR, '/x/y')
  assert str(compile_cache.resolve()) == '/x/y'
  assert str(compile_cache.resolve('/a')) == '/a'  # the flag wins


def test_a_user_that_does_not_exist_is_one_sentence(monkeypatch):
  with pytest.raises(InputError, match='--compile_cache .*~user'):
    compile_cache.resolve('~nosuchuser-codesign/x')
  monkeypatch.setenv(compile_cache.ENV_VAR, '~nosuchuser-codesign/x')
  with pytest.raises(InputError, match=compile_cache.ENV_VAR):
    compile_cache.resolve()


def test_default_is_per_user(monkeypatch, tmp_path):
  monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  assert compile_cache.resolve() == tmp_path / 'codesign' / 'jax'


_RUN = (
  'import json, jax, jax.numpy as jnp\n'
  'from codesign.core import compile_cache\n'
  'before = compile_cache.enable()\n'
  'jax.jit(lambda x: jnp.sin(x) * 3.25 + 0.5)(jnp.arange(7.0))'
  '.block_until_ready()\n'
  'print(json.dumps([before, compile_cache.status()]))\n'
)


def _fresh_process(cache) -> list:
  """compile_cache.status() of a new process that compiles one function
  with the cache at `cache` (JAX opens its cache once per process), when
  enabled and after the compile."""
  env = dict(os.environ, **{compile_cache.ENV_VAR: str(cache)})
  proc = subprocess.run(
    [sys.executable, '-c', _RUN],
    env=env,
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode == 0, proc.stderr[-1000:]
  return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_compile_is_kept_and_the_second_run_is_warm(tmp_path):
  cold, after = _fresh_process(tmp_path / 'c')
  assert cold == {
    'dir': str(tmp_path / 'c'),
    'warm': False,
    'entries_before': 0,
    'off': None,
    'events': {},
  }
  assert after['events'].get('misses', 0) >= 1
  warm, after = _fresh_process(tmp_path / 'c')
  assert warm['warm'] and warm['entries_before'] >= 1
  assert after['events'].get('hits', 0) >= 1
  assert 'misses' not in after['events']


@pytest.fixture
def own_cache(tmp_path):
  """This process's cache moved to a fresh directory for the test."""
  suite_cache = os.environ[compile_cache.ENV_VAR]
  try:
    yield tmp_path / 'own'
  finally:
    compile_cache.enable(suite_cache)


def _compile(scale: float):
  """A program of its own (`scale`), compiled with JAX's in-memory caches
  emptied, so that the persistent cache is asked."""
  jax.clear_caches()
  out = jax.jit(lambda x: jnp.cos(x) * scale)(np.arange(5.0))
  return np.asarray(out)


def test_a_damaged_entry_is_removed_and_compiled_again(own_cache, capfd):
  compile_cache.enable(str(own_cache))
  want = _compile(1.375)
  entries = list(own_cache.glob('*-cache'))
  for entry in entries:
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 1
    entry.write_bytes(bytes(data))
  for _ in range(2):  # the second time: a good entry, no line
    np.testing.assert_array_equal(_compile(1.375), want)
  err = capfd.readouterr().err
  assert err.count('removed a damaged entry') == 1, err
  assert len(err.strip().splitlines()) == 1, err
  events = compile_cache.status()['events']
  assert events['entries_removed'] == len(entries) and events['hits'] >= 1
  for entry in entries:
    key = entry.name.removesuffix('-cache')
    assert compile_cache.entry_value(entry.read_bytes(), key) is not None


def test_an_entry_under_another_key_is_removed(own_cache, capfd):
  """Another program's valid entry copied under this one's name: read
  back, it would run the other program."""
  compile_cache.enable(str(own_cache))
  want = _compile(5.25), _compile(6.75)
  first, second = sorted(own_cache.glob('*-cache'))
  first.write_bytes(second.read_bytes())
  np.testing.assert_array_equal(_compile(5.25), want[0])
  np.testing.assert_array_equal(_compile(6.75), want[1])
  assert compile_cache.status()['events']['entries_removed'] == 1
  assert 'removed a damaged entry' in capfd.readouterr().err


def test_a_fifo_in_the_cache_turns_it_off_without_a_hang(own_cache, capfd):
  own_cache.mkdir()
  os.mkfifo(own_cache / 'a-cache')
  status = compile_cache.enable(str(own_cache))
  assert status['dir'] is None and 'FIFO' in status['off']
  _compile(2.5)
  err = capfd.readouterr().err
  assert err.strip().splitlines() == [
    f'compile cache: {own_cache}/a-cache is a FIFO, not a cache entry; off '
    'for this run'
  ]


def test_a_fifo_made_while_running_is_never_read(own_cache, monkeypatch, capfd):
  compile_cache.enable(str(own_cache))
  planted = []
  real_get = compile_cache.CheckedCache.get

  def plant(self, key):
    planted.append(key)
    os.mkfifo(self.path / f'{key}-cache')
    return real_get(self, key)

  monkeypatch.setattr(compile_cache.CheckedCache, 'get', plant)
  _compile(3.5)  # a hang here is the failure
  monkeypatch.undo()
  assert planted and 'FIFO' in compile_cache.status()['off']
  assert 'off for this run' in capfd.readouterr().err


def test_a_full_disk_leaves_no_temporary_file(own_cache, monkeypatch, capfd):
  compile_cache.enable(str(own_cache))

  def full(*_):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

  monkeypatch.setattr(os, 'replace', full)
  _compile(4.5)
  monkeypatch.undo()
  assert sorted(p.name for p in own_cache.iterdir()) == []
  assert 'No space left on device' in compile_cache.status()['off']
  assert 'off for this run' in capfd.readouterr().err


def test_an_unwritable_place_leaves_the_cache_off(tmp_path):
  suite_cache = os.environ[compile_cache.ENV_VAR]
  blocker = tmp_path / 'file'
  blocker.write_text('not a directory')
  try:
    status = compile_cache.enable(str(blocker / 'cache'))
    assert status['dir'] is None and not status['warm']
    assert 'cannot be used' in status['off']
  finally:
    compile_cache.enable(suite_cache)
