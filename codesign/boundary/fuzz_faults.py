"""Fuzzing faults of the machine rather than of the user: a damaged or
mixed-up cache, closed or broken output streams, bad JAX, XLA and
matplotlib variables, and limits of memory (`ulimit -v`), run against a
checkout of codesign as `codesign.boundary.fuzz_misuse` runs the careless
user's attempts (its `Outcome`, `run_script` and rules).

Every attempt runs a script whose clean result is known (`Clean`: the
same script, flags and seed run twice, cold then warm, with the same
result.json bytes) and must end in one of two ways: the same result.json
bytes as the clean run, or a refusal (a non-zero exit with one line on
stderr) that leaves no run behind. Counted per class (`summarize`):
  changed result  exit 0 with other result.json bytes;
  native abort    a signal or XLA's abort (exit 134, 139, negative);
  traceback       a Python traceback, another exit status, a refusal in
                  several lines;
  noisy           more than two lines on stderr besides progress lines
                  (a cache entry dropped says so once);
  run lost        a run that should have been written is missing;
  left behind     a partial run, or temporary files in the cache;
  hung            no end within `TIMEOUT_S`.
"""

import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from codesign.boundary.fuzz_misuse import Outcome

FAULT_CLASSES = (
  'cache_flips',
  'cache_swaps',
  'streams',
  'environment',
  'memory',
)
TIMEOUT_S = 60.0
GB = 2**30
# The scripts the faults are tried on: the search's exported programs
# (propose), the elasticities' program (sensitivity), JAX's entries only
# (evaluate). Small settings: seconds with a warm cache.
SCRIPTS = {
  'evaluate': ('experiments.evaluate', '--workload=criteo_kaggle'),
  'sensitivity': ('experiments.sensitivity', '--workload=criteo_kaggle'),
  'propose': (
    'experiments.propose',
    '--workload=criteo_kaggle',
    '--starts=4',
    '--steps=10',
    '--presets=zion',
    '--max_nodes=2',
  ),
}
# Another problem of the same script: its programs are valid but wrong
# under the first one's keys (a swap must not change the result).
OTHER_PROBLEM = (
  '--override=workload.global_batch=32768',
  '--override=workload.popularity_skew=1.5',
)


class Clean:
  """A script's clean result and its warm cache, kept (`pristine`) to be
  put back in place before each attempt (`fresh_cache`): JAX's keys hold
  the cache's path (its XLA autotuning folder is a compile option), so a
  copy elsewhere would miss every entry."""

  def __init__(self, root, script: str, base: pathlib.Path, extra=()):
    self.root, self.script, self.extra = root, script, tuple(extra)
    self.cache = base / f'cache-{script}'
    self.pristine = base / f'pristine-{script}'
    runs = []
    for i in range(2):  # cold, then warm: the same bytes
      proc, run = self.run(base / f'clean-{script}-{i}', self.cache, 900)
      if proc is None or proc.returncode != 0:
        err = b'' if proc is None else proc.stderr[-300:]
        raise RuntimeError(f'clean {script} failed: {err!r}')
      runs.append((run / 'result.json').read_bytes())
    if runs[0] != runs[1]:
      raise RuntimeError(f'clean {script}: cold and warm results differ')
    if b'"hits"' not in (run / 'env.json').read_bytes():
      raise RuntimeError(f'clean {script}: the warm run had no cache hit')
    self.result = runs[0]
    shutil.copytree(self.cache, self.pristine)

  def fresh_cache(self) -> pathlib.Path:
    """The warm cache, as the clean runs left it, at its own path."""
    shutil.rmtree(self.cache, ignore_errors=True)
    shutil.copytree(self.pristine, self.cache)
    return self.cache

  def args(self):
    return (*SCRIPTS[self.script], *self.extra)

  def run(self, workdir, cache, timeout=TIMEOUT_S, env=None, **kw):
    """(CompletedProcess or None if it hung, the run folder)."""
    return _run(self.root, self.args(), workdir, cache, timeout, env, **kw)


