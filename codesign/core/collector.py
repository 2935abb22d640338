"""Python's cyclic garbage collector, tuned for a process that traces JAX
programs: `tune()` freezes what the process holds so far (its imports:
never walked again) and collects less often.

Tracing makes millions of short-lived objects. At Python's default
thresholds (700, 10, 10) the youngest generation is collected every 700
net allocations, and each full collection walks every object the
process keeps (compiled programs, jaxprs, caches). A cold tiny `propose`
on 2 cores spent 1.60 s in 832 collections (6 full); tuned at start-up,
0.41 s, most of it in the imports before (a warm one: 0.48 s, now
0.17 s). The suite's processes: 3.4 s of a 73 s run of planner_test and
plan_space_test before, 0.6 s of 69 s after.

Every script calls it at start-up (`experiments.common`), and so does the
test suite (tests/conftest.py); a library call leaves the user's process
as it is.
"""

import gc

THRESHOLDS = (20_000, 20, 20)


def tune() -> None:
  """Freezes the objects that exist now and sets `THRESHOLDS`."""
  gc.freeze()
  gc.set_threshold(*THRESHOLDS)
