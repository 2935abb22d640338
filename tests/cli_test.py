"""`python3 -m experiments.evaluate` as a user runs it: bad input ends in one
sentence and a non-zero exit with no result; a run's config.json
reproduces its result.json byte for byte; the `codesign` command
(`experiments.cli`) lists every script and runs it as `-m` does.

Each subprocess pays for a JAX import, so the bad-input runs start
together and the good runs are two.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# name -> (flags, words the one-line message must contain)
BAD_INPUT = {
  'unknown_workload_preset': (
    ['--workload=criteo_kagle'],
    ["'criteo_kagle'", 'valid choices', 'criteo_kaggle', 'zion_scale'],
  ),
  'unknown_platform_preset': (
    ['--platform=big_basn'],
    ["'big_basn'", 'valid choices', 'big_basin', 'cpu_2s', 'dgx_h200'],
  ),
  'unknown_override_key': (
    ['--override=platform.accelerator.hbm_bandwith_gb_per_s=900'],
    ['unknown override key', 'hbm_bandwith_gb_per_s', 'hbm_bandwidth_gb_per_s'],
  ),
  'zero_batch': (
    ['--override=workload.global_batch=0'],
    ['workload.global_batch', '[1, 1e+08]', 'got 0'],
  ),
  'negative_hbm': (
    ['--override=platform.accelerator.hbm_capacity_gb=-16'],
    ['platform.accelerator.hbm_capacity_gb', 'negative'],
  ),
  'zero_nodes': (
    ['--override=platform.nodes=0'],
    ['platform.nodes', '[1, 1024]', 'got 0'],
  ),
  'malformed_json': (
    ['--workload={tmp}/broken.json'],
    ['broken.json', 'not valid JSON'],
  ),
  'unknown_stack_preset': (
    ['--stack=torchrek'],
    ["'torchrek'", 'valid choices', 'torchrec', 'hugectr', 'jax_xla'],
  ),
  'stack_json_missing_field': (
    ['--stack={tmp}/stack_missing.json'],
    ['missing key', 'stack.op_host_time_us'],
  ),
  'stack_json_out_of_range': (
    ['--stack={tmp}/stack_range.json'],
    ['stack.host_overlap', '[0, 1]', '1.5'],
  ),
  'stack_not_for_the_trainer': (
    ['--platform=cpu_2s', '--stack=hugectr'],
    ["'hugectr'", 'does not run on a cpu trainer', "'cpu_2s'"],
  ),
  'strict_refuses_an_unbuildable_platform': (
    ['--platform=zionex', '--strict'],
    ["'zionex' cannot be built (--strict)", 'pcie_generation', 'nic_slot'],
  ),
  'stack_override_out_of_range': (
    ['--override=stack.embedding_efficiency=0'],
    ['stack.embedding_efficiency', '[0.01, 1]'],
  ),
  'compile_cache_of_no_user': (
    ['--compile_cache=~nosuchuser-codesign/x'],
    ['--compile_cache', '~user does not exist', 'off'],
  ),
}
# name -> (environment, words the one-line message must contain): the
# variables of JAX, XLA and matplotlib, checked at start-up.
BAD_ENVIRONMENT = {
  'x64_maybe': ({'JAX_ENABLE_X64': 'maybe'}, ['JAX_ENABLE_X64', 'true']),
  'mpl_bogus': ({'MPLBACKEND': 'bogus'}, ['MPLBACKEND', 'agg']),
  'xla_unknown': (
    {'XLA_FLAGS': '--xla_no_such_flag_codesign=1'},
    ['XLA_FLAGS', '--xla_no_such_flag_codesign=1', 'unset'],
  ),
  'platform_absent': (
    {'JAX_PLATFORMS': 'no_such_backend'},
    ['JAX_PLATFORMS', 'no_such_backend', 'cpu'],
  ),
  'cache_of_no_user': (
    {'CODESIGN_COMPILE_CACHE': '~nosuchuser-codesign/x'},
    ['CODESIGN_COMPILE_CACHE', '~user'],
  ),
}


def _command(flags, workdir):
  return [
    sys.executable,
    '-m',
    'experiments.evaluate',
    *flags,
    f'--workdir={workdir}',
  ]


def test_bad_input_is_one_sentence(tmp_path):
  # One test (not one per case) so that pytest-xdist does not start the
  # subprocesses twice; all of them run side by side.
  (tmp_path / 'broken.json').write_text('{"name": "criteo_kaggle", "tables": [')
  from codesign.spec import schema, stack_presets

  stack = schema.stack_to_json(stack_presets.get('torchrec'))
  missing = {k: v for k, v in stack.items() if k != 'op_host_time_us'}
  (tmp_path / 'stack_missing.json').write_text(json.dumps(missing))
  (tmp_path / 'stack_range.json').write_text(
    json.dumps({**stack, 'host_overlap': 1.5})
  )
  procs, words = {}, {}
  cases = [(n, f, {}, w) for n, (f, w) in BAD_INPUT.items()]
  cases += [(n, [], e, w) for n, (e, w) in BAD_ENVIRONMENT.items()]
  for name, flags, env, words[name] in cases:
    flags = [f.format(tmp=tmp_path) for f in flags]
    procs[name] = subprocess.Popen(
      _command(flags, tmp_path / name),
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      env={**os.environ, **env},
    )
  problems = []
  for name, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=300)
    workdir = tmp_path / name
    lines = stderr.strip().splitlines()
    if proc.returncode != 2:
      problems.append((name, f'exit status {proc.returncode}'))
    if len(lines) != 1:
      problems.append((name, f'{len(lines)} lines on stderr', stderr[-500:]))
    if 'Traceback' in stderr + stdout:
      problems.append((name, 'traceback'))
    missing = [w for w in words[name] if w not in stderr]
    if missing:
      problems.append((name, f'message lacks {missing}', stderr[-500:]))
    # No run directory, let alone a result.
    if (workdir / 'result.json').exists() or (
      workdir.exists() and any(workdir.iterdir())
    ):
      problems.append((name, 'wrote files'))
  assert not problems, problems


def _closed_stdout(command):
  """`command` as `command >&-` runs it: stdout closed from the start."""
  return subprocess.run(
    ['bash', '-c', 'exec "$@" >&-', 'bash', *command],
    cwd=ROOT,
    stderr=subprocess.PIPE,
    text=True,
    timeout=300,
  )


def test_config_json_reproduces_result_even_with_stdout_closed(tmp_path):
  """The replay runs with stdout closed (`evaluate >&-`): its run folder
  is as complete as the first's and its result the same bytes."""
  first, second = tmp_path / 'first', tmp_path / 'second'
  flags = [
    '--workload=zion_scale',
    '--platform=big_basin',
    # Non-round numbers through the unit conversions, tables spilled.
    '--override=platform.accelerator.hbm_capacity_gb=40.7',
    '--override=platform.cpu.ddr_bandwidth_gb_per_s=131.3',
    '--override=workload.global_batch=24576',
    '--override=plan.overlap=0.3',
    '--stack=hugectr',
    '--override=stack.step_floor_us=123.4',
  ]
  run = lambda f, d: subprocess.run(  # noqa: E731
    _command(f, d), cwd=ROOT, capture_output=True, text=True, timeout=300
  )
  a = run(flags, first)
  assert a.returncode == 0, a.stderr
  result = json.loads((first / 'result.json').read_text())
  for key in (
    'step_time_s',
    'throughput_samples_per_s',
    'breakdown_s',
    'bottleneck',
    'memory',
    'feasible',
    'capex_usd',
    'power_w',
  ):
    assert key in result, key
  assert 0 < result['step_time_s'] < float('inf')
  config = first / 'config.json'
  b = _closed_stdout(
    _command(
      [
        f'--workload={config}',
        f'--platform={config}',
        f'--plan={config}',
        f'--stack={config}',
      ],
      second,
    )
  )
  assert b.returncode == 0 and 'Traceback' not in b.stderr, b.stderr
  assert sorted(p.name for p in second.iterdir()) == sorted(
    p.name for p in first.iterdir()
  )
  assert (first / 'result.json').read_bytes() == (
    second / 'result.json'
  ).read_bytes()
  c1 = json.loads(config.read_text())
  c2 = json.loads((second / 'config.json').read_text())
  for key in ('workload', 'platform', 'plan', 'stack'):
    assert c1[key] == c2[key], key
  assert c1['stack']['name'] == 'hugectr'
  assert c1['stack']['step_floor_us'] == pytest.approx(123.4, rel=1e-12)
  for name in ('env.json', 'config.json'):
    assert (second / name).is_file()


