"""The installable package: the checkout installs into a fresh virtual
environment, where README.md's Python API example and the `codesign`
command run from elsewhere; every public name exists and is documented;
the requirement files, pyproject.toml, README.md's commands and CI agree.

The test's venv sees the site-packages of the interpreter that runs the
suite (a `.pth` file; the pinned dependencies are installed there, in the
system Python or in a venv of its own), so the install needs neither the
network nor a build of the dependencies.
"""

import inspect
import json
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys
import tomllib

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


def _run(args, cwd, env, status=0):
  out = subprocess.run(
    args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
  )
  assert out.returncode == status, f'{args}: {out.stdout}\n{out.stderr}'
  return out


def outer_site_dirs() -> list[str]:
  """The site directories of the interpreter running the suite, in its
  order: the system Python's, or a venv's (and its base's, where the venv
  sees them)."""
  dirs = [*site.getsitepackages(), site.getusersitepackages()]
  return list(dict.fromkeys(d for d in dirs if d in sys.path))


def make_venv(where: pathlib.Path) -> pathlib.Path:
  """A venv with nothing installed that sees this interpreter's packages.

  Not `--system-site-packages`: that shows the base interpreter's
  packages, which lack jax and wheel when the suite runs in a venv. The
  `.pth` file adds this interpreter's site directories after the venv's
  own (with their `.pth` files, as `site.addsitedir` does), so what the
  venv installs comes first; pip runs from there too."""
  _run([sys.executable, '-m', 'venv', '--without-pip', str(where)], None, None)
  purelib = subprocess.run(
    [
      str(where / 'bin' / 'python'),
      '-c',
      "import sysconfig; print(sysconfig.get_paths()['purelib'])",
    ],
    capture_output=True,
    text=True,
    check=True,
  ).stdout.strip()
  lines = [f'import site; site.addsitedir({d!r})' for d in outer_site_dirs()]
  (pathlib.Path(purelib) / '_outer_site.pth').write_text('\n'.join(lines))
  return where


def install_copy(tmp_path: pathlib.Path) -> pathlib.Path:
  """pip installs a copy of the checkout into a new venv, then removes
  the copy; returns the venv."""
  # A copy, so that the build leaves no build/ or egg-info in the checkout.
  src = tmp_path / 'src'
  shutil.copytree(ROOT, src, ignore=_NOT_SOURCES)
  venv = make_venv(tmp_path / 'venv')
  _run(
    [
      str(venv / 'bin' / 'python'),
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
    _user_env(venv),
  )
  shutil.rmtree(src)  # the installed package must not need the sources
  return venv


def _user_env(venv: pathlib.Path) -> dict[str, str]:
  """A user's environment with the venv activated: no PYTHONPATH (the
  checkout stays unseen) and no test-suite XLA flags."""
  env = {
    k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'XLA_FLAGS')
  }
  env['PATH'] = f'{venv / "bin"}{os.pathsep}{env.get("PATH", "")}'
  env['JAX_PLATFORMS'] = 'cpu'
  env['PIP_DISABLE_PIP_VERSION_CHECK'] = '1'
  return env


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
  """(venv, its user environment, a directory outside the checkout)."""
  tmp = tmp_path_factory.mktemp('installed')
  venv = install_copy(tmp)
  work = tmp / 'elsewhere'
  work.mkdir()
  env = {**_user_env(venv), 'XDG_STATE_HOME': str(tmp / 'state')}
  return venv, env, work


def test_the_test_venv_sees_this_interpreters_packages(tmp_path):
  """The suite's own venv or system Python: either way the new venv
  imports the pins from where this interpreter has them, after its own
  site-packages."""
  venv = make_venv(tmp_path / 'venv')
  out = _run(
    [
      str(venv / 'bin' / 'python'),
      '-c',
      'import sys, absl, pytest; print(sys.prefix); print(absl.__file__); '
      'print(pytest.__file__)',
    ],
    tmp_path,
    _user_env(venv),
  ).stdout.split('\n')
  import absl

  assert pathlib.Path(out[0]) == venv
  assert out[1] == absl.__file__ and out[2] == pytest.__file__, out


