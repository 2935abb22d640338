"""The search studies as library calls (`codesign.studies`): pareto,
growth, search_quality and proposal, in-process on tiny settings.

Each study runs once per module (fixtures) on a tiny space (at most 2
nodes, a few starts and steps), and the tests check what the numbers
mean: the frontier is monotone and made of feasible searches, every
reported design's figures are the cost model's on that design, the CSV
has a row per limit or factor, a NO comes with its reason, and growth's
"% below the best" is a percentage of the best.
"""

import math

import numpy as np
import pytest

from codesign.core.errors import InputError
from codesign.model import cost_model, planner, report
from codesign.search import buildability, gradient, snapping
from codesign.search import design_space as ds
from codesign.spec import (
  hardware,
  platform_presets,
  stack_presets,
  workload_presets,
)
from codesign.studies import (
  growth,
  pareto,
  proposal,
  search_quality,
  search_quality_large,
  shared,
  sweeps,
)

STACK = stack_presets.get('torchrec')
W = workload_presets.get('criteo_kaggle')


def _index(space, design: dict) -> np.ndarray:
  """The index (H,) of a design described by `ds.describe_index`."""
  index = [
    space.accelerators.index(design['accelerator']),
    space.cpus.index(design['cpu']),
  ]
  values = (
    design['nodes'],
    design['sockets_per_node'],
    design['accelerators_per_node'],
    design['ddr_per_channel_gb'] * ds.GB,
    design['nic_count'],
    design['nic_bandwidth_gbit_per_s'] * 1e9 / 8,
    design['oversubscription'],
  )
  for grid, v in zip(space.grids, values, strict=True):
    index.append(int(np.argmin(np.abs(np.asarray(grid) - v))))
  assert ds.describe_index(space, index) == design
  return np.array(index)


def _evaluate(space, w, design: dict):
  """The cost model's report of a searched design, evaluated directly."""
  problem = gradient.Problem(space, w, STACK, 'throughput')
  p, plan = gradient.buildable(problem, _index(space, design), np.zeros(0))
  return cost_model.evaluate(hardware.as_arrays(p), w, plan, STACK)


# ---- pareto ----------------------------------------------------------------

PARETO = pareto.Settings(
  workload=W,
  stack=STACK,
  max_nodes=2,
  budgets=2,
  starts=2,
  steps=4,
  snap_top=1,
  presets=('big_basin', 'zion'),
)


@pytest.fixture(scope='module')
def pareto_run():
  lines = []
  result, metrics = pareto.run(PARETO, progress=lines.append)
  return result, metrics, lines


@pytest.mark.heavy
def test_pareto_frontier_is_monotone_and_feasible(pareto_run):
  result, metrics, lines = pareto_run
  assert len(result['searches']) == 4  # 2 capex + 2 power limits
  for key, cost_key in (('capex', 'capex_usd'), ('power', 'power_w')):
    f = result['frontier'][key]
    cost = [x['cost'] for x in f]
    thr = [x['throughput_samples_per_s'] for x in f]
    assert cost == sorted(cost) and thr == sorted(thr)
    for x in f:
      s = result['searches'][x['search']]
      assert s['feasible'] and s[cost_key] == x['cost']
  assert len(metrics) == PARETO.steps
  assert lines and all('\n' not in x for x in lines)


def test_pareto_designs_are_the_cost_model(pareto_run):
  result = pareto_run[0]
  space = ds.make_space(W, max_nodes=2, plan_mode='auto')
  for s in result['searches']:
    # Every reported design is on a board that is sold.
    assert snapping.board_ok(space, _index(space, s['design'])[None])[0]
    r = _evaluate(space, W, s['design'])
    np.testing.assert_allclose(
      float(r.throughput), s['throughput_samples_per_s'], rtol=1e-9
    )
    np.testing.assert_allclose(float(r.capex), s['capex_usd'], rtol=1e-9)
    np.testing.assert_allclose(float(r.power), s['power_w'], rtol=1e-9)
    within = s['capex_usd' if s['limit_kind'] == 'capex' else 'power_w']
    if s['feasible']:
      assert bool(r.feasible) and within <= s['limit']
  # The presets: auto plan with the study's sharding.
  for name, row in result['presets'].items():
    p = platform_presets.get(name)
    plan = planner.make(W, p, STACK, sharding=PARETO.sharding)
    r = cost_model.evaluate(hardware.as_arrays(p), W, plan, STACK)
    assert row['throughput_samples_per_s'] == float(r.throughput)
    assert row['feasible'] == bool(r.feasible)


