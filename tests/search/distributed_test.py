"""The search on two processes (`jax.distributed` on localhost, CPU, gloo
collectives) gives the same bits as on one process.

Both runs shard the starts over 2 devices: one process with 2 host
devices, or two processes with one each (a mesh over the global device
list; `codesign.search.batching` lays rows out per process and gathers results
from every process). Two devices on both sides, because a single-device
program may differ in the last bits (codesign/search.py, Reproducibility).
The workers are tests/search/distributed_worker.py, run at once under one hard
deadline, so a hang fails the test instead of blocking it. They compile
with XLA's cheaper LLVM settings (as tests/model/gradients_test.py), all three
alike: half the compile time, the same comparison.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKER = ROOT / 'tests' / 'search' / 'distributed_worker.py'
TIMEOUT_S = 150  # all three workers; about 35 CPU seconds in all
KEYS = (
  'best_index',
  'best_plan_z',
  'best_value',
  'best_feasible',
  'continuous_z',
  'continuous_value',
  'evaluations',
)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


def _start(tmp_path, name, process_id, processes, port, devices):
  # The suite's XLA flags (its fast compiles, all alike) and the device
  # count by JAX's setting. JAX's compilation cache keys on the process's
  # devices (jax 0.10: the CPU topology's fingerprint counts them), so
  # these workers share no compile with the suite's 1-device processes.
  env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(devices))
  env['JAX_PLATFORMS'] = 'cpu'
  env['PYTHONPATH'] = str(ROOT)
  out = tmp_path / f'{name}.json'
  log = open(tmp_path / f'{name}.log', 'w')
  args = [str(out), str(process_id), str(processes), str(port)]
  proc = subprocess.Popen(
    [sys.executable, str(WORKER), *args],
    cwd=ROOT,
    env=env,
    stdout=log,
    stderr=subprocess.STDOUT,
  )
  log.close()
  return name, proc


def _wait_all(tmp_path, procs):
  """Waits for every worker until TIMEOUT_S after the call; kills those
  still running then. Returns {name: record}; asserts every worker
  finished in time and succeeded."""
  deadline = time.monotonic() + TIMEOUT_S
  late = []
  for name, proc in procs:
    try:
      proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
      late.append(name)
  for _, proc in procs:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  logs = {name: (tmp_path / f'{name}.log').read_text() for name, _ in procs}
  assert not late, f'{late} ran past {TIMEOUT_S} s; logs: {logs}'
  records = {}
  for name, proc in procs:
    assert proc.returncode == 0, f'{name} failed:\n{logs[name][-3000:]}'
    records[name] = json.loads((tmp_path / f'{name}.json').read_text())
  return records


@pytest.mark.heavy
def test_search_on_two_processes_equals_one_process(tmp_path):
  port = _free_port()
  procs = [
    _start(tmp_path, 'single', 0, 1, 0, devices=2),
    _start(tmp_path, 'rank0', 0, 2, port, devices=1),
    _start(tmp_path, 'rank1', 1, 2, port, devices=1),
  ]
  r = _wait_all(tmp_path, procs)
  single = r['single']
  assert single['process_count'] == 1
  assert single['device_count'] == single['local_device_count'] == 2
  for i, name in enumerate(('rank0', 'rank1')):
    assert r[name]['process_index'] == i
    assert r[name]['process_count'] == 2
    assert r[name]['device_count'] == 2
    assert r[name]['local_device_count'] == 1
  # A real proposal (a feasible design with a positive throughput), the
  # same bits on every process and on one process.
  assert single['best_feasible']
  assert float.fromhex(single['best_value']) > 0
  assert len(single['best_plan_z']) > 0  # plan mode `optimize`: polished
  for key in KEYS:
    assert r['rank0'][key] == single[key], key
    assert r['rank1'][key] == single[key], key
