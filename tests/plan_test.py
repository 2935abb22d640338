"""The `auto` plan: which sharding it picks, and that it is never slower
than the simple plans it chooses from."""

import numpy as np
import pytest

from codesign import cost_model, hardware, plan, platform_presets
from codesign import workload_presets as presets


def step(w, p, pl) -> float:
  return float(
    np.asarray(cost_model.evaluate(hardware.as_arrays(p), w, pl).step_time)
  )


@pytest.mark.parametrize(
  'workload, platform',
  [('zion_scale', 'zionex'), ('zion_scale', 'zion'), ('rm2', 'zionex')],
)
def test_auto_is_no_slower_than_uniform_shardings(workload, platform):
  w, p = presets.get(workload), platform_presets.get(platform)
  auto = plan.make(w, p)
  r = cost_model.evaluate(hardware.as_arrays(p), w, auto)
  assert bool(r.feasible)
  for sharding in ('table_wise', 'row_wise', 'column_wise'):
    assert float(r.step_time) <= step(w, p, plan.make(w, p, sharding=sharding))
  # Several nodes split tables within a node, never over all ranks; one
  # node has no table-row-wise (row-wise is the same there).
  if float(p.nodes) > 1:
    assert 'row_wise' not in auto.sharding
  else:
    assert 'table_row_wise' not in auto.sharding


def test_auto_balances_hot_tables_across_zionex_nodes():
  # 16 nodes: whole tables would make the busiest rank carry a whole hot
  # table for the global batch; the auto plan splits them (table-row-wise
  # or column-wise, whichever the model finds faster).
  w, p = presets.get('zion_scale'), platform_presets.get('zionex')
  auto = plan.make(w, p)
  assert set(auto.sharding) <= {'table_row_wise', 'column_wise', 'table_wise'}
  assert auto.sharding.count('table_wise') < w.num_tables // 2
  t_auto = step(w, p, auto)
  assert t_auto < 0.6 * step(w, p, plan.make(w, p, sharding='table_wise'))
  assert t_auto <= step(w, p, plan.make(w, p, sharding='column_wise'))
