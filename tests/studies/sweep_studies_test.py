"""The sweep studies in-process: compare_platforms, scale_out, sensitivity.

Each `run` is called on a small setting (few points, a small workload) and
its rows are checked against the cost model evaluated directly for one
point; the CSV and the printed table are checked for shape and for the
notes they must carry. The plots are checked on the values that used to
crash them (nothing positive on a log axis).
"""

import json
import math

import numpy as np
import pytest

from codesign.boundary import inputs
from codesign.calibration import public_cases as pc
from codesign.core import results
from codesign.core.errors import InputError
from codesign.core.units import GIB
from codesign.model import cost_model, planner, report
from codesign.spec import hardware
from codesign.spec import workload as wl
from codesign.studies import compare_platforms as cp
from codesign.studies import plotting, shared, sweeps
from codesign.studies import scale_out as so
from codesign.studies import sensitivity as se

PNG = b'\x89PNG\r\n\x1a\n'


# ---- compare_platforms -----------------------------------------------------


@pytest.fixture(scope='module')
def compared():
  lines = []
  settings = cp.Settings(
    workload='criteo_kaggle',
    platforms=('big_basin',),
    gpu_platforms=(),
    large_memory_platforms=(),
    min_size_gb=10.0,
    max_size_gb=3000.0,
    points=2,
  )
  result, metrics = cp.run(settings, progress=lines.append)
  return settings, result, metrics, lines


def test_compare_platforms_matches_the_cost_model(compared):
  _, result, metrics, lines = compared
  assert lines == ['sweeping 2 sizes on big_basin']
  base = inputs.load_workload('criteo_kaggle')
  p = inputs.load_platform('big_basin')
  stack = inputs.load_stack('torchrec')
  d = result['platforms']['big_basin']
  for j, size_gb in enumerate(result['sizes_gb']):
    scale = size_gb * 1e9 / wl.embedding_bytes(base)
    plan = planner.make(base, p, stack, row_scale=scale)
    r = cost_model.evaluate(hardware.as_arrays(p), base, plan, stack, scale)
    np.testing.assert_allclose(
      d['throughput_samples_per_s'][j], r.throughput, rtol=1e-9
    )
    assert bool(d['feasible'][j]) == bool(r.feasible)
  # 3 TB of tables fit in neither 8 x 32 GB of HBM nor 1.5 TB of DDR.
  assert d['feasible'].tolist() == [True, False]
  assert result['why_infeasible']['big_basin'][0] is None
  assert result['why_infeasible']['big_basin'][1].startswith('out of DDR')
  assert [m['step'] for m in metrics] == [0, 1]
  # The result is what the launcher writes, without the extra keys.
  saved = {k: v for k, v in result.items() if k not in cp.EXTRA_KEYS}
  assert 'big_basin' in json.loads(results.dumps(saved))['platforms']


def test_compare_platforms_csv_and_table(compared, tmp_path):
  _, result, _, _ = compared
  header, rows = cp.csv_table(result)
  assert header[0] == 'embedding_size_gb'
  assert 'big_basin/throughput_samples_per_s' in header
  assert len(rows) == 2 and all(len(r) == len(header) for r in rows)
  assert [r[0] for r in rows] == pytest.approx([10.0, 3000.0])
  results.write_csv(tmp_path / 'compare_platforms.csv', header, rows)
  text = cp.table(result)
  assert 'x big_basin from 3,000.0 GB: out of DDR' in text
  assert result['summary'][0] in text


def test_compare_platforms_settings_are_checked():
  with pytest.raises(InputError, match='--points'):
    cp.Settings(points=1)
  with pytest.raises(InputError, match='--gpu_platforms'):
    cp.Settings(platforms=('zion',), gpu_platforms=('big_basin',))
  with pytest.raises(InputError, match='twice'):
    cp.Settings(platforms=('zion', 'zion'), gpu_platforms=())


# ---- scale_out -------------------------------------------------------------


@pytest.fixture(scope='module')
def scaled():
  lines = []
  settings = so.Settings(
    workload='criteo_kaggle',
    platform='dgx_a100_80gb',
    nodes=(1, 2),
    rounds=1,
  )
  result, metrics = so.run(settings, progress=lines.append)
  return result, metrics, lines


