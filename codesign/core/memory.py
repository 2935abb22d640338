"""The memory a run may use on this machine, checked before the work, and
a lack of memory told in one sentence.

A run that asks for more memory than the machine gives it must not die
in XLA's allocator (a native abort, exit status 134, or a `std::bad_alloc`
under `ulimit -v`) nor after minutes of silence: what it will need is
estimated from its sizes before anything is compiled (`check`), against
what this process may still use (`available`: the memory the kernel
reports available, the cgroup's limit and the address-space limit of
`ulimit -v`, whichever leaves least), and a request beyond it is one
sentence naming the setting to lower and both amounts. A lack of memory
that still reaches Python (`MemoryError`, XLA's `RESOURCE_EXHAUSTED`) is
the same sentence (`out_of_memory`).

The estimates are bounds fitted to measured peaks on a 2-core x86
machine (in WORKSPACE.md); they err high.
"""

import math
import os
import resource

from codesign.core.errors import InputError

GB = 2**30
# Address space (`ulimit -v`) a script needs: to load Python, JAX and
# XLA's CPU runtime and start it (`START_ADDRESS_SPACE`; the 2-core
# machine: 1.35 GB, 14 threads; under 1.5 GB XLA ends in std::bad_alloc
# or a segmentation fault while it loads, which no handler can catch),
# then to compile and run the smallest run left after that
# (`WORK_ADDRESS_SPACE`: evaluate ran under a limit of 1.8 GB,
# sensitivity and a small propose under 2.1 GB, none under 1.8 GB).
START_ADDRESS_SPACE = 2.0 * GB
WORK_ADDRESS_SPACE = 1.25 * GB


def _kb_field(path: str, key: str) -> float | None:
  """Bytes of the `key: N kB` line of a /proc file, or None."""
  try:
    with open(path) as f:
      for line in f:
        name, _, rest = line.partition(':')
        if name == key:
          return float(rest.split()[0]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return None


def _meminfo(key: str) -> float | None:
  return _kb_field('/proc/meminfo', key)


def _self_status(key: str) -> float:
  found = _kb_field('/proc/self/status', key)
  return 0.0 if found is None else found


def _cgroup_headroom() -> float | None:
  """Bytes left under this process's cgroup (v2) memory limit, or None."""
  try:
    with open('/proc/self/cgroup') as f:
      rel = f.read().strip().rpartition(':')[2]
    base = os.path.join('/sys/fs/cgroup', rel.lstrip('/'))
    with open(os.path.join(base, 'memory.max')) as f:
      limit = f.read().strip()
    if limit == 'max':
      return None
    with open(os.path.join(base, 'memory.current')) as f:
      used = float(f.read().strip())
    return float(limit) - used
  except (OSError, ValueError):
    return None


def address_space_limit() -> float | None:
  """The soft `ulimit -v` in bytes, or None (unlimited)."""
  soft, _ = resource.getrlimit(resource.RLIMIT_AS)
  return None if soft == resource.RLIM_INFINITY else float(soft)


def available() -> tuple[float, str]:
  """(bytes this process may still allocate, what bounds them)."""
  found = []
  mem = _meminfo('MemAvailable')
  if mem is not None:
    found.append((mem, 'the memory available on this machine'))
  cgroup = _cgroup_headroom()
  if cgroup is not None:
    found.append((cgroup, "the cgroup's memory limit"))
  limit = address_space_limit()
  if limit is not None:
    left = limit - _self_status('VmSize')
    found.append((left, f'the address-space limit (ulimit -v {gb(limit)})'))
  return min(found) if found else (math.inf, 'nothing')


def gb(n: float) -> str:
  """Bytes in GB for people: 3 significant digits."""
  return f'{n / GB:.3g} GB'


def check(need: float, what: str, lower: str) -> None:
  """Refuses, before the work, a request that needs more memory than
  this process may still use.

  Args:
    need: estimated bytes.
    what: the request, for the sentence ('10,000,000 starts of 120
      coordinates').
    lower: the setting to lower ('--starts (starts=)').

  Raises:
    InputError: naming the request, both amounts and what to lower.
  """
  have, bound = available()
  if need > have:
    raise InputError(
      f'{what}: about {gb(need)} of memory needed, more than the '
      f'{gb(max(have, 0.0))} left by {bound}; lower {lower}'
    )


def check_address_space(need: float = START_ADDRESS_SPACE) -> None:
  """Refuses, before JAX loads, an address-space limit (`ulimit -v`)
  under what a script needs to start.

  Raises:
    InputError: naming the limit and the need.
  """
  limit = address_space_limit()
  if limit is not None and limit < need:
    raise InputError(
      f'the address-space limit (ulimit -v) is {gb(limit)}, under the '
      f'{gb(need)} a codesign script needs to load and start JAX; raise it '
      '(ulimit -v unlimited)'
    )


def check_address_space_left(need: float = WORK_ADDRESS_SPACE) -> None:
  """Refuses, once JAX's runtime has started, an address-space limit
  that leaves less than a run's compiles need.

  Raises:
    InputError: naming the limit, what is left and the need.
  """
  limit = address_space_limit()
  if limit is None:
    return
  left = limit - _self_status('VmSize')
  if left < need:
    raise InputError(
      f'the address-space limit (ulimit -v) is {gb(limit)}, which leaves '
      f'{gb(max(left, 0.0))} once JAX has started, under the {gb(need)} a '
      "run's compiles need; raise it (ulimit -v unlimited)"
    )


def is_out_of_memory(e: BaseException) -> bool:
  """Whether `e` is a lack of memory: MemoryError or XLA's
  RESOURCE_EXHAUSTED (an allocation that failed)."""
  if isinstance(e, MemoryError):
    return True
  text = str(e)
  return 'RESOURCE_EXHAUSTED' in text or 'Out of memory' in text


def out_of_memory(e: BaseException, lower: str) -> InputError:
  """The one sentence of a lack of memory that reached Python."""
  have, bound = available()
  return InputError(
    f'out of memory ({type(e).__name__}; {gb(max(have, 0.0))} left by '
    f'{bound}); lower {lower}'
  )
