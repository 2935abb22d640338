"""The one check a script makes before jax and the library load: is its
--workdir in use by another run? Then it refuses at once (one sentence,
exit status 2) instead of after seconds of imports.

`codesign.core.locks` takes the lock itself once the flags are parsed;
this only answers sooner, and never takes or changes a lock: it reads
the kernel's list of held locks (/proc/locks, Linux) for the lock file
`.<name>.lock` beside the workdir (`codesign.core.locks.lock_path`) and,
where that list cannot be read, leaves the check to the library.
"""

import os
import sys


def lock_path(workdir: str) -> str:
  """`codesign.core.locks.lock_path` of a --workdir (symlinks followed)."""
  final = os.path.realpath(os.path.abspath(workdir))
  head, name = os.path.split(final)
  return os.path.join(head, f'.{name}.lock')


def _workdir(args: list[str]) -> str | None:
  found = None
  for i, arg in enumerate(args):
    if arg.startswith('--workdir='):
      found = arg.partition('=')[2]
    elif arg == '--workdir' and i + 1 < len(args):
      found = args[i + 1]
  return found or None


def _holder_pid(path: str) -> int | None:
  """The process holding a flock on `path`, from /proc/locks, or None."""
  try:
    st = os.stat(path, follow_symlinks=False)
    with open('/proc/locks') as f:
      rows = f.read().splitlines()
  except OSError:
    return None
  dev = f'{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}'
  for row in rows:
    parts = row.split()
    if len(parts) > 5 and parts[1] == 'FLOCK' and parts[5] == dev:
      return int(parts[4]) if parts[4].isdigit() else None
  return None


def refuse_if_in_use(args: list[str]) -> None:
  """Exits with status 2 and one sentence if the --workdir in `args` is
  held by another run; returns otherwise."""
  workdir = _workdir(args)
  if workdir is None:
    return
  path = lock_path(workdir)
  pid = _holder_pid(path)
  if pid is None or pid == os.getpid():
    return
  try:
    with open(path, encoding='utf-8', errors='replace') as f:
      cmd = f.read(400).strip().partition(' ')[2]
  except OSError:
    cmd = ''
  cmd = ''.join(c if c.isprintable() else '?' for c in cmd[:120])
  final = os.path.realpath(os.path.abspath(workdir))
  shown = ''.join(c if c.isprintable() else '?' for c in final)
  holder = f'process {pid}: {cmd}' if cmd else f'process {pid}'
  print(
    f'error: --workdir {shown!r} is in use by another run ({holder}); wait '
    'for it to end or choose another directory',
    file=sys.stderr,
  )
  sys.exit(2)
