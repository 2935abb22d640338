"""Stopping long work on request: a stop flag that the searches check
between chunks, and a thread map whose pool is cancelled, not waited for,
when its caller is interrupted.

The scripts stop at Ctrl-C on their own (`experiments.signals`); this is
what makes a library call (`codesign.propose` in a notebook) stop at the
next chunk instead of running its other threads to the end.
"""

import contextvars
import threading
from collections.abc import Callable, Iterable
from concurrent import futures

import jax

STOP = threading.Event()


def check() -> None:
  """Raises `KeyboardInterrupt` once a stop was asked (`STOP` is set).

  Called between chunks of work: a search stops within one chunk.
  """
  if STOP.is_set():
    raise KeyboardInterrupt('stopped')


def thread_map(fn: Callable, items: Iterable, workers: int) -> list:
  """`list(map(fn, items))` on `workers` threads. When the caller is
  interrupted (or one call fails), the other calls are asked to stop at
  their next `check` and those not started are cancelled, so it returns
  within one chunk of work instead of after all of it.

  Each call runs under the caller's precision: `jax.enable_x64(...)` is
  thread-local, so a caller inside it (`codesign.propose`) would
  otherwise trace float64 programs in its own thread and float32 ones in
  the pool's, and mix the two. Each call also runs in a copy of the
  caller's context variables (`catalog.using`: a user's parts), which
  threads do not inherit."""
  x64 = bool(jax.config.jax_enable_x64)
  context = contextvars.copy_context()  # the caller's (a user's parts)

  def call(item):
    with jax.enable_x64(x64):
      return context.copy().run(fn, item)

  pool = futures.ThreadPoolExecutor(max_workers=workers)
  try:
    return list(pool.map(call, items))
  except BaseException:
    ours = not STOP.is_set()
    STOP.set()
    pool.shutdown(wait=True, cancel_futures=True)
    if ours:
      STOP.clear()
    raise
  finally:
    pool.shutdown(wait=True)
