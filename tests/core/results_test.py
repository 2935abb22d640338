"""Run directories that cannot mix or mislead: checked before any work,
never mixed with another run, renamed into place only when complete, files
readable per the umask; in process (`codesign.core.results`) and as a user runs
the scripts (exit status 2 and one sentence for a bad workdir)."""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from codesign.core import locks, results
from codesign.core.errors import InputError
from experiments import early

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_staged_runs_left():
  yield
  results.abandon_runs()


def _old_run(path: pathlib.Path) -> pathlib.Path:
  """A past run's directory: its marker files and a result."""
  path.mkdir()
  (path / 'config.json').write_text('{"flags": {}}')
  (path / 'env.json').write_text('{"versions": {}}')
  (path / 'result.json').write_text('old')
  return path


def test_a_run_is_staged_then_renamed_into_place(tmp_path):
  final = tmp_path / 'run'
  assert results.reserve_workdir('x', str(final)) == final
  staging = results.make_workdir('x', str(final))
  assert staging != final and staging.parent == tmp_path
  assert staging.name.startswith('.run.partial-')
  assert not final.exists()  # a reader sees no run yet
  results.write_json(staging / 'result.json', {'a': 1})
  assert results.final_path(staging) == final
  assert results.finish_runs() == [final]
  assert (final / 'result.json').read_text() == '{\n "a": 1\n}\n'
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run']


def test_a_failed_run_leaves_nothing(tmp_path):
  staging = results.make_workdir('x', str(tmp_path / 'run'))
  results.write_json(staging / 'config.json', {})
  results.abandon_runs()
  assert list(tmp_path.iterdir()) == []


def test_a_used_workdir_is_refused_unless_overwrite(tmp_path):
  final = _old_run(tmp_path / 'run')  # written before runs listed files
  (final / 'growth.png').write_text('old')  # a file runs write
  with pytest.raises(InputError, match='already holds a run.*--overwrite'):
    results.reserve_workdir('x', str(final))
  assert (final / 'result.json').read_text() == 'old'
  results.reserve_workdir('x', str(final), overwrite=True)
  staging = results.make_workdir('x', str(final))
  results.write_json(staging / 'result.json', {'new': True})
  results.finish_runs()
  # The old run is replaced whole: nothing of it stays beside the new one,
  # and the new one lists what it wrote.
  assert sorted(p.name for p in final.iterdir()) == [
    results.MANIFEST,
    'result.json',
  ]
  assert results.foreign_files(final) == []
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run']


def test_overwrite_refuses_a_run_holding_files_it_did_not_write(tmp_path):
  """A user's notes and figures in a run folder are named and kept:
  --overwrite replaces only a run that holds nothing else."""
  final = tmp_path / 'run'
  results.reserve_workdir('x', str(final))
  staging = results.make_workdir('x', str(final))
  results.write_json(staging / 'config.json', {'flags': {}})
  results.write_json(staging / 'env.json', {'versions': {}})
  (staging / 'plots').mkdir()
  results.write_json(staging / 'plots' / 'a.json', {})
  results.finish_runs()
  assert results.foreign_files(final) == []
  (final / 'notes.md').write_text('my notes')
  (final / 'figs').mkdir()
  (final / 'figs' / 'mine.png').write_bytes(b'png')
  with pytest.raises(InputError) as e:
    results.reserve_workdir('x', str(final), overwrite=True)
  assert 'figs/mine.png, notes.md' in str(e.value)
  assert (final / 'notes.md').read_text() == 'my notes'
  assert (final / 'figs' / 'mine.png').read_bytes() == b'png'
  (final / 'notes.md').unlink()
  shutil.rmtree(final / 'figs')
  results.reserve_workdir('x', str(final), overwrite=True)


def test_overwrite_never_replaces_what_is_not_a_run(tmp_path):
  home = tmp_path / 'home'
  home.mkdir()
  (home / 'thesis.tex').write_text('years of work')
  (home / 'notes').mkdir()
  with pytest.raises(InputError) as e:
    results.reserve_workdir('x', str(home), overwrite=True)
  message = str(e.value)
  assert 'notes, thesis.tex' in message and 'not a codesign run' in message
  assert '\n' not in message
  assert (home / 'thesis.tex').read_text() == 'years of work'
  assert sorted(p.name for p in tmp_path.iterdir()) == ['home']


def test_a_symlink_workdir_is_followed_and_left_a_link(tmp_path):
  target = _old_run(tmp_path / 'target')
  link = tmp_path / 'link'
  link.symlink_to(target)
  assert results.reserve_workdir('x', str(link), overwrite=True) == target
  staging = results.make_workdir('x', str(link))
  results.write_json(staging / 'result.json', {'new': True})
  assert results.finish_runs() == [target]
  assert link.is_symlink() and link.resolve() == target
  assert sorted(p.name for p in target.iterdir()) == [
    results.MANIFEST,
    'result.json',
  ]
  assert sorted(p.name for p in tmp_path.iterdir()) == ['link', 'target']


