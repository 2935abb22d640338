"""Layer 4, search: how platforms (and table placements) are searched.

  design_space  the relaxed design vector over catalog parts and counts
  plan_space    its plan half: per-table sharding weights
  part_tables   the catalog parts a search may use, with user prices
  buildability  the rules a design must meet to be built
  constrained   the optax-style augmented-Lagrangian loop
  gradient      the gradient search: starts, Adam, snapping, the best
  snapping      relaxed designs rounded to buildable ones
  multi_search  one design for several workloads (pareto, growth)
  baselines     random search, CMA-ES, exhaustive enumeration
  batching      starts sharded over every JAX device

Imports: core, spec, model.
"""
