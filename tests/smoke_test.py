"""Every workload preset on every platform preset, under the automatic
placement and one of the two fixed ones (`hbm` and `ddr` by turns, so
that every workload meets both on half the presets), with the stack
presets by turns: a finite, positive step time, or infeasible with the
tier that overflows named; never NaN, and always a valid result.json,
whose DDR need the per-rank DDR of ranks.json sums to.
Each evaluation runs op by op (about 0.1 s on 2 cores): the pairs are
too varied in structure for one compile to serve them."""

import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core import results
from codesign.model import cost_model, planner, rank_stats, report
from codesign.spec import (
  hardware,
  platform_presets,
  stack_presets,
  workload_presets,
)


@pytest.mark.parametrize('workload_name', sorted(workload_presets.WORKLOADS))
def test_every_preset_pair_is_finite(workload_name):
  w = workload_presets.get(workload_name)
  stacks = list(stack_presets.PRESETS)
  for i, name in enumerate(platform_presets.PLATFORMS):
    p = platform_presets.get(name)
    for j, placement in enumerate(('auto', ('hbm', 'ddr')[i % 2])):
      s = stack_presets.get(stacks[(i + j) % len(stacks)])
      where = (workload_name, name, placement, s.name)
      pl = planner.make(w, p, s, placement=placement, sharding='table_wise')
      r = cost_model.evaluate(hardware.as_arrays(p), w, pl, s)
      step = float(r.step_time)
      assert np.isfinite(step) and step > 0, where
      assert np.all(np.isfinite(jnp.stack(list(r.breakdown.values())))), where
      over = [
        t
        for t in ('hbm', 'ddr')
        if float(r.memory_required[t]) > float(r.memory_available[t])
      ]
      assert bool(r.feasible) == (not over), where
      result = report.to_result(r)
      assert result['overflowing_tiers'] == over, where
      # dumps refuses NaN and inf (allow_nan=False).
      results.dumps(result)
      assert result['capex_usd'] > 0 and result['power_w'] > 0, where
      _ranks_agree_on_ddr(w, p, pl, s, result, where)


def _ranks_agree_on_ddr(w, p, pl, s, result, where):
  """ranks.json's DDR per rank sums, per node, to result.json's DDR need
  (one memory truth: `terms.table_tiers`)."""
  ranks = rank_stats.compute(w, p, pl, s)['ranks']
  per_node = sum(x['ddr_bytes'] for x in ranks) / float(p.nodes)
  need = result['memory']['ddr']['required_bytes']
  assert per_node == pytest.approx(need, rel=1e-9, abs=1.0), where
