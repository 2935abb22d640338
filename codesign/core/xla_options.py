"""XLA CPU options the tool runs with, chosen by measurement.

Measured on the 2-core machine (`experiments.benchmark` and
`experiments.propose`; numbers in WORKSPACE.md):

- YNNPACK fusions off (`SCRIPT_XLA_FLAGS`). XLA CPU hands the cost
  model's reductions over short axes (the 8 quadrature nodes of a Zipf
  lookup count, the packing bounds of the busiest rank) to YNNPACK,
  which takes 8-95 us for what its own loop fusions do in 1-10 us at
  1,000 designs: the batched model runs about 15% faster without them.
  No term changes; sums come out in another order (last bits).
- XLA CPU's older loop emitters (`SCRIPT_XLA_FLAGS`, and
  `SEARCH_COMPILER_OPTIONS` for the search's programs wherever they
  run): they compile the relaxed value and gradient in about half the
  time of the fusion emitters and run them at the same speed; `propose`
  from an empty cache takes 62 s instead of 87 s. The plain batched
  model, compiled once and run millions of times, runs 10% faster with
  the fusion emitters: `experiments.benchmark` times it with them
  (`MODEL_COMPILER_OPTIONS`).

Every script sets `SCRIPT_XLA_FLAGS` before JAX computes (env.json
records XLA_FLAGS), and so does the test suite; `experiments.calibrate`
does not: it measures the local device as JAX runs a user's model, with
XLA's defaults. A notebook gets the scripts' numbers by calling
`apply_script_flags()` before its first JAX computation.
"""

import os

SCRIPT_XLA_FLAGS = (
  '--xla_cpu_experimental_ynn_fusion_type=',
  '--xla_cpu_use_fusion_emitters=false',
)
SEARCH_COMPILER_OPTIONS = {'xla_cpu_use_fusion_emitters': False}
MODEL_COMPILER_OPTIONS = {'xla_cpu_use_fusion_emitters': True}


def apply_script_flags() -> str:
  """Adds `SCRIPT_XLA_FLAGS` to the environment's XLA_FLAGS (each flag
  the user has not set already) and returns the new value. XLA reads
  XLA_FLAGS once, when JAX first computes: call this before."""
  flags = os.environ.get('XLA_FLAGS', '')
  for flag in SCRIPT_XLA_FLAGS:
    name = flag.split('=', 1)[0]
    if name not in flags:
      flags = f'{flags} {flag}'.strip()
  os.environ['XLA_FLAGS'] = flags
  return flags
