"""Tests of the design space and the gradient search (codesign.search).

Small spaces and few steps keep this file short on 2 CPU cores; the
end-to-end runs of experiments.propose are subprocesses (one with 4 host
devices).
"""

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign import api
from codesign.boundary import inputs
from codesign.model import cost_model, report, terms
from codesign.search import baselines, gradient, part_tables, snapping
from codesign.search import design_space as ds
from codesign.spec import hardware, stack_presets
from codesign.spec import workload_presets as wp
from codesign.studies import shared
from tests import streams

STACK = stack_presets.get('torchrec')

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMALL_ACCELERATORS = (
  'V100-SXM2-32GB',
  'A100-SXM4-80GB',
  'H100-SXM5-80GB',
  'H200-SXM-141GB',
)
SMALL_CPUS = (
  'Xeon-Platinum-8380H (Cooper Lake-SP)',
  'EPYC-7742 (Rome)',
  'Xeon-Platinum-8480+ (Sapphire Rapids-SP)',
)


def _space(w, plan_mode='auto', max_nodes=4):
  return ds.make_space(
    w,
    max_nodes=max_nodes,
    plan_mode=plan_mode,
    accelerators=SMALL_ACCELERATORS,
    cpus=SMALL_CPUS,
  )


def _buildable_draws(space, rng, count: int) -> list[list[int]]:
  """`count` random grid indices of `space` that pass every buildability
  rule (a sold board, whole domains)."""
  out = []
  while len(out) < count:
    idx = [int(rng.integers(n)) for n in space.sizes]
    if snapping.buildable(space, np.array([idx]))[0][0]:
      out.append(idx)
  return out


@pytest.mark.parametrize('system', ds.SYSTEMS)
def test_decode_index_matches_catalog_build(system):
  """The traced buildable decoder gives the same platform, leaf for leaf,
  as the concrete catalog build that is written to JSON, in every system
  class (a superchip's C2C host link, soldered memory and NVLink domain
  across hosts; a PCIe card's bridged pairs)."""
  w = wp.get('rm1')
  space = ds.make_space(w, plan_mode='auto', max_nodes=36, system=system)
  rng = np.random.default_rng(1)
  for idx in _buildable_draws(space, rng, 3):
    built = hardware.as_arrays(ds.build(space, idx))
    traced, _, _ = ds.decode_index(
      space, w, STACK, jnp.array(idx), jnp.zeros(0)
    )
    for path, a, b in zip(
      hardware.leaf_paths(built),
      jax.tree.leaves(built),
      jax.tree.leaves(traced),
      strict=True,
    ):
      if path == 'cpu.ddr_price':
        # exp2 of the DIMM price curve (spec.dimms): numpy and XLA may
        # round it differently in the last bit.
        np.testing.assert_allclose(float(a), float(b), rtol=1e-14)
        continue
      assert float(a) == float(b), path


def test_relaxation_agrees_with_buildable_at_grid_points():
  """At grid points the relaxation is the discrete design (so the gradient
  search relaxes the same space the baselines enumerate)."""
  w = wp.get('rm1')
  space = ds.make_space(w, plan_mode='auto')
  problem = gradient.Problem(
    space, w, STACK, 'throughput_per_usd', budget_usd=1e6
  )
  rng = np.random.default_rng(2)
  for _ in range(3):
    idx = np.array([int(rng.integers(n)) for n in space.sizes])
    z = ds.grid_z(space, idx)
    lc, gc, vc = gradient.assess(problem, jnp.asarray(z))
    lb, gb, vb = gradient.assess_index(problem, jnp.asarray(idx), jnp.zeros(0))
    # Equal up to the weight floor (1e-10) of the part mixture.
    np.testing.assert_allclose(float(vc), float(vb), rtol=1e-7)
    np.testing.assert_allclose(np.asarray(gc), np.asarray(gb), atol=1e-7)
    np.testing.assert_array_equal(
      ds.neighbour_indices(space, z)[0], idx
    )  # rounding a grid point returns it


