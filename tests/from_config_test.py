"""--from_config goes through the flags' own parsers: a config file gets
exactly the checks the command line gets (`experiments.common`)."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# In one subprocess (the scripts' flags are process-wide): propose's flags,
# each config applied in turn; prints the outcome of each as a JSON line.
CHILD = """
import json, sys
from absl import flags
from experiments import common, propose
from codesign.core.errors import InputError
flags.FLAGS(['propose'])
for path in sys.argv[1:]:
    flags.FLAGS.unparse_flags()
    flags.FLAGS(['propose'])
    try:
        common.apply_config(path)
        fv = flags.FLAGS
        out = {n: fv[n].value for n in ('x64', 'steps', 'starts', 'presets',
                                        'budget_usd', 'override', 'price')}
    except InputError as e:
        out = {'error': str(e)}
    print(json.dumps(out))
"""

CASES = {
  'x64_no': ({'x64': 'no'}, 'bad value for --x64'),
  'steps_null': ({'steps': None}, 'no value (null) for --steps'),
  'override_ints': ({'override': [1, 2]}, 'takes overrides of workload.'),
  'starts_float': ({'starts': 2.5}, 'bad value for --starts'),
  'starts_zero': ({'starts': 0}, 'bad value for --starts'),
  'nested': ({'presets': [['zion']]}, 'bad value for --presets'),
  'object': ({'steps': {'a': 1}}, 'bad value for --steps'),
}
GOOD = {
  'x64': False,
  'steps': 7,
  'budget_usd': '1e6',  # as --budget_usd=1e6 on the command line
  'presets': 'zion',  # as --presets=zion: one preset
  'price': ['H100=22000'],
  'starts': 3,
}


def test_a_config_gets_the_command_lines_checks(tmp_path):
  paths = []
  for name, (recorded, _) in [*CASES.items(), ('good', (GOOD, None))]:
    path = tmp_path / f'{name}.json'
    path.write_text(json.dumps({'flags': recorded}))
    paths.append(str(path))
  proc = subprocess.run(
    [sys.executable, '-c', CHILD, *paths],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  outcomes = [json.loads(line) for line in proc.stdout.splitlines()]
  for (name, (_, words)), got in zip(CASES.items(), outcomes, strict=False):
    assert words in got.get('error', ''), (name, got)
    assert '\n' not in got['error']
  good = outcomes[-1]
  assert good == {
    'x64': False,
    'steps': 7,
    'starts': 3,
    'presets': ['zion'],
    'budget_usd': 1e6,
    'override': [],
    'price': ['H100=22000'],
  }
