"""The planner: the `auto` sharding is never slower than the simple plans
it chooses from, and the HBM placement is the water-filling of the hottest
bytes, fitted to the HBM the stack allows."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import workload as wl
from codesign.spec import workload_presets as presets

STACK = stack_presets.get('torchrec')


def report(w, p, pl, s=STACK):
  return cost_model.evaluate(hardware.as_arrays(p), w, pl, s)


def step(w, p, pl) -> float:
  return float(np.asarray(report(w, p, pl).step_time))


@pytest.mark.parametrize(
  'workload, platform',
  [('zion_scale', 'zionex'), ('zion_scale', 'zion'), ('rm2', 'zionex')],
)
def test_auto_is_no_slower_than_uniform_shardings(workload, platform):
  w, p = presets.get(workload), platform_presets.get(platform)
  auto = planner.make(w, p, STACK)
  r = report(w, p, auto)
  assert bool(r.feasible)
  for sharding in ('table_wise', 'row_wise', 'column_wise'):
    other = planner.make(w, p, STACK, sharding=sharding)
    if bool(report(w, p, other).feasible):
      assert float(r.step_time) <= step(w, p, other)
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
  auto = planner.make(w, p, STACK)
  assert set(auto.sharding) <= {'table_row_wise', 'column_wise', 'table_wise'}
  assert auto.sharding.count('table_wise') < w.num_tables // 2
  t_auto = step(w, p, auto)
  tw = planner.make(w, p, STACK, sharding='table_wise')
  assert t_auto < 0.6 * step(w, p, tw)
  assert t_auto <= step(w, p, planner.make(w, p, STACK, sharding='column_wise'))


def test_hottest_bytes_first():
  # Two tables of equal lookups: a tiny one and a huge one. Uniform
  # traffic (k = 1) values a byte of the tiny table 1000 times more, so it
  # goes wholly into HBM before any of the huge one; with skew the cold
  # tail of the tiny table is worth less than the hot head of the huge
  # one, so both are partly in HBM, at equal marginal hits per byte.
  w = wl.Workload(
    name='two',
    tables=(wl.Table(1_000, 64), wl.Table(1_000_000, 64)),
    num_dense=4,
    bottom_mlp=(64,),
    top_mlp=(1,),
  )
  tb = planner.table_bytes(w)
  cap = tb[0] + 0.25 * tb[1]
  frac = planner.water_fill(w, cap, np.zeros(2))
  np.testing.assert_allclose(frac, [1.0, 0.25], rtol=1e-12)
  k = 8.0
  skewed = dataclasses.replace(w, popularity_skew=k)
  frac = planner.water_fill(skewed, cap, np.zeros(2))
  assert 0.0 < frac[0] < 1.0 and 0.0 < frac[1] < 1.0
  assert frac[0] > frac[1]
  assert float(np.sum(frac * tb)) == pytest.approx(cap, rel=1e-9)
  marginal = k * (1.0 - frac) ** (k - 1.0) / tb
  assert marginal[0] == pytest.approx(marginal[1], rel=1e-6)


def _one_step_at_a_time(w, capacity, dp_mask):
  """`water_fill`'s skewed bisection judged one midpoint per step."""
  tb = planner.table_bytes(w)
  density = np.array([t.pooling for t in w.tables], np.float64) / tb
  k, free = float(w.popularity_skew), np.asarray(dp_mask) < 0.5

  def fill(log_lam):
    f = 1.0 - (np.exp(log_lam) / (k * density)) ** (1.0 / (k - 1.0))
    return np.where(free, np.clip(f, 0.0, 1.0), 0.0)

  lo, hi = np.log(k * density.min()) - 60.0, np.log(k * density.max())
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    over = np.sum(fill(mid) * tb) > capacity
    bracket = (mid, hi) if over else (lo, mid)
    if bracket == (lo, hi):
      break
    lo, hi = bracket
  return fill(hi)


