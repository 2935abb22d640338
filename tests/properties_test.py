"""Property tests of the cost model over random designs inside the bounds.

- Faster parts never slow the step: raising any bandwidth or peak FLOP/s
  field (and, as well, any efficiency or link count, or lowering any
  latency or per-op overhead) never raises the step time.
- More memory never hurts feasibility: raising the HBM or DDR capacity
  never turns a feasible design infeasible and never lowers the margin.

Designs are drawn inside `hardware.BOUNDS` (log-uniform where the lower
bound is positive, uniform on [0, hi] otherwise), plans in [0, 1]. Each
configuration (workload, platform structure, sharding) is jit-compiled
once; the examples reuse the compiled function.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from designs import HI, LO, PATHS, configure, design, evaluator
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign import cost_model, hardware, plan, platform_presets
from codesign import workload_presets as presets

# name -> (workload, platform preset, topology override, sharding)
CONFIGS = {
  'kaggle_cube_mesh_mixed': ('criteo_kaggle', 'big_basin', None, 'mixed'),
  'zion_scale_fully_connected': ('zion_scale', 'zion', None, 'auto'),
  'dcnv2_ring': ('mlperf_dlrm_dcnv2', 'dgx_a100_80gb', 'ring', 'auto'),
  'rm2_pcie_only': ('rm2', 'p4d', 'pcie_only', 'auto'),
  'benchmark_switch_row_wise': ('dlrm_benchmark', 'zionex', None, 'row_wise'),
  'terabyte_cpu_trainer': ('criteo_terabyte', 'cpu_2s', None, 'auto'),
}

TEMPLATE = platform_presets.get('big_basin')


def _last(path):
  return path.rsplit('.', 1)[-1]


# The fields the issue names: every bandwidth and every peak FLOP/s.
BANDWIDTH_AND_FLOPS = [
  k
  for k in PATHS
  if _last(k).startswith('peak_flops') or _last(k).endswith('bandwidth')
]
# Also "faster": efficiencies and link counts (raised) ...
ALSO_RAISED = [
  k for k in PATHS if _last(k).endswith('efficiency') or _last(k) in (
    'socket_links', 'links_per_accelerator', 'count'
  )
]  # fmt: skip
# ... and latencies, per-op overheads and the GEMM half size (lowered).
LOWERED = [
  k
  for k in PATHS
  if _last(k) in ('latency', 'kernel_overhead', 'step_overhead')
  or _last(k) == 'gemm_half_size'
]
CAPACITIES = ['accelerator.hbm_capacity', 'cpu.ddr_capacity']


def test_field_lists():
  assert len(BANDWIDTH_AND_FLOPS) == 12, BANDWIDTH_AND_FLOPS
  assert 'nic.bandwidth' in BANDWIDTH_AND_FLOPS
  assert not any('price' in k or 'power' in k for k in BANDWIDTH_AND_FLOPS)
  assert len(ALSO_RAISED) == 12 and len(LOWERED) == 8
  assert len(PATHS) == len(jax.tree.leaves(TEMPLATE))


@functools.cache
def setup(name):
  """(workload, plan template, jitted vmapped evaluate) for a config."""
  w, p, template = configure(*CONFIGS[name])
  report = evaluator(w, p, template)

  def f(*args):
    r = report(*args)
    return r.step_time, r.feasible, r.feasibility_margin

  return w, template, jax.jit(jax.vmap(f, in_axes=(0, None, None, None)))


def unit(n):
  return st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)


# Every example evaluates one batch of ROWS designs (one compile per
# config): the drawn design, then variants of it.
FASTER = BANDWIDTH_AND_FLOPS + ALSO_RAISED + LOWERED
ROWS = 2 + len(FASTER)


def draw_case(data, name):
  """A random design and plan, and a function that evaluates rows of
  platform leaves (padded to ROWS) under that plan."""
  w, _, fn = setup(name)
  x = design(data.draw(unit(len(PATHS)), label='platform (unit)'))
  frac = np.asarray(data.draw(unit(w.num_tables), label='hbm_fraction'))
  c = data.draw(st.floats(0.0, 1.0), label='cpu_lookup_fraction')
  o = data.draw(st.floats(0.0, 1.0), label='overlap')
  args = (jnp.asarray(frac), jnp.asarray(c), jnp.asarray(o))

  def run(rows):
    rows = list(rows) + [x] * (ROWS - len(rows))
    out = fn(jnp.asarray(np.stack(rows)), *args)
    return tuple(np.asarray(v) for v in out)

  return x, run


def changed(x, k, factor):
  """x with field k made `factor` times better, kept inside the bounds."""
  y = x.copy()
  i = PATHS.index(k)
  if k in LOWERED:
    y[i] = max(y[i] / factor, LO[i])
  else:
    y[i] = min(y[i] * factor, HI[i])
  return y


SETTINGS = settings(
  max_examples=60, deadline=None, database=None, derandomize=True
)


@pytest.mark.parametrize('name', list(CONFIGS))
@SETTINGS
@given(data=st.data())
def test_faster_parts_never_slow_the_step(name, data):
  x, run = draw_case(data, name)
  factors = data.draw(
    st.lists(st.floats(1.0, 1e3), min_size=len(FASTER), max_size=len(FASTER)),
    label='factors',
  )
  # Each field alone, then all of them at once.
  rows = [x] + [changed(x, k, f) for k, f in zip(FASTER, factors)]
  y = x
  for k, f in zip(FASTER, factors):
    y = changed(y, k, f)
  rows.append(y)
  step, _, _ = run(rows)
  assert np.all(np.isfinite(step)) and np.all(step > 0), step
  slower = [
    (k, step[0], step[1 + i])
    for i, k in enumerate(FASTER + ['all'])
    if step[1 + i] > step[0] * (1 + 1e-12)
  ]
  assert not slower, slower


@pytest.mark.parametrize('name', list(CONFIGS))
@SETTINGS
@given(data=st.data())
def test_more_capacity_never_hurts_feasibility(name, data):
  x, run = draw_case(data, name)
  f_hbm, f_ddr = data.draw(st.floats(1.0, 1e3)), data.draw(st.floats(1.0, 1e3))
  hbm = changed(x, CAPACITIES[0], f_hbm)
  ddr = changed(x, CAPACITIES[1], f_ddr)
  both = changed(hbm, CAPACITIES[1], f_ddr)
  _, feasible, margin = run([x, hbm, ddr, both])
  feasible, margin = feasible[:4], margin[:4]
  assert np.all(np.isfinite(margin))
  for i in (1, 2, 3):
    assert feasible[i] or not feasible[0], (i, feasible)
    assert margin[i] >= margin[0] - 1e-12, (i, margin)
  # The soft minimum of the tier margins at temperature T = 0.01 is >= 0
  # when every tier fits and below T log 2 when one overflows.
  for f, m in zip(feasible, margin):
    assert m >= -1e-12 if f else m < 0.01 * np.log(2.0), (f, m)


@settings(max_examples=25, deadline=None, database=None, derandomize=True)
@given(
  wname=st.sampled_from(['criteo_kaggle', 'zion_scale', 'mlperf_dlrm_dcnv2']),
  pname=st.sampled_from(sorted(platform_presets.PLATFORMS)),
  field=st.sampled_from(CAPACITIES),
  factor=st.floats(1.0, 16.0),
)
def test_more_capacity_with_the_auto_plan(wname, pname, field, factor):
  # The automatic plan is rebuilt for the bigger memory: it may put more
  # in HBM and reshard, but a design that fit must still fit.
  w = presets.get(wname)
  p = platform_presets.get(pname)
  bigger = hardware.with_value(p, field, hardware.get_value(p, field) * factor)

  def fits(q):
    r = cost_model.evaluate(hardware.as_arrays(q), w, plan.make(w, q))
    return bool(r.feasible)

  assert fits(bigger) or not fits(p)
