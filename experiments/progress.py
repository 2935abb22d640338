"""Progress on stderr, the one convention of every script.

Results go to stdout (tables, warnings, `wrote DIR`); what a run is
doing goes to stderr through a `Reporter`:
- a line at the start of each phase (`reporter('searching ...')`);
- a bar with its ETA for a phase that counts (`reporter.count(key,
  done, total)`; the search's Adam steps through `reporter.on_step`);
- never silent: on a terminal, `rich` redraws the phase's spinner with
  its elapsed time and each bar with its ETA several times a second;
  elsewhere (a pipe, a log file), each line carries the seconds since
  the start, a bar prints a line at most every `BAR_EVERY_S`, and a
  phase that prints nothing for `HEARTBEAT_S` gets a line saying it is
  still running.
`--quiet` (`Reporter(quiet=True)`) prints none of it: stdout keeps the
results, stderr only a bad input's one sentence.
"""

import sys
import threading
import time

# A phase silent this long on a stream that is not a terminal gets a
# line (no phase is silent for 5 s: tests/progress_test.py).
HEARTBEAT_S = 2.0
# A bar on a stream that is not a terminal prints at most this often.
BAR_EVERY_S = 1.0


class Reporter:
  """A `progress` callable for the studies, with bars.

  Args:
    quiet: print nothing.
    stream: where to print (default stderr, read when printing).
    terminal: draw with `rich` (None: when the stream is a terminal).
    heartbeat_s: the longest silence on a stream that is not a terminal.
  """

  def __init__(
    self,
    quiet: bool = False,
    stream=None,
    terminal: bool | None = None,
    heartbeat_s: float = HEARTBEAT_S,
  ):
    self.quiet = quiet
    self._stream = stream
    self._start = time.perf_counter()
    self._lock = threading.Lock()
    self._last = self._start
    self._last_line = (self._start, 'the start')
    self._phase = 'starting'
    self._bars: dict = {}
    self._live = None
    self._closed = threading.Event()
    if quiet:
      return
    if terminal is None:
      terminal = bool(getattr(self.stream, 'isatty', lambda: False)())
    if terminal:
      self._live = _RichBars(self.stream)
    else:
      threading.Thread(
        target=self._beat, args=(heartbeat_s,), daemon=True
      ).start()

  @property
  def stream(self):
    return self._stream or sys.stderr

  # ---- what the studies call ------------------------------------------

  def __call__(self, line: str) -> None:
    """A phase starts: its line."""
    if self.quiet:
      return
    with self._lock:
      self._phase = line
      if self._live is not None:
        self._live.phase(line)
      else:
        self._emit(line)

  def count(self, key: str, done: int, total: int, note: str = '') -> None:
    """`done` of `total` of the phase `key`: its bar, with its ETA."""
    if self.quiet:
      return
    with self._lock:
      now = time.perf_counter()
      bar = self._bars.setdefault(key, {'start': now, 'printed': -1e9})
      if self._live is not None:
        self._live.count(key, done, total, note)
        return
      finished = done >= total
      if finished or now - bar['printed'] >= BAR_EVERY_S:
        bar['printed'] = now
        eta = eta_s(bar['start'], now, done, total)
        eta_text = '' if eta is None else f', ETA {eta:.0f} s'
        self._emit(
          f'{key}: {done}/{total} ({100 * done / max(total, 1):.0f}%'
          f'{eta_text}){": " + note if note else ""}'
        )

  def on_step(self, total: int):
    """An `on_step(step, metrics)` for the searches (`studies.proposal`):
    a bar per trainer, phase and objective searched, `total` steps each,
    with the best feasible objective so far."""

    def step(done, m):
      key = ' '.join(
        str(x) for x in (m.get('era'), m.get('trainer'), m.get('phase')) if x
      )
      if m.get('searching') in ('capex', 'power'):  # explaining a NO
        key += f' (least {m["searching"]})'
      best = m.get('objective')
      note = 'best feasible ' + ('none yet' if best is None else f'{best:.4g}')
      self.count(key, int(done), int(total), note)

    return step

  def close(self) -> None:
    """Stops drawing (a terminal's bars stay as they ended)."""
    self._closed.set()
    if self._live is not None:
      self._live.stop()

  # ---- a stream that is not a terminal --------------------------------

  def _emit(self, line: str, beat: bool = False) -> None:
    now = time.perf_counter()
    self._last = now
    if not beat:
      self._last_line = (now, line)
    try:
      # One write, newline included: print's text and newline are two
      # writes, and Ctrl-C's line (`signals`, written from another
      # thread) could land between them.
      self.stream.write(f'[{now - self._start:6.1f} s] {line}\n')
      self.stream.flush()
    except (OSError, ValueError):  # a closed pipe never costs the run
      pass

  def _beat(self, heartbeat_s: float) -> None:
    while not self._closed.wait(min(0.25, heartbeat_s / 4)):
      with self._lock:
        now = time.perf_counter()
        if now - self._last >= heartbeat_s:
          since, line = self._last_line
          self._emit(
            f'still running, {now - since:.0f} s after: {line[:70]}', True
          )