def test_relaxed_loss_gradient_is_finite_and_matches_differences():
  w = wp.get('rm1')
  space = ds.make_space(w, plan_mode='optimize')
  problem = gradient.Problem(
    space, w, STACK, 'throughput_per_usd', budget_usd=1e6
  )
  f = jax.jit(lambda z: gradient.assess(problem, z)[0])
  g = jax.jit(jax.grad(lambda z: gradient.assess(problem, z)[0]))
  rng = np.random.default_rng(3)
  for _ in range(2):
    # Off the kinks of the part interpolation (integer relaxed index).
    z = rng.uniform(0.05, 0.95, space.dim)
    grad = np.asarray(g(jnp.asarray(z)))
    assert np.all(np.isfinite(grad))
    a = len(space.accelerators) + len(space.cpus)
    # An accelerator weight, a CPU weight, nodes, accelerators per node,
    # DDR per socket and the first table's HBM fraction.
    for i in (1, a - 1, a, a + 2, a + 3, space.num_hw_coords):
      e = np.zeros(space.dim)
      e[i] = 1e-6
      fd = (float(f(z + e)) - float(f(z - e))) / 2e-6
      np.testing.assert_allclose(grad[i], fd, rtol=1e-4, atol=1e-8)


def test_part_relaxation_ties_flops_to_price():
  """A mixture of two parts costs between their prices: no free FLOP/s."""
  w = wp.get('rm1')
  space = _space(w)
  acc, _ = part_tables.tables(space.accelerators, space.cpus)
  i = part_tables.ACC_FIELDS.index('peak_flops_bf16')
  j = part_tables.ACC_FIELDS.index('price')
  zp = jnp.array([0.5, 0.5, 0.0, 0.0])  # half the first, half the second
  row = np.asarray(part_tables.mix(acc, zp))
  assert acc[0, i] < row[i] < acc[1, i]
  assert min(acc[0, j], acc[1, j]) < row[j] < max(acc[0, j], acc[1, j])


def test_one_program_answers_every_question():
  """The objective and the limits are arguments of the compiled program
  (one compile for every budget): two questions to one jitted `assess`
  give the figures of one report, each as its objective and limits ask."""
  w = wp.get('rm1')
  a = gradient.Problem(
    _space(w), w, STACK, 'throughput_per_usd', budget_usd=1e6
  )
  b = dataclasses.replace(
    a,
    objective='time_to_train',
    budget_usd=None,
    power_w=2e4,
    samples=1e8,
    rack_w=5e3,
  )
  key = gradient.program_key(a)
  assert key == gradient.program_key(b)
  assess = jax.jit(lambda z, q: gradient.assess(key, z, q))
  z = jnp.asarray(gradient.initial_starts(a, 1, 0)[0])
  la, ga, va = (np.asarray(x) for x in assess(z, gradient.question_of(a)))
  lb, gb, vb = (np.asarray(x) for x in assess(z, gradient.question_of(b)))
  capex = (ga[0] + 1.0) * 1e6  # capex over the 1e6 budget, minus 1
  throughput = va * capex  # samples/s per USD
  np.testing.assert_allclose(vb, 1e8 / throughput, rtol=1e-12)
  assert la == pytest.approx(-np.log(va)) and lb == pytest.approx(np.log(vb))
  rack = gradient.CONSTRAINTS.index('rack')
  space = gradient.CONSTRAINTS.index('rack_space')
  # Absent limits are inactive; without a rack rule, so is rack space.
  assert ga[1] == ga[rack] == ga[space] == gb[0] == -1.0
  assert gb[1] > -1.0  # the power limit is active
  # The rack row: one node's wall power over the rack's 5 kW, minus 1.
  p, _, _ = ds.decode(a.space, w, STACK, z)
  node_w = float(terms.node_wall_power(p))
  assert gb[rack] == pytest.approx(node_w / 5e3 - 1.0, rel=1e-12)
  # The rack space row: its rack units over what its rack class holds.
  used = float(terms.rack_unit_space(p) / terms.usable_rack_units(p))
  assert gb[space] == pytest.approx(used - 1.0, rel=1e-12)
  same = [i for i in range(2, len(ga)) if i not in (rack, space)]
  np.testing.assert_array_equal(ga[same], gb[same])