def test_scale_out_matches_the_cost_model(scaled):
  result, metrics, lines = scaled
  # Each count's plan and figures first, then (against the reference)
  # its needed NIC.
  assert len(lines) == 4 and lines[1].startswith('2 nodes')
  rows = result['per_node_count']
  assert [r['nodes'] for r in rows] == [1, 2]
  assert rows[0]['efficiency'] == pytest.approx(1.0)
  # One node holds criteo_kaggle's tables: it is the reference.
  assert result['efficiency_reference']['nodes'] == 1
  assert result['efficiency_reference']['capacity_effect'] is None
  # Time to train of 1e9 samples (no curve), goodput 1 at 16 GPUs.
  times = result['time_to_train']['rows']
  assert [t['goodput'] for t in times] == [1.0, 1.0]
  np.testing.assert_allclose(
    times[1]['time_to_train_s'], 1e9 / rows[1]['throughput_samples_per_s']
  )
  w0 = inputs.load_workload('criteo_kaggle')
  p0 = inputs.load_platform('dgx_a100_80gb')
  stack = inputs.load_stack('torchrec')
  p, w = sweeps.with_nodes(p0, w0, 2, weak=True)
  plan = planner.make(w, p, stack, sharding='auto')
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, stack)
  np.testing.assert_allclose(
    rows[1]['throughput_samples_per_s'], r.throughput, rtol=1e-9
  )
  np.testing.assert_allclose(so.step_time_s(rows[1]), r.step_time, rtol=1e-9)
  # The bill per node count, the network apart: one node none, two nodes
  # of 8 NICs one switch and 16 links; their sum is the model's capex.
  bills = [row['capex_breakdown'] for row in rows]
  assert bills[0]['network']['switches'] == 0
  assert bills[1]['network']['switches_by_tier'] == {'single': 1}
  assert bills[1]['network']['links'] == 16
  np.testing.assert_allclose(bills[1]['total_usd'], r.capex, rtol=1e-6)
  assert rows[1]['global_batch'] == 2 * rows[0]['global_batch']
  assert [m['nodes'] for m in metrics] == [1, 2]
  assert result['why_infeasible'] == [None, None]


def test_scale_out_csv_and_table(scaled):
  result, _, _ = scaled
  header, rows = so.csv_table(result)
  assert header[:2] == ['nodes', 'global_batch_samples']
  assert 'required_nic_gbit_per_s_per_accelerator' in header
  assert 'alltoall_inter_s' in header
  assert [r[0] for r in rows] == [1, 2]
  assert all(len(r) == len(header) for r in rows)
  text = so.table(result)
  assert shared.OVERLAP_NOTE in text
  assert 'bottleneck (% of step)' in text and 'step time' in text
  assert '1 single (16 links)' in text and 'network $' in text


def test_scale_out_table_says_why_a_node_count_is_infeasible(scaled):
  result, _, _ = scaled
  broken = json.loads(results.dumps(result))
  broken['per_node_count'][1]['feasible'] = False
  broken['why_infeasible'] = [None, shared.why_infeasible(9e10, 8e10, 0, 1)]
  text = so.table(broken)
  assert 'NO: out of HBM: 90.0 GB needed of 80.0 GB per accelerator' in text


def test_scale_out_without_a_matching_case_draws_none(scaled):
  """criteo_kaggle on dgx_a100_80gb with torchrec: no public case ran it."""
  result, _, _ = scaled
  assert result['measured_cases'] == []
  assert 'no public case measured' in so.table(result)


def test_scale_out_names_the_term_that_stops_the_scaling(scaled):
  result, _, _ = scaled
  rows = result['per_node_count']
  stop = result['scaling_stopped_by']
  if rows[1]['efficiency'] >= 0.8:
    assert stop['component'] is None and stop['nodes'] is None
  # At a target of 100% the second node count stops it; under weak
  # scaling the term named is one that grows from one node.
  stop = so.scaling_stop(rows, 1.0)
  assert stop['nodes'] == 2
  k = stop['component']
  assert k in rows[1]['breakdown_s'] and k in cost_model.COMPONENTS
  assert stop['to_s'] == pytest.approx(float(rows[1]['breakdown_s'][k]))
  assert stop['from_s'] == pytest.approx(float(rows[0]['breakdown_s'][k]))
  assert stop['to_s'] > stop['from_s'] == stop['linear_scaling_s']
  grew = {
    j: float(rows[1]['breakdown_s'][j]) - float(rows[0]['breakdown_s'][j])
    for j in cost_model.COMPONENTS
  }
  assert grew[k] == max(grew.values())
  step = so.step_time_s(rows[1])
  assert stop['share_of_step'] == pytest.approx(stop['to_s'] / step)
  assert (
    k in stop['sentence'] and 'Scaling stops at 2 nodes' in stop['sentence']
  )
  assert stop['beyond'] is None  # 2 nodes is the last count


