"""Test-wide JAX settings: float64 available, fast compiles.

Most of the suite's time is XLA compiling small programs on 2 cores;
LLVM's cheaper optimization level halves a compile (the two-process
search: 15.6 s to 6.9 s) at the price of slower runs, which the tests'
tiny workloads do not notice, and XLA CPU's loop emitters halve it again
(`FAST_COMPILE_FLAGS`). Set before any JAX computation starts the
backend, here and in every subprocess a test launches (they inherit the
environment; tests that set their own XLA_FLAGS add theirs to it).

Compiles are also shared: one persistent compilation cache per suite run
(`codesign.core.compile_cache`), a fresh directory made by the first
process (pytest's controller, before it starts the xdist workers), then
used by the workers and every subprocess a test launches through the
environment variable. A fresh one each run, so no test depends on what
an earlier run left.

Work is split between the xdist workers a module at a time (`--dist
loadscope` in pyproject.toml's addopts): a module's module-scoped
fixture (a whole study, run once for its tests) then runs once, not on
both workers. The modules holding a test marked `heavy` (a study or a
script end to end, tens of seconds) are handed out first, so that no
long module starts last while the other worker idles. Modules that
compile the same programs (a study run in-process and by its script,
with the same settings) form one unit of work (`SHARED_WORKER`): they run
on one worker one after the other, so the second finds the first's
compiles in the suite's cache instead of compiling them again at the
same time on the other worker.
"""

import collections
import os
import shutil
import tempfile

import jax
import pytest

from codesign.core import collector, compile_cache, environment, xla_options

FAST_COMPILE_FLAGS = (
  '--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true'
  # XLA CPU's older loop emitters compile the search's programs in half the
  # time of its fusion emitters (the relaxed value and gradient: 3.8 s
  # against 8.4 s on 2 cores), same run speed, values within 5e-12.
  ' --xla_cpu_use_fusion_emitters=false'
  # One XLA CPU thread per op in each worker: two workers on two cores
  # already fill the machine, and idle intra-op threads spin.
  ' --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1 '
  # What every script runs with (codesign.core.xla_options).
  + ' '.join(xla_options.SCRIPT_XLA_FLAGS)
)
if 'xla_backend_optimization_level' not in os.environ.get('XLA_FLAGS', ''):
  os.environ['XLA_FLAGS'] = (
    os.environ.get('XLA_FLAGS', '') + ' ' + FAST_COMPILE_FLAGS
  ).strip()

# XLA parses these once, here (a child process, 0.4 s), not in each of
# the suite's script subprocesses: they inherit the verdict
# (`environment.CHECKED_VAR`).
environment.check_xla_flags()

jax.config.update('jax_enable_x64', True)

# Python's cyclic garbage collector, in every process of the suite that
# imports this file (the controller and the xdist workers), as every
# script tunes it (`codesign.core.collector`): each full collection walks
# every object the worker keeps. It took 3.4 s of a 73 s run of
# planner_test and plan_space_test (14 full collections, 2.8 s); frozen
# after the imports, with rarer collections, 0.6 s of 69 s.
collector.tune()

_OWN_CACHE = compile_cache.ENV_VAR not in os.environ
if _OWN_CACHE:
  os.environ[compile_cache.ENV_VAR] = tempfile.mkdtemp(prefix='codesign-jax-')
compile_cache.enable()


# module -> unit of work shared with other modules (see the docstring).
SHARED_WORKER = {
  'tests/studies/search_studies_test.py': 'pareto and growth',
  'tests/experiments_test.py': 'pareto and growth',
  # The public cases' plans and their leave-one-case-out fit (float64 in
  # both, the largest program of the calibration).
  'tests/calibration/calibrate_test.py': 'public cases',
  'tests/calibration/public_cases_test.py': 'public cases',
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
  """xdist's loadscope, with the modules of SHARED_WORKER as one scope."""
  if config.getvalue('dist') != 'loadscope':
    return None
  from xdist.scheduler import LoadScopeScheduling

  class SharedScopes(LoadScopeScheduling):
    def _split_scope(self, nodeid):
      module = super()._split_scope(nodeid).split('::', 1)[0]
      return SHARED_WORKER.get(module, module)

  return SharedScopes(config, log)


def pytest_collection_modifyitems(config, items):
  """The modules with the most `heavy` test functions first (the longest
  work first, roughly), then the rest; a stable sort, so each module
  keeps its own order."""
  heavy = collections.defaultdict(set)
  for item in items:
    if item.get_closest_marker('heavy'):
      heavy[item.module.__name__].add(item.originalname)
  items.sort(key=lambda item: -len(heavy[item.module.__name__]))


def pytest_unconfigure(config):
  """The process that made the suite's cache removes it at the end."""
  if _OWN_CACHE and not hasattr(config, 'workerinput'):
    shutil.rmtree(os.environ[compile_cache.ENV_VAR], ignore_errors=True)
