"""Progress on stderr (`experiments.progress`): phase lines with the
seconds since the start, bars with their ETA, never silent for long,
`rich` bars on a terminal, nothing with --quiet. The scripts' own runs
are read in tests/experiments_test.py, tests/studies/zion_decision_test.py
and tests/spec/user_parts_test.py (`tests.streams`)."""

import io
import sys
import time

from experiments import progress
from tests import streams


def test_quiet_prints_nothing():
  out = io.StringIO()
  r = progress.Reporter(quiet=True, stream=out, terminal=False)
  r('a phase')
  r.count('search', 3, 10)
  r.on_step(10)(5, {'phase': 'continuous', 'objective': 1.0})
  r.close()
  assert out.getvalue() == ''


def test_lines_carry_their_seconds_and_bars_their_eta():
  out = io.StringIO()
  r = progress.Reporter(stream=out, terminal=False, heartbeat_s=60)
  r('searching')
  time.sleep(0.05)
  step = r.on_step(300)
  step(30, {'trainer': 'cpu', 'phase': 'continuous', 'objective': None})
  time.sleep(progress.BAR_EVERY_S)
  step(60, {'trainer': 'cpu', 'phase': 'continuous', 'objective': 2.5})
  r.close()
  lines = out.getvalue().splitlines()
  assert lines[0].endswith('] searching') and streams.stamps(out.getvalue())
  assert 'cpu continuous: 30/300 (10%' in lines[1]
  assert 'cpu continuous: 60/300 (20%, ETA ' in lines[2]
  assert lines[2].endswith('best feasible 2.5')
  eta = float(lines[2].split('ETA ')[1].split(' s')[0])
  assert 2 <= eta <= 60  # 30 steps in about a second, 240 to go


def test_a_silent_phase_gets_a_line():
  out = io.StringIO()
  r = progress.Reporter(stream=out, terminal=False, heartbeat_s=0.2)
  r('compiling')
  time.sleep(0.7)
  r.close()
  text = out.getvalue()
  assert 'still running' in text and 'after: compiling' in text
  assert streams.longest_silence(text) < 0.5


def test_a_terminal_gets_rich_bars_with_an_eta():
  out = io.StringIO()
  before = sys.stdout
  r = progress.Reporter(stream=out, terminal=True)
  r('evaluating')
  r.count('presets', 3, 10, 'zion')
  time.sleep(0.3)
  r.count('presets', 6, 10, 'zion')
  stdout = sys.stdout
  assert stdout is not before  # watched: results end the drawing
  print('a result')
  assert sys.stdout is before
  r.close()
  text = out.getvalue()
  assert 'evaluating' in text and '6/10' in text and 'ETA' in text
  assert 'a result' not in text  # results stay on stdout


def test_eta_is_the_rate_so_far():
  assert progress.eta_s(0.0, 10.0, 25, 100) == 30.0
  assert progress.eta_s(0.0, 10.0, 0, 100) is None