def test_a_chunk_program_is_keyed_by_the_settings_its_steps_read():
  """Another seed, start count or snapping reuses the chunk's program;
  another step setting does not. STEP_SETTINGS is every `config.<name>`
  that `constrained` reads."""
  src = (ROOT / 'codesign' / 'search' / 'constrained.py').read_text()
  read = set(re.findall(r'config\.(\w+)', src))
  assert read == set(gradient.STEP_SETTINGS)
  w = wp.get('rm1')
  key = gradient.program_key(
    gradient.Problem(_space(w), w, STACK, 'throughput')
  )
  base = gradient.Config(steps=4)
  other = dataclasses.replace(base, seed=7, starts=3, snap_top=2, polish=False)
  keys = [
    gradient.chunk_program(key, c, 4).program_key
    for c in (base, other, dataclasses.replace(base, learning_rate=0.1))
  ]
  assert keys[0] == keys[1] and keys[0] != keys[2]


@pytest.mark.heavy
def test_gradient_search_meets_budget_and_finds_exhaustive_optimum():
  """On a small space where enumeration is cheap: the budget binds (the
  exhaustive optimum spends most of it), every constraint of the proposal
  holds, and gradient search reaches the optimum within 1% with a fraction
  of the evaluations."""
  w = wp.get('rm1')
  problem = gradient.Problem(
    _space(w), w, STACK, 'throughput', budget_usd=400e3, power_w=20e3
  )
  exh = baselines.exhaustive(problem)
  res = gradient.gradient_search(
    problem, gradient.Config(starts=16, steps=80, snap_top=4)
  )
  assert exh.best_feasible and res.best_feasible
  assert np.all(res.best_g <= 0.0)
  p, plan = gradient.buildable(problem, res.best_index, res.best_plan_z)
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, STACK)
  assert float(r.capex) <= 400e3 and float(r.power) <= 20e3
  assert bool(r.feasible)
  np.testing.assert_allclose(float(r.throughput), res.best_value, rtol=1e-9)
  assert res.best_value >= 0.99 * exh.best_value
  assert res.evaluations < 0.1 * exh.evaluations
  # The budget binds: the best platform spends over half of it.
  pe, plan_e = gradient.buildable(problem, exh.best_index, np.zeros(0))
  capex = cost_model.evaluate(pe, w, plan_e, STACK).capex
  assert float(capex) > 200e3


def _every_design(problem):
  """(index, ev, feasible) of every design of the problem's space,
  costed by the model (unscreened)."""
  space = problem.space
  flat = np.arange(space.size)
  index = np.stack(np.unravel_index(flat, space.sizes), axis=1)
  ev = gradient.evaluate_indices(problem, index, None, chunk=65536)
  return index, ev, ev['feasible'] & snapping.board_ok(space, index)


def test_screened_enumeration_is_the_whole_enumeration():
  """`baselines.screened` rules a design out only where the cost model
  finds it infeasible, and the screened `exhaustive` returns, to the bit,
  the best design of costing every design; where no design is feasible
  it returns the least violation of the whole space."""
  w = wp.get('rm1')
  problem = gradient.Problem(
    _space(w), w, STACK, 'throughput', budget_usd=400e3, power_w=20e3
  )
  index, ev, feasible = _every_design(problem)
  kept = baselines.screened(problem, index)
  assert 0 < kept.sum() < 0.5 * len(kept)
  assert np.any(feasible) and not np.any(feasible & ~kept)
  b = gradient.best_position(ev['loss'], ev['g'], feasible)
  exh = baselines.exhaustive(problem)
  np.testing.assert_array_equal(exh.best_index, index[b])
  assert exh.best_value == float(ev['value'][b]) and exh.best_feasible
  assert exh.evaluations == problem.space.size
  poor = dataclasses.replace(problem, budget_usd=1.0)
  index, ev, feasible = _every_design(poor)
  assert not np.any(baselines.screened(poor, index))
  b = gradient.best_position(ev['loss'], ev['g'], feasible)
  exh = baselines.exhaustive(poor)
  np.testing.assert_array_equal(exh.best_index, index[b])
  assert not exh.best_feasible


