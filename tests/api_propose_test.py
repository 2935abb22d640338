"""`codesign.propose` end to end, as a user calls it: a fresh process
outside the checkout, JAX left at its defaults (no float64 switched on by
the caller), the search run for real (nothing monkeypatched); its
proposal equals the command line's result.json for the same arguments.
And the API takes every flag of `experiments.propose` that changes the
answer, with the command line's defaults."""

import dataclasses
import inspect
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

import codesign
from codesign import InputError
from codesign.studies import proposal

ROOT = pathlib.Path(__file__).resolve().parents[1]

# A tiny request: 2 starts of 4 steps, one preset, two parts, one space.
ARGS = {
  'workload': 'rm1',
  'budget_usd': 3e5,
  'max_nodes': 2,
  'starts': 2,
  'steps': 4,
  'presets': ('dgx_h100',),
  'only_parts': ('H100', 'EPYC-9654'),
  'trainers': ('accelerator',),
  'systems': ('board',),  # one space: the question is the API's path
}
FLAGS = [
  '--workload=rm1',
  '--budget_usd=3e5',
  '--max_nodes=2',
  '--starts=2',
  '--steps=4',
  '--presets=dgx_h100',
  '--only_parts=H100,EPYC-9654',
  '--trainers=accelerator',
  '--systems=board',
]
# The flags of experiments.propose that say where and how a run is
# written, not what it answers; `stack` and the preset list are checked
# by name below.
NOT_ANSWERS = {
  'workdir',
  'overwrite',
  'from_config',
  'x64',
  'compile_cache',
  'quiet',
}

API_SCRIPT = """
import json, os, sys
import jax
assert not jax.config.jax_enable_x64  # the user's default
import codesign
from codesign import InputError
from codesign.core import results
r = codesign.propose(**json.loads(sys.argv[1]))
assert not jax.config.jax_enable_x64  # left as it was
# The compiles the command line left in the cache are read back.
from codesign.core import compile_cache
status = compile_cache.status()
assert status['dir'] == os.environ['CODESIGN_COMPILE_CACHE'], status
assert status['events'].get('hits', 0) > 0, status
sys.stdout.write(results.dumps(r['proposal']))
"""


def _env():
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  env.pop('JAX_ENABLE_X64', None)
  return env


@pytest.mark.heavy
def test_api_propose_runs_in_a_fresh_process_and_equals_the_cli(tmp_path):
  run = tmp_path / 'run'
  cli = subprocess.run(
    [sys.executable, '-m', 'experiments.propose', *FLAGS, f'--workdir={run}'],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert cli.returncode == 0, cli.stderr[-2000:]
  api = subprocess.run(
    [sys.executable, '-c', API_SCRIPT, json.dumps(ARGS)],
    cwd=tmp_path,  # outside the checkout
    env=_env(),
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert api.returncode == 0, api.stderr[-2000:]
  from_api = json.loads(api.stdout)
  from_cli = json.loads((run / 'result.json').read_text())['proposal']
  assert from_api == from_cli
  assert from_api['within_limits']


FLAG_NAMES = """
import json, sys
from absl import flags
import experiments.propose
by_module = flags.FLAGS.flags_by_module_dict()
names = set()
for module in ('experiments.propose', 'experiments.common'):
  names |= {f.name for f in by_module.get(module, [])}
print(json.dumps(sorted(names)))
"""


def test_api_propose_takes_every_flag_that_changes_the_answer():
  out = subprocess.run(
    [sys.executable, '-c', FLAG_NAMES],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=60,
  )
  flags = set(json.loads(out.stdout))
  assert {'objective', 'only_parts', 'override'} <= flags  # read them all
  params = inspect.signature(codesign.propose).parameters
  assert sorted(flags - NOT_ANSWERS - set(params)) == []


def test_api_propose_defaults_are_the_settings_defaults():
  params = inspect.signature(codesign.propose).parameters
  for field in dataclasses.fields(proposal.Settings):
    if field.name in ('workload', 'presets'):
      continue
    assert params[field.name].default == field.default, field.name
  assert params['presets'].default is None  # proposal.PRESETS


def test_api_propose_refuses_starts_beyond_memory_before_compiling():
  """10^9 starts would end the process in XLA's allocator (an abort that
  kills a notebook's kernel); they are one sentence, in seconds."""
  t0 = time.monotonic()
  with pytest.raises(InputError) as e:
    codesign.propose(workload='criteo_kaggle', starts=10**9, steps=1)
  text = str(e.value)
  assert '1,000,000,000 starts' in text and 'GB of memory' in text
  assert 'lower the starts (--starts, starts=) to at most' in text
  assert time.monotonic() - t0 < 30
