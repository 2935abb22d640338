"""Layer 3, model: what one synchronous training step costs.

  cost_model  evaluate(platform, workload, plan, stack): the step's
              time, breakdown, memory per tier, capex, power; pure,
              unjitted (jit, vmap and grad are the caller's)
  terms/      the named terms evaluate composes (dense, embedding,
              collectives, host, budget)
  planner     the auto plan: sharding choice and HBM placement
  report      a CostReport as the dict result.json holds
  rank_stats  per-rank loads of a plan, as a sharding planner sees them
  whole_system  the system around the step: readers, storage, front-end
              network, failures and goodput over a CostReport
  convergence  samples to the accuracy target against the global batch

Imports: core, spec.
"""
