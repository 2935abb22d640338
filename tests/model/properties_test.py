"""Property tests of the cost model over random designs inside the bounds.

- Faster parts never slow the step: raising any bandwidth or peak FLOP/s
  field (and, as well, any efficiency or link count, or lowering any
  latency or per-op overhead) never raises the step time. The software
  stack's leaves likewise: a lower step floor, host time per operator or
  collective latency, a higher embedding efficiency, UVM fill efficiency
  or host overlap never slow the step.
- More memory never hurts feasibility: raising the HBM or DDR capacity,
  or lowering the share of HBM the stack reserves, never turns a feasible
  design infeasible and never lowers the margin.

Designs are drawn inside `hardware.BOUNDS` and `stack.BOUNDS`
(log-uniform where the lower bound is positive, uniform on [0, hi]
otherwise), plans in [0, 1]. Each configuration (workload, platform
structure, sharding, stack) is jit-compiled once; the examples reuse the
compiled function. Between them the configurations run every stack
preset and every static choice family of the stack.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesign.core.pytree import replace
from codesign.model import planner
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import workload_presets as presets
from tests.designs import (
  HI,
  LO,
  PATHS,
  STACK_HI,
  STACK_LO,
  STACK_PATHS,
  configure,
  design,
  evaluator,
  stack_design,
)

# name -> (workload, platform preset, topology override, sharding, stack
# preset[, changes to its static choices])
CONFIGS = {
  'kaggle_cube_mesh_mixed': (
    'criteo_kaggle',
    'big_basin',
    None,
    'mixed',
    'nvidia_pytorch',  # one_device, forward_backward graph, sparse_grad
  ),
  'zion_scale_fully_connected': (
    'zion_scale',
    'zion',
    None,
    'auto',
    'torchrec',  # eager, UVM caching, nn.Linear + ReLU, fused TBE update
  ),
  'dcnv2_ring': (
    'mlperf_dlrm_dcnv2',
    'dgx_a100_80gb',
    'ring',
    'auto',
    'hugectr',
  ),
  'rm2_pcie_only': ('rm2', 'p4d', 'pcie_only', 'auto', 'jax_xla'),
  'benchmark_switch_row_wise': (
    'dlrm_benchmark',
    'zionex',
    None,
    'row_wise',
    'torchrec',
    # a graph around forward and backward, sparse gradients, bf16 payloads
    # cast in a pass of their own, no UVM caching
    (
      ('graph_scope', 'forward_backward'),
      ('update_path', 'sparse_grad'),
      ('mlp_fusion', 'elementwise'),
      ('payload_precision', 'bf16'),
      ('pooled_cast', True),
      ('uvm_caching', False),
    ),
  ),
  'terabyte_cpu_trainer': (
    'criteo_terabyte',
    'cpu_2s',
    None,
    'auto',
    'ipex_cpu',
  ),
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
    'socket_links', 'links_per_accelerator', 'count', 'switch_radix'
  )
]  # fmt: skip
# ... and latencies, per-op overheads, the GEMM half size and the
# network's posting cost, switch latency and oversubscription (lowered).
LOWERED = [
  k for k in PATHS if _last(k) in (
    'latency', 'kernel_overhead', 'gemm_half_size', 'post_overhead',
    'switch_latency', 'oversubscription'
  )
]  # fmt: skip
CAPACITIES = ['accelerator.hbm_capacity', 'cpu.ddr_capacity']
# The stack's leaves where a better value is faster: host and software
# costs (lowered) and efficiencies and host overlap (raised). Not
# monotone in the step: hbm_reserve (memory only) and comm_overlap (the
# planner's default plan overlap, not an input of the step).
STACK_LOWERED = [
  'step_floor',
  'sample_host_time',
  'op_host_time',
  'collective_latency',
]
STACK_RAISED = [
  'embedding_efficiency',
  'hybrid_embedding_efficiency',
  'uvm_fill_efficiency',
  'host_overlap',
]


def test_field_lists():
  assert len(BANDWIDTH_AND_FLOPS) == 13, BANDWIDTH_AND_FLOPS
  assert 'nic.bandwidth' in BANDWIDTH_AND_FLOPS
  assert not any('price' in k or 'power' in k for k in BANDWIDTH_AND_FLOPS)
  assert len(ALSO_RAISED) == 14 and len(LOWERED) == 10
  assert len(PATHS) == len(jax.tree.leaves(TEMPLATE))
  # Every stack leaf is either ordered here or said not to be.
  unordered = {'hbm_reserve', 'comm_overlap'}
  assert set(STACK_PATHS) == set(STACK_LOWERED + STACK_RAISED) | unordered


@functools.cache
def setup(name):
  """(workload, plan template, jitted vmapped evaluate) for a config."""
  w, p, s, template = configure(*CONFIGS[name])
  report = evaluator(w, p, s, template)

  def f(*args):
    r = report(*args)
    return r.step_time, r.feasible, r.feasibility_margin

  fn = jax.vmap(f, in_axes=(0, 0, None, None, None))
  return w, template, jax.jit(fn)


def unit(n):
  return st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)


# Every example evaluates one batch of ROWS designs (one compile per
# config): the drawn design, then variants of it.
FASTER = (
  BANDWIDTH_AND_FLOPS
  + ALSO_RAISED
  + LOWERED
  + ['stack.' + k for k in STACK_LOWERED + STACK_RAISED]
)
ROWS = 2 + len(FASTER)


def draw_case(data, name):
  """A random design and plan, and a function that evaluates rows of
  (platform leaves, stack leaves) (padded to ROWS) under that plan."""
  w, _, fn = setup(name)
  x = design(data.draw(unit(len(PATHS)), label='platform (unit)'))
  y = stack_design(data.draw(unit(len(STACK_PATHS)), label='stack (unit)'))
  frac = np.asarray(data.draw(unit(w.num_tables), label='hbm_fraction'))
  c = data.draw(st.floats(0.0, 1.0), label='cpu_lookup_fraction')
  o = data.draw(st.floats(0.0, 1.0), label='overlap')
  args = (jnp.asarray(frac), jnp.asarray(c), jnp.asarray(o))

  def run(rows):
    rows = list(rows) + [(x, y)] * (ROWS - len(rows))
    platforms = jnp.asarray(np.stack([r[0] for r in rows]))
    stacks = jnp.asarray(np.stack([r[1] for r in rows]))
    out = fn(platforms, stacks, *args)
    return tuple(np.asarray(v) for v in out)

  return (x, y), run


def changed(design_, k, factor):
  """(platform, stack) leaves with field k (`stack.` for the stack's) made
  `factor` times better, kept inside the bounds."""
  x, y = design_[0].copy(), design_[1].copy()
  if k.startswith('stack.'):
    k = k[len('stack.') :]
    i = STACK_PATHS.index(k)
    if k in STACK_LOWERED or k == 'hbm_reserve':
      y[i] = max(y[i] / factor, STACK_LO[i])
    else:
      y[i] = min(y[i] * factor, STACK_HI[i])
    return x, y
  i = PATHS.index(k)
  if k in LOWERED:
    x[i] = max(x[i] / factor, LO[i])
  else:
    x[i] = min(x[i] * factor, HI[i])
  return x, y


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
  f_reserve = data.draw(st.floats(1.0, 1e3))
  hbm = changed(x, CAPACITIES[0], f_hbm)
  ddr = changed(x, CAPACITIES[1], f_ddr)
  reserve = changed(x, 'stack.hbm_reserve', f_reserve)
  both = changed(changed(hbm, CAPACITIES[1], f_ddr), 'stack.hbm_reserve', 1e9)
  _, feasible, margin = run([x, hbm, ddr, reserve, both])
  feasible, margin = feasible[:5], margin[:5]
  assert np.all(np.isfinite(margin))
  for i in (1, 2, 3, 4):
    assert feasible[i] or not feasible[0], (i, feasible)
    assert margin[i] >= margin[0] - 1e-12, (i, margin)
  # The soft minimum of the tier margins at temperature T = 0.01 is >= 0
  # when every tier fits and below T log 2 when one overflows.
  for f, m in zip(feasible, margin):
    assert m >= -1e-12 if f else m < 0.01 * np.log(2.0), (f, m)


# Each new (workload, stack) pair compiles the planner (3-4 s on 2 cores),
# so the examples are few; the fixed-plan property above draws 60 per
# configuration, each in one batched call.
@pytest.mark.heavy
@settings(max_examples=12, deadline=None, database=None, derandomize=True)
@given(
  wname=st.sampled_from(['criteo_kaggle', 'zion_scale', 'mlperf_dlrm_dcnv2']),
  pname=st.sampled_from(sorted(platform_presets.PLATFORMS)),
  sname=st.sampled_from(sorted(stack_presets.PRESETS)),
  field=st.sampled_from(CAPACITIES + ['stack.hbm_reserve']),
  factor=st.floats(1.0, 16.0),
)
def test_more_capacity_with_the_auto_plan(wname, pname, sname, field, factor):
  # The automatic plan is rebuilt for the bigger memory (or the smaller
  # reserve): it may put more in HBM and reshard, but a design that fit
  # must still fit.
  w = presets.get(wname)
  p = platform_presets.get(pname)
  s = stack_presets.get(sname)
  if field == 'stack.hbm_reserve':
    bigger, s2 = p, replace(s, hbm_reserve=s.hbm_reserve / factor)
  else:
    value = hardware.get_value(p, field) * factor
    bigger, s2 = hardware.with_value(p, field, value), s

  def fits(q, stack):  # cost_model.evaluate's feasibility, one compile
    return planner.feasible_and_step_time(
      w, q, stack, planner.make(w, q, stack)
    )[0]

  assert fits(bigger, s2) or not fits(p, s)
