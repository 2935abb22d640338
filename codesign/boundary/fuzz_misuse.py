"""Fuzzing the careless or unlucky user: what they type, give, import or
interrupt, run against a checkout of codesign (this one, or an older one
to measure before and after).

Each attempt belongs to a class (`CLASSES`) and runs a script of the
checkout as a subprocess (or, for the `api` class, a batch of calls in one
subprocess). What it must not do, counted per class (`summarize`):
  traceback  a Python traceback, or an exit status other than 0 and 2
             (130 for an interrupt); a refusal that is not one line;
  data lost  a file that was there before and is not a run, changed or
             gone; a symlink renamed;
  run lost   a run whose work finished that is not in place (a print or
             a plot failed after the work, or two runs overwrote one);
  raw control characters printed (ESC, BEL, CR, ... in stdout/stderr);
  left       hidden staging, moved-aside or lock entries left behind;
  accepted   a wrong input the API or a config file took silently.
`sigint_trial` interrupts a script at a given moment and measures the
time to exit, the exit status, the lines printed and what is left.
"""

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

from codesign.core.results import UNLISTED_RUN_FILES

# A name that retitles and clears a terminal, returns the carriage, breaks
# mathtext and cannot be encoded.
HOSTILE = 'evil\x1b]0;pwned\x07\x1b[2J\r$\\frac$ \udc80 \u202eend'
CLASSES = (
  'overwrite',
  'concurrent',
  'json',
  'names',
  'from_config',
  'api',
  'output',
)
_CONTROL = set(range(32)) - {9, 10} | {127}


@dataclasses.dataclass
class Outcome:
  """What one attempt did; `failures` lists the rules it broke."""

  cls: str
  name: str
  failures: list[str] = dataclasses.field(default_factory=list)
  detail: str = ''


_PROGRESS = re.compile(r'^\[\s*[0-9.]+ s\] ')


def run_script(root, args, timeout=600, **kw):
  env = {**os.environ, 'PYTHONPATH': str(root)}
  return subprocess.run(
    [sys.executable, '-m', *args],
    cwd=root,
    capture_output=True,
    timeout=timeout,
    env=env,
    **kw,
  )


def judge(proc, out: Outcome, expect: str) -> None:
  """The rules every script run keeps: `expect` is 'run' (must write),
  'refuse' (exit 2, one line) or 'either'."""
  err = proc.stderr.decode('utf-8', 'replace')
  # Progress lines (`[  1.2 s] ...`, experiments/progress.py) may come
  # before a refusal found late; the refusal itself is one line.
  said = [x for x in err.strip().splitlines() if not _PROGRESS.match(x)]
  if 'Traceback' in err or proc.returncode not in (0, 2):
    out.failures.append('traceback')
  elif proc.returncode == 2 and len(said) != 1:
    out.failures.append('traceback')
  if _CONTROL & set(proc.stdout + proc.stderr):
    out.failures.append('raw control characters')
  if expect == 'run' and proc.returncode != 0:
    out.failures.append('run lost')
  if expect == 'refuse' and proc.returncode == 0:
    out.failures.append('accepted')
  out.detail = f'exit {proc.returncode}: ' + err.strip()[-160:]


def _snapshot(folder: pathlib.Path) -> dict:
  """Every entry under `folder` (links not followed): path -> bytes, a
  link's target or 'dir'."""
  out = {}
  for dirpath, dirnames, filenames in os.walk(folder):
    for name in dirnames + filenames:
      p = pathlib.Path(dirpath) / name
      rel = str(p.relative_to(folder))
      if p.is_symlink():
        out[rel] = 'link:' + os.readlink(p)
      elif p.is_dir():
        out[rel] = 'dir'
      elif p.is_file():
        out[rel] = p.read_bytes()
  return out


def leftovers(folder: pathlib.Path, wait_s: float = 3.0) -> list[str]:
  """Hidden staging, moved-aside and lock entries in `folder` (waiting for
  a watcher to clean up)."""
  marks = ('.partial-', '.old-', '.lock')
  if not folder.is_dir():
    return []
  deadline = time.monotonic() + wait_s
  while True:
    left = [p.name for p in folder.iterdir() if any(m in p.name for m in marks)]
    if not left or time.monotonic() > deadline:
      return left
    time.sleep(0.2)


# ---- overwrite: never delete what is not ours ----------------------------

EVALUATE = ('experiments.evaluate', '--workload=criteo_kaggle')


def _make_run(path: pathlib.Path) -> None:
  path.mkdir()
  (path / 'config.json').write_text('{"flags": {}}')
  (path / 'env.json').write_text('{"versions": {}}')
  (path / 'result.json').write_text('{"old": true}')