def _run(root, args, workdir, cache, timeout, env=None, **kw):
  """Runs a script of `root` with the compile cache `cache` (`env` set
  last: it may name another)."""
  env = {
    **os.environ,
    'PYTHONPATH': str(root),
    'CODESIGN_COMPILE_CACHE': str(cache),
    **(env or {}),
  }
  cmd = [sys.executable, '-m', *args, f'--workdir={workdir}']
  kw.setdefault('stdout', subprocess.PIPE)
  kw.setdefault('stderr', subprocess.PIPE)
  try:
    proc = subprocess.run(cmd, cwd=root, env=env, timeout=timeout, **kw)
  except subprocess.TimeoutExpired:
    return None, pathlib.Path(workdir)
  return proc, pathlib.Path(workdir)


def _stderr_lines(err: bytes) -> list[str]:
  """stderr's lines besides progress lines (`[  1.2 s] ...`)."""
  text = err.decode('utf-8', 'replace')
  return [x for x in text.splitlines() if x.strip() and not x.startswith('[')]


def judge(proc, run: pathlib.Path, want: bytes, out: Outcome) -> None:
  """The rules of the module docstring for one attempt."""
  if proc is None:
    out.failures.append('hung')
    return
  rc = proc.returncode
  lines = _stderr_lines(proc.stderr or b'')
  out.detail = f'exit {rc}: ' + ' | '.join(lines)[-200:]
  if rc < 0 or rc in (134, 139):
    out.failures.append('native abort')
  elif any('Traceback' in x for x in lines) or rc not in (0, 2):
    out.failures.append('traceback')
  if rc == 0:
    result = run / 'result.json'
    if not result.is_file():
      out.failures.append('run lost')
    elif result.read_bytes() != want:
      out.failures.append('changed result')
  else:
    if rc == 2 and len(lines) != 1:
      out.failures.append('traceback')
    if run.exists():
      out.failures.append('left behind')
  if len(lines) > 2 and rc == 0:
    out.failures.append('noisy')


def flip_bit(path: pathlib.Path, rng: random.Random) -> int:
  """Flips one random bit of the file; returns the byte's offset."""
  data = bytearray(path.read_bytes())
  at = rng.randrange(len(data))
  data[at] ^= 1 << rng.randrange(8)
  path.write_bytes(bytes(data))
  return at


def cache_files(cache: pathlib.Path) -> dict[str, list[pathlib.Path]]:
  """The cache's files: `programs` (exported) and `entries` (JAX's)."""
  return {
    'programs': sorted((cache / 'exported').glob('*')),
    'entries': sorted(cache.glob('*-cache')),
  }


def _tmp_left(cache: pathlib.Path) -> bool:
  return any(p.name.startswith('.tmp-') for p in cache.rglob('*'))


def flip_attempts(cleans: list[Clean], trials: int, seed: int, base):
  """`trials` single-bit flips spread over the scripts' caches, half in
  exported programs, half in JAX's entries."""
  rng = random.Random(seed)
  outcomes = []
  for i in range(trials):
    clean = cleans[i % len(cleans)]
    cache = clean.fresh_cache()
    files = cache_files(cache)
    kind = 'programs' if files['programs'] and i % 2 == 0 else 'entries'
    target = rng.choice(files[kind])
    at = flip_bit(target, rng)
    what = f'{clean.script} {kind} {target.name[:12]}@{at}'
    out = Outcome('cache_flips', what)
    proc, run = clean.run(base / f'flip{i}-run', cache)
    judge(proc, run, clean.result, out)
    if _tmp_left(cache):
      out.failures.append('left behind')
    outcomes.append(out)
    shutil.rmtree(run, ignore_errors=True)
  return outcomes


