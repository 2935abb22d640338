"""Prices the user sets (--price, `part_tables.parse_prices`) and what a
proposal rests on (`codesign.studies.robustness`): a set price reaches the
search's part rows, the built platforms, the presets and the proposal by
known amounts; bad prices are one sentence with no files; the ranking
check is consistent with itself and flips when it must."""

import dataclasses
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from codesign.core.errors import InputError
from codesign.model import cost_model, planner, report, terms
from codesign.search import design_space as ds
from codesign.search import part_tables
from codesign.spec import hardware, platform_presets, schema, stack_presets
from codesign.spec import workload_presets as wp
from codesign.studies import proposal, robustness

ROOT = pathlib.Path(__file__).resolve().parents[2]
STACK = stack_presets.get('torchrec')
H100 = 'H100-SXM5-80GB'
EPYC = 'EPYC-7742 (Rome)'


def _capex(p) -> float:
  """The cost model's capex of `p` (any plan: capex does not depend on it)."""
  w = wp.get('rm1')
  plan = planner.make(w, p, STACK, placement='hbm', sharding='table_wise')
  return float(cost_model.evaluate(hardware.as_arrays(p), w, plan, STACK).capex)


def test_a_set_price_moves_capex_by_the_known_amount_everywhere():
  """H100 at 20,000 USD (catalog 30,000, with its HBM) and the EPYC at
  5,000 (catalog 6,950): a fixed design of 2 nodes x (2 sockets + 8
  H100) costs 16 x 10,000 + 4 x 1,950 USD less, built or decoded; the
  dgx_h100 preset (8 H100, other CPU) 8 x 10,000 less."""
  prices = part_tables.parse_prices(['h100=20000', 'EPYC-7742=5000'])
  assert prices == ((EPYC, 5000.0), (H100, 20000.0))
  w = wp.get('rm1')
  space = ds.make_space(w, max_nodes=2, plan_mode='auto')
  priced = ds.make_space(w, max_nodes=2, plan_mode='auto', prices=prices)
  index = [
    space.accelerators.index(H100),
    space.cpus.index(EPYC),
    1,  # 2 nodes
    1,  # 2 sockets
    3,  # 8 accelerators
    2,
    0,
    0,
    0,  # 1:1
  ]
  assert ds.describe_index(space, index)['accelerators_per_node'] == 8
  before = _capex(ds.build(space, index))
  after = _capex(ds.build(priced, index))
  assert before - after == pytest.approx(16 * 10000 + 4 * 1950, rel=1e-12)
  # The search's traced decoder sees the same prices, leaf for leaf.
  built = hardware.as_arrays(ds.build(priced, index))
  traced, _, _ = ds.decode_index(
    priced, w, STACK, jnp.array(index), jnp.zeros(0)
  )
  for a, b in zip(jax.tree.leaves(built), jax.tree.leaves(traced), strict=True):
    assert float(a) == float(b)
  # The HBM stays priced apart: the board is the rest.
  a = ds.build(priced, index).accelerator
  assert float(a.price) + float(a.hbm_capacity * a.hbm_price) == 20000.0
  assert 'user: 20,000 USD' in dict(a.sources)['price']
  preset = platform_presets.get('dgx_h100')
  moved = _capex(part_tables.priced(preset, prices)) - _capex(preset)
  assert moved == pytest.approx(-8 * 10000, rel=1e-12)


@pytest.mark.parametrize(
  'items,words',
  [
    (['nope=100'], ["unknown part 'nope'"]),
    (['H100'], ['PART=USD', "'H100'"]),
    (['=100'], ['PART=USD']),
    (['H100=abc'], ['positive number', "'abc'"]),
    (['H100=-5'], ['positive number']),
    (['H100=0'], ['positive number']),
    (['H100=nan'], ['positive number']),
    (['A100=9000'], ['begins several parts', 'A100-SXM4-40GB']),
    (['H100=20000', 'h100-SXM5-80GB=1'], ['twice']),
    (['H100=1000'], ['less its HBM', 'board price']),
    (['EPYC-7742=1e6'], ['CPU price']),
  ],
)
def test_bad_prices_are_one_sentence(items, words):
  with pytest.raises(InputError) as e:
    part_tables.parse_prices(items)
  message = str(e.value)
  assert '\n' not in message
  for word in words:
    assert word in message, message