def test_help_into_a_reader_that_left_is_no_traceback():
  """`--help | head -1` where head has already left: the reader is
  closed before the script writes."""
  proc = subprocess.Popen(
    [sys.executable, '-m', 'experiments.evaluate', '--help'],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  proc.stdout.close()
  stderr = proc.stderr.read()
  assert proc.wait(timeout=60) == 1  # absl's status after --help
  assert stderr == ''


# Bad flag values of every kind the shared validator (common.
# check_flag_values) and the parse-time checks catch, over several scripts.
BAD_FLAGS = {
  'nan_time': ('benchmark', ['--min_time_s=nan'], ['--min_time_s', 'finite']),
  'inf_budget': ('pareto', ['--max_budget_usd=inf'], ['--max_budget_usd']),
  'negative_batch': ('benchmark', ['--grad_batch=-5'], ['--grad_batch']),
  'negative_steps': ('calibrate', ['--fit_steps=-1'], ['--fit_steps']),
  'empty_list': ('search_quality', ['--workloads='], ['--workloads']),
  'blank_element': ('scale_out', ['--nodes=1,,4'], ['--nodes', 'empty']),
  'not_a_number': ('propose', ['--budget_usd=abc'], ['--budget_usd']),
  'unknown_platform': (
    'compare_platforms',
    ['--platforms=nope'],
    ["'nope'", 'valid choices'],
  ),
  'unknown_part': ('propose', ['--only_parts=nope'], ["unknown part 'nope'"]),
  'no_part_by_year': ('propose', ['--available_by=2010'], ['by 2010']),
  'every_part_excluded': (
    'propose',
    ['--exclude_parts=V100,A100,MI,H,B200,GB200,GH200,L40S'],
    ['leave no accelerator'],
  ),
  'wrong_override_section': (
    'growth',
    ['--override=platform.nodes=2'],
    ['workload.', 'stack.'],
  ),
  'unknown_preset_compared': (
    'zion_decision',
    ['--presets=zion,nope'],
    ["'nope'", 'valid choices'],
  ),
}


def test_bad_flag_values_are_one_sentence_for_every_script(tmp_path):
  procs = {
    name: subprocess.Popen(
      [
        sys.executable,
        '-m',
        f'experiments.{script}',
        *args,
        f'--workdir={tmp_path / name}',
      ],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for name, (script, args, _) in BAD_FLAGS.items()
  }
  problems = []
  for name, proc in procs.items():
    stdout, stderr = proc.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    if proc.returncode != 2 or len(lines) != 1 or 'Traceback' in stderr:
      problems.append((name, proc.returncode, stderr[-300:]))
    missing = [w for w in BAD_FLAGS[name][2] if w not in stderr]
    if missing:
      problems.append((name, f'message lacks {missing}', stderr[-300:]))
  assert not problems, problems
  assert list(tmp_path.iterdir()) == []  # no run directory at all


def test_a_flag_that_does_not_parse_is_answered_before_jax_loads():
  """`import codesign` and the scripts' shared flag code leave JAX
  unloaded (the package's names load on first use), so a script answers
  a malformed flag without JAX's import; the names still resolve."""
  code = (
    'import sys, codesign\n'
    'from experiments import common\n'
    "assert 'jax' not in sys.modules, 'jax loaded early'\n"
    'assert callable(codesign.evaluate) and codesign.Platform\n'
    "assert 'jax' in sys.modules\n"
  )
  out = subprocess.run(
    [sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True
  )
  assert out.returncode == 0, out.stderr
  bad = subprocess.run(
    [sys.executable, '-m', 'experiments.propose', '--starts=abc'],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert bad.returncode == 2 and '--starts=abc' in bad.stderr
  assert 'Traceback' not in bad.stderr


def test_scripts_define_their_flags_without_jax():
  """Every script's flags (preset names in their help included) are
  defined without JAX: `--help` and a malformed flag are answered before
  JAX's import (about 2 s on 2 cores)."""
  scripts = sorted(
    f.stem
    for f in (pathlib.Path(ROOT) / 'experiments').glob('*.py')
    if f.name != '__init__.py'
  )
  code = (
    'import importlib, sys\n'
    'importlib.import_module(sys.argv[1])\n'
    "assert 'jax' not in sys.modules, sys.argv[1] + ' loads jax'\n"
  )
  procs = {
    name: subprocess.Popen(
      [sys.executable, '-c', code, f'experiments.{name}'],
      cwd=ROOT,
      stderr=subprocess.PIPE,
      text=True,
    )
    for name in scripts
  }
  failed = {n: p.communicate()[1][-300:] for n, p in procs.items()}
  failed = {n: e for n, e in failed.items() if procs[n].returncode != 0}
  assert not failed, failed


def test_the_help_lists_every_preset():
  """The preset names the flags list (spelled out in experiments.common
  so that no JAX loads) are the registries' names."""
  from codesign.spec import platform_presets, stack_presets, workload_presets
  from experiments import common

  assert sorted(common.WORKLOAD_PRESETS) == sorted(workload_presets.WORKLOADS)
  assert sorted(common.PLATFORM_PRESETS) == sorted(platform_presets.PLATFORMS)
  assert sorted(common.STACK_PRESETS) == sorted(stack_presets.PRESETS)


def _scripts_with_main() -> set[str]:
  """The experiments modules that run as `python -m experiments.X`."""
  return {
    f.stem
    for f in (ROOT / 'experiments').glob('*.py')
    if "if __name__ == '__main__':" in f.read_text() and f.stem != '__main__'
  }


def test_the_codesign_command_lists_every_script():
  """`codesign --help` (here `python -m experiments --help`, the same
  dispatcher) names every script but the checkout's doc check, each with
  what it does."""
  from experiments import cli

  assert set(cli.COMMANDS) == _scripts_with_main() - {'doc_numbers', 'cli'}
  out = subprocess.run(
    [sys.executable, '-m', 'experiments', '--help'],
    cwd=ROOT,
    capture_output=True,
    text=True,
  )
  assert out.returncode == 0, out.stderr
  for command in cli.COMMANDS:
    line = next(x for x in out.stdout.split('\n') if f'  {command} ' in x)
    assert len(line.split()) > 3, line  # a summary follows the name


def test_the_codesign_command_runs_the_script_as_dash_m_does():
  """A command's flags reach its script, which answers as under `-m`;
  an unknown or missing command is one sentence and exit status 2."""

  def run(*args):
    return subprocess.run(
      [sys.executable, '-m', *args],
      cwd=ROOT,
      capture_output=True,
      text=True,
    )

  via = run('experiments', 'propose', '--starts=abc')
  direct = run('experiments.propose', '--starts=abc')
  assert via.returncode == direct.returncode == 2
  assert via.stderr == direct.stderr and '--starts=abc' in via.stderr
  for args in (('experiments', 'propse'), ('experiments',)):
    out = run(*args)
    assert out.returncode == 2 and out.stdout == '', args
    assert out.stderr.startswith('error: ') and out.stderr.count('\n') == 1
  assert "'propse'" in run('experiments', 'propse').stderr