def test_a_violation_of_rounding_size_is_feasible():
  """A buildable design over a limit by 1e-13 of it is feasible (the
  rounding of an auto plan's HBM fill, `gradient.ROUNDING_TOL`); by 1e-9,
  it is not."""
  w = wp.get('rm1')
  problem = gradient.Problem(_space(w), w, STACK, 'throughput', budget_usd=1e9)
  index = np.array([[1, 1, 0, 0, 0, 0, 0, 0, 0]])
  p, plan = gradient.buildable(problem, index[0], np.zeros(0))
  capex = float(cost_model.evaluate(p, w, plan, STACK).capex)
  for over, feasible in ((1e-13, True), (1e-9, False)):
    budget = capex / (1.0 + over)
    tight = dataclasses.replace(problem, budget_usd=budget)
    ev = gradient.evaluate_indices(tight, index)
    assert ev['g'][0, gradient.CONSTRAINTS.index('capex')] > 0.0
    assert bool(ev['feasible'][0]) is feasible, over


def _propose(tmp_path, name, *flags, devices=1):
  # The device count by JAX's own setting. Either way a 4-device run
  # compiles every program again: JAX's compilation cache keys on the
  # process's devices, so it reads nothing the 1-device runs left there
  # (jax 0.10: 35.7 s against 34.4 s cold and 12.5 s warm for 1 device).
  env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(devices))
  env['JAX_PLATFORMS'] = 'cpu'
  return subprocess.run(
    [
      sys.executable,
      '-m',
      'experiments.propose',
      '--workload=rm1',
      '--starts=6',
      '--steps=30',
      '--presets=zion,dgx_h100',
      '--trainers=accelerator',
      # One space: what is checked is the bits, not the system classes.
      '--systems=board',
      f'--workdir={tmp_path / name}',
      *flags,
    ],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.mark.heavy
def test_propose_cli_reproducible_across_devices_and_evaluable(tmp_path):
  """The same flags give byte-identical result.json and metrics.jsonl; 1
  and 4 devices (6 starts, padded on 4) give the identical proposal and a
  continuous phase equal to rounding; the proposal file evaluates to the
  same figures."""
  one = _propose(tmp_path, 'one', '--max_nodes=4')
  again = _propose(tmp_path, 'again', '--max_nodes=4')
  four = _propose(tmp_path, 'four', '--max_nodes=4', devices=4)
  for out in (one, again, four):
    assert out.returncode == 0, out.stderr
  for f in ('result.json', 'metrics.jsonl', 'propose.csv'):
    a = (tmp_path / 'one' / f).read_bytes()
    assert a == (tmp_path / 'again' / f).read_bytes(), f
  env = json.loads((tmp_path / 'four' / 'env.json').read_text())
  assert env['device_count'] == 4
  result = json.loads((tmp_path / 'one' / 'result.json').read_text())
  result4 = json.loads((tmp_path / 'four' / 'result.json').read_text())
  assert result4['proposal'] == result['proposal']
  np.testing.assert_allclose(
    result4['continuous_optimum']['objective_value'],
    result['continuous_optimum']['objective_value'],
    rtol=1e-6,
  )
  prop = result['proposal']
  assert prop['feasible'] and prop['within_limits']
  for key in ('continuous_optimum', 'presets', 'search'):
    assert key in result
  assert {'method', 'starts', 'steps', 'evaluations'} <= set(result['search'])
  # What experiments.evaluate does with --platform/--plan=proposal.json:
  # the trainers alone by default, the whole system (propose's readers
  # and failures, auto) when asked.
  path = str(tmp_path / 'one' / 'proposal.json')
  w, p, plan, s = inputs.resolve(path, path, path, stack=path)
  alone = api.evaluate(w, p, s, plan)
  trainers = prop['system']
  thr = trainers['trainer_throughput_samples_per_s']
  assert alone['throughput_samples_per_s'] == thr
  # The system's split sums the trainers' parts again: last bits.
  assert alone['capex_usd'] == pytest.approx(trainers['trainers_usd'], 1e-12)
  assert alone['power_w'] == pytest.approx(trainers['trainers_w'], 1e-12)
  back = api.evaluate(w, p, s, plan, readers='auto', with_failures='auto')
  for key in ('throughput_samples_per_s', 'capex_usd', 'power_w', 'system'):
    assert back[key] == prop[key], key
  assert back['breakdown_s'] == prop['breakdown_s']
  rows = (tmp_path / 'one' / 'metrics.jsonl').read_text().splitlines()
  assert len(rows) == 2 * 30  # continuous and polish phases
  assert {'objective', 'violation_min'} <= set(json.loads(rows[0]))


@pytest.mark.heavy
def test_propose_infeasible_budget_is_one_sentence(tmp_path):
  out = _propose(tmp_path, 'poor', '--budget_usd=5000', '--max_nodes=4')
  assert out.returncode == 2
  # Progress lines (stderr, timestamped) come first; then one sentence.
  lines = [
    x for x in out.stderr.strip().splitlines() if not streams.STAMP.match(x)
  ]
  assert len(lines) == 1 and 'capex budget of $5,000' in lines[0], lines
  assert lines[0] == out.stderr.strip().splitlines()[-1]
  assert 'Traceback' not in out.stderr
  assert not (tmp_path / 'poor').exists()


def test_violation_sentence_without_a_power_limit():
  """No power limit (None) and the tables do not fit: the sentence names
  HBM (it used to format the absent power limit and raise TypeError)."""
  w = wp.get('rm1')
  problem = gradient.Problem(_space(w), w, STACK, 'throughput', budget_usd=1e5)
  g = np.zeros(len(gradient.CONSTRAINTS))
  g[gradient.CONSTRAINTS.index('hbm')] = 0.5
  assert shared.violation_sentence(problem, g) == (
    'the HBM capacity is exceeded by 50.0%'
  )
  g[gradient.CONSTRAINTS.index('capex')] = 2.0
  assert shared.violation_sentence(problem, g) == (
    'the capex budget of $100,000 is exceeded by 200.0%'
  )
  problem = dataclasses.replace(problem, rack_w=1e4)
  g[gradient.CONSTRAINTS.index('rack')] = 3.0
  assert shared.violation_sentence(problem, g) == (
    "a rack's 10 kW (--rack_kw), by one node, is exceeded by 300.0%"
  )


def test_throughput_per_tco_objective():
  """samples/s per USD of capex plus energy: 1e6 samples/s, $200,000 of
  capex and 10 kW at 5.540112 USD per W (5 years, 0.08 USD/kWh, PUE
  1.58) give 1e6 / 255,401.12 = 3.9154 samples/s per USD; maximized."""
  import types

  from codesign.studies import proposal

  problem = types.SimpleNamespace(
    objective='throughput_per_tco', energy_usd_per_w=5.540112, samples=1e9
  )
  r = types.SimpleNamespace(
    throughput=1e6,
    capex=2e5,
    power=1e4,
    perf_per_usd=1e6 / 2e5,
    perf_per_watt=1e6 / 1e4,
  )
  value = gradient.objective_value(problem, r)
  assert value == pytest.approx(1e6 / 255401.12)
  # The same from the search's compiled form (the question as numbers).
  question = np.array([np.inf, np.inf, 1e9, 0.0, 5.540112, np.inf])
  question[3] = gradient.OBJECTIVES.index('throughput_per_tco')
  assert float(gradient.objective_value(problem, r, question)) == value
  assert gradient.maximized('throughput_per_tco')
  fig = {'throughput_samples_per_s': 1e6, 'capex_usd': 2e5, 'power_w': 1e4}
  assert proposal.objective_of(
    fig, 'throughput_per_tco', 1e9, 5.540112
  ) == pytest.approx(value)


def test_superchip_space_reaches_nvlink_domains_across_hosts():
  """The superchip space builds GB200 trays on one NVLink domain of 18
  hosts with the gb200_nvl72 preset's throughput; one domain buys one
  front-end NIC a tray whatever the NIC axes say; nodes that are not
  whole domains break the `fabric_domain` rule."""
  from codesign.model import planner
  from codesign.search import buildability
  from codesign.spec import platform_presets

  w = wp.get('mlperf_dlrm_dcnv2')
  space = ds.make_space(w, max_nodes=36, system='superchip', plan_mode='auto')
  assert space.axes[-1] == 'hosts_per_domain'
  assert space.grids[-1] == (1.0, 9.0, 18.0)
  gb200 = space.accelerators.index('GB200-B200-186GB')
  # 18 trays x (2 Grace + 4 GB200), 4 x 400G NICs and 2:1 leaves asked,
  # one domain of 18: no network, so no NICs but one and no leaves.
  asked = [gb200, 0, 17, 1, 2, 0, 2, 2, 1, 2]
  idx = buildability.canonical_index(space, asked)
  p = ds.build(space, idx)
  assert buildability.violations(p, proposal=True) == []
  assert float(p.nic.count) == 1.0 and idx[6] == idx[7] == idx[8] == 0
  assert float(p.nic.oversubscription) == 1.0
  assert p.host_link.kind == 'c2c' and p.cpu.memory == 'soldered'
  assert float(p.fabric.hosts_per_domain) == 18.0
  stack = stack_presets.get('hugectr')
  preset = platform_presets.get('gb200_nvl72')
  ours = report.design_figures(p, w, planner.make(w, p, stack), stack)
  theirs = report.design_figures(
    preset, w, planner.make(w, preset, stack), stack
  )
  assert ours['throughput_samples_per_s'] == pytest.approx(
    theirs['throughput_samples_per_s'], rel=1e-9
  )
  twenty = ds.build(space, [*idx[:2], 19, *idx[3:]])
  assert 'fabric_domain' in {r for r, _ in buildability.violations(twenty)}


@pytest.mark.parametrize('system', ['board', 'superchip'])
def test_the_search_judges_a_design_as_the_report_does(system):
  """The search's evaluation of a buildable design equals the report's
  figures of the platform it builds, for parts whose switch reduces
  (NVLink SHARP: H100, B200, GB200) and for parts whose does not (V100,
  MI300X, GH200's mesh) in one space: each part's share of the static
  NVLS option is traced (`aux['nvls_share']`)."""
  w = wp.get('mlperf_dlrm_dcnv2')  # DCNv2's dense allreduce: NVLS matters
  space = ds.make_space(w, plan_mode='auto', max_nodes=18, system=system)
  problem = gradient.Problem(space, w, STACK, 'throughput')
  rng = np.random.default_rng(3)
  parts = set()
  for idx in _buildable_draws(space, rng, 6):
    parts.add(space.accelerators[idx[0]])
    idx = np.array(idx)
    pz = np.zeros(space.num_plan)
    ev = gradient.evaluate_indices(problem, idx[None], pz[None])
    p, plan = gradient.buildable(problem, idx, pz)
    fig = report.design_figures(p, w, plan, STACK)
    assert float(ev['value'][0]) == pytest.approx(
      fig['throughput_samples_per_s'], rel=1e-9
    ), ds.describe_index(space, idx)
  assert len(parts) >= 2


def test_oversubscription_is_a_searched_axis():
  """The leaves' oversubscription is a number axis of the space (1:1,
  2:1, 3:1): built, 40 nodes of 8 x 400G NICs (more than a 64-port
  leaf's 32) buy fewer uplinks and switches at 2:1 and 3:1 and move less
  across the leaves; relaxed, the
  coordinate sets a continuous oversubscription whose gradient reaches
  the loss."""
  from codesign.model.terms import collectives

  w = wp.get('rm1')
  space = ds.make_space(w, max_nodes=40, plan_mode='auto')
  axis = space.axes.index('oversubscription')
  assert space.grids[axis - 2] == ds.OVERSUBSCRIPTIONS == (1.0, 2.0, 3.0)
  h100 = space.accelerators.index('H100-SXM5-80GB')
  spr = space.cpus.index('Xeon-Platinum-8480+ (Sapphire Rapids-SP)')
  base = [h100, spr, 39, 1, 3, 2, 3, 2, 0]
  built = [ds.build(space, base[:axis] + [o]) for o in range(3)]
  assert [float(p.nic.oversubscription) for p in built] == [1.0, 2.0, 3.0]
  bills = [float(terms.network_bill(p)['usd']) for p in built]
  rates = [float(collectives.nic_rate(p, False)) for p in built]
  assert bills[0] > bills[1] > bills[2]
  assert rates[0] > rates[1] > rates[2]
  problem = gradient.Problem(space, w, STACK, 'throughput_per_usd')
  z = ds.grid_z(space, base)
  coord = len(space.accelerators) + len(space.cpus) + axis - 2
  z[coord] = 0.3
  # Jitted: one compile each, not one per primitive run eagerly.
  decoded = jax.jit(lambda z: ds.decode(space, w, STACK, z)[0].nic)
  assert 1.0 < float(decoded(jnp.asarray(z)).oversubscription) < 2.0

  def loss(x):
    return gradient.assess(problem, jnp.asarray(z).at[coord].set(x))[0]

  assert float(jax.jit(jax.grad(loss))(0.3)) != 0.0


def test_pcie_space_offers_the_l40s_on_pcie_only():
  """The PCIe space proposes the L40S (no NVLink bridge: sold on PCIe
  only) beside the bridged cards: it builds on `pcie_only` with no fabric
  links, the traced decoder (whose one topology is bridged pairs) gives
  the same leaves, and the search judges it as the report does; its
  bridged neighbour keeps its bridge."""
  w = wp.get('rm1')
  space = ds.make_space(w, max_nodes=4, plan_mode='auto', system='pcie')
  assert 'L40S' in space.accelerators and 'H100-PCIe-80GB' in space.accelerators
  genoa = space.cpus.index('EPYC-9654 (Genoa)')
  problem = gradient.Problem(space, w, STACK, 'throughput')
  for part, topology in (
    ('L40S', 'pcie_only'),
    ('H100-PCIe-80GB', 'bridged_pairs'),
  ):
    idx = [space.accelerators.index(part), genoa, 1, 1, 3, 2, 1, 1, 0]
    assert snapping.buildable(space, np.array([idx]))[0][0]
    p = ds.build(space, idx)
    assert p.fabric.topology == topology
    assert (float(p.fabric.links_per_accelerator) == 0.0) == (part == 'L40S')
    traced, _, _ = ds.decode_index(
      space, w, STACK, jnp.array(idx), jnp.zeros(0)
    )
    built = hardware.as_arrays(p)
    for path, a, b in zip(
      hardware.leaf_paths(built),
      jax.tree.leaves(built),
      jax.tree.leaves(traced),
      strict=True,
    ):
      if path != 'cpu.ddr_price':  # numpy and XLA may round it differently
        assert float(a) == float(b), (part, path)
    pz = np.zeros((1, space.num_plan))
    ev = gradient.evaluate_indices(problem, np.array([idx]), pz)
    q, plan = gradient.buildable(problem, np.array(idx), pz[0])
    fig = report.design_figures(q, w, plan, STACK)
    assert float(ev['value'][0]) == pytest.approx(
      fig['throughput_samples_per_s'], rel=1e-9
    ), part
