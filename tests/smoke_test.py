"""Every workload preset on every platform preset, under each named
placement and every stack preset: a finite, positive step time, or
infeasible with the tier that overflows named; never NaN, and always a
valid result.json."""

import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core import results
from codesign.model import cost_model, planner, report
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
    for j, placement in enumerate(('auto', 'hbm', 'ddr')):
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
