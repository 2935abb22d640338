"""The installable package: the checkout installs into a fresh virtual
environment and README.md's Python API example runs from elsewhere; every
public name exists and is documented.

The venv sees the system site-packages (the pinned dependencies are
installed there), so the install needs neither the network nor a build of
the dependencies.
"""

import inspect
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import codesign

ROOT = pathlib.Path(__file__).resolve().parent.parent
_EXAMPLE = re.compile(
  r'<!-- api-example -->\s*```python\n(.*?)```\s*<!-- /api-example -->', re.S
)
# What a checkout holds that is not a source file.
_NOT_SOURCES = shutil.ignore_patterns(
  '.git',
  '__pycache__',
  '*.pyc',
  'results',
  'build',
  'dist',
  '*.egg-info',
  '.pytest_cache',
  '.ruff_cache',
  '.hypothesis',
)


def readme_example() -> str:
  match = _EXAMPLE.search((ROOT / 'README.md').read_text())
  assert match, 'README.md has no <!-- api-example --> python block'
  return match.group(1)


def _run(args, cwd, env):
  out = subprocess.run(
    args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == 0, f'{args}: {out.stdout}\n{out.stderr}'
  return out.stdout


@pytest.mark.heavy
def test_installed_package_runs_readme_example(tmp_path):
  """pip installs the checkout into a new venv; the README example then
  runs from a directory outside the checkout and prints a positive
  throughput, and the experiments and tests were not installed."""
  # A copy of the checkout's sources, so that the build leaves no build/
  # or egg-info behind in the checkout.
  src = tmp_path / 'src'
  shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
  venv = tmp_path / 'venv'
  _run(
    [sys.executable, '-m', 'venv', '--system-site-packages', str(venv)],
    tmp_path,
    None,
  )
  python = str(venv / 'bin' / 'python')
  env = {
    k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'XLA_FLAGS')
  }
  env['JAX_PLATFORMS'] = 'cpu'
  env['PIP_DISABLE_PIP_VERSION_CHECK'] = '1'
  _run(
    [
      python,
      '-m',
      'pip',
      'install',
      '-q',
      '--no-deps',
      '--no-build-isolation',
      '--no-index',
      str(src),
    ],
    tmp_path,
    env,
  )
  shutil.rmtree(src)  # the installed package must not need the sources
  work = tmp_path / 'elsewhere'
  work.mkdir()
  script = work / 'example.py'
  script.write_text(readme_example())
  out = _run([python, str(script)], work, env)
  throughput = float(out.split()[0])
  assert throughput > 0, out
  where = _run(
    [
      python,
      '-c',
      'import codesign, importlib.util as u; print(codesign.__file__); '
      "print(u.find_spec('experiments'), u.find_spec('tests'))",
    ],
    work,
    env,
  ).split('\n')
  assert pathlib.Path(where[0]).is_relative_to(venv), where
  assert where[1] == 'None None', where
  # The data files came along (catalog, stack fit, device profiles).
  data = pathlib.Path(where[0]).parent / 'data'
  for name in ('catalog.json', 'stack_fit.json', 'profiles/local_cpu.json'):
    assert (data / name).is_file(), name


def test_public_names_exist_and_are_documented():
  assert codesign.__all__
  assert len(set(codesign.__all__)) == len(codesign.__all__)
  for name in codesign.__all__:
    assert hasattr(codesign, name), name
    obj = getattr(codesign, name)
    doc = inspect.getdoc(obj)
    assert doc and len(doc.split()) >= 5, f'{name} has no docstring'
    if inspect.isfunction(obj):
      # Documented in the function itself, not inherited.
      assert obj.__doc__, name
  assert isinstance(codesign.__version__, str)


def test_api_matches_the_scripts_inputs():
  """The loaders take names, files and dicts alike; evaluate takes names
  or objects and gives the same figures; bad input raises InputError."""
  w = codesign.load_workload('criteo_kaggle')
  p = codesign.load_platform('big_basin')
  s = codesign.load_stack('torchrec')
  by_name = codesign.evaluate('criteo_kaggle', 'big_basin')
  by_object = codesign.evaluate(w, p, s, plan=codesign.make_plan(w, p, s))
  assert by_name == by_object
  assert by_name['throughput_samples_per_s'] > 0
  assert (by_name['workload'], by_name['platform'], by_name['stack']) == (
    'criteo_kaggle',
    'big_basin',
    'torchrec',
  )
  from codesign.spec import schema

  assert codesign.load_platform(schema.platform_to_json(p)) == p
  try:
    codesign.load_workload('no_such_workload')
  except codesign.InputError as e:
    assert 'no_such_workload' in str(e)
  else:
    raise AssertionError('an unknown preset must raise InputError')