# (what, entries made under a fresh folder (path -> 'dir', 'run', 'fifo',
# 'link:TARGET' or the text of a file), the workdir given, expect).
_HOME = {
  'home': 'dir',
  **{f'home/notes{i}.txt': f'note {i}' for i in range(5)},
  'home/.bashrc': 'export X=1',
  'home/src': 'dir',
  'home/src/main.c': 'int main(){}',
}
OVERWRITE_CASES = [
  ('a file that is not a run', {'w': 'dir', 'w/thesis.tex': 'years'}, 'w',
   'refuse'),
  ('a home directory', _HOME, 'home', 'refuse'),
  ('only a hidden file', {'w': 'dir', 'w/.secret': 'key'}, 'w', 'refuse'),
  ('a past run', {'w': 'run'}, 'w', 'run_if_overwrite'),
  ('a symlink to a past run', {'t': 'run', 'link': 'link:t'}, 'link',
   'run_if_overwrite'),
  ('a symlink to a non-run', {'w': 'dir', 'w/thesis.tex': 'years',
                              'link': 'link:w'}, 'link', 'refuse'),
  ('a dangling symlink', {'link': 'link:nowhere'}, 'link', 'run'),
  ('a file as workdir', {'f': 'precious'}, 'f', 'refuse'),
  ('a workdir under a file', {'f': 'precious'}, 'f/run', 'refuse'),
  ('a FIFO as workdir', {'fifo': 'fifo'}, 'fifo', 'refuse'),
  ('an empty directory', {'w': 'dir'}, 'w', 'run'),
  ('a config.json that is not a run', {'w': 'dir', 'w/config.json': '{}',
                                       'w/data.csv': '1,2'}, 'w', 'refuse'),
  ('a past run with notes of its user', {'w': 'run', 'w/notes.md': 'mine'},
   'w', 'refuse'),
  ('a past run with figures of its user', {'w': 'run', 'w/figs': 'dir',
                                          'w/figs/a.png': 'png'}, 'w',
   'refuse'),
]  # fmt: skip


def _build(base: pathlib.Path, entries: dict) -> None:
  for rel, what in entries.items():
    path = base / rel
    if what == 'dir':
      path.mkdir()
    elif what == 'run':
      _make_run(path)
    elif what == 'fifo':
      os.mkfifo(path)
    elif what.startswith('link:'):
      path.symlink_to(base / what[5:])
    else:
      path.write_text(what)


def _overwrite_attempt(root, case, overwrite) -> Outcome:
  name, entries, given, expect = case
  out = Outcome('overwrite', f'{name}{" --overwrite" if overwrite else ""}')
  with tempfile.TemporaryDirectory() as tmp:
    base = pathlib.Path(tmp)
    _build(base, entries)
    workdir = base / given
    before = _snapshot(base)
    args = [*EVALUATE, f'--workdir={workdir}']
    if overwrite:
      args.append('--overwrite')
    proc = run_script(root, args, stdin=subprocess.DEVNULL)
    if expect == 'run_if_overwrite':
      expect = 'run' if overwrite else 'refuse'
    judge(proc, out, expect)
    after = _snapshot(base)
    run_dir = os.path.realpath(workdir)
    for rel, content in before.items():
      inside = os.path.realpath(base / rel).startswith(run_dir + os.sep)
      is_run = (base / rel).parent.joinpath('env.json').exists()
      ours = pathlib.Path(rel).name in UNLISTED_RUN_FILES  # a run's file
      if after.get(rel) != content and not (inside and is_run and ours):
        out.failures.append('data lost')
        break
    left = leftovers(base) + leftovers(pathlib.Path(run_dir).parent)
    if left:
      out.failures.append('left behind')
  return out


def overwrite_attempts(root) -> list[Outcome]:
  return [
    _overwrite_attempt(root, case, overwrite)
    for case in OVERWRITE_CASES
    for overwrite in (False, True)
  ]


# ---- concurrent: one run per workdir -------------------------------------


COMPARE = (
  'experiments.compare_platforms',
  '--workload=criteo_kaggle',
  '--platforms=big_basin,zion',
  '--gpu_platforms=big_basin',
  '--large_memory_platforms=zion',
  '--points=3',
  '--refine_steps=0',
)


def _started(folder: pathlib.Path, proc, timeout_s: float = 120) -> bool:
  """Waits until a run has staged its directory in `folder`."""
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline and proc.poll() is None:
    if any('.partial-' in p.name for p in folder.iterdir()):
      return True
    time.sleep(0.05)
  return False