def swap_attempts(cleans, others, trials: int, seed: int, base):
  """`trials` swaps: two files of one cache exchanged, or a file of
  another problem's cache (same script, other batch and skew) put under
  a name of this one's."""
  rng = random.Random(seed)
  outcomes = []
  for i in range(trials):
    clean, other = cleans[i % len(cleans)], others[i % len(others)]
    cache = clean.fresh_cache()
    files = cache_files(cache)
    kind = 'programs' if files['programs'] and i % 2 == 0 else 'entries'
    mine = files[kind]
    theirs = cache_files(other.cache)[kind]
    if i % 4 < 2 and len(mine) >= 2:
      a, b = rng.sample(mine, 2)
      da, db = a.read_bytes(), b.read_bytes()
      a.write_bytes(db)
      b.write_bytes(da)
      what = f'{clean.script} {kind}: two swapped'
    else:
      a = rng.choice(mine)
      a.write_bytes(rng.choice(theirs).read_bytes())
      what = f"{clean.script} {kind}: another problem's under its name"
    out = Outcome('cache_swaps', what)
    proc, run = clean.run(base / f'swap{i}-run', cache)
    judge(proc, run, clean.result, out)
    outcomes.append(out)
    shutil.rmtree(run, ignore_errors=True)
  return outcomes


def _closing(fds):
  def preexec():
    for fd in fds:
      os.close(fd)

  return preexec


# Streams of a condition: which descriptors are closed in the child,
# which go to /dev/full, which to a pipe whose reader has left.
_CLOSED = {
  'stdin closed': [0],
  'stdout closed': [1],
  'stderr closed': [2],
  'both closed': [1, 2],
  'all three closed': [0, 1, 2],
}
_NAMES = {0: 'stdin', 1: 'stdout', 2: 'stderr'}


def _stream_kw(name: str) -> dict:
  """subprocess arguments of a stream condition (`STREAM_CASES`)."""
  if name in _CLOSED:
    fds = _CLOSED[name]
    kw = {_NAMES[fd]: None for fd in fds if fd}
    return {**kw, 'preexec_fn': _closing(fds)}
  kw = {}
  for fd in (1, 2):
    if _NAMES[fd] not in name:
      continue
    if '/dev/full' in name:
      kw[_NAMES[fd]] = open('/dev/full', 'wb')  # noqa: SIM115  closed later
    else:  # a reader that left
      read, write = os.pipe()
      os.close(read)
      kw[_NAMES[fd]] = write
  return kw


def _stream_case(name: str, clean: Clean, base, i: int) -> Outcome:
  """One stream condition on a clean script's run."""
  out = Outcome('streams', f'{clean.script}: {name}')
  run = base / f'stream{i}'
  kw = _stream_kw(name)
  proc, run = clean.run(run, clean.fresh_cache(), **kw)
  for f in kw.values():
    if hasattr(f, 'close'):
      f.close()
    elif isinstance(f, int):
      os.close(f)
  if proc is not None and proc.stderr is None:
    proc.stderr = b''
  judge(proc, run, clean.result, out)
  if proc is not None and proc.returncode != 0:
    out.failures.append('run lost')
  shutil.rmtree(run, ignore_errors=True)
  return out


STREAM_CASES = (
  *_CLOSED,
  'stdout /dev/full',
  'stderr /dev/full',
  'stdout and stderr /dev/full',
  'stdout reader left',
  'stderr reader left',
  'stdout and stderr reader left',
)
HELP_SCRIPTS = (
  'evaluate',
  'propose',
  'benchmark',
  'calibrate',
  'compare_platforms',
  'export',
  'fuzz',
  'growth',
  'pareto',
  'scale_out',
  'search_quality',
  'sensitivity',
  'zion_decision',
  'doc_numbers',
)


def _help_case(root, script: str, full: bool = False) -> Outcome:
  """`--help` into a reader that has left (or onto /dev/full): no
  traceback, absl's status."""
  where = '/dev/full' if full else 'a reader that left'
  out = Outcome('streams', f'{script} --help into {where}')
  env = {**os.environ, 'PYTHONPATH': str(root)}
  with open('/dev/full', 'wb') as device:
    proc = subprocess.Popen(
      [sys.executable, '-m', f'experiments.{script}', '--help'],
      cwd=root,
      env=env,
      stdout=device if full else subprocess.PIPE,
      stderr=subprocess.PIPE,
    )
  if not full:
    proc.stdout.close()
  try:
    err = proc.stderr.read()
    rc = proc.wait(timeout=TIMEOUT_S)
  except subprocess.TimeoutExpired:
    proc.kill()
    out.failures.append('hung')
    return out
  out.detail = f'exit {rc}: ' + err.decode('utf-8', 'replace')[-160:]
  if b'Traceback' in err or rc not in (0, 1):
    out.failures.append('traceback')
  return out