def test_scale_out_public_cases_match_by_preset_names():
  def ids(workload, platform, stack):
    keys = so.matching_cases(
      inputs.load_workload(workload),
      inputs.load_platform(platform),
      inputs.load_stack(stack),
    )
    return [k.case_id for k in keys]

  dcnv2 = 'mlperf_dlrm_dcnv2'
  assert ids(dcnv2, 'dgx_h100', 'hugectr') == ['C8', 'C11']
  assert ids(dcnv2, 'dgx_h200', 'hugectr') == ['C13', 'C14']
  assert ids('mlperf_dlrm_v1', 'dgx_a100_80gb', 'hugectr') == ['C6', 'C10']
  assert ids('mlperf_dlrm_v1', 'dgx_h100', 'hugectr') == ['C12', 'C19']
  assert ids(dcnv2, 'dgx_h100', 'torchrec') == []
  # C1 ran one GPU of a DGX A100: not a whole node.
  assert ids('nv_dlrm_small', 'dgx_a100_80gb', 'nvidia_pytorch') == []


def test_scale_out_measured_points_are_the_public_cases():
  """dcnv2 on DGX H100 with HugeCTR: C11 (8 nodes) beside C8 (one node),
  each at its measured rate and the model's `public_cases.predict`."""
  points = so.measured_cases(
    inputs.load_workload('mlperf_dlrm_dcnv2'),
    inputs.load_platform('dgx_h100'),
    inputs.load_stack('hugectr'),
  )
  data = json.loads(pc.CASES_FILE.read_text())
  rate = {c['id']: c['records_per_s'].get('amp') for c in data['cases']}
  src = {c['id']: c['src'] for c in data['cases']}
  assert [p['case'] for p in points] == ['C8_amp', 'C11_amp']
  c8, c11 = points
  assert (c8['nodes'], c11['nodes']) == (1, 8)
  for p in points:
    assert p['measured_samples_per_s'] == pytest.approx(rate[p['case_id']])
    assert p['source'] == src[p['case_id']]
  (case,) = pc.load(ids=('C11',))
  model = pc.predict(case, pc.shipped_values())
  assert c11['model_samples_per_s'] == pytest.approx(
    float(model.throughput), rel=1e-5
  )
  assert c11['model_samples_per_s_at_priors'] == pytest.approx(
    float(pc.predict(case).throughput), rel=1e-5
  )
  assert c11['global_batch'] == case.workload.global_batch == 135168
  assert c11['reference_case'] == 'C8_amp'
  assert c11['measured_efficiency'] == pytest.approx(
    rate['C11'] / (8 * rate['C8'])
  )
  assert c11['model_efficiency'] == pytest.approx(
    c11['model_samples_per_s'] / (8 * c8['model_samples_per_s'])
  )
  text = '\n'.join(so.measured_lines({'measured_cases': points}))
  assert 'C11_amp' in text and src['C11'] in text


def test_scale_out_settings_are_checked():
  with pytest.raises(InputError, match='--nodes'):
    so.Settings(nodes=(2, 4))
  with pytest.raises(InputError, match='--target'):
    so.Settings(target=1.5)
  with pytest.raises(InputError, match='CPU trainer'):
    so.run(so.Settings(workload='criteo_kaggle', platform='cpu_2s'))


# ---- sensitivity -----------------------------------------------------------


@pytest.fixture(scope='module')
def elasticities():
  lines = []
  settings = se.Settings(
    workload='criteo_kaggle', platform='big_basin', check_top=1
  )
  result, metrics = se.run(settings, progress=lines.append)
  return result, metrics, lines