def test_pareto_csv_and_table(pareto_run):
  result = pareto_run[0]
  header, rows = pareto.csv_table(result)
  assert header == pareto.CSV_HEADER and 'capex_limit_usd' in header
  assert len(rows) == 2 * PARETO.budgets
  assert [r[0] for r in rows] == ['capex', 'capex', 'power', 'power']
  assert all(len(r) == len(header) for r in rows)
  text = pareto.table(result)
  for t, s in enumerate(result['searches']):
    if not s['feasible']:
      # A NO names its reason.
      assert result['display']['search_reasons'][t]
  assert 'big_basin' in text and 'zion' in text
  panels = pareto.plot_panels(result)
  assert [len(p['labels']) for p in panels] == [
    len(result['frontier'][k]) for k in ('capex', 'power')
  ]


def test_pareto_bad_settings_are_one_sentence():
  import dataclasses

  for change, words in (
    ({'min_budget_usd': -1.0}, '--min_budget_usd'),
    ({'budgets': 1}, '--budgets'),
    ({'snap_top': 0}, '--snap_top'),
  ):
    with pytest.raises(InputError, match=words):
      pareto.run(dataclasses.replace(PARETO, **change))


def test_frontier_plot_labels_and_legend(tmp_path, pareto_run):
  from codesign.studies import plotting

  result = pareto_run[0]
  path = plotting.frontier(
    tmp_path / 'f.png', pareto.plot_panels(result), pareto.plot_title(result)
  )
  assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


# ---- growth ----------------------------------------------------------------

GROWTH = growth.Settings(
  workload=W,
  stack=STACK,
  factors=(1.0, 2.0),
  budget_usd=1e6,
  max_nodes=2,
  starts=2,
  steps=4,
  snap_top=1,
)


@pytest.fixture(scope='module')
def growth_run():
  return growth.run(GROWTH)


def test_percent_below_is_a_percentage_of_the_best():
  # Half the best throughput: regret log 2, 50% below the best (not 100%).
  assert growth.percent_below(math.log(2.0)) == pytest.approx(50.0)
  # The case of the issue: best / throughput = 1.488 is 32.8% below.
  assert growth.percent_below(math.log(1.488)) == pytest.approx(32.8, abs=0.05)
  assert growth.percent_below(0.0) == 0.0


def test_growth_regrets_and_figures(growth_run):
  result, metrics = growth_run
  assert result['factors'] == [1.0, 2.0]
  assert set(result['designs']) == {'tuned_x1', 'tuned_x2', 'horizon'}
  space = ds.make_space(W, max_nodes=2, plan_mode='auto')
  best = result['best_found_throughput_samples_per_s']
  for d in result['designs'].values():
    assert snapping.board_ok(space, _index(space, d['design'])[None])[0]
    for j, f in enumerate(result['factors']):
      r = _evaluate(space, sweeps.grow(W, f), d['design'])
      thr = d['throughput_samples_per_s'][j]
      reg = d['regret_log'][j]
      if thr is None:
        assert reg is None
        continue
      np.testing.assert_allclose(float(r.throughput), thr, rtol=1e-9)
      assert bool(r.feasible) and d['capex_usd'] <= GROWTH.budget_usd
      assert reg >= 0.0 and thr <= best[j]
      np.testing.assert_allclose(reg, math.log(best[j] / thr), atol=1e-12)
  assert len(metrics) == GROWTH.steps
  # A tuned design beaten on its own factor by another design of the run
  # is reported as a search that did not converge, with the winner.
  flagged = {x['design']: x for x in result['not_converged']}
  for j, f in enumerate(result['factors']):
    name = f'tuned_x{f:g}'
    reg = result['designs'][name]['regret_log'][j]
    if name in flagged:
      x = flagged[name]
      assert x['best_throughput_samples_per_s'] == pytest.approx(best[j])
      assert reg is None or reg > growth.CONVERGED_LOG
      assert any('did not converge' in line for line in result['summary'])
    else:
      assert reg is not None and reg <= growth.CONVERGED_LOG


