"""The proposal never loses to what its own run printed: over 30 random
(workload, objective, budget) requests, no candidate the run evaluated
(another design the search found, another space's best, a preset) beats
the proposal within the limits by the proposal rule
(`studies.shared.decide`: for throughput objectives, by more than the
tolerance), and the ranking line agrees that the proposal is the best.

Tiny searches (2 starts, 4 steps, the board space) on two small
workloads: each workload's programs compile once and serve every
objective and budget (the question is an argument of the programs)."""

import numpy as np
import pytest

from codesign.core.errors import InputError
from codesign.studies import proposal, shared

WORKLOADS = ('rm1', 'criteo_kaggle')
OBJECTIVES = ('throughput', 'throughput_per_usd', 'throughput_per_watt')
DRAWS = 30


def _draws():
  rng = np.random.default_rng(0)
  for _ in range(DRAWS):
    yield (
      WORKLOADS[int(rng.integers(len(WORKLOADS)))],
      OBJECTIVES[int(rng.integers(len(OBJECTIVES)))],
      float(10 ** rng.uniform(5.2, 6.5)),  # $158k to $3.2M
    )


def _run(workload, objective, budget):
  settings = proposal.Settings(
    workload=workload,
    objective=objective,
    budget_usd=budget,
    max_nodes=4,
    starts=2,
    steps=4,
    presets=('dgx_h100', 'dgx_a100_80gb', 'mi300x_8', 'big_basin'),
    trainers=('accelerator',),
    systems=('board',),
  )
  result, _ = proposal.run(settings)
  return result


@pytest.mark.heavy
def test_no_printed_candidate_beats_the_proposal():
  seen = 0
  for workload, objective, budget in _draws():
    try:
      result = _run(workload, objective, budget)
    except InputError:
      continue  # nothing buildable within the budget: one sentence
    seen += 1
    prop = result['proposal']
    assert prop['within_limits'], (workload, objective, budget)
    rob = result['robustness']
    assert rob['nominal_best'] == 'proposal', (workload, objective, budget)
    # Every candidate of the ranking (the proposal first, other designs
    # the search found, presets within the limits) and every preset row
    # within the limits, judged by the rule.
    rows = [c for c in rob['candidates'] if c['objective_value'] is not None]
    rows += [r for r in result['presets'] if r['within_limits']]
    values = [r['objective_value'] for r in rows]
    capex = [r['capex_usd'] for r in rows]
    tol = result['tolerance']['tolerance'] if result['tolerance'] else None
    order = shared.decide(values, capex, objective, tol)
    assert order[0] == 0, (workload, objective, budget, order, values)
    for v in values[1:]:
      if objective in shared.THROUGHPUT_OBJECTIVES:
        assert v <= values[0] / (1.0 - tol) ** len(values) * (1 + 1e-9)
      else:
        assert v <= values[0] * (1 + 1e-9)
  assert seen >= 20  # most requests have a buildable answer


def test_a_design_over_its_rack_space_is_outside_the_limits():
  """Where there is a rack rule, a rack unit's rack units must fit what
  its rack class holds (`rack_unit_u` within `rack_space_u`), beside its
  power; without a rack rule, neither counts."""
  fig = {
    'feasible': True,
    'capex_usd': 1e5,
    'power_w': 1e4,
    'rack_unit_w': 1e4,
    'rack_unit_u': 45.0,
    'rack_space_u': 38.0,
    'overflowing_tiers': [],
  }
  limits = {'budget_usd': None, 'power_w': None, 'rack_w': 142e3}
  assert not proposal.within_limits(fig, limits)
  assert '45U, over the 38U' in shared.why_not(fig, rack_w=142e3)
  assert proposal.within_limits(fig, {**limits, 'rack_w': None})
  assert proposal.within_limits({**fig, 'rack_unit_u': 27.0}, limits)