def test_sensitivity_matches_the_cost_model(elasticities):
  result, metrics, lines = elasticities
  assert metrics == [] and len(lines) == 2
  w = inputs.load_workload('criteo_kaggle')
  p = inputs.load_platform('big_basin')
  stack = inputs.load_stack('torchrec')
  plan = planner.make(w, p, stack)
  direct = report.to_result(
    cost_model.evaluate(hardware.as_arrays(p), w, plan, stack)
  )
  assert result['design']['throughput_samples_per_s'] == pytest.approx(
    direct['throughput_samples_per_s'], rel=1e-12
  )
  assert len(result['elasticities']) == len(hardware.leaf_paths(p))
  assert len(result['finite_difference_check']) == 2  # one field x 2 metrics
  assert result['finite_difference_ok']
  e = [abs(x['elasticity']) for x in result['upgrade_for_throughput']]
  assert e == sorted(e, reverse=True)


def test_sensitivity_csv_and_table(elasticities):
  result, _, _ = elasticities
  header, rows = se.csv_table(result)
  assert header[:4] == ['rank', 'field', 'value_in_field_unit', 'value_si']
  assert len(rows) == len(result['elasticities'])
  hbm = next(r for r in rows if r[1] == 'accelerator.hbm_capacity_gb')
  # A 32 GB V100 holds 32 GiB; the field's unit is the SI gigabyte.
  assert hbm[2] == pytest.approx(32 * GIB / 1e9) and hbm[3] == 32 * GIB
  top = result['upgrade_for_throughput'][0]
  assert rows[0][1] == top['field']
  text = se.table(result)
  assert 'what to upgrade next' in text and 'feasible: yes' in text
  broken = json.loads(results.dumps(result))
  broken['design']['feasible'] = False
  broken['design']['memory']['hbm']['required_bytes'] = 1e12
  assert 'feasible: NO: out of HBM' in se.table(broken)


def test_sensitivity_settings_are_checked():
  with pytest.raises(InputError, match='--check_top'):
    se.Settings(check_top=0)
  with pytest.raises(InputError, match='--fd_rel_step'):
    se.Settings(fd_rel_step=0.5)


# ---- plots -----------------------------------------------------------------


def test_lines_with_nothing_positive_on_log_axes(tmp_path):
  """scale_out --workload=criteo_kaggle --scaling=strong: the target is out
  of reach at every node count, so nic_required.png has no point."""
  path = plotting.lines(
    tmp_path / 'nic_required.png',
    np.array([2, 4]),
    {'needed for 80% efficiency': np.array([np.nan, np.nan])},
    'criteo_kaggle on zionex (strong scaling)',
    'nodes',
    'NIC Gb/s per accelerator',
    logx=True,
    logy=True,
    hline=200.0,
    hline_label='own NIC: 200 Gb/s per accelerator',
  )
  assert path.read_bytes()[:8] == PNG
  path = plotting.lines(
    tmp_path / 'zeros.png',
    np.array([1, 2, 4]),
    {'a': np.array([0.0, math.inf, -1.0])},
    't',
    'nodes',
    'y',
    logx=True,
    logy=True,
  )
  assert path.read_bytes()[:8] == PNG


def test_other_plots_take_zero_and_inf(tmp_path):
  sizes = np.array([10.0, 100.0])
  zero = {'a': np.array([0.0, 0.0])}
  plotting.platform_curves(
    tmp_path / 'p.png',
    sizes,
    [('throughput (samples/s)', zero)],
    {'a': np.array([False, True])},
    {'a': np.array([True, False])},
    't',
  )
  plotting.ranked_bars(
    tmp_path / 'b.png', ['x', 'y'], {'m': np.array([math.inf, 1.0])}, 't', 'e'
  )
  plotting.step_breakdown(
    tmp_path / 's.png',
    np.array([1, 2]),
    {'dense_top_mlp': np.array([1e-3, math.inf]), 'host': np.zeros(2)},
    't',
    'nodes',
    step_s=np.array([1e-3, 2e-3]),
  )
  for name in ('p.png', 'b.png', 's.png'):
    assert (tmp_path / name).read_bytes()[:8] == PNG


def test_component_colors_group_by_kind():
  from codesign.model.cost_model import COMPONENTS

  colors = plotting.component_colors(list(COMPONENTS))
  assert len(set(colors.values())) == len(COMPONENTS)

  def hue(name):
    r, g, b, _ = colors[name]
    return max(('r', r), ('g', g), ('b', b), key=lambda t: t[1])[0]

  assert hue('dense_top_mlp') == 'b' and hue('embedding_gather_hbm') == 'g'
  assert hue('alltoall_inter') == 'r'  # oranges: red channel leads
  r, g, b, _ = colors['host']
  assert r == g == b  # grey
