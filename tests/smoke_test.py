"""Every workload preset on every platform preset, under each named
placement: a finite, positive step time, or infeasible with the tier that
overflows named; never NaN, and always a valid result.json."""

import jax.numpy as jnp
import numpy as np
import pytest

from codesign import (
  cost_model,
  hardware,
  plan,
  platform_presets,
  report,
  results,
  workload_presets,
)


@pytest.mark.parametrize('workload_name', sorted(workload_presets.WORKLOADS))
def test_every_preset_pair_is_finite(workload_name):
  w = workload_presets.get(workload_name)
  for name in platform_presets.PLATFORMS:
    p = platform_presets.get(name)
    for placement in ('auto', 'hbm', 'ddr'):
      where = (workload_name, name, placement)
      pl = plan.make(w, p, placement=placement)
      r = cost_model.evaluate(hardware.as_arrays(p), w, pl)
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
