"""The proposal's search steps (`codesign.studies.proposal_search`): each
candidate of the tolerance step is judged with its own plan. A design
with fewer nodes, or less HBM, than the one whose plan it was given
cannot hold that plan's tables in HBM; with the planner's HBM rule for
its own platform it can, at the throughput the cost model gives that
plan. (The cheapest-within-the-tolerance rule itself is checked on a
searched design in `search_studies_test`.)"""

import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.search import design_space as ds
from codesign.search import gradient
from codesign.spec import hardware, stack_presets
from codesign.spec import workload_presets as wp
from codesign.studies import proposal_search, sweeps

STACK = stack_presets.get('torchrec')
# rm1 with 16x the rows: 65.5 GB of tables, more than one 16 GB V100 holds.
W = sweeps.grow(wp.get('rm1'), 16.0)


def test_each_design_is_judged_with_its_own_plan():
  space = ds.make_space(W, max_nodes=2, sharding='table_wise')
  problem = gradient.Problem(space, W, STACK, objective='throughput')
  row = np.zeros(space.num_hw, dtype=np.int32)
  row[0] = space.accelerators.index('V100-SXM2-16GB')
  row[1] = space.cpus.index('Xeon-Platinum-8180 (Skylake-SP)')
  row[3] = list(space.grids[1]).index(2.0)  # 2 sockets
  row[5] = list(space.grids[3]).index(64 * ds.GB)  # 768 GB of DDR
  # One node and one accelerator, with a plan that keeps every table in
  # HBM (as a larger design's could).
  index = row[None]
  plan_z = np.zeros((1, space.num_plan))
  plan_z[0, : space.num_tables + 1] = 1.0
  copied = gradient.evaluate_indices(problem, index, plan_z)
  assert not copied['feasible'][0]
  own = proposal_search.own_plans(problem, index, plan_z)
  assert own['feasible'][0] and own['variant'][0] == 0
  # Its value is the cost model's with the planner's rule (HBM filled
  # hottest first, the rest in DDR) on this platform.
  p = ds.build(space, row)
  plan = planner.make(W, p, STACK, sharding='table_wise')
  assert 0.0 < float(plan.hbm_fraction.max()) and (plan.hbm_fraction < 1).any()
  r = cost_model.evaluate(hardware.as_arrays(p), W, plan, STACK)
  assert bool(r.feasible)
  assert own['value'][0] == pytest.approx(float(r.throughput), rel=1e-6)
  assert np.isfinite(own['g']).all() and np.isfinite(own['value']).all()