@pytest.mark.parametrize('workload', ['zion_scale', 'rm2', 'criteo_terabyte'])
def test_water_fill_judging_midpoints_in_batches_is_bit_for_bit(workload):
  # `water_fill` judges the midpoints of several bisection steps in one
  # numpy call; the fractions equal those of one midpoint per step, at
  # skews near 1 and large, with replicated tables, at capacities from
  # almost nothing to almost everything.
  rng = np.random.default_rng(3)
  base = presets.get(workload)
  for skew in (1.01, 1.5, max(base.popularity_skew, 2.0), 16.0):
    w = dataclasses.replace(base, popularity_skew=skew)
    tb = planner.table_bytes(w)
    for trial in range(12):
      dp = (rng.random(len(tb)) < 0.2 * (trial % 2)).astype(float)
      cap = float(np.sum(tb * (1.0 - dp))) * rng.random() ** 3
      with np.errstate(over='ignore'):
        got = planner.water_fill(w, cap, dp)
        want = _one_step_at_a_time(w, cap, dp)
      np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
  'workload, platform, stack',
  [
    ('zion_scale', 'dgx_a100_80gb', 'torchrec'),
    ('zion_scale', 'big_basin', 'nvidia_pytorch'),
    ('mlperf_dlrm_dcnv2', 'dgx1_v100', 'hugectr'),
    ('zion_scale', 'zion', 'torchrec'),
  ],
)
def test_auto_placement_fits_the_models_hbm(workload, platform, stack):
  # The numpy mirror of the HBM requirement agrees with the cost model,
  # and the fitted plan uses the HBM the stack allows, to within 1%.
  w, p = presets.get(workload), platform_presets.get(platform)
  s = stack_presets.get(stack)
  pl = planner.make(w, p, s, placement='auto')  # not the stack's own
  r = report(w, p, pl, s)
  need = planner.hbm_required(w, p, s, pl.sharding, pl.hbm_fraction)
  assert float(r.memory_required['hbm']) == pytest.approx(need, rel=1e-9)
  avail = planner.hbm_available(p, s)
  assert float(r.memory_available['hbm']) == pytest.approx(avail, rel=1e-12)
  assert need <= avail
  if np.any(pl.hbm_fraction < 1.0):  # spilling: HBM nearly full
    assert need >= 0.99 * avail


def test_torchrec_reserves_15_percent_of_hbm():
  p = platform_presets.get('dgx_a100_80gb')
  avail = planner.hbm_available(p, stack_presets.get('torchrec'))
  assert avail == pytest.approx(0.85 * 80 * 2**30)  # 80 GiB


def _spilling_platforms():
  # Every accelerator preset, and each with HBM cut to an eighth (so the
  # larger workloads spill and the fit has work to do).
  for name in platform_presets.PLATFORMS:
    p = platform_presets.get(name)
    if p.trainer == 'cpu':
      continue
    yield name, p
    cap = p.accelerator.hbm_capacity / 8.0
    yield f'{name}/8', hardware.with_value(p, 'accelerator.hbm_capacity', cap)


@pytest.mark.parametrize(
  'sharding,workloads',
  [
    ('table_wise', ('criteo_kaggle', 'mlperf_dlrm_dcnv2', 'zion_scale')),
    ('row_wise', ('zion_scale',)),
  ],
)
def test_traced_hbm_fit_agrees_with_the_concrete_fit_on_every_preset(
  sharding, workloads
):
  # The one HBM rule in its two forms: numpy bisection on the capacity
  # (planner.make) and jnp bisection on the fill level (design space,
  # sensitivity). They agree to 1e-9 on every accelerator preset, with HBM
  # as shipped and cut to an eighth, for workloads of uniform and skewed
  # traffic and few and many tables (every workload preset would take
  # minutes: one compile per platform structure and workload).
  s = STACK
  worst, spilled = 0.0, 0
  for wname in workloads:
    w = presets.get(wname)
    shard = (sharding,) * w.num_tables
    traced = jax.jit(
      lambda p, w=w, shard=shard: planner.fit_hbm_traced(w, p, s, shard)
    )
    for _, p in _spilling_platforms():
      concrete = planner.fit_hbm(w, p, s, shard)
      # Without labels: presets of one structure share a compile.
      got = np.asarray(traced(hardware.unlabelled(hardware.as_arrays(p))))
      worst = max(worst, float(np.max(np.abs(got - concrete))))
      spilled += bool(np.any(concrete < 1.0))
  assert worst < 1e-9
  assert spilled >= 5  # the agreement is tested where it matters