def test_bad_price_flags_exit_2_with_no_files(tmp_path):
  cases = {
    'unknown': ('--price=nope=100', "unknown part 'nope'"),
    'malformed': ('--price=H100', 'PART=USD'),
    'negative': ('--price=H100=-5', 'positive number'),
    'not_a_number': ('--price=MI300X=lots', 'positive number'),
  }
  procs = {
    name: subprocess.Popen(
      [
        sys.executable,
        '-m',
        'experiments.propose',
        flag,
        f'--workdir={tmp_path / name}',
      ],
      cwd=ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    for name, (flag, _) in cases.items()
  }
  for name, proc in procs.items():
    _, stderr = proc.communicate(timeout=300)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 2, (name, stderr[-300:])
    assert len(lines) == 1 and cases[name][1] in lines[0], (name, stderr)
  assert list(tmp_path.iterdir()) == []  # no run directory at all


# ---- the proposal with a set price ----------------------------------------

PRICED = proposal.Settings(
  workload='rm1',
  stack=STACK,
  budget_usd=3e5,
  max_nodes=2,
  starts=2,
  steps=4,
  presets=('dgx_h100', 'dgx_a100_80gb'),
  only_parts=('H100', 'EPYC-9654'),  # Genoa: an HGX H100 host
  price=('H100=20000',),
  trainers=('accelerator',),
  systems=('board',),  # the SXM module (H100 begins its PCIe cards too)
  readers='local',  # the trainers' bill alone: no readers or storage
)


@pytest.fixture(scope='module')
def priced_run():
  result, _ = proposal.run(PRICED)
  return result


@pytest.mark.heavy
def test_the_proposal_and_presets_see_the_set_price(priced_run):
  result = priced_run
  prop = result['proposal']
  p = schema.platform_from_json(prop['platform'])
  assert p.accelerator.name == H100
  n = float(p.nodes * p.accelerators_per_node)
  w = wp.get('rm1')
  plan = schema.plan_from_json(prop['plan'], w)
  catalog_priced = part_tables.priced(p, ((H100, 30000.0),))
  fig = report.to_result(
    cost_model.evaluate(hardware.as_arrays(catalog_priced), w, plan, STACK)
  )
  assert fig['capex_usd'] - prop['capex_usd'] == pytest.approx(
    n * 10000, rel=1e-12
  )
  # dgx_h100 costs 325,335 USD at the catalog's price, over the budget of
  # 300,000; 8 x 10,000 USD less brings it within.
  row = next(r for r in result['presets'] if r['name'] == 'dgx_h100')
  catalog_capex = _capex(platform_presets.get('dgx_h100'))
  assert row['capex_usd'] == pytest.approx(catalog_capex - 80000, rel=1e-12)
  assert row['within_limits']
  assert result['prices']['set_by_flag_usd'] == {H100: 20000.0}
  info = result['prices']['proposal_parts'][0]
  assert info['set_by_flag'] and info['catalog_price_usd'] == 30000.0
  text = proposal.table(result)
  assert f'{H100} 20,000 USD (set by --price; catalog 30,000, low ' in text
  # A price the user set is theirs: not perturbed.
  perturbed = {
    x for r in result['robustness']['perturbations'] for x in r.get('parts', ())
  }
  assert H100 not in perturbed


def test_assumptions_are_the_workloads_numbers(priced_run):
  a = priced_run['assumptions']
  w = wp.get('rm1')
  assert a['origin'] == 'rm1 default'
  assert a['popularity_skew'] == 1.0
  assert a['hottest_20pct_rows_lookup_share'] == pytest.approx(0.2)
  assert a['global_batch'] == w.global_batch
  assert a['table_bytes_with_optimizer_state'] == pytest.approx(
    float(planner.table_bytes(w).sum())
  )
  p = schema.platform_from_json(priced_run['proposal']['platform'])
  assert a['proposal_hbm_bytes'] == pytest.approx(
    float(p.nodes * p.accelerators_per_node * p.accelerator.hbm_capacity)
  )
  assert 0.0 <= a['table_bytes_share_in_hbm'] <= 1.0
  assert 'assumptions: popularity_skew 1 (rm1 default, an assumption' in (
    proposal.table(priced_run)
  )
  assert a['skew_basis'] is None


def test_a_sourced_skew_is_not_called_an_assumption(monkeypatch):
  # No preset's skew is read from a source today: mlperf_dlrm_v1's 8 is
  # an assumption (HugeCTR's configs only bound it). A preset given a
  # basis is printed with it; the same workload with a skew the user set
  # is "as given", with no basis.
  w = wp.get('mlperf_dlrm_v1')
  p = platform_presets.get('dgx_a100_80gb')
  plan = planner.make(w, p, stack_presets.get('hugectr'))
  a = robustness.assumptions(w, p, plan)
  assert a['skew_basis'] is None
  assert 'an assumption' in robustness.assumptions_line(a)
  # Its hottest rows' Zipf exponent, which sets the hybrid embedding's
  # split, is printed beside; a workload without one prints none.
  assert 'Zipf exponent 1.68 of the hottest rows (mlperf_dlrm_v1 default' in (
    robustness.assumptions_line(a)
  )
  plain = robustness.assumptions(
    dataclasses.replace(w, zipf_exponent=0.0), p, plan
  )
  assert 'Zipf' not in robustness.assumptions_line(plain)
  monkeypatch.setitem(wp.SKEW_BASIS, 'mlperf_dlrm_v1', 'read from a trace')
  a = robustness.assumptions(w, p, plan)
  assert a['skew_basis'] == 'read from a trace'
  line = robustness.assumptions_line(a)
  assert '(mlperf_dlrm_v1 default, read from a trace' in line
  assert 'an assumption' not in line
  mine = dataclasses.replace(w, popularity_skew=2.0)
  a = robustness.assumptions(mine, p, plan)
  assert a['origin'] == 'as given' and a['skew_basis'] is None
  assert 'popularity_skew 2 (as given:' in robustness.assumptions_line(a)


def test_robustness_share_matches_its_perturbations(priced_run):
  rob = priced_run['robustness']
  rows = rob['perturbations']
  assert rows and rob['perturbation_count'] == len(rows)
  stays = [r['proposal_stays_best'] for r in rows]
  assert rob['proposal_stays_best'] == sum(stays)
  assert 0.0 <= rob['share'] <= 1.0
  assert rob['share'] == pytest.approx(sum(stays) / len(rows))
  for r in rows:
    assert r['best'] == (r['ranking'][0] if r['ranking'] else None)
    assert r['proposal_stays_best'] == (r['best'] == 'proposal')
  # Every skew of 1.2 to 16 but the workload's own (rm1's: 1), and the
  # proposal's worst of them named.
  skews = [r['value'] for r in rows if r['kind'] == 'popularity_skew']
  assert skews == [1.2, 2.0, 4.0, 8.0, 16.0] and rob['left_out'] == []
  worst = rob['worst_skew']
  values = [r['proposal_value'] for r in rows if r['kind'] == 'popularity_skew']
  assert worst['value'] == min(v for v in values if v is not None)
  assert (
    f'its worst popularity_skew of 1.2, 2, 4, 8, 16 is {worst["skew"]:g}'
    in (rob['sentence'])
  )
  assert f'{sum(stays)} of {len(rows)} perturbations' in rob['sentence']


# ---- a flip that must happen ------------------------------------------------


def _preset(name, w, label=None):
  p = platform_presets.get(name)
  plan = planner.make(w, p, STACK)
  fig = report.to_result(
    cost_model.evaluate(hardware.as_arrays(p), w, plan, STACK)
  )
  return robustness.Candidate(label or name, 'preset', p, plan, fig)


def test_pricing_the_winners_accelerator_at_100x_makes_another_win():
  """On rm1 the A100-80GB node leads the H100 node in samples/s per USD
  (at nearly the same throughput, half the capex); at 100x its
  accelerator's price, its capex grows about 60-fold and the H100 node
  must win. At x0.7 the A100 node leads by more."""
  w = wp.get('rm1')
  cands = [
    _preset('dgx_a100_80gb', w, label='proposal'),
    _preset('dgx_h100', w),
  ]

  def score(fig):
    return fig['perf_per_usd'] if fig['feasible'] else None

  nominal = [score(c.figures) for c in cands]
  assert nominal[0] > nominal[1]
  perts = [
    {
      'name': f'A100 x{f:g}',
      'kind': 'price',
      'parts': ['A100-SXM4-80GB'],
      'factor': f,
    }
    for f in (100.0, 0.7)
  ]
  rob = robustness.check(cands, perts, w, STACK, score, 'throughput_per_usd')
  flip, keep = rob['perturbations']
  assert rob['nominal_best'] == 'proposal'
  assert flip['best'] == 'dgx_h100' and not flip['proposal_stays_best']
  assert keep['best'] == 'proposal' and keep['proposal_stays_best']
  # The price moves the capex alone: the H100 node's figures stay put.
  assert flip['best_value'] == nominal[1]
  assert rob['share'] == 0.5
  assert 'under A100 x100 the best is dgx_h100' in rob['sentence']
  # A skew perturbation re-fits the plans; both nodes hold rm1 whole.
  skew = {
    'name': 'skew x2',
    'kind': 'popularity_skew',
    'factor': 2.0,
    'value': 2.0,
  }
  rob2 = robustness.check(cands, [skew], w, STACK, score, 'throughput_per_usd')
  assert rob2['perturbations'][0]['best'] == 'proposal'
  w2 = dataclasses.replace(w, popularity_skew=2.0)
  frac = robustness.refit_hbm(w2, cands[0].platform, STACK, cands[0].plan)
  assert frac.shape == (w.num_tables,) and frac.min() >= 0.0


def test_network_prices_are_perturbed_where_there_is_a_network():
  """zionex (16 nodes) and dgx_h100 (one node): the network's prices x0.7
  and x1.3 move zionex's capex by 0.3 x its network bill (NICs,
  switches, links) and dgx_h100's by 0.3 x its NICs only."""
  w = wp.get('rm1')

  def candidate(name):
    p = platform_presets.get(name)
    usd = float(terms.capex_and_power(p)[0])
    fig = {'capex_usd': usd, 'throughput_samples_per_s': 1.0}
    return robustness.Candidate(name, 'preset', p, None, fig)

  cands = [candidate('zionex'), candidate('dgx_h100')]
  perts, _ = robustness.perturbations(cands, w)
  net = [x for x in perts if x['kind'] == 'network_price']
  assert [x['factor'] for x in net] == list(robustness.PRICE_FACTORS)
  up = next(x for x in net if x['factor'] > 1.0)
  figs = robustness.figures_under(up, cands, w, STACK, ())
  for c, f in zip(cands, figs, strict=True):
    bill = report.capex_breakdown(c.platform)['network']
    moved = f['capex_usd'] - c.figures['capex_usd']
    assert moved == pytest.approx((up['factor'] - 1.0) * bill['usd'], rel=1e-5)
  single = robustness.perturbations(cands[1:], w)[0]
  assert not [x for x in single if x['kind'] == 'network_price']
