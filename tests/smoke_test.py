"""Every workload preset on every platform preset: finite or infeasible."""

import jax.numpy as jnp
import numpy as np
import pytest

from codesign import (
  cost_model,
  hardware,
  plan,
  platform_presets,
  workload_presets,
)


@pytest.mark.parametrize('workload_name', sorted(workload_presets.WORKLOADS))
def test_every_preset_pair_is_finite(workload_name):
  w = workload_presets.get(workload_name)
  for name in platform_presets.PLATFORMS:
    p = platform_presets.get(name)
    r = cost_model.evaluate(hardware.as_arrays(p), w, plan.make(w, p))
    step = float(r.step_time)
    assert np.isfinite(step) and step > 0, (workload_name, name)
    assert np.all(np.isfinite(jnp.stack(list(r.breakdown.values()))))
    if not bool(r.feasible):
      over = [
        t
        for t in ('hbm', 'ddr')
        if float(r.memory_required[t]) > float(r.memory_available[t])
      ]
      assert over, (workload_name, name)
