"""The machinery of the machine-fault campaign (`codesign.boundary.
fuzz_faults`; the campaign itself runs in `experiments.fuzz
--parts=faults`, not here): a flip is one bit, the rules tell a clean
end from a changed result, an abort, a noisy or left-behind refusal and a
hang, and the classes hold the cases the campaign counts."""

import random
import subprocess

from codesign.boundary import fuzz_faults
from codesign.boundary.fuzz_misuse import Outcome


def test_a_flip_changes_exactly_one_bit(tmp_path):
  path = tmp_path / 'entry'
  data = bytes(range(256)) * 4
  path.write_bytes(data)
  at = fuzz_faults.flip_bit(path, random.Random(3))
  after = path.read_bytes()
  diff = [i for i, (a, b) in enumerate(zip(data, after, strict=True)) if a != b]
  assert diff == [at]
  assert bin(data[at] ^ after[at]).count('1') == 1


def _judged(tmp_path, rc, stderr=b'', result=b'same', run=True):
  folder = tmp_path / f'run{rc}{len(stderr)}{run}'
  if run:
    folder.mkdir()
    (folder / 'result.json').write_bytes(result)
  proc = subprocess.CompletedProcess([], rc, b'', stderr)
  out = Outcome('x', 'y')
  fuzz_faults.judge(proc, folder, b'same', out)
  return out.failures


def test_the_rules_tell_each_end_apart(tmp_path):
  progress = b'[   0.1 s] working\n'
  assert _judged(tmp_path, 0, progress + b'compile cache: dropped\n') == []
  assert _judged(tmp_path, 0, result=b'other') == ['changed result']
  assert _judged(tmp_path, 2, b'error: one sentence\n', run=False) == []
  assert _judged(tmp_path, 2, b'error: a\nerror: b\n', run=False) == [
    'traceback'
  ]
  assert _judged(tmp_path, 2, b'error: one\n') == ['left behind']
  assert _judged(tmp_path, 134, b'F1205 failed\n', run=False) == [
    'native abort'
  ]
  assert _judged(tmp_path, -11, run=False) == ['native abort']
  tb = b'Traceback (most recent call last):\n'
  assert _judged(tmp_path, 1, tb, run=False) == ['traceback']
  assert _judged(tmp_path, 0, b'a\nb\nc\n') == ['noisy']
  out = Outcome('x', 'y')
  fuzz_faults.judge(None, tmp_path, b'same', out)
  assert out.failures == ['hung']


def test_the_classes_hold_at_least_fifty_cases(tmp_path):
  cases = fuzz_faults.environment_cases(tmp_path)
  assert len(cases) >= 50 and len({name for name, _, _ in cases}) == len(cases)
  assert {expect for _, _, expect in cases} == {'run', 'refuse'}
  for variable in (
    'JAX_PLATFORMS',
    'JAX_ENABLE_X64',
    'MPLBACKEND',
    'XLA_FLAGS',
  ):
    assert any(variable in env for _, env, _ in cases), variable
  streams = len(fuzz_faults.STREAM_CASES) * len(fuzz_faults.SCRIPTS)
  assert streams + 2 * len(fuzz_faults.HELP_SCRIPTS) >= 50
  limits = fuzz_faults.MEMORY_LIMITS_GB
  assert min(limits) == 0.6 and max(limits) == 16.0
  memory = len(limits) * len(fuzz_faults.SCRIPTS) + len(
    fuzz_faults.BIG_REQUESTS
  )
  assert memory >= 50