def concurrent_attempts(root, pairs: int = 4) -> list[Outcome]:
  """A compare_platforms run into a workdir, and while it works an
  evaluate run into the same one: exactly one completes, the other
  refuses at once."""
  outcomes = []
  env = {**os.environ, 'PYTHONPATH': str(root)}
  for i in range(pairs):
    overwrite = i % 2 == 1
    out = Outcome('concurrent', f'pair {i}' + ' --overwrite' * overwrite)
    with tempfile.TemporaryDirectory() as tmp:
      run = pathlib.Path(tmp) / 'run'
      flags = [f'--workdir={run}'] + ['--overwrite'] * overwrite
      first = subprocess.Popen(
        [sys.executable, '-m', *COMPARE, *flags],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
      )
      _started(pathlib.Path(tmp), first)
      t0 = time.monotonic()
      second = run_script(root, [*EVALUATE, *flags])
      took = time.monotonic() - t0
      o1, e1 = first.communicate(timeout=600)
      wrote = [b'wrote' in o1, b'wrote' in second.stdout]
      judge(second, out, 'either')
      if sum(wrote) != 1:
        out.failures.append('run lost')
      if b'Traceback' in e1 or first.returncode not in (0, 2):
        out.failures.append('traceback')
      if leftovers(pathlib.Path(tmp)):
        out.failures.append('left behind')
      out.detail += f' (second ended after {took:.1f} s)'
    outcomes.append(out)
  return outcomes


# ---- json: inputs that parse but cannot be held ---------------------------


def _criteo() -> dict:
  """criteo_kaggle's workload JSON (the same schema in every checkout
  measured)."""
  from codesign.boundary import inputs

  return inputs.workload_json('criteo_kaggle')


def _criteo_text(**raw) -> str:
  """criteo_kaggle's JSON text with the values of `raw` (key -> JSON text,
  written as is: '9' * 400, '1e400', '[[[]]]')."""
  d = _criteo()
  d.update({k: f'@{k}@' for k in raw})
  text = json.dumps(d)
  for k, v in raw.items():
    text = text.replace(f'"@{k}@"', v)
  return text


def _json_cases(base: pathlib.Path):
  """(name, evaluate flags, expect) of inputs that parse but cannot be
  held, or are not files."""

  def file(name, text):
    path = base / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return str(path)

  cases = []
  for digits in (20, 400, 5000, 100_000):
    path = file(f'int{digits}.json', _criteo_text(global_batch='9' * digits))
    cases.append((f'a {digits}-digit integer', [f'--workload={path}']))
  for depth in (100, 1000, 100_000):
    deep = '[' * depth + ']' * depth
    path = file(f'deep{depth}.json', _criteo_text(top_mlp=deep))
    cases.append((f'{depth} levels of nesting', [f'--workload={path}']))
  dup = _criteo_text()[:-1] + ', "global_batch": 4096}'
  cases.append(('a duplicate key', [f'--workload={file("dup.json", dup)}']))
  table_dup = _criteo_text().replace('"dim": ', '"dim": 32, "dim": ', 1)
  cases.append(
    ('a duplicate key in a table', [f'--workload={file("d2.json", table_dup)}'])
  )
  (base / 'adir.json').mkdir()
  os.mkfifo(base / 'fifo.json')
  inf = file('inf.json', _criteo_text(global_batch='1e400'))
  latin = file('latin.json', b'{"name": "\xe9"}')
  cases += [
    ('a directory as workload', [f'--workload={base / "adir.json"}']),
    ('a FIFO as workload', [f'--workload={base / "fifo.json"}']),
    ('a device as workload', ['--workload=/dev/null']),
    ('an unreadable file (EIO)', ['--workload=/proc/self/mem']),
    ('a missing file', [f'--workload={base / "missing.json"}']),
    ('not UTF-8', [f'--workload={latin}']),
    ('an empty file', [f'--workload={file("empty.json", "")}']),
    ('a JSON array', [f'--workload={file("arr.json", "[1, 2]")}']),
    ('NaN at the top', [f'--workload={file("nan.json", "NaN")}']),
    ('1e400 as a batch', [f'--workload={inf}']),
  ]
  good = _criteo()
  many = dict(good, tables=[good['tables'][0]] * 200_001)
  cases.append(
    ('200,001 tables', [f'--workload={file("many.json", json.dumps(many))}'])
  )
  cases += _flag_cases(base, file)
  return [(name, flags, 'refuse') for name, flags in cases]


def _flag_cases(base: pathlib.Path, file) -> list:
  """(name, flags) of overrides, device profiles, stacks and configs that
  cannot be held or are not files."""
  pdup = file('pdup.json', '{"a": 1, "a": 2}')
  sdup = file('sdup.json', '{"name": "a", "name": "b"}')
  cases = []
  for flag, text in (
    ('--override=workload.global_batch=' + '9' * 5000, '5000-digit override'),
    ('--override=workload.top_mlp=' + '[' * 5000 + ']' * 5000, 'deep override'),
    (
      '--override=workload.tables={"rows": 1, "rows": 2}',
      'duplicate-key override',
    ),
    (f'--device_profile={base / "adir.json"}', 'a directory as device profile'),
    (
      f'--device_profile={pdup}',
      'a device profile with a duplicate key',
    ),
    (
      f'--stack={sdup}',
      'a stack with a duplicate key',
    ),
    (f'--from_config={base / "adir.json"}', 'a directory as config'),
    (f'--from_config={base / "fifo.json"}', 'a FIFO as config'),
    (
      f'--from_config={file("cdeep.json", "[" * 100000 + "]" * 100000)}',
      'a deep config',
    ),
  ):
    cases.append((text, [flag]))
  return cases


