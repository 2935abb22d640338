"""Names are data: a workload or platform name from a file (control
characters, a lone surrogate, mathtext) is printed escaped, drawn as it is
written and never costs a finished run (`core.errors.printable`,
`experiments.common.SafeStream`, `codesign.studies.plotting`)."""

import io
import json
import pathlib
import subprocess
import sys

import numpy as np

from codesign.boundary import inputs
from codesign.core.errors import printable
from codesign.studies import plotting
from experiments import common

ROOT = pathlib.Path(__file__).resolve().parent.parent
PNG = b'\x89PNG\r\n\x1a\n'
# Retitles and clears a terminal, returns the carriage, breaks mathtext and
# cannot be encoded.
HOSTILE = 'evil\x1b]0;pwned\x07\x1b[2J\r$\\frac$ \udc80 \u202eend'


def test_printable_escapes_what_is_not_shown():
  assert printable(HOSTILE) == (
    'evil\\x1b]0;pwned\\x07\\x1b[2J\\x0d$\\frac$ \\udc80 \\u202eend'
  )
  assert printable('a\nb\tc', keep='\n') == 'a\nb\\x09c'
  assert printable('zion é 漢 ✓') == 'zion é 漢 ✓'


def test_a_safe_stream_escapes_encodes_and_survives_a_closed_stream():
  raw = io.TextIOWrapper(io.BytesIO(), encoding='ascii')
  out = common.SafeStream(raw)
  out.write(HOSTILE + ' é\n')
  out.flush()
  text = raw.buffer.getvalue().decode('ascii')
  assert '\x1b' not in text and text.endswith('\\xe9\n')
  raw.close()
  out.write('after the reader left\n')  # no exception: the run goes on
  out.flush()
  assert out.failed


def test_plots_draw_a_hostile_name_as_it_is_written(tmp_path):
  names = [HOSTILE, 'zion']
  plotting.ranked_bars(
    tmp_path / 'b.png',
    names,
    {HOSTILE: np.array([1.0, 2.0])},
    HOSTILE,
    'capex $ and $',
  )
  plotting.lines(
    tmp_path / 'l.png',
    np.array([1, 2]),
    {HOSTILE: np.array([1.0, 2.0])},
    HOSTILE,
    'nodes',
    'y',
  )
  plotting.platform_curves(
    tmp_path / 'p.png',
    np.array([10.0, 100.0]),
    [('throughput (samples/s)', {HOSTILE: np.array([1.0, 2.0])})],
    {HOSTILE: np.array([True, True])},
    {HOSTILE: np.array([True, True])},
    HOSTILE,
  )
  for name in ('b.png', 'l.png', 'p.png'):
    assert (tmp_path / name).read_bytes()[:8] == PNG


def _hostile_workload(tmp_path) -> pathlib.Path:
  d = inputs.workload_json('criteo_kaggle')
  d['name'] = HOSTILE
  path = tmp_path / 'w.json'
  path.write_text(json.dumps(d))  # valid JSON: the surrogate is \udc80
  return path


def test_a_script_prints_a_hostile_name_escaped_and_keeps_its_run(tmp_path):
  w = _hostile_workload(tmp_path)
  run = tmp_path / 'run'
  cmd = [
    sys.executable,
    '-m',
    'experiments.evaluate',
    f'--workload={w}',
    f'--workdir={run}',
  ]
  proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=300)
  assert proc.returncode == 0, proc.stderr
  for stream in (proc.stdout, proc.stderr):
    assert not set(stream) & (set(range(32)) - {9, 10})
  assert b'evil\\x1b]0;pwned' in proc.stdout
  assert json.loads((run / 'result.json').read_text())['workload'] == HOSTILE


def test_a_run_is_written_when_its_reader_is_gone(tmp_path):
  run = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'experiments.evaluate', f'--workdir={run}']
  proc = subprocess.Popen(
    cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
  )
  proc.stdout.close()  # `| head -0`: every print fails
  _, err = proc.communicate(timeout=300)
  assert proc.returncode == 0, err
  assert err == b''
  assert (run / 'result.json').is_file()