@pytest.mark.heavy
def test_growth_summary_and_table_say_what_the_percentage_is(growth_run):
  result = growth_run[0]
  text = growth.table(result)
  for name, d in result['designs'].items():
    if d['mean_regret_log'] is not None:
      pct = growth.percent_below(d['mean_regret_log'])
      assert f'{pct:.1f}%' in text
    for j, thr in enumerate(d['throughput_samples_per_s']):
      if thr is None:  # a NO names why
        assert result['display']['reasons'][name][j]
  for line in result['summary'][:2]:
    assert 'geometric mean' in line or 'cannot train' in line
  header, rows = growth.csv_table(result)
  assert header[:2] == ['factor', 'workload']
  assert 'horizon_throughput_samples_per_s' in header
  assert [r[0] for r in rows] == [1.0, 2.0]


def test_growth_bad_factors_are_one_sentence():
  import dataclasses

  with pytest.raises(InputError, match='--factors'):
    growth.run(dataclasses.replace(GROWTH, factors=(2.0, 4.0)))
  with pytest.raises(InputError, match='increasing'):
    growth.run(dataclasses.replace(GROWTH, factors=(1.0, 1.0)))


# ---- search_quality --------------------------------------------------------


@pytest.fixture(scope='module')
def quality():
  # Two accelerators and two CPUs, one node: 1/16 of the space per node,
  # so that the exhaustive enumeration takes seconds. Both spaces, once.
  import functools

  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(
      search_quality.design_space,
      'make_space',
      functools.partial(
        ds.make_space,
        accelerators=('A100-SXM4-80GB', 'H100-SXM5-80GB'),
        cpus=(
          'EPYC-7763 (Milan)',
          'Xeon-Platinum-8480+ (Sapphire Rapids-SP)',
        ),
      ),
    )
    settings = search_quality.Settings(
      workloads=(W,),
      stack=STACK,
      objective='throughput_per_usd',
      budget_usd=3e5,
      max_nodes=1,
      starts=2,
      steps=4,
      population=32,
      large_systems=('board',),  # the patched space's parts are boards'
    )
    lines = []
    result, metrics = search_quality.run(settings, progress=lines.append)
  return settings, result, metrics, lines


@pytest.mark.heavy
def test_search_quality_gaps_are_to_the_exhaustive_optimum(quality):
  settings, result, metrics, lines = quality
  # A line per method and space and per chunk of gradient steps: small
  # space 4 + 1, large space 3 + 2 (the polish of the sharding weights).
  assert len(lines) == 5 + 5
  v = result['per_workload'][W.name]
  opt = v['exhaustive']['value']
  assert opt is not None and v['exhaustive']['gap_pct'] == 0.0
  # A100 with Sapphire Rapids is no board that is sold: the space holds
  # unsold boards, and no method's design is one.
  space = ds.make_space(
    W,
    max_nodes=1,
    plan_mode='auto',
    accelerators=('A100-SXM4-80GB', 'H100-SXM5-80GB'),
    cpus=('EPYC-7763 (Milan)', 'Xeon-Platinum-8480+ (Sapphire Rapids-SP)'),
  )
  assert not snapping.board_table(space).all()
  for m in search_quality.METHODS:
    if v[m]['value'] is not None:
      idx = _index(space, v[m]['platform'])
      assert snapping.board_ok(space, idx[None])[0], m
  for m in search_quality.METHODS:
    if v[m]['value'] is not None:
      assert v[m]['value'] <= opt * (1 + 1e-9)
      assert v[m]['gap_pct'] == pytest.approx(100 * (opt - v[m]['value']) / opt)
  assert set(result['timing']['small_space'][W.name]) == {
    'gradient',
    'random',
    'cma_es',
    'exhaustive',
  }
  header, rows = search_quality.csv_table(result)
  assert 'optimum_samples_per_s_per_usd' in header
  assert 'gradient_gap_pct' in header
  assert len(rows) == 1 and rows[0][0] == W.name
  small = [r for r in metrics if r['space'] == 'small']
  assert len(small) == settings.steps
  assert 'within 1% of the optimum' in search_quality.table(result)


