"""Test-wide JAX settings: float64 available, fast compiles.

Most of the suite's time is XLA compiling small programs on 2 cores;
LLVM's cheaper optimization level halves a compile (the two-process
search: 15.6 s to 6.9 s) at the price of slower runs, which the tests'
tiny workloads do not notice. Set before any JAX computation starts the
backend, here and in every subprocess a test launches (they inherit the
environment; tests that set their own XLA_FLAGS add theirs to it).
"""

import os

import jax

FAST_COMPILE_FLAGS = (
  '--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true'
)
if 'xla_backend_optimization_level' not in os.environ.get('XLA_FLAGS', ''):
  os.environ['XLA_FLAGS'] = (
    os.environ.get('XLA_FLAGS', '') + ' ' + FAST_COMPILE_FLAGS
  ).strip()

jax.config.update('jax_enable_x64', True)