def stream_attempts(root, cleans, base) -> list[Outcome]:
  """Every stream condition on every clean script, and --help of every
  script into a reader that left."""
  outcomes = []
  for clean in cleans:
    for i, name in enumerate(STREAM_CASES):
      outcomes.append(_stream_case(name, clean, base, len(outcomes) + i))
  outcomes += [_help_case(root, s, f) for s in HELP_SCRIPTS for f in (0, 1)]
  return outcomes


def _var(name: str, values, expect: str) -> list[tuple[str, dict, str]]:
  return [(f'{name}={v!r}', {name: v}, expect) for v in values]


def environment_cases(base: pathlib.Path) -> list[tuple[str, dict, str]]:
  """(name, variables, expect: 'run' or 'refuse') of the environment
  class; a run must give the clean bytes."""
  os.mkfifo(base / 'fifo')
  (base / 'file').write_text('not a directory')
  platforms = ('cuda', 'bogus', 'tpu', 'cpu,bogus', 'gpu', ',', 'CPU ')
  cases = _var('JAX_PLATFORMS', platforms, 'refuse')
  cases += _var('JAX_PLATFORMS', ('cpu', ''), 'run')
  x64 = ('maybe', '2', 'tru', 'on-ish', '\u00e9', '')
  cases += _var('JAX_ENABLE_X64', x64, 'refuse')
  cases += _var('JAX_ENABLE_X64', ('1', 'true', 'no', 'OFF', 'Yes'), 'run')
  mpl = ('bogus', 'module://no_such_module', 'Agg2', 'qt9agg')
  cases += _var('MPLBACKEND', mpl, 'refuse')
  backends = ('Agg', 'agg', 'svg', 'pdf', 'ps', 'template', '')
  cases += _var('MPLBACKEND', backends, 'run')
  xla = (
    '--xla_no_such_flag=1',
    '--xla_backend_optimization_level=abc',
    '--xla_cpu_use_fusion_emitters=maybe',
    'bogus',
    '--intra_op_parallelism_threads=1',
  )
  cases += _var('XLA_FLAGS', xla, 'refuse')
  same = (
    '--xla_cpu_enable_fast_math=false',
    '--xla_force_host_platform_device_count=1',
    '',
  )
  cases += _var('XLA_FLAGS', same, 'run')
  cache = 'CODESIGN_COMPILE_CACHE'
  cases += _var(cache, ('~nosuchuser-codesign/x',), 'refuse')
  where = (
    str(base / 'fifo'),
    str(base / 'file'),
    str(base / 'file' / 'x'),
    '/dev/null',
    '/proc/codesign-x',
    'off',
  )
  cases += _var(cache, where, 'run')
  cases += [
    ('XDG_CACHE_HOME unwritable', {'XDG_CACHE_HOME': '/proc/x', cache: ''}),
    ('LANG=C, LC_ALL=C', {'LANG': 'C', 'LC_ALL': 'C'}),
    ('PYTHONIOENCODING=ascii', {'PYTHONIOENCODING': 'ascii'}),
    ('TERM=dumb', {'TERM': 'dumb'}),
    ('OMP_NUM_THREADS=1', {'OMP_NUM_THREADS': '1'}),
    ('TF_CPP_MIN_LOG_LEVEL=0', {'TF_CPP_MIN_LOG_LEVEL': '0'}),
  ]
  return [c if len(c) == 3 else (*c, 'run') for c in cases]


