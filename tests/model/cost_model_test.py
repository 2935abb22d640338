"""`cost_model.evaluate_design`: one concrete design's report as one
compiled program, the numbers of `evaluate` op by op."""

import dataclasses

import jax
import numpy as np
import pytest

from codesign.core.pytree import replace
from codesign.model import cost_model, planner
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import workload_presets as presets

# A term that is zero on the design (HBM work on a CPU trainer) is left
# as a residue of safe divisions near 1e-42 (s or B), whose last bits
# differ between a named plan and its one-hot weights.
ZERO = 1e-30
TRACE = '/jax/core/compile/jaxpr_trace_duration'


def _compiled_is_eager(w, p, plan, s):
  """Asserts that `evaluate_design` gives `evaluate`'s report (float64)."""
  with jax.enable_x64(True):
    eager = cost_model.evaluate(hardware.as_arrays(p), w, plan, s)
    compiled = cost_model.evaluate_design(hardware.as_arrays(p), w, plan, s)
  for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(compiled)):
    np.testing.assert_allclose(
      np.asarray(b), np.asarray(a), rtol=1e-12, atol=ZERO
    )
  assert compiled.bottleneck == eager.bottleneck


def _events(fn) -> tuple:
  """(fn's result in float64, the JAX events it recorded)."""
  events = []

  def listen(event, duration, **kwargs):
    events.append(event)

  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    with jax.enable_x64(True):
      return fn(), events
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)


@pytest.mark.parametrize(
  'workload, platform, stack',
  [
    ('criteo_kaggle', 'dgx_a100_80gb', 'torchrec'),
    ('criteo_kaggle', 'cpu_2s', 'ipex_cpu'),
  ],
)
def test_evaluate_design_is_evaluate(workload, platform, stack):
  w = presets.get(workload)
  p = platform_presets.get(platform)
  s = stack_presets.get(stack)
  _compiled_is_eager(w, p, planner.make(w, p, s), s)


def test_designs_differing_in_numbers_and_labels_share_one_trace():
  w = presets.get('criteo_kaggle')
  p = platform_presets.get('dgx_a100_80gb')
  s = stack_presets.get('torchrec')
  plan = planner.make(w, p, s)
  q = replace(p, name='renamed', nodes=2.0)
  _events(lambda: cost_model.evaluate_design(hardware.as_arrays(p), w, plan, s))
  r, events = _events(
    lambda: cost_model.evaluate_design(hardware.as_arrays(q), w, plan, s)
  )
  assert float(r.throughput) > 0
  assert TRACE not in events
  # A change of structure (here one more dense feature) is a new trace.
  # The workload is made here, so no other test in this worker (pytest-
  # xdist shares the process) has traced it before.
  w2 = dataclasses.replace(
    w, name='one_more_dense_feature', num_dense=w.num_dense + 1
  )
  plan2 = planner.make(w2, p, s, sharding='table_wise')  # ranks no plans
  _, events = _events(
    lambda: cost_model.evaluate_design(hardware.as_arrays(p), w2, plan2, s)
  )
  assert TRACE in events


@pytest.mark.parametrize('skew', [1.0, 1.5, 8.0])
def test_every_skew_is_its_own_in_one_program(skew):
  """The skew is an argument of `evaluate_design`'s program (the key
  holds a shared one): each skew's report is `evaluate`'s of the workload
  at that skew, and another skew of the workload is no new trace."""
  w = dataclasses.replace(presets.get('zion_scale'), popularity_skew=skew)
  p = platform_presets.get('big_basin')
  s = stack_presets.get('torchrec')
  plan = planner.make(w, p, s)
  assert np.any(np.asarray(plan.hbm_fraction) < 1.0)  # the skew matters
  _compiled_is_eager(w, p, plan, s)
  if skew == 1.0:  # uniform traffic: its own program, the closed form
    return
  other = dataclasses.replace(w, popularity_skew=3.0)
  _, events = _events(
    lambda: cost_model.evaluate_design(hardware.as_arrays(p), other, plan, s)
  )
  assert TRACE not in events