@pytest.mark.heavy
def test_installed_package_runs_readme_example_and_command(installed):
  """pip installs the checkout into a new venv; from a directory outside
  the checkout the README example prints a positive throughput, and
  `codesign evaluate` of the same design writes that throughput (into
  the per-user run directory); the tests were not installed, the
  experiments were, and the data came."""
  venv, env, work = installed
  script = work / 'example.py'
  script.write_text(readme_example())
  out = _run([str(venv / 'bin' / 'python'), str(script)], work, env).stdout
  throughput = float(out.split()[0])
  assert throughput > 0, out
  design = ['--workload=mlperf_dlrm_v1', '--platform=dgx_a100_80gb']
  run = _run(['codesign', 'evaluate', *design, '--stack=hugectr'], work, env)
  # No --workdir: the per-user directory, not site-packages or the cwd.
  state = pathlib.Path(env['XDG_STATE_HOME']) / 'codesign' / 'results'
  (written,) = (state / 'evaluate').iterdir()
  assert f'wrote {written}' in run.stdout
  result = json.loads((written / 'result.json').read_text())
  assert result['throughput_samples_per_s'] == throughput
  assert 'mlperf_dlrm_v1 on dgx_a100_80gb 1x(2S' in run.stdout
  assert 'with hugectr' in run.stdout
  assert list(work.iterdir()) == [script]
  _check_installed_files(venv, work, env)


def _check_installed_files(venv, work, env):
  where = _run(
    [
      str(venv / 'bin' / 'python'),
      '-c',
      'import codesign, experiments, importlib.util as u; '
      'print(codesign.__file__); print(experiments.__file__); '
      "print(u.find_spec('tests'))",
    ],
    work,
    env,
  ).stdout.split('\n')
  assert pathlib.Path(where[0]).is_relative_to(venv), where
  assert pathlib.Path(where[1]).is_relative_to(venv), where
  assert where[2] == 'None', where
  # The data files came along (catalog, stack fit, device profiles).
  data = pathlib.Path(where[0]).parent / 'data'
  for name in ('catalog.json', 'stack_fit.json', 'profiles/local_cpu.json'):
    assert (data / name).is_file(), name


def test_installed_command_answers_help_and_unknown_commands(installed):
  """The installed `codesign` lists its commands, shows a command's own
  flags, and answers an unknown command in one sentence, exit status 2."""
  _, env, work = installed
  from experiments import cli

  listing = _run(['codesign', '--help'], work, env).stdout
  for command in cli.COMMANDS:
    assert f'\n  {command} ' in listing, command
  flags = subprocess.run(
    ['codesign', 'propose', '--help'],
    cwd=work,
    env=env,
    capture_output=True,
    text=True,
  )
  assert '--budget_usd' in flags.stdout and '--only_parts' in flags.stdout
  assert 'Propose the platform to build' in flags.stdout
  assert 'Traceback' not in flags.stderr, flags.stderr
  bad = _run(['codesign', 'evaluat'], work, env, status=2)
  assert bad.stdout == ''
  assert bad.stderr.count('\n') == 1 and "'evaluat'" in bad.stderr


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


def _pins(path: pathlib.Path) -> list[str]:
  lines = (line.split('#')[0].strip() for line in path.read_text().split('\n'))
  return [line for line in lines if line]


def test_requirement_files_match_pyproject():
  """requirements.txt is the runtime (pyproject's dependencies) and
  requirements-test.txt the `test` extra, pin for pin; no test tool in
  the runtime."""
  project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
  runtime = _pins(ROOT / 'requirements.txt')
  test = _pins(ROOT / 'requirements-test.txt')
  assert runtime == project['dependencies']
  assert test == project['optional-dependencies']['test']
  assert not {r.split('=')[0] for r in runtime} & {'pytest', 'ruff', 'wheel'}


def readme_commands() -> list[str]:
  """The commands of README.md's first shell block (not its comments)."""
  block = re.search(r'```sh\n(.*?)```', (ROOT / 'README.md').read_text(), re.S)
  assert block, 'README.md has no sh block'
  lines = [line.strip() for line in block.group(1).split('\n')]
  return [line for line in lines if line and not line.startswith('#')]


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
  """README.md's two commands install the project and run the suite with
  what it needs; .ci/run makes a fresh venv, installs the project as the
  first command does and runs the second, word for word."""
  propose, test = readme_commands()
  install = propose.split(' && ')[0]
  assert install == 'python3 -m pip install .', propose
  assert propose.endswith('codesign propose'), propose
  assert '-r requirements-test.txt' in test and 'pytest' in test, test
  ci = [line.strip() for line in (ROOT / '.ci' / 'run').read_text().split('\n')]
  assert 'set -euo pipefail' in ci
  assert any(re.match(r'python3 -m venv ', line) for line in ci), ci
  assert install in [line.replace(' -q', '') for line in ci], ci  # quieter
  assert test in ci, ci
  assert ci.index(test) > max(i for i, c in enumerate(ci) if 'venv' in c)