@pytest.mark.parametrize('skew', [None, 1.0, 1.01, 1.5])
def test_fill_orders_are_the_order_of_the_bytes_along_the_fill_curve(skew):
  # The whole tables' order at every fill level between two breaks is
  # the order of their bytes there (ties by index), for skewed traffic
  # (preset) and uniform (skew 1: filled densest first); levels a hair
  # either side of each break read the sorted bytes within rounding.
  w = presets.get('zion_scale')
  if skew is not None:
    w = dataclasses.replace(w, popularity_skew=skew)
  names = ('table_wise',) * w.num_tables
  breaks, orders = planner.fill_orders(w, names)
  assert len(breaks) > 10  # the order does change along the curve
  tb = planner.table_bytes(w)
  dp = np.zeros(w.num_tables)
  edges = np.concatenate([[0.0], breaks, [1.0]])
  u = np.concatenate(
    [np.random.default_rng(0).random(400), 0.5 * (edges[:-1] + edges[1:])]
  )
  loads = planner.fill_curve(w, dp, u[:, None], xp=np) * tb
  got = orders[np.searchsorted(breaks, u)]
  want = np.argsort(-loads, axis=-1, kind='stable')
  np.testing.assert_array_equal(got, want)
  near = np.concatenate([breaks * (1 - 1e-12), breaks * (1 + 1e-12)])
  loads = planner.fill_curve(w, dp, near[:, None], xp=np) * tb
  read = np.take_along_axis(loads, orders[np.searchsorted(breaks, near)], -1)
  sort = -np.sort(-loads, axis=-1)
  np.testing.assert_allclose(read, sort, rtol=1e-9, atol=0.0)


@pytest.mark.parametrize('workload', ['zion_scale', 'criteo_kaggle'])
def test_traced_hbm_fit_in_fill_order_is_the_ranked_fit_bit_for_bit(workload):
  # The excess E(u) of the traced fit (loads read in `fill_orders`)
  # against the same excess with the loads ranked at each level (T^2
  # comparisons), at random levels and at the breaks, skewed traffic and
  # uniform: equal bits.
  w = presets.get(workload)
  names = ('table_wise',) * w.num_tables
  p = hardware.unlabelled(hardware.as_arrays(platform_presets.get('zionex')))
  breaks, orders = planner.fill_orders(w, names)
  u = np.concatenate([np.random.default_rng(1).random(200), breaks])
  dp = np.zeros(w.num_tables)

  @jax.jit
  def both(u):
    frac = planner.fill_curve(w, dp, u)
    order = jnp.asarray(orders)[jnp.searchsorted(breaks, u)]
    need = planner.hbm_need(w, p, STACK, names, frac, order=order)
    ranked = planner.hbm_need(w, p, STACK, names, frac)
    return need, ranked

  need, ranked = jax.vmap(both)(jnp.asarray(u))
  np.testing.assert_array_equal(np.asarray(need), np.asarray(ranked))