def environment_attempts(cleans, base) -> list[Outcome]:
  """Every case of `environment_cases` on evaluate (the others' clean
  runs are for the cache classes)."""
  clean = next(c for c in cleans if c.script == 'evaluate')
  outcomes = []
  for i, (name, env, expect) in enumerate(environment_cases(base)):
    out = Outcome('environment', name)
    proc, run = clean.run(base / f'env{i}', clean.fresh_cache(), env=env)
    judge(proc, run, clean.result, out)
    if proc is not None and (proc.returncode == 0) != (expect == 'run'):
      out.failures.append('accepted' if expect == 'refuse' else 'run lost')
    outcomes.append(out)
    shutil.rmtree(run, ignore_errors=True)
  return outcomes


MEMORY_LIMITS_GB = (
  0.6,
  0.8,
  1.0,
  1.2,
  1.5,
  1.8,
  2.0,
  2.2,
  2.4,
  2.6,
  2.8,
  3.0,
  3.5,
  4.0,
  5.0,
  6.0,
  8.0,
  12.0,
  16.0,
)
# Requests beyond memory under a limit: refused before any compile.
BIG_REQUESTS = (
  ('propose', ('--starts=1000000',), 8.0),
  ('propose', ('--starts=10000000',), 16.0),
  ('propose', ('--starts=1000000000000000000',), 4.0),
)


def _limited(limit_bytes: int):
  def preexec():
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

  return preexec


def memory_attempts(cleans, base) -> list[Outcome]:
  """Every clean script under every address-space limit of
  `MEMORY_LIMITS_GB`, and `BIG_REQUESTS` under theirs."""
  outcomes = []
  for clean in cleans:
    for gb in MEMORY_LIMITS_GB:
      out = Outcome('memory', f'{clean.script} under ulimit -v {gb} GB')
      run = base / f'mem{len(outcomes)}'
      limit = _limited(int(gb * GB))
      proc, run = clean.run(run, clean.fresh_cache(), preexec_fn=limit)
      judge(proc, run, clean.result, out)
      outcomes.append(out)
      shutil.rmtree(run, ignore_errors=True)
  by_name = {c.script: c for c in cleans}
  for script, extra, gb in BIG_REQUESTS:
    clean = by_name[script]
    out = Outcome('memory', f'{script} {" ".join(extra)} under {gb} GB')
    t0 = time.monotonic()
    proc, run = _run(
      clean.root,
      (*clean.args(), *extra),
      base / f'big{len(outcomes)}',
      clean.fresh_cache(),
      TIMEOUT_S,
      preexec_fn=_limited(int(gb * GB)),
    )
    judge(proc, run, b'', out)
    if proc is not None and proc.returncode == 0:
      out.failures.append('accepted')
    out.detail += f' ({time.monotonic() - t0:.1f} s)'
    outcomes.append(out)
  return outcomes


def run_faults(root, classes, trials: int, seed: int, progress=print):
  """The fault classes of `classes` against the checkout `root`:
  `trials` attempts each of the cache classes (flips and swaps), every
  case of the others."""
  import warnings

  # preexec_fn (setrlimit, close) after fork in a process that loaded JAX.
  warnings.filterwarnings('ignore', message='os.fork', category=RuntimeWarning)
  outcomes = []
  with tempfile.TemporaryDirectory(prefix='codesign-faults-') as tmp:
    base = pathlib.Path(tmp)
    progress('clean runs (cold and warm) of ' + ', '.join(SCRIPTS))
    cleans = [Clean(root, s, base) for s in SCRIPTS]
    others = []
    if 'cache_swaps' in classes:
      others = [
        Clean(root, s, base / 'other', OTHER_PROBLEM)
        for s in ('sensitivity', 'propose')
      ]
    runners = {
      'cache_flips': lambda: flip_attempts(cleans, trials, seed, base),
      'cache_swaps': lambda: swap_attempts(
        [c for c in cleans if c.script != 'evaluate'],
        others,
        trials,
        seed,
        base,
      ),
      'streams': lambda: stream_attempts(root, cleans, base),
      'environment': lambda: environment_attempts(cleans, base),
      'memory': lambda: memory_attempts(cleans, base),
    }
    for cls in classes:
      progress(f'{cls}: attempts against {root}')
      got = runners[cls]()
      bad = sum(bool(o.failures) for o in got)
      progress(f'{cls}: {len(got)} tried, {bad} failed')
      outcomes += got
  return outcomes
