"""Layer 1, core: what any numeric tool needs, with no DLRM knowledge.

  errors  InputError: one sentence for people, exit status 2
  pytree  frozen pytree dataclasses; `field(unit=, static=, doc=)`
  units   the one place human units (GB/s, TFLOP/s) become SI
  smooth  smooth maxima and minima, safe division (no branch on a trace)
  results run directories: config, env, metrics.jsonl, result.json
  paths   the package's data directory and the checkout

Imports: nothing from codesign.
"""