def _full_bisection(excess):
  """The fit's bisection as it was before it stopped early: every one of
  the `TRACED_FIT_STEPS` steps run."""

  def body(_, bracket):
    lo, hi = bracket
    mid = 0.5 * (lo + hi)
    over = excess(mid) > 0.0
    return jnp.where(over, lo, mid), jnp.where(over, mid, hi)

  over = excess(jnp.float32(0.5)) > 0.0
  bracket = jnp.where(over, 0.0, 0.5), jnp.where(over, 0.5, 1.0)
  return jax.lax.fori_loop(1, planner.TRACED_FIT_STEPS, body, bracket)[0]


@pytest.mark.parametrize('noise', [0.0, 1e-6])
def test_bisection_stopped_early_is_the_full_bisection_bit_for_bit(noise):
  # float32 levels: roots spread over [0, 1] (tiny ones, where float32
  # resolves all 50 steps, and ones near 1), nothing fits (root below 0),
  # everything fits (root above 1), and an excess whose rounding-scale
  # wiggle makes it non-monotone near the root (`noise`).
  rng = np.random.default_rng(0)
  roots = np.concatenate(
    [rng.random(300), 10.0 ** -rng.uniform(3, 12, 100), [-0.1, 1.5, 0.5]]
  ).astype(np.float32)

  def level(root, fn):
    def excess(u):
      return (u - root) + noise * jnp.sin(1e7 * u)

    return fn(excess)

  with jax.enable_x64(False):  # as the search runs
    stopped = jax.jit(
      jax.vmap(lambda r: level(r, lambda e: planner.bisect_level(e)[0]))
    )(jnp.asarray(roots))
    full = jax.jit(jax.vmap(lambda r: level(r, _full_bisection)))(
      jnp.asarray(roots)
    )
  assert stopped.dtype == jnp.float32
  # Where everything fits (root above 1) the full loop's last step moves
  # the level onto 1 and the stopped one leaves it an ulp below; the fit
  # returns every row there (and none where nothing fits) either way.
  used = (roots > 0.0) & (roots < 1.0)
  stopped, full = np.asarray(stopped), np.asarray(full)
  np.testing.assert_array_equal(stopped[used], full[used])
  assert stopped[roots < 0.0] == 0.0 and full[roots < 0.0] == 0.0


def test_traced_hbm_fit_gradient_matches_finite_differences():
  # d(bytes in HBM)/d(HBM capacity, nodes) by the implicit gradient of
  # the traced fit against central differences, on a spilling design.
  w = presets.get('zion_scale')
  p = hardware.as_arrays(platform_presets.get('big_basin'))
  shard = ('table_wise',) * w.num_tables
  tb = planner.table_bytes(w)

  def held(cap, nodes):
    q = hardware.with_value(p, 'accelerator.hbm_capacity', cap)
    q = hardware.with_value(q, 'nodes', nodes)
    return jnp.sum(planner.fit_hbm_traced(w, q, STACK, shard) * tb)

  cap, nodes = p.accelerator.hbm_capacity, p.nodes
  g_cap, g_nodes = jax.grad(held, argnums=(0, 1))(cap, nodes)
  h = 1e-4 * float(cap)
  fd_cap = (held(cap + h, nodes) - held(cap - h, nodes)) / (2 * h)
  fd_nodes = (held(cap, nodes + 1e-4) - held(cap, nodes - 1e-4)) / 2e-4
  assert float(held(cap, nodes)) < float(np.sum(tb))  # spilling
  assert float(g_cap) == pytest.approx(float(fd_cap), rel=1e-5)
  assert float(g_nodes) == pytest.approx(float(fd_nodes), rel=1e-5)
  # Everything in HBM, or nothing: the fractions are flat, the gradient 0.
  assert float(jax.grad(held)(100.0 * cap, nodes)) == 0.0
  assert float(jax.grad(held)(1e-3 * cap, nodes)) == 0.0