def test_search_quality_large_space_is_judged_against_the_best_found(quality):
  settings, result, metrics, _ = quality
  large = result['large_space']
  v = large['per_workload'][W.name]
  # 26 tables, 4 shardings each: 4^26 times the small space.
  assert v['tables'] == W.num_tables >= 15
  assert v['size_factor_over_small'] == 4.0**W.num_tables >= 1e9
  small_size = result['per_workload'][W.name]['design_space_size']
  assert v['platforms'] == small_size
  assert v['design_space_size'] == pytest.approx(small_size * 4.0**26)
  # The small space's optimum is a design of the large space (its one
  # sharding is one of the choices) with the same value there.
  opt = v['small_space_optimum']
  assert ds.make_space(W).sharding in large['sharding_choices']
  assert opt['sharding_tables'] == {'table_wise': W.num_tables}
  assert (
    opt['value_in_small_space']
    == (result['per_workload'][W.name]['exhaustive']['value'])
  )
  assert opt['value'] == pytest.approx(
    opt['value_in_small_space'], rel=search_quality_large.TIE_REL
  )
  # The reference is the best value of any entry; gaps are to it.
  entries = search_quality_large.ENTRIES
  values = [v[m]['value'] for m in entries if v[m]['value'] is not None]
  assert v['reference'] == max(values)
  for m in entries:
    assert v[m]['gap_pct'] >= 0.0
    assert v[m]['gap_pct'] == pytest.approx(
      100 * (v['reference'] - v[m]['value']) / v['reference']
    )
    assert (m in v['best']) == (v[m]['gap_pct'] <= 1e-7)
  rest = [v[m]['gap_pct'] for m in entries if m not in v['best']]
  assert v['margin_pct'] == (min(rest) if rest else None)
  # Equal evaluations; every search's design is buildable and costed.
  evals = v['gradient']['evaluations']
  assert evals > settings.starts * (2 * settings.steps + 1)
  assert v['random']['evaluations'] == evals
  assert evals - settings.population < v['cma_es']['evaluations'] <= evals
  for m in search_quality.METHODS:
    assert sum(v[m]['sharding_tables'].values()) == W.num_tables
  s = large['summary']
  assert s['wins'] == {m: int(m in v['best']) for m in entries}
  assert s['median_gap_pct'] == {m: v[m]['gap_pct'] for m in entries}
  assert (W.name in s['gradient_not_best']) == ('gradient' not in v['best'])
  assert (
    s['small_space_optimum_max_relative_difference']
    == (opt['relative_difference'])
  )
  header, rows = search_quality_large.csv_table(result)
  assert len(rows) == 1 and rows[0][0] == W.name
  assert rows[0][header.index('best')] == '+'.join(v['best'])
  assert 'best on:' in search_quality.table(result)
  assert [r['space'] for r in metrics].count('large') == 2 * settings.steps


def test_search_quality_refuses_bad_spaces():
  for spaces in ((), ('huge',), ('small', 'small')):
    with pytest.raises(InputError, match='--spaces'):
      search_quality.run(search_quality.Settings(spaces=spaces))


