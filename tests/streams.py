"""What the tests read from a script's streams: the seconds each
progress line carries (`experiments.progress`), and how long a run was
silent between them."""

import re

STAMP = re.compile(r'^\[\s*([0-9.]+) s\] ')


def stamps(stderr: str) -> list[float]:
  """The seconds of every progress line of `stderr`, in order."""
  return [float(m[1]) for m in map(STAMP.match, stderr.splitlines()) if m]


def longest_silence(stderr: str) -> float:
  """The longest gap between two progress lines (and from the start to
  the first), seconds; 0 without any."""
  times = [0.0, *stamps(stderr)]
  return (
    max(b - a for a, b in zip(times, times[1:], strict=False))
    if times[1:]
    else 0.0
  )


def progress_lines(stdout: str) -> list[str]:
  """Lines of `stdout` that look like progress (a result stream holds
  none)."""
  return [x for x in stdout.splitlines() if STAMP.match(x)]