def _full_disk(base: pathlib.Path):
  """A 64 KiB tmpfs (needs root), or None."""
  mount = base / 'full'
  mount.mkdir()
  proc = subprocess.run(
    ['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', str(mount)],
    capture_output=True,
  )
  if proc.returncode != 0:
    return None
  (mount / 'filler').write_bytes(b'x' * 40_000)
  return mount


def json_attempts(root) -> list[Outcome]:
  outcomes = []
  with tempfile.TemporaryDirectory() as tmp:
    base = pathlib.Path(tmp)
    for name, flags, expect in _json_cases(base):
      out = Outcome('json', name)
      t0 = time.monotonic()
      try:
        proc = run_script(
          root, [*EVALUATE[:1], *flags, f'--workdir={base}/r'], 120
        )
        judge(proc, out, expect)
      except subprocess.TimeoutExpired:
        out.failures.append('hung')
      out.detail += f' ({time.monotonic() - t0:.1f} s)'
      outcomes.append(out)
      shutil.rmtree(base / 'r', ignore_errors=True)
    mount = _full_disk(base)
    if mount is not None:
      for i in range(3):
        out = Outcome('json', f'a full disk ({i})')
        proc = run_script(root, [*EVALUATE, f'--workdir={mount}/run{i}'])
        judge(proc, out, 'refuse')
        if any(p.name != 'filler' for p in mount.iterdir()):
          out.failures.append('left behind')
        outcomes.append(out)
      subprocess.run(['umount', str(mount)], capture_output=True)
  return outcomes


# ---- names: printed, drawn and written as data -----------------------------

NAMES = {
  'a title-setting escape': 'x\x1b]0;pwned\x07y',
  'a screen-clearing escape': 'x\x1b[2J\x1b[Hy',
  'a carriage return': 'fake line\rreal',
  'a bell': 'ding\x07',
  'a C1 control (CSI)': 'x\x9b31my',
  'a lone surrogate': 'x\udc80y',
  'mathtext': '$\\frac$',
  'a bidi override': 'abc\u202edef',
  'a newline': 'two\nlines',
  'a NUL': 'nul\x00byte',
  'everything at once': HOSTILE,
}


def names_attempts(root) -> list[Outcome]:
  outcomes = []
  with tempfile.TemporaryDirectory() as tmp:
    base = pathlib.Path(tmp)
    for i, (what, name) in enumerate(NAMES.items()):
      w = base / f'w{i}.json'
      w.write_text(json.dumps(dict(_criteo(), name=name)))
      script = COMPARE if what in ('mathtext', 'everything at once') else None
      for args in ([*EVALUATE[:1], f'--workload={w}'],) + (
        ((*script[:1], f'--workload={w}', *script[2:]),) if script else ()
      ):
        out = Outcome('names', f'{what} ({args[0].split(".")[1]})')
        run = base / f'run{i}{len(outcomes)}'
        proc = run_script(root, [*args, f'--workdir={run}'])
        judge(proc, out, 'run')
        if proc.returncode == 0 and not (run / 'result.json').is_file():
          out.failures.append('run lost')
        outcomes.append(out)
  return outcomes


def output_attempts(root) -> list[Outcome]:
  """A reader that leaves (`| head -0`) and a stdout on a full device: the
  run is still written."""
  outcomes = []
  with tempfile.TemporaryDirectory() as tmp:
    base = pathlib.Path(tmp)
    env = {**os.environ, 'PYTHONPATH': str(root)}
    for what in ('closed pipe', '/dev/full'):
      out = Outcome('output', f'stdout is a {what}')
      run = base / what.replace('/', '_')
      cmd = [sys.executable, '-m', *EVALUATE, f'--workdir={run}']
      if what == '/dev/full':
        with open('/dev/full', 'w') as full:
          proc = subprocess.run(
            cmd, cwd=root, env=env, stdout=full, stderr=subprocess.PIPE
          )
        err = proc.stderr
      else:
        proc = subprocess.Popen(
          cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait()
      if b'Traceback' in err:
        out.failures.append('traceback')
      if not (run / 'result.json').is_file():
        out.failures.append('run lost')
      out.detail = err.decode('utf-8', 'replace')[-160:]
      outcomes.append(out)
  return outcomes