# ---- proposal --------------------------------------------------------------


@pytest.mark.heavy
def test_proposal_names_why_a_preset_is_not_within_the_limits():
  settings = proposal.Settings(
    workload='rm1',
    stack=STACK,
    budget_usd=3e5,
    max_nodes=2,
    starts=2,
    steps=4,
    presets=('dgx_h100',),
    readers='local',  # the trainers' bill alone (tests/studies/
    with_failures='false',  # proposal_system_test.py: the system's)
  )
  lines, steps = [], []
  result, history = proposal.run(
    settings,
    progress=lines.append,
    on_step=lambda step, m: steps.append((step, m['searching'])),
  )
  row = result['presets'][0]
  assert row['capex_usd'] > 3e5 and not row['within_limits']
  over = row['capex_usd'] - 3e5
  text = proposal.table(result)
  line = next(x for x in text.splitlines() if x.startswith('dgx_h100'))
  assert ' NO ' in line and f'over the capex budget by ${over:,.0f}' in line
  header, rows = proposal.csv_table(result)
  assert header[5] == 'objective_samples_per_s_per_usd'
  assert [r[0] for r in rows][-1] == 'dgx_h100'
  assert rows[-1][header.index('why_not')].startswith('over the capex')
  assert rows[0][header.index('within_limits')] is True
  # The proposal's figures are those the evaluate CLI gives.
  prop = result['proposal']
  w = workload_presets.get('rm1')
  p = platform_presets.get('dgx_h100')
  fig = report.to_result(
    cost_model.evaluate(
      hardware.as_arrays(p), w, planner.make(w, p, STACK), STACK
    )
  )
  assert fig['capex_usd'] == row['capex_usd']
  assert prop['within_limits'] and len(lines) >= 2
  # The bill lists the network apart from the nodes; its sum is capex.
  bill = prop['capex_breakdown']
  assert bill['total_usd'] == pytest.approx(prop['capex_usd'], rel=1e-5)
  assert bill['nodes_usd'] + bill['network']['usd'] == bill['total_usd']
  assert report.capex_line(bill) in text.splitlines()
  assert ('no scale-out switches' in report.capex_line(bill)) == (
    prop['platform']['nodes'] == 1
  )
  assert len(history) == 2 * settings.steps
  # on_step (codesign.api.propose's progress) sees the chunks of steps.
  assert steps and steps[-1] == (settings.steps, 'throughput_per_usd')
  # Both trainers were searched, the accelerator trainer in each system
  # class; the proposal is the best of their best designs (or its auto
  # plan, when better).
  per = result['search']['per_space']
  assert set(per) == {'board', 'superchip', 'pcie', 'cpu'}
  assert {v['trainer'] for v in per.values()} == {'accelerator', 'cpu'}
  best = max(v['objective_value'] or 0.0 for v in per.values())
  assert per[result['search']['system']]['objective_value'] == best
  assert prop['objective_value'] >= best * (1 - 1e-6)
  # Each trainer is searched with its own stack, and both are recorded.
  assert result['stacks'] == {'accelerator': STACK.name, 'cpu': 'ipex_cpu'}
  # The proposal buys the least legal DDR that holds what its plan keeps
  # there; perf per USD weighs the price already (no tolerance phase).
  ddr = result['ddr']
  assert ddr['bought_bytes_per_node'] <= ddr['searched_bytes_per_node']
  mem = prop['memory']['ddr']
  assert mem['required_bytes'] <= mem['available_bytes']
  assert mem['available_bytes'] == pytest.approx(ddr['bought_bytes_per_node'])
  assert result['tolerance'] is None
  assert 'ceiling' in prop and 'ceiling:' in text