def test_a_plan_costs_the_same_traced_and_concrete():
  # With traced HBM fractions (a batch of plans, a search) the packing
  # bounds sort the loads; with concrete ones they use the static order.
  # Both read the same tables, so the step and the memory agree.
  w = presets.get('zion_scale')
  p = platform_presets.get('big_basin')
  pl = planner.make(w, p, STACK, sharding='table_wise')
  assert np.any(pl.hbm_fraction < 1.0)
  hw = hardware.as_arrays(p)
  concrete = cost_model.evaluate(hw, w, pl, STACK)

  @jax.jit
  def traced(frac):
    return cost_model.evaluate(
      hw, w, dataclasses.replace(pl, hbm_fraction=frac), STACK
    )

  r = traced(jnp.asarray(pl.hbm_fraction))
  for a, b in (
    (r.step_time, concrete.step_time),
    (r.memory_required['hbm'], concrete.memory_required['hbm']),
  ):
    assert float(a) == pytest.approx(float(b), rel=1e-9)


def test_data_parallel_tables_rank_and_fit_jitted_as_op_by_op():
  """A plan with data-parallel tables (Intel's split: the small tables
  replicated) is ranked and fitted to HBM through the jitted path (a
  static mask of replicated tables beside the one-hot weights) with the
  figures of the named plan evaluated op by op."""
  w = presets.get('criteo_kaggle')
  p = dataclasses.replace(
    platform_presets.get('dgx_a100_80gb'), accelerators_per_node=4.0
  )
  s = stack_presets.get('hugectr')
  plan = planner.make(w, p, s, placement='auto', sharding='intel')
  assert 0 < plan.sharding.count('data_parallel') < w.num_tables
  hw = hardware.as_arrays(p)
  r = cost_model.evaluate(hw, w, plan, s)
  feasible, step = planner.feasible_and_step_time(w, p, s, plan)
  assert feasible == bool(r.feasible)
  assert step == pytest.approx(float(r.step_time), rel=1e-12)
  for frac in (plan.hbm_fraction, 0.5 * np.asarray(plan.hbm_fraction)):
    need = planner.hbm_need(w, hw, s, plan.sharding, np.asarray(frac))
    got = planner.hbm_required(w, p, s, plan.sharding, frac)
    assert got == pytest.approx(float(need), rel=1e-12)


def test_no_term_of_the_hbm_need_reads_the_skew():
  """`hbm_required` keeps one program per workload up to its skew: the
  need's program is the same at every skew, and so are its bytes."""
  w = presets.get('zion_scale')
  p = platform_presets.get('big_basin')
  pl = planner.make(w, p, STACK, sharding='table_wise')
  hw = hardware.as_arrays(p)
  frac = np.asarray(pl.hbm_fraction)

  def program(skew):
    w_k = dataclasses.replace(w, popularity_skew=skew)
    return str(
      jax.make_jaxpr(
        lambda f: planner.hbm_need(w_k, hw, STACK, pl.sharding, f)
      )(frac)
    )

  assert program(1.0) == program(w.popularity_skew) == program(37.0)
  needs = {
    planner.hbm_required(
      dataclasses.replace(w, popularity_skew=k), p, STACK, pl.sharding, frac
    )
    for k in (1.0, w.popularity_skew, 37.0)
  }
  assert len(needs) == 1


def test_a_plan_beyond_this_machines_memory_is_refused_before_compiling(
  monkeypatch,
):
  """The auto plan of 30,000 tables needs about 36 GB (its HBM fit pairs
  every table with every other): under 12 GB left it is one sentence
  naming the tables, not minutes of silence and an XLA traceback."""
  from codesign.core import memory
  from codesign.core.errors import InputError

  monkeypatch.setattr(memory, 'available', lambda: (12 * memory.GB, 'x'))
  w = presets.get('criteo_kaggle')
  many = dataclasses.replace(w, tables=w.tables * 1154)  # 30,004 tables
  p, s = platform_presets.get('big_basin'), stack_presets.get('torchrec')
  with pytest.raises(InputError, match='a plan of 30,004 tables'):
    planner.make(many, p, s)
  planner.check_memory(w)  # 26 tables: a few KB