def test_a_symlink_to_a_non_run_is_refused_and_kept(tmp_path):
  target = tmp_path / 'home'
  target.mkdir()
  (target / 'thesis.tex').write_text('years of work')
  (tmp_path / 'link').symlink_to(target)
  with pytest.raises(InputError, match='not a codesign run'):
    results.reserve_workdir('x', str(tmp_path / 'link'), overwrite=True)
  assert (tmp_path / 'link').is_symlink()
  assert sorted(p.name for p in tmp_path.iterdir()) == ['home', 'link']


def test_a_workdir_in_use_is_refused_naming_the_process(tmp_path):
  final = tmp_path / 'run'
  child = (
    'import sys, time\n'
    'from codesign.core import results\n'
    'results.reserve_workdir("x", sys.argv[1])\n'
    'print("reserved", flush=True)\n'
    'time.sleep(60)\n'
  )
  proc = subprocess.Popen(
    [sys.executable, '-c', child, str(final)],
    cwd=ROOT,
    stdout=subprocess.PIPE,
    text=True,
  )
  try:
    assert proc.stdout.readline().strip() == 'reserved'
    for overwrite in (False, True):
      with pytest.raises(InputError) as e:
        results.reserve_workdir('x', str(final), overwrite=overwrite)
      assert f'process {proc.pid}' in str(e.value)
      assert 'in use by another run' in str(e.value)
    # The scripts ask before jax loads (experiments.early), the same lock.
    assert early.lock_path(str(final)) == str(locks.lock_path(final))
    with pytest.raises(SystemExit) as exit_:
      early.refuse_if_in_use(['--workdir', str(final)])
    assert exit_.value.code == 2
  finally:
    proc.kill()
    proc.wait()
  # Its lock dies with it: the next run takes the directory.
  results.reserve_workdir('x', str(final))
  results.write_json(results.make_workdir('x', str(final)) / 'a.json', {})
  results.finish_runs()
  deadline = time.monotonic() + 20
  while len(list(tmp_path.iterdir())) > 1 and time.monotonic() < deadline:
    time.sleep(0.2)
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run']


def test_stale_leftovers_of_dead_processes_in_the_study_folder_go(tmp_path):
  proc = subprocess.Popen([sys.executable, '-c', 'pass'])
  proc.wait()
  # A default (timestamped) run killed with its watcher: the next run of
  # the study, into another timestamp, cleans it.
  stale = tmp_path / f'.20260101-000000-000000{results.STAGING_MARK}{proc.pid}'
  stale.mkdir()
  (stale / 'config.json').write_text('{}')
  moved = _old_run(tmp_path / f'.old{results.OLD_MARK}{proc.pid}')
  results.reserve_workdir('x', str(tmp_path / 'new'))
  results.abandon_runs()
  assert not stale.exists() and not moved.exists()
  assert (tmp_path / 'old' / 'result.json').read_text() == 'old'


def test_an_empty_workdir_is_used(tmp_path):
  (tmp_path / 'run').mkdir()
  results.reserve_workdir('x', str(tmp_path / 'run'))
  results.finish_runs()
  assert (tmp_path / 'run').is_dir()


@pytest.mark.parametrize('kind', ['file', 'under_a_file'])
def test_a_workdir_that_cannot_be_a_directory_is_one_sentence(tmp_path, kind):
  f = tmp_path / 'f'
  f.write_text('x')
  path = f if kind == 'file' else f / 'run'
  with pytest.raises(InputError) as e:
    results.reserve_workdir('x', str(path))
  assert str(path) in str(e.value) and '\n' not in str(e.value)
  assert sorted(p.name for p in tmp_path.iterdir()) == ['f']


def test_stale_staging_of_a_dead_process_is_removed(tmp_path):
  proc = subprocess.Popen([sys.executable, '-c', 'pass'])
  proc.wait()
  stale = tmp_path / f'.run{results.STAGING_MARK}{proc.pid}'
  stale.mkdir()
  (stale / 'config.json').write_text('{}')
  results.reserve_workdir('x', str(tmp_path / 'run'))
  assert not stale.exists()


def test_files_get_the_umask_mode(tmp_path):
  old = os.umask(0o022)
  try:
    results.write_json(tmp_path / 'a.json', {})
    results.write_csv(tmp_path / 'a.csv', ['x'], [[1]])
  finally:
    os.umask(old)
  for name in ('a.json', 'a.csv'):
    assert (tmp_path / name).stat().st_mode & 0o777 == 0o644


def test_default_workdir_falls_back_when_the_checkout_is_read_only(
  tmp_path, monkeypatch
):
  monkeypatch.setattr(results, 'ROOT', tmp_path / 'file')
  (tmp_path / 'file').write_text('not a directory')
  monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
  path = results.default_workdir('evaluate')
  assert path.parent == tmp_path / 'state' / 'codesign' / 'results' / 'evaluate'


