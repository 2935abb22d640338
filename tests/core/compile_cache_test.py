"""The persistent compilation cache: where it goes, off, and what a run
records."""

import json
import os
import pathlib
import subprocess
import sys

from codesign.core import compile_cache

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_off_by_flag_or_environment(monkeypatch):
  assert compile_cache.resolve('off') is None
  assert compile_cache.resolve('OFF') is None
  monkeypatch.setenv(compile_cache.ENV_VAR, 'off')
  assert compile_cache.resolve() is None
  monkeypatch.setenv(compile_cache.ENV_VAR, '/x/y')
  assert str(compile_cache.resolve()) == '/x/y'
  assert str(compile_cache.resolve('/a')) == '/a'  # the flag wins


def test_default_is_per_user(monkeypatch, tmp_path):
  monkeypatch.delenv(compile_cache.ENV_VAR, raising=False)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path))
  assert compile_cache.resolve() == tmp_path / 'codesign' / 'jax'


_RUN = (
  'import json, jax, jax.numpy as jnp\n'
  'from codesign.core import compile_cache\n'
  'status = compile_cache.enable()\n'
  'jax.jit(lambda x: jnp.sin(x) * 3.25 + 0.5)(jnp.arange(7.0))'
  '.block_until_ready()\n'
  'print(json.dumps(status))\n'
)


def _fresh_process(cache) -> dict:
  """compile_cache.status() of a new process that compiles one function
  with the cache at `cache` (JAX opens its cache once per process)."""
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
  cold = _fresh_process(tmp_path / 'c')
  assert cold == {
    'dir': str(tmp_path / 'c'),
    'warm': False,
    'entries_before': 0,
  }
  warm = _fresh_process(tmp_path / 'c')
  assert warm['warm'] and warm['entries_before'] >= 1


def test_an_unwritable_place_leaves_the_cache_off(tmp_path):
  suite_cache = os.environ[compile_cache.ENV_VAR]
  blocker = tmp_path / 'file'
  blocker.write_text('not a directory')
  try:
    status = compile_cache.enable(str(blocker / 'cache'))
    assert status == {'dir': None, 'warm': False, 'entries_before': 0}
  finally:
    compile_cache.enable(suite_cache)
