"""Stopping on request: the library's stop flag and cancelled thread
pools (`codesign.interrupts`), and Ctrl-C in a script
(`experiments.signals`): one line, exit status 130, nothing left."""

import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from codesign.core import interrupts
from tests import streams

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_check_raises_only_once_asked():
  interrupts.check()
  interrupts.STOP.set()
  try:
    with pytest.raises(KeyboardInterrupt):
      interrupts.check()
  finally:
    interrupts.STOP.clear()


def test_a_failing_call_stops_the_others_at_their_next_check():
  started = threading.Event()
  chunks = []

  def work(i):
    if i == 0:
      started.wait(10)
      raise ValueError('bad input')
    started.set()
    for _ in range(10_000):  # a long search, in chunks
      interrupts.check()
      chunks.append(i)
      time.sleep(0.01)
    return i

  with pytest.raises(ValueError, match='bad input'):
    interrupts.thread_map(work, range(50), workers=2)
  assert len(chunks) < 1000  # stopped long before the end
  assert len(set(chunks)) < 10  # the calls not started are cancelled
  assert not interrupts.STOP.is_set()  # the next call runs


def _started_propose(run: pathlib.Path) -> subprocess.Popen:
  proc = subprocess.Popen(
    [
      sys.executable,
      '-m',
      'experiments.propose',
      '--workload=rm1',
      '--starts=4',
      '--steps=100000',
      '--presets=zion',
      f'--workdir={run}',
    ],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  deadline = time.monotonic() + 240
  for line in proc.stderr:  # wait until the search is under way
    if 'searching' in line or time.monotonic() > deadline:
      break
  return proc


def test_ctrl_c_in_a_script_ends_it_with_one_line_and_no_run(tmp_path):
  run = tmp_path / 'run'
  proc = _started_propose(run)
  proc.send_signal(signal.SIGINT)
  time.sleep(0.05)
  proc.send_signal(signal.SIGINT)  # a second Ctrl-C is handled the same
  _, err = proc.communicate(timeout=60)
  assert proc.returncode == 130
  # Progress (stderr, timestamped) may come before; then the one line.
  said = [x for x in err.strip().splitlines() if not streams.STAMP.match(x)]
  assert said == ['interrupted: stopped; no run written'], err[-2000:]
  assert err.strip().splitlines()[-1] == said[0]
  assert list(tmp_path.iterdir()) == []


def test_thread_map_runs_each_call_under_the_callers_precision():
  """`jax.enable_x64` is thread-local: the pool's threads get the
  caller's setting, not the process's, in both directions."""
  import jax
  import jax.numpy as jnp

  def dtype(_):
    return str(jnp.asarray(1.0).dtype)

  for on, want in ((True, 'float64'), (False, 'float32')):
    with jax.enable_x64(on):
      assert interrupts.thread_map(dtype, range(3), workers=2) == [want] * 3
