"""Fuzzing the careless user, part two (`codesign.boundary.fuzz_misuse`
holds the rules and the script classes): wrong arguments and hand-built objects
given to the Python API, config files replayed with `--from_config`, and
Ctrl-C at a random moment of a script (`sigint_trial`).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time

from codesign.boundary.fuzz_misuse import (
  EVALUATE,
  Outcome,
  judge,
  leftovers,
  run_script,
)

# ---- api: wrong types and values in Python --------------------------------

# Run in a subprocess of the checkout under test: every case an expression
# that must raise InputError (or, the last ones, succeed); prints one JSON
# line per case: refused, accepted, or the exception's type (a traceback).
API_CHILD = r"""
import dataclasses, json, math, sys
import numpy as np
import codesign
from codesign import InputError
from codesign.studies import proposal

class SearchStarted(Exception):
  pass

def no_search(*a, **k):
  raise SearchStarted()

proposal.run = no_search
W = codesign.load_workload('criteo_kaggle')
P = codesign.load_platform('big_basin')
S = codesign.load_stack('torchrec')
PLAN = codesign.make_plan(W, P, S)
rep = dataclasses.replace
BAD = {'None': None, 'str': '8', 'nan': math.nan, 'huge': 10**400,
       'dict': {'a': 1}, 'list': [1, 2]}

def cases():
  for f in dataclasses.fields(W):
    for k, v in BAD.items():
      if f.name in ('name', 'interaction', 'optimizer', 'dense_precision',
                    'source') and k == 'str':
        continue
      yield (f'Workload.{f.name}={k}',
             lambda f=f, v=v: codesign.evaluate(rep(W, **{f.name: v}), P))
  T = W.tables[0]
  for name in ('rows', 'dim', 'pooling', 'precision'):
    for k, v in BAD.items():
      if name == 'precision' and k == 'str':
        continue
      yield (f'Table.{name}={k}', lambda n=name, v=v: codesign.evaluate(
        rep(W, tables=(rep(T, **{n: v}),) + W.tables[1:]), P))
  for name in ('nodes', 'sockets_per_node', 'accelerators_per_node', 'cpu',
               'accelerator', 'node_price'):
    for k, v in BAD.items():
      yield (f'Platform.{name}={k}',
             lambda n=name, v=v: codesign.evaluate(W, rep(P, **{n: v})))
  for name in ('hbm_fraction', 'cpu_lookup_fraction', 'overlap', 'sharding',
               'column_shards', 'comm_precision'):
    for k, v in BAD.items():
      yield (f'Plan.{name}={k}',
             lambda n=name, v=v: codesign.evaluate(
               W, P, S, rep(PLAN, **{n: v})))
  for name in ('tf32', 'step_floor', 'id_bytes', 'name'):
    for k in ('None', 'nan', 'dict'):
      yield (f'Stack.{name}={k}',
             lambda n=name, v=BAD[k]: codesign.evaluate(W, P, rep(S, **{n: v})))
  yield ('evaluate(workload=5)', lambda: codesign.evaluate(5, P))
  yield ('evaluate(stack=5)', lambda: codesign.evaluate(W, P, 5))
  yield ('evaluate(plan=5)', lambda: codesign.evaluate(W, P, S, 5))
  yield ('evaluate(x64="no")', lambda: codesign.evaluate(W, P, x64='no'))
  yield ('load_workload([])', lambda: codesign.load_workload([]))
  yield ('load_platform(3.5)', lambda: codesign.load_platform(3.5))
  yield ('make_plan(placement=5)',
         lambda: codesign.make_plan(W, P, placement=5))
  base = dict(workload='criteo_kaggle', starts=1, steps=1)
  for k, v in [('budget_usd', '1e6'), ('max_nodes', 2.7), ('max_nodes', '8'),
               ('starts', 2.5), ('steps', None), ('seed', -1), ('seed', 1.5),
               ('trainers', 'cpu'), ('presets', 'zion'), ('price', 'H100=1'),
               ('objective', 5), ('samples', math.nan), ('power_w', -5),
               ('workload', 5), ('stack', None), ('cpu_stack', 5),
               ('x64', 'no'), ('sharding', 7), ('progress', 5)]:
    yield (f'propose({k}={v!r})',
           lambda k=k, v=v: codesign.propose(**{**base, k: v}))

