"""Tests of the searched per-table sharding (codesign.plan_space and the
cost model's `sharding_weights`): one-hot weights are exactly the named
sharding, relaxed weights have finite gradients that match differences,
and the search over sharding never does worse than the uniform shardings
it starts from."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model import cost_model, planner, terms
from codesign.search import batching, gradient, plan_space, snapping
from codesign.search import design_space as ds
from codesign.spec import hardware, stack_presets
from codesign.spec import platform_presets as pp
from codesign.spec import workload_presets as wp

STACK = stack_presets.get('torchrec')
CHOICES = terms.SEARCHED_SHARDINGS


def test_one_hot_weights_are_the_named_sharding():
  """Random per-table shardings and HBM fractions, on platforms of one and
  several nodes: the relaxed path with one-hot weights gives the step
  time, HBM need and bottleneck of the named plan to the last bits."""
  rng = np.random.default_rng(0)
  for wname, pname in (('zion_scale', 'dgx_h100'), ('zion_scale', 'p4d')):
    w, p = wp.get(wname), pp.get(pname)
    hw = hardware.as_arrays(p)
    base = planner.make(w, p, STACK, sharding='table_wise')
    mixed_fn = jax.jit(
      lambda hw, frac, wts, w=w, base=base: cost_model.evaluate(
        hw,
        w,
        dataclasses.replace(base, hbm_fraction=frac),
        STACK,
        sharding_weights=wts,
      )
    )
    for _ in range(3):
      names = tuple(CHOICES[i] for i in rng.integers(0, 4, w.num_tables))
      frac = rng.uniform(0, 1, w.num_tables)
      plan = dataclasses.replace(base, sharding=names, hbm_fraction=frac)
      named = cost_model.evaluate(hw, w, plan, STACK)
      wts = np.eye(4)[[CHOICES.index(n) for n in names]]
      mixed = mixed_fn(hw, jnp.asarray(frac), jnp.asarray(wts))
      for key in ('step_time', 'throughput', 'capex'):
        np.testing.assert_allclose(
          float(getattr(mixed, key)), float(getattr(named, key)), rtol=1e-12
        )
      np.testing.assert_allclose(
        float(mixed.memory_required['hbm']),
        float(named.memory_required['hbm']),
        rtol=1e-12,
      )
      assert int(mixed.bottleneck_index) == int(named.bottleneck_index)


def test_relaxed_sharding_gradient_is_finite_and_matches_differences():
  w, p = wp.get('zion_scale'), pp.get('dgx_h100')
  hw = hardware.as_arrays(p)
  plan = planner.make(w, p, STACK, sharding='table_wise')
  rng = np.random.default_rng(1)
  z = rng.uniform(0.1, 0.9, (w.num_tables, 4))

  def step(zz):
    wts = zz / jnp.sum(zz, axis=1, keepdims=True)
    r = cost_model.evaluate(hw, w, plan, STACK, sharding_weights=wts)
    return jnp.log(r.step_time)

  f = jax.jit(step)
  grad = np.asarray(jax.jit(jax.grad(step))(jnp.asarray(z)))
  assert np.all(np.isfinite(grad))
  assert np.any(np.abs(grad) > 1e-6)  # the sharding matters
  for i, k in ((0, 0), (0, 3), (w.num_tables - 1, 1), (2, 2)):
    e = np.zeros_like(z)
    e[i, k] = 1e-6
    fd = (float(f(z + e)) - float(f(z - e))) / 2e-6
    np.testing.assert_allclose(grad[i, k], fd, rtol=1e-4, atol=1e-9)


def test_plan_vector_snaps_to_one_sharding_per_table():
  w = wp.get('rm1')
  space = ds.make_space(w, max_nodes=2, sharding=plan_space.SEARCH)
  assert space.num_plan == w.num_tables + 1 + w.num_tables * 4
  rng = np.random.default_rng(2)
  z = rng.uniform(0, 1, space.num_plan)
  snapped = snapping.snap_plan(space, z)
  wts = snapped[w.num_tables + 1 :].reshape(w.num_tables, 4)
  assert np.all(wts.sum(axis=1) == 1.0) and set(np.unique(wts)) == {0.0, 1.0}
  expect = np.argmax(z[w.num_tables + 1 :].reshape(w.num_tables, 4), axis=1)
  np.testing.assert_array_equal(np.argmax(wts, axis=1), expect)
  names = tuple(CHOICES[i] for i in expect)
  np.testing.assert_array_equal(
    plan_space.sharding_of_names(space, names), wts.reshape(-1)
  )


def test_uniform_sharding_of_many_plan_vectors_is_that_of_each():
  w = wp.get('rm1')
  space = ds.make_space(w, max_nodes=2, sharding=plan_space.SEARCH)
  z = np.random.default_rng(3).uniform(0, 1, (5, space.num_plan))
  lead = w.num_tables + 1
  for c in range(len(CHOICES)):
    many = plan_space.uniform_sharding(space, z, c)
    for row, x in zip(many, z, strict=True):
      one = plan_space.uniform_sharding(space, x, c)
      np.testing.assert_array_equal(row, one)
      np.testing.assert_array_equal(one[:lead], x[:lead])
      wts = one[lead:].reshape(w.num_tables, len(CHOICES))
      assert np.all(wts[:, c] == 1.0) and wts.sum() == w.num_tables
  assert np.array_equal(z, np.random.default_rng(3).uniform(0, 1, z.shape))


@pytest.mark.heavy
def test_sharding_search_is_no_worse_than_uniform_sharding_on_its_platform():
  """The search over per-table sharding judges every platform it reaches
  with each uniform sharding too: its buildable result is at least as good
  as any uniform sharding on the same platform (auto HBM rule), and its
  written plan evaluates to the searched value."""
  w = wp.get('rm1')
  space = ds.make_space(
    w,
    max_nodes=2,
    plan_mode='auto',
    sharding=plan_space.SEARCH,
    accelerators=('V100-SXM2-32GB', 'A100-SXM4-80GB', 'H100-SXM5-80GB'),
    cpus=('EPYC-7742 (Rome)', 'Xeon-Platinum-8380H (Cooper Lake-SP)'),
  )
  problem = gradient.Problem(space, w, STACK, 'throughput', budget_usd=3e5)
  res = gradient.gradient_search(
    problem, gradient.Config(starts=6, steps=20, snap_top=2)
  )
  assert res.best_feasible
  p, plan = gradient.buildable(problem, res.best_index, res.best_plan_z)
  assert set(plan.sharding) <= set(CHOICES)
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, STACK)
  np.testing.assert_allclose(float(r.throughput), res.best_value, rtol=1e-6)
  uniform = np.stack(
    [
      plan_space.uniform_sharding(space, res.best_plan_z, c)
      for c in range(len(CHOICES))
    ]
  )
  ev = gradient.evaluate_indices(
    problem, np.repeat(res.best_index[None], len(CHOICES), axis=0), uniform
  )
  best_uniform = np.max(np.where(ev['feasible'], ev['value'], 0.0))
  assert res.best_value >= best_uniform * (1 - 1e-12), (res.best_value, ev)


def test_auto_plan_reads_its_axes_and_designs_share_their_fit():
  """The auto plan's fractions read the accelerator, the nodes and the
  accelerators per node (`ds.plan_axes`, from the traced program): moving
  any other axis leaves them to the bit, moving those moves them; and the
  batched evaluation, one fit per distinct plan, gives the figures of
  fitting every design in its own program."""
  w = wp.get('rm1')  # 4 GB of tables: 100x, so that small designs spill
  tables = tuple(dataclasses.replace(t, rows=t.rows * 100) for t in w.tables)
  w = dataclasses.replace(w, tables=tables)
  space = ds.make_space(w, max_nodes=4, plan_mode='auto')
  axes = ds.plan_axes(space, w, STACK)
  assert [ds.HW_AXES[i] for i in axes] == [
    'accelerator',
    'nodes',
    'accelerators_per_node',
  ]
  rng = np.random.default_rng(0)
  sizes = np.asarray(space.sizes)
  index = (rng.random((64, len(sizes))) * sizes).astype(np.int32)
  moved = index.copy()
  others = [i for i in range(len(sizes)) if i not in axes]
  moved[:, others] = (index[:, others] + 1) % sizes[others]
  no_plan = jnp.zeros(0)
  fit = jax.jit(
    jax.vmap(lambda i: ds.auto_fractions_index(space, w, STACK, i, no_plan))
  )
  np.testing.assert_array_equal(fit(index), fit(moved))
  shifted = index.copy()
  shifted[:, list(axes)] = (index[:, list(axes)] + 1) % sizes[list(axes)]
  assert np.any(fit(index) != fit(shifted))
  problem = gradient.Problem(space, w, STACK, budget_usd=1e6)
  rows = np.concatenate([index, moved])
  ev = gradient.evaluate_indices(problem, rows)
  # The same blocked program with the fit inside it, per design.
  alone = batching.run_blocked(
    functools.partial(gradient.assess_index, problem),
    256,
    batching.make_mesh(),
    rows,
    np.zeros((len(rows), 0)),
    np.tile(gradient.question_of(problem), (len(rows), 1)),
  )
  # Equal to rounding: with the fit in the same program XLA may fuse its
  # last operations with the memory term's (g of HBM near 0 here moves by
  # an ulp of 1).
  for got, want in zip((ev['loss'], ev['g'], ev['value']), alone, strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