def test_why_not_names_memory_and_power():
  fig = {
    'feasible': False,
    'overflowing_tiers': ['hbm'],
    'capex_usd': 10.0,
    'power_w': 2000.0,
  }
  assert shared.why_not(fig, budget_usd=20.0, power_w=1500.0) == (
    'over the power limit by 500 W; tables do not fit in HBM'
  )
  fig['rack_unit_w'] = 12500.0
  assert shared.why_not(fig, rack_w=10e3).startswith(
    "one node (or scale-up domain) draws 12.5 kW, over a rack's 10 kW"
  )
  # The limit, HBM, DDR, rack power and space, then the buildability rows.
  g = np.full(5 + len(buildability.TRACED), -1.0)
  g[0], g[2] = 0.5, 0.2
  assert shared.why_not_rows(g, 'capex', 100.0, 150.0, 0.0) == (
    'over the capex budget by $50; tables do not fit in DDR'
  )
  g[3] = 0.1
  assert shared.why_not_rows(g, 'capex', 100.0, 150.0, 0.0).endswith(
    "one node over a rack's power"
  )
  g[5 + buildability.TRACED.index('pcie_lanes')] = 0.5  # beyond switches
  assert shared.why_not_rows(g, 'capex', 100.0, 150.0, 0.0).endswith(
    "not buildable: beyond the sockets' PCIe lanes with one level of switches"
  )


def test_pareto_cross_check_reports_a_better_design_of_the_same_run():
  """A search whose limit admits a faster design found by another search
  did not converge: its row takes that design and keeps its own result;
  a search with the best design within its limit keeps its own."""

  def row(kind, limit, thr, capex, power, feasible=True):
    return {
      'limit_kind': kind,
      'limit': limit,
      'feasible': feasible,
      'throughput_samples_per_s': thr,
      'capex_usd': capex,
      'power_w': power,
      'design': {'thr': thr},
    }

  searches = [
    row('capex', 1e5, 10.0, 9e4, 1e3),
    row('capex', 2e5, 15.0, 1.9e5, 3e3),  # beaten by the power search's
    row('power', 5e3, 20.0, 1.5e5, 4e3),
    row('power', 500.0, 0.0, 5e4, 2e3, feasible=False),  # none within 500 W
  ]
  index = np.arange(4)[:, None] * np.ones((1, 3), int)
  notes = pareto.cross_check(searches, index)
  assert [s['design_from_search'] for s in searches] == [0, 2, 2, 3]
  assert searches[1]['throughput_samples_per_s'] == 20.0
  assert searches[1]['own_throughput_samples_per_s'] == 15.0
  assert searches[1]['capex_usd'] == 1.5e5 and searches[1]['design'] == {
    'thr': 20.0
  }
  assert np.all(index[1] == 2) and np.all(index[3] == 3)
  assert (
    not searches[3]['feasible']
    and 'own_throughput_samples_per_s' not in (searches[3])
  )
  assert notes == ['capex <= $200,000: the design of power <= 5,000 W']


def test_large_space_summary_counts_only_the_entries_a_row_has():
  """A superchip space beside a board space: the small space's optimum
  is judged on the board row alone (the small space holds no superchip),
  and a row without it is neither a gap nor a miss of it."""

  def row(gaps, small=None):
    v = {
      m: {'gap_pct': g, 'evaluations': 10}
      for m, g in zip(('gradient', 'random', 'cma_es'), gaps, strict=True)
    }
    if small is not None:
      v['small_space_optimum'] = {'gap_pct': small, 'relative_difference': 0}
    best = [m for m, e in v.items() if e['gap_pct'] == 0.0]
    return {
      **v,
      'best': best,
      'size_factor_over_small': 10.0,
      'design_space_size_log10': 6.0,
    }

  per = {
    'w (board)': row((0.0, 2.0, 1.0), small=0.5),
    'w (superchip)': row((0.0, None, 3.0)),
  }
  s = search_quality_large.summary(per)
  assert s['median_gap_pct']['small_space_optimum'] == 0.5
  assert s['no_feasible_design'] == {
    'gradient': 0,
    'random': 1,
    'cma_es': 0,
    'small_space_optimum': 0,
  }
  assert s['wins']['gradient'] == 2