def test_default_workdir_of_an_installed_package_is_per_user(
  tmp_path, monkeypatch
):
  """No checkout (the package in site-packages): runs go to the per-user
  directory, not beside the package; a checkout keeps results/."""
  monkeypatch.setattr(results, 'ROOT', tmp_path / 'site-packages')
  (tmp_path / 'site-packages').mkdir()
  monkeypatch.setenv('XDG_STATE_HOME', str(tmp_path / 'state'))
  path = results.default_workdir('evaluate')
  assert path.parent == tmp_path / 'state' / 'codesign' / 'results' / 'evaluate'
  assert not (tmp_path / 'site-packages' / 'results').exists()
  (tmp_path / 'site-packages' / 'pyproject.toml').write_text('')
  path = results.default_workdir('evaluate')
  assert path.parent == tmp_path / 'site-packages' / 'results' / 'evaluate'


def _evaluate(*args, **kw):
  return subprocess.run(
    [sys.executable, '-m', 'experiments.evaluate', *args],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
    **kw,
  )


def test_scripts_refuse_a_used_workdir_and_overwrite_only_their_own(
  tmp_path,
):
  run = tmp_path / 'run'
  first = _evaluate(f'--workdir={run}')
  assert first.returncode == 0, first.stderr
  assert f'wrote {run}' in first.stdout
  again = _evaluate(f'--workdir={run}')
  assert again.returncode == 2
  assert len(again.stderr.strip().splitlines()) == 1
  assert '--overwrite' in again.stderr and 'Traceback' not in again.stderr
  (run / 'notes.md').write_text('what I made of this run')
  kept = _evaluate(f'--workdir={run}', '--overwrite')
  assert kept.returncode == 2 and 'notes.md' in kept.stderr, kept.stderr
  assert len(kept.stderr.strip().splitlines()) == 1
  assert (run / 'notes.md').read_text() == 'what I made of this run'
  (run / 'notes.md').unlink()
  over = _evaluate(f'--workdir={run}', '--overwrite')
  assert over.returncode == 0, over.stderr
  assert (run / 'result.json').is_file()
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run']
  bad = _evaluate(f'--workdir={run / "result.json"}')
  assert bad.returncode == 2 and 'is a file' in bad.stderr


def test_a_killed_run_leaves_nothing(tmp_path):
  run = tmp_path / 'run'
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
    stderr=subprocess.STDOUT,
    text=True,
  )
  deadline = time.monotonic() + 240
  for line in proc.stdout:  # wait until the search is under way
    if 'step' in line or time.monotonic() > deadline:
      break
  proc.send_signal(signal.SIGKILL)
  proc.wait(timeout=60)
  assert not run.exists()
  # The watcher the run started removes its staging directory.
  deadline = time.monotonic() + 20
  while list(tmp_path.iterdir()) and time.monotonic() < deadline:
    time.sleep(0.2)
  assert list(tmp_path.iterdir()) == []


def test_a_run_killed_while_swapping_in_puts_the_old_run_back(tmp_path):
  # The process dies right after moving the old run aside (the one moment
  # of finish_runs when neither run is in place): its watcher moves the old
  # run back and removes the new, unfinished one.
  run = _old_run(tmp_path / 'run')
  child = (
    'import os, sys\n'
    'from codesign.core import results\n'
    'final = results.reserve_workdir("x", sys.argv[1], overwrite=True)\n'
    'staging = results.make_workdir("x", sys.argv[1])\n'
    '(staging / "result.json").write_text("new")\n'
    'os.replace(final, final.parent / f".{final.name}.old-{os.getpid()}")\n'
    'os._exit(9)\n'
  )
  proc = subprocess.run(
    [sys.executable, '-c', child, str(run)], cwd=ROOT, timeout=120
  )
  assert proc.returncode == 9
  deadline = time.monotonic() + 20
  while len(list(tmp_path.iterdir())) != 1 and time.monotonic() < deadline:
    time.sleep(0.2)
  time.sleep(1.0)  # the watcher has finished its steps
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run']
  assert (run / 'result.json').read_text() == 'old'


def test_two_runs_into_one_workdir_one_completes(tmp_path):
  run = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'experiments.evaluate', f'--workdir={run}']
  first = subprocess.Popen(
    cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  lock = tmp_path / f'.run{locks.LOCK_SUFFIX}'
  deadline = time.monotonic() + 120
  while not lock.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
  second = _evaluate(f'--workdir={run}', '--overwrite')
  out, err = first.communicate(timeout=300)
  assert first.returncode == 0, err
  assert f'wrote {run}' in out
  assert second.returncode == 2, second.stdout
  assert len(second.stderr.strip().splitlines()) == 1
  assert f'in use by another run (process {first.pid}' in second.stderr
  assert (run / 'result.json').is_file()
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run']
