"""Ctrl-C in a script: stop at once, one line, exit status 130, no run.

`install` is called when the `experiments` package is imported by a
script (`python -m experiments.X`), before anything heavy is imported. A
SIGINT (the first or any later one) wakes a thread through the signal
module's wakeup file descriptor, so neither a long XLA compile in the
main thread nor a pool of search threads delays it; that thread removes
the run's staging directory and lock (waiting, at most a second, for a
run being renamed into place), prints one line and ends the process with
status 130. This module imports nothing of codesign, so it is in place
while jax and the library load.
"""

import os
import signal
import socket
import sys
import threading

EXIT_STATUS = 130
_installed = []


def _cleanup() -> bool:
  """Stops the library's searches and removes this process's staged runs.
  Returns whether a run was discarded."""
  stop = sys.modules.get('codesign.core.interrupts')
  if stop is not None:
    stop.STOP.set()
  results = sys.modules.get('codesign.core.results')
  return results is not None and results.abandon_runs(wait_s=1.0)


def _stop() -> None:
  try:
    discarded = _cleanup()
  except BaseException:  # whatever happens, the process ends now
    discarded = True
  line = 'interrupted: stopped' + ('; no run written' if discarded else '')
  try:
    os.write(2, f'{line}\n'.encode())
  finally:
    os._exit(EXIT_STATUS)


def _watch(sock: socket.socket) -> None:
  while True:
    try:
      data = sock.recv(64)
    except InterruptedError:
      continue
    if not data or signal.SIGINT in data:
      break
  _stop()


def install() -> None:
  """Makes SIGINT stop this process as the module docstring says. Call it
  from the main thread; a second call does nothing."""
  if _installed or threading.current_thread() is not threading.main_thread():
    return
  reader, writer = socket.socketpair()
  writer.setblocking(False)
  signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
  # The Python-level handler only marks the signal; the watcher stops.
  signal.signal(signal.SIGINT, lambda signum, frame: None)
  threading.Thread(
    target=_watch, args=(reader,), daemon=True, name='sigint'
  ).start()
  _installed.append((reader, writer))


def is_script() -> bool:
  """Whether this process runs an experiments script (`python -m
  experiments.X` or `python experiments/X.py`)."""
  argv = list(getattr(sys, 'orig_argv', []))
  if '-m' in argv[:-1]:
    return argv[argv.index('-m') + 1].startswith('experiments.')
  main = sys.argv[0] if sys.argv else ''
  return os.path.basename(os.path.dirname(os.path.abspath(main))) == (
    'experiments'
  ) and main.endswith('.py')