for name, fn in cases():
  try:
    r = fn()
    if isinstance(r, dict) and not math.isfinite(r.get('step_time_s', 1.0)):
      out = 'accepted (nan result)'
    else:
      out = 'accepted'
  except InputError as e:
    out = 'refused' if '\n' not in str(e) else 'refused in several lines'
  except SearchStarted:
    out = 'accepted (search started)'
  except Exception as e:
    out = type(e).__name__
  print(json.dumps({'name': name, 'out': out}), flush=True)
"""


def api_attempts(root) -> list[Outcome]:
  env = {**os.environ, 'PYTHONPATH': str(root)}
  proc = subprocess.run(
    [sys.executable, '-c', API_CHILD],
    cwd=root,
    env=env,
    capture_output=True,
    text=True,
    timeout=3600,
  )
  outcomes = []
  for line in proc.stdout.splitlines():
    case = json.loads(line)
    out = Outcome('api', case['name'], detail=case['out'])
    if case['out'].startswith('accepted'):
      out.failures.append('accepted')
    elif case['out'] != 'refused':
      out.failures.append('traceback')
    outcomes.append(out)
  if proc.returncode != 0:
    outcomes.append(
      Outcome('api', 'the batch', ['traceback'], proc.stderr[-300:])
    )
  return outcomes


# ---- from_config: the command line's checks --------------------------------

# (recorded flags of evaluate, expect): what --name=text on the command
# line would do with each value.
CONFIGS = [
  ({'x64': 'no'}, 'refuse'),
  ({'x64': 'yes'}, 'refuse'),
  ({'x64': 2}, 'refuse'),
  ({'x64': False}, 'run'),
  ({'override': [1, 2]}, 'refuse'),
  ({'override': 'workload.global_batch=4096'}, 'run'),
  ({'override': [['workload.global_batch=4096']]}, 'refuse'),
  ({'override': {'a': 1}}, 'refuse'),
  ({'stack': 5}, 'refuse'),
  ({'stack': None}, 'refuse'),
  ({'workload': None}, 'refuse'),
  ({'workload': ['criteo_kaggle']}, 'refuse'),
  ({'plan': ['auto']}, 'refuse'),
  ({'seed': -1}, 'refuse'),
  ({'seed': 2.5}, 'refuse'),
  ({'seed': '3'}, 'run'),
  ({'seed': None}, 'refuse'),
  ({'seed': 10**30}, 'either'),
  ({'dump_schema': 'maybe'}, 'refuse'),
  ({'no_such_flag': 1}, 'refuse'),
  ({'device_profile': 5}, 'refuse'),
  ('flags is a list', 'refuse'),
  ('not an object', 'refuse'),
]


def from_config_attempts(root) -> list[Outcome]:
  outcomes = []
  with tempfile.TemporaryDirectory() as tmp:
    base = pathlib.Path(tmp)
    for i, (flags, expect) in enumerate(CONFIGS):
      if flags == 'flags is a list':
        config = {'flags': [1, 2]}
      elif flags == 'not an object':
        config = [1, 2]
      else:
        config = {'flags': flags}
      path = base / f'c{i}.json'
      path.write_text(json.dumps(config))
      out = Outcome('from_config', json.dumps(flags)[:60])
      proc = run_script(
        root,
        [EVALUATE[0], f'--from_config={path}', f'--workdir={base}/r{i}'],
      )
      judge(proc, out, expect)
      outcomes.append(out)
  return outcomes


# ---- Ctrl-C at a random moment ---------------------------------------------

SIGINT_SCRIPTS = {
  'propose': (
    'experiments.propose',
    '--workload=criteo_kaggle',
    '--starts=2',
    '--steps=20',
    '--presets=big_basin,zion',
    '--max_nodes=2',
  ),
  'compare_platforms': (
    'experiments.compare_platforms',
    '--workload=criteo_kaggle',
    '--platforms=big_basin,zion,dgx_a100_80gb',
    '--gpu_platforms=big_basin',
    '--large_memory_platforms=zion',
    '--points=4',
  ),
  'search_quality': (
    'experiments.search_quality',
    '--workloads=criteo_kaggle',
    '--spaces=large',
    '--starts=2',
    '--steps=10',
  ),
}


def _reader(stream, lines: list) -> threading.Thread:
  def read():
    for line in iter(stream.readline, b''):
      lines.append((time.monotonic(), line))

  t = threading.Thread(target=read, daemon=True)
  t.start()
  return t


def sigint_trial(root, script: str, delay_s: float, timeout_s=120) -> dict:
  """Runs a script, sends SIGINT to its process group (as Ctrl-C does)
  `delay_s` seconds after its start, and measures: seconds from the
  signal to the exit, the exit status, the lines it printed after the
  signal, a traceback, and what was left (the run directory, staging,
  moved-aside or lock entries)."""
  env = {**os.environ, 'PYTHONPATH': str(root)}
  with tempfile.TemporaryDirectory() as tmp:
    run = pathlib.Path(tmp) / 'run'
    proc = subprocess.Popen(
      [sys.executable, '-m', *SIGINT_SCRIPTS[script], f'--workdir={run}'],
      cwd=root,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      start_new_session=True,
    )
    lines = []
    readers = [_reader(proc.stdout, lines), _reader(proc.stderr, lines)]
    try:
      proc.wait(timeout=delay_s)
      finished = True  # ended before the signal
    except subprocess.TimeoutExpired:
      finished = False
    t0 = time.monotonic()
    if not finished:
      os.killpg(proc.pid, signal.SIGINT)
    try:
      proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    took = time.monotonic() - t0
    for r in readers:
      r.join(timeout=5)
    after = [line for t, line in lines if t >= t0]
    left = leftovers(pathlib.Path(tmp))
    return {
      'script': script,
      'delay_s': round(delay_s, 2),
      'finished_before': finished,
      'exit_s': round(took, 3),
      'status': proc.returncode,
      'lines_after': len(after),
      'traceback': any(b'Traceback' in line for line in after),
      'left': left + (['run (partial)'] if run.exists() else []),
    }


# ---- the whole measurement ---------------------------------------------------

RULES = (
  'traceback',
  'data lost',
  'run lost',
  'raw control characters',
  'left behind',
  'accepted',
  'hung',
  'harness error',
  # codesign.boundary.fuzz_faults
  'changed result',
  'native abort',
  'noisy',
)


def summarize(outcomes: list[Outcome]) -> dict:
  """Per class: attempts tried, attempts that broke any rule, and the count
  per rule."""
  out = {}
  for o in outcomes:
    row = out.setdefault(
      o.cls, {'tried': 0, 'failed': 0, **{r: 0 for r in RULES}}
    )
    row['tried'] += 1
    row['failed'] += bool(o.failures)
    for rule in set(o.failures):
      row[rule] += 1
  return out


def sigint_summary(trials: list[dict]) -> dict:
  """Per script: trials, how many exited 130 within 2 s with one line,
  no traceback and nothing left; the slowest exit and the most lines."""
  out = {}
  for t in trials:
    if t['finished_before']:
      continue
    row = out.setdefault(
      t['script'],
      {'trials': 0, 'ok': 0, 'max_exit_s': 0.0, 'max_lines': 0, 'statuses': []},
    )
    ok = (
      t['status'] == 130
      and t['exit_s'] <= 2.0
      and t['lines_after'] == 1
      and not t['traceback']
      and not t['left']
    )
    row['trials'] += 1
    row['ok'] += ok
    row['max_exit_s'] = max(row['max_exit_s'], t['exit_s'])
    row['max_lines'] = max(row['max_lines'], t['lines_after'])
    row['statuses'] = sorted(set(row['statuses']) | {t['status']})
  return out


def run_misuse(root, classes, progress=print) -> list[Outcome]:
  """Every attempt of `classes` (names of `fuzz_misuse.CLASSES`) against
  the checkout `root`."""
  from codesign.boundary import fuzz_misuse as fm

  runners = {
    'overwrite': fm.overwrite_attempts,
    'concurrent': fm.concurrent_attempts,
    'json': fm.json_attempts,
    'names': fm.names_attempts,
    'from_config': from_config_attempts,
    'api': api_attempts,
    'output': fm.output_attempts,
  }
  outcomes = []
  for cls in classes:
    progress(f'{cls}: attempts against {root}')
    try:
      got = runners[cls](root)
    except Exception as e:  # the harness, not the checkout: say so
      got = [Outcome(cls, 'the harness', ['harness error'], repr(e))]
    bad = sum(bool(o.failures) for o in got)
    progress(f'{cls}: {len(got)} tried, {bad} failed')
    outcomes += got
  return outcomes


def run_sigint(root, trials: int, seed: int, progress=print) -> list[dict]:
  """`trials` SIGINT trials per script of `SIGINT_SCRIPTS`, each at a
  moment drawn uniformly in the script's first 30 s (after 0.5 s)."""
  import random

  rng = random.Random(seed)
  out = []
  for script in SIGINT_SCRIPTS:
    for _ in range(trials):
      t = sigint_trial(root, script, rng.uniform(0.5, 30.0))
      progress(f'SIGINT {script}: {t}')
      out.append(t)
  return out
