"""Memory checked before the work: requests beyond what this process may
use are one sentence naming the setting and both amounts, and so is a
lack of memory that reaches Python; an address-space limit under what
JAX needs to start is refused before JAX loads."""

import pathlib
import subprocess
import sys
import time

import pytest

from codesign.core import memory
from codesign.core.errors import InputError

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_available_is_positive_and_says_what_bounds_it():
  have, bound = memory.available()
  assert have > 0 and bound


def test_a_request_beyond_what_is_left_is_one_sentence(monkeypatch):
  monkeypatch.setattr(memory, 'available', lambda: (2.0 * memory.GB, 'x'))
  memory.check(1.9 * memory.GB, 'a small request', '--small')
  with pytest.raises(InputError) as e:
    memory.check(300.0 * memory.GB, '9 starts', '--starts to at most 3')
  text = str(e.value)
  assert '9 starts' in text and '300 GB' in text and '2 GB' in text
  assert text.endswith('lower --starts to at most 3') and '\n' not in text


def test_a_lack_of_memory_from_xla_or_python_is_recognised():
  xla = RuntimeError('RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes')
  assert memory.is_out_of_memory(xla)
  assert memory.is_out_of_memory(MemoryError())
  assert not memory.is_out_of_memory(ValueError('bad shape'))
  text = str(memory.out_of_memory(xla, '--starts'))
  assert text.startswith('out of memory') and text.endswith('lower --starts')


@pytest.mark.parametrize('limit_gb', [0.6, 1.5])
def test_a_low_address_space_limit_is_refused_before_jax_loads(
  tmp_path, limit_gb
):
  t0 = time.monotonic()
  kb = int(limit_gb * memory.GB) // 1024
  proc = subprocess.run(
    [
      'bash',
      '-c',
      f'ulimit -v {kb} && exec "$@"',
      'bash',
      sys.executable,
      '-m',
      'experiments.evaluate',
      f'--workdir={tmp_path}/r',
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-500:]
  assert 'ulimit -v' in lines[0] and f'{limit_gb:.3g} GB' in lines[0]
  assert time.monotonic() - t0 < 30
  assert not (tmp_path / 'r').exists()
