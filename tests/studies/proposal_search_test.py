"""The proposal's tolerance step (`codesign.studies.proposal_search`):
the cheapest design within the tolerance of the best found, each
candidate judged with its own plan. A design with fewer nodes, or less
HBM, than the one whose plan it was given cannot hold that plan's tables
in HBM; with the planner's HBM rule for its own platform it can, at the
throughput the cost model gives that plan.

One problem for the module (rm1 with 16x the rows: 65.5 GB of tables,
more than one 16 GB V100 holds; at most 4 nodes), so its evaluations
compile once."""

import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.search import design_space as ds
from codesign.search import gradient
from codesign.spec import hardware, stack_presets
from codesign.spec import workload_presets as wp
from codesign.studies import proposal_search, shared, sweeps

STACK = stack_presets.get('torchrec')
W = sweeps.grow(wp.get('rm1'), 16.0)
SPACE = ds.make_space(W, max_nodes=4, sharding='table_wise')
PROBLEM = gradient.Problem(SPACE, W, STACK, objective='throughput')


def test_each_design_is_judged_with_its_own_plan():
  row = np.zeros(SPACE.num_hw, dtype=np.int32)
  row[0] = SPACE.accelerators.index('V100-SXM2-16GB')
  row[1] = SPACE.cpus.index('Xeon-Platinum-8180 (Skylake-SP)')
  row[3] = list(SPACE.grids[1]).index(2.0)  # 2 sockets
  row[5] = list(SPACE.grids[3]).index(64 * ds.GB)  # 768 GB of DDR
  # One node and one accelerator, with a plan that keeps every table in
  # HBM (as a larger design's could).
  index = row[None]
  plan_z = np.zeros((1, SPACE.num_plan))
  plan_z[0, : SPACE.num_tables + 1] = 1.0
  copied = gradient.evaluate_indices(PROBLEM, index, plan_z)
  assert not copied['feasible'][0]
  own = proposal_search.own_plans(PROBLEM, index, plan_z)
  assert own['feasible'][0] and own['variant'][0] == 0
  # Its value is the cost model's with the planner's rule (HBM filled
  # hottest first, the rest in DDR) on this platform.
  p = ds.build(SPACE, row)
  plan = planner.make(W, p, STACK, sharding='table_wise')
  assert 0.0 < float(plan.hbm_fraction.max()) and (plan.hbm_fraction < 1).any()
  r = cost_model.evaluate(hardware.as_arrays(p), W, plan, STACK)
  assert bool(r.feasible)
  assert own['value'][0] == pytest.approx(float(r.throughput), rel=1e-6)
  assert np.isfinite(own['g']).all() and np.isfinite(own['value']).all()


def test_throughput_proposal_is_the_cheapest_within_the_tolerance():
  res = gradient.gradient_search(PROBLEM, gradient.Config(starts=2, steps=4))
  assert res.best_feasible
  out, info = proposal_search.cheapest_within(PROBLEM, res, 0.02)
  best = info['best_found_samples_per_s']
  prop, prop_capex = info['proposal_samples_per_s'], info['proposal_capex_usd']
  assert prop_capex <= info['best_found_capex_usd']
  # The proposal's figures are its final ones (the concrete platform with
  # the better of its plan and the auto plan), as the run prints them.
  fig = proposal_search.final_figures(PROBLEM, out.best_index, out.best_plan_z)
  assert fig['throughput_samples_per_s'] == pytest.approx(prop, rel=1e-12)
  assert fig['capex_usd'] == pytest.approx(prop_capex, rel=1e-12)
  # Each shrunk variant is judged with its own plan: never worse than the
  # plan of the design it was shrunk from.
  index, plan_z = proposal_search.shrunk_designs(PROBLEM, res)
  ev = proposal_search.own_plans(PROBLEM, index, plan_z)
  copied = gradient.evaluate_indices(PROBLEM, index, plan_z)
  assert (ev['feasible'] | ~copied['feasible']).all()
  both = ev['feasible'] & copied['feasible']
  assert (ev['value'][both] >= copied['value'][both] * (1 - 1e-12)).all()
  # The rule on what it judged: within the tolerance of the fastest
  # (once per knee step), and no design at 90% of the proposal's price or
  # less within the tolerance of it (the last 10% buys 2%).
  judged = [j for j in info['judged'] if j['within_limits']]
  assert judged and max(j['samples_per_s'] for j in judged) == best
  assert prop >= 0.98 ** len(judged) * best
  for j in judged:
    if j['capex_usd'] <= shared.KNEE_PRICE * prop_capex:
      assert j['samples_per_s'] < 0.98 * prop
    if j['samples_per_s'] > prop:
      assert j['capex_usd'] >= prop_capex
  assert 'last 10% of the money' in info['rule']
  # Other objectives weigh the price themselves.
  per_usd = gradient.Problem(SPACE, W, STACK)
  assert proposal_search.cheapest_within(per_usd, res)[1] is None