def eta_s(start: float, now: float, done: float, total: float):
  """Seconds left at the rate so far, or None before any progress."""
  if done <= 0 or now <= start:
    return None
  return max(total - done, 0) * (now - start) / done


class _RichBars:
  """`rich`'s live progress on a terminal: each phase line printed for
  good (with the seconds since the start) and, below, a spinner with
  its elapsed time for the running phase and a bar with its ETA for
  each count under way (a finished count leaves one line)."""

  def __init__(self, stream):
    from rich.console import Console
    from rich.progress import (
      BarColumn,
      MofNCompleteColumn,
      Progress,
      SpinnerColumn,
      TextColumn,
      TimeElapsedColumn,
      TimeRemainingColumn,
    )

    self.start = time.perf_counter()
    self.progress = Progress(
      SpinnerColumn(),
      TextColumn('{task.description}'),
      BarColumn(bar_width=24),
      MofNCompleteColumn(),
      TimeElapsedColumn(),
      TextColumn('ETA'),
      TimeRemainingColumn(),
      console=Console(file=stream, stderr=stream is None),
      refresh_per_second=4,
      # stdout stays the results' stream (rich would send it to stderr's
      # console); the first result printed ends the drawing instead.
      redirect_stdout=False,
    )
    self.progress.start()
    self.phase_task = None
    self.tasks: dict = {}
    self.stdout = sys.stdout
    sys.stdout = _StopOnWrite(self.stdout, self.stop)

  def _print(self, line: str) -> None:
    now = time.perf_counter() - self.start
    self.progress.console.print(
      f'[{now:6.1f} s] {line}', markup=False, highlight=False
    )

  def phase(self, line: str) -> None:
    if self.phase_task is not None:
      self.progress.remove_task(self.phase_task)
    self._print(line)
    self.phase_task = self.progress.add_task(line[:40], total=None)

  def count(self, key: str, done: int, total: int, note: str) -> None:
    label = f'{key}: {note}' if note else key
    if key not in self.tasks:
      self.tasks[key] = self.progress.add_task(label[:40], total=total)
    task = self.tasks[key]
    if done >= total:  # finished: one line for good, the bar goes
      self.progress.remove_task(task)
      del self.tasks[key]
      self._print(f'{label} ({done}/{total})')
      return
    self.progress.update(
      task, completed=done, total=total, description=label[:40]
    )

  def stop(self) -> None:
    if (
      isinstance(sys.stdout, _StopOnWrite) and sys.stdout.stream is self.stdout
    ):
      sys.stdout = self.stdout
    if self.phase_task is not None:
      self.progress.remove_task(self.phase_task)
      self.phase_task = None
    self.progress.stop()


class _StopOnWrite:
  """stdout while bars are drawn: the first write (a result) stops them
  (`stop`), then writes go to `stream` as they are."""

  def __init__(self, stream, stop):
    self.stream = stream
    self._stop = stop

  def write(self, text: str) -> int:
    self._stop()
    return self.stream.write(text)

  def __getattr__(self, name):
    return getattr(self.stream, name)
