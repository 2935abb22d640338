"""The system around the step (`codesign.model.whole_system`): the step
alone where nothing is set; readers that bound the step; auto readers
that feed it and are billed apart; failures counted above 64
accelerators only under `auto`; finite gradients of the whole system
(float32 and float64) at 1,000 random points inside the bounds."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core.pytree import replace
from codesign.model import cost_model, planner, report, whole_system
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import whole_system as ws
from codesign.spec import workload_presets as wp


@pytest.fixture(scope='module')
def design():
  w = wp.get('criteo_kaggle')
  p = platform_presets.get('dgx_a100_80gb')
  s = stack_presets.get('torchrec')
  return p, w, planner.make(w, p, s), s


def test_local_data_without_failures_is_the_step_alone(design):
  p, w, plan, s = design
  a = report.design_figures(p, w, plan, s)
  b = report.design_figures(p, w, plan, s, ws.WholeSystem())
  assert a == b and 'system' not in b


def test_auto_readers_feed_the_step_and_are_billed_apart(design):
  p, w, plan, s = design
  a = report.design_figures(p, w, plan, s)
  f = report.design_figures(p, w, plan, s, ws.WholeSystem('auto'))
  sysd = f['system']
  assert sysd['reader_nodes'] >= 1 and sysd['storage_nodes'] >= 1
  assert f['throughput_samples_per_s'] <= sysd['readers_feed_samples_per_s']
  assert f['throughput_samples_per_s'] <= a['throughput_samples_per_s']
  bill = sum(b['usd'] for b in sysd['bill'].values())
  assert f['capex_usd'] == pytest.approx(a['capex_usd'] + bill)
  assert f['power_w'] > a['power_w']
  text = whole_system.lines(sysd)
  assert text[0].startswith('system: capex') and text[1].startswith('readers: ')


def test_too_few_readers_bound_the_step(design):
  # Trainers made fast (1e9 samples/s) so that one reader cannot keep up.
  p, w, plan, s = design
  p = hardware.as_arrays(p)
  r = cost_model.evaluate_design(p, w, plan, s)
  r = dataclasses.replace(r, throughput=jnp.asarray(1e9))
  fed, f = whole_system.apply(r, p, w, ws.WholeSystem(1))
  rate = f.reader_rate
  assert rate < 0.5e9
  assert float(fed.throughput) <= rate
  auto, g = whole_system.apply(r, p, w, ws.WholeSystem('auto'))
  # Auto readers feed what the trainers' front-end port lets through.
  front = ws.parts().trainer_frontend_bps / f.sample_bytes
  assert g.fed_throughput <= front
  assert g.readers == np.ceil(g.fed_throughput * 1.1 / rate)
  assert g.readers * rate >= float(auto.throughput)


def test_auto_failures_count_above_64_accelerators_only(design):
  p, w, plan, s = design
  auto = ws.WholeSystem(with_failures='auto')
  small = report.design_figures(p, w, plan, s)
  same = report.design_figures(p, w, plan, s, auto)
  assert same['throughput_samples_per_s'] == small['throughput_samples_per_s']
  assert same['capex_usd'] == small['capex_usd']
  big = replace(p, nodes=16.0)
  plan16 = planner.make(w, big, s)
  alone = report.design_figures(big, w, plan16, s)
  counted = report.design_figures(big, w, plan16, s, auto)
  assert 0 < counted['system']['goodput'] < 1
  assert counted['throughput_samples_per_s'] < alone['throughput_samples_per_s']
  assert counted['system']['storage_nodes'] == 1


def _whole_loss(p, w, plan, s, system):
  r = cost_model.evaluate(p, w, plan, s)
  r, _ = whole_system.apply(r, p, w, system)
  return jnp.log(r.throughput) - jnp.log(r.capex) - 0.1 * jnp.log(r.power)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_gradients_finite_at_random_points_in_bounds(design, dtype):
  p0, w, plan, s = design
  system = ws.WholeSystem('auto', True, 'incremental')
  p0 = hardware.as_arrays(p0)
  rng = np.random.default_rng(0)
  n = 1000
  nodes = jnp.asarray(np.exp(rng.uniform(0.0, np.log(1024.0), n)), dtype)
  per = jnp.asarray(rng.uniform(1.0, 16.0, n), dtype)
  batch_scale = jnp.asarray(np.exp(rng.uniform(-2.0, 2.0, n)), dtype)

  def loss(x, a, k):
    q = dataclasses.replace(p0, nodes=x, accelerators_per_node=a)
    q = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype), q)
    r = cost_model.evaluate(q, w, plan, s)
    r = dataclasses.replace(r, throughput=r.throughput * k)
    r, _ = whole_system.apply(r, q, w, system)
    return jnp.log(r.throughput) - jnp.log(r.capex) - 0.1 * jnp.log(r.power)

  grads = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1, 2))))(
    nodes, per, batch_scale
  )
  for g in grads:
    assert np.all(np.isfinite(np.asarray(g)))


def test_the_printed_feed_names_what_binds_it(design):
  """The readers line says what the trainers' front-end ports take and
  which of trainers, readers and those ports holds the system down: one
  trainer node of a fast design is bound by its front-end port, and with
  the ports made wide the trainers bind again."""
  p, w, plan, s = design
  f = report.design_figures(p, w, plan, s, ws.WholeSystem('auto'))
  sysd = f['system']
  front = sysd['frontend_samples_per_s']
  assert front > 0 and sysd['trainer_frontend_gbit_per_s'] > 0
  rates = {
    'the trainers': sysd['trainer_throughput_samples_per_s'],
    'the readers': sysd['readers_feed_samples_per_s'],
    "the trainers' front-end ports": front,
  }
  want = min(rates, key=rates.get)
  assert whole_system.feed_bound(sysd) == want
  assert sysd['fed_throughput_samples_per_s'] <= rates[want]
  line = whole_system.lines(sysd)[1]
  assert f'bound by {want}' in line
  # The port's speed is the data file's assumption, and says so.
  assert sysd['trainer_frontend_source'].startswith('assumption')
  assert 'Gb/s a node, an assumption) take' in line
  wide = {**sysd, 'frontend_samples_per_s': 1e12}
  wide['readers_feed_samples_per_s'] = 1e12
  assert whole_system.feed_bound(wide) == 'the trainers'
  # The data local (failures counted): no front-end ports in the feed.
  local = report.design_figures(
    p, w, plan, s, ws.WholeSystem(with_failures=True)
  )
  assert local['system']['frontend_samples_per_s'] == 0.0
