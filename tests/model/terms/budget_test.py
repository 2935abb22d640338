"""Known answers, worked by hand, for the model: composition, capex and power.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import jax
import pytest

from tests.model.fixtures import (
  ACC_EFF,
  ACC_HALF,
  ACC_KERNEL,
  BOTTOM_WIDTHS,
  EW,
  HBM_BW,
  LINK_LAT,
  NIC,
  STEP_FLOOR,
  STREAM,
  TOP_WIDTHS,
  B,
  close,
  hand_dense,
  ids_terms,
  make_plan,
  run,
  smax,
  switch,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)

# ---- composition, capex and power -----------------------------------------


# Forward shares of the MLPs' elementwise passes (terms.MLP_PASSES):
# none 3 of 7 (bias copy, ReLU read and write), elementwise 2 of 5, epilogue
# none (the mask is read backward). The model splits the whole elementwise
# time, kernel launches included, by them.
PASS_FWD = {'none': 3 / 7, 'elementwise': 2 / 5, 'epilogue': 0.0}
# Forward shares of the elementwise kernels as terms.MLP_KERNELS
# documents them: none 1 of 3 (ReLU forward; ReLU and bias gradients
# backward), elementwise 1 of 2, epilogue none.
KERNEL_FWD = {'none': 1 / 3, 'elementwise': 1 / 2, 'epilogue': 0.0}


def composed_step(bd, o, fusion='epilogue', bottom_b=1024):
  """The step from the breakdown terms, by hand, with the dense terms
  split forward and backward by hand: the MLPs' streaming time by the
  forward share of their passes (`PASS_FWD`), their kernel launches by
  `KERNEL_FWD`."""
  d = hand_dense(
    1024, 10e12, 4, ACC_EFF, ACC_HALF, HBM_BW, ACC_KERNEL, bottom_b=bottom_b
  )
  passes, kernels = EW[fusion]

  def split(b, widths):
    stream = b * passes * widths * 4 / (STREAM * HBM_BW)
    launch = 2 * kernels * ACC_KERNEL
    fk = KERNEL_FWD[fusion]
    fwd = PASS_FWD[fusion] * stream + fk * launch
    return fwd, stream + launch - fwd

  ew_b, ew_t = split(bottom_b, BOTTOM_WIDTHS), split(1024, TOP_WIDTHS)
  bottom = (d['bottom'][0] + ew_b[0], d['bottom'][1] + ew_b[1])
  top = (d['top'][0] + ew_t[0], d['top'][1] + ew_t[1])

  def ov(a, b):  # o overlapped: (1 - o)(a + b) + o smax(a, b)
    return (1 - o) * (a + b) + o * smax(a, b)

  # With every DDR lookup on the CPUs (c = 1) the terms split cleanly:
  # forward gathers from HBM race the CPU gathers plus their transfer.
  host, upi = bd['host_transfer'] / 2, bd['socket_links'] / 2
  # Ids go forward only; pooled vectors and their gradients both ways.
  ids = sum(ids_terms(8, 4, switch, LINK_LAT, NIC))
  a2a = (bd['alltoall_intra'] + bd['alltoall_inter'] - ids) / 2
  sparse_fwd = smax(
    bd['embedding_gather_hbm'], bd['embedding_gather_ddr'] + host + upi
  )
  sparse_fwd += ids + a2a
  sparse_bwd = a2a + smax(
    bd['embedding_update_hbm'], host + upi + bd['embedding_update_ddr']
  )
  t_fwd = ov(sparse_fwd, bottom[0]) + d['inter'][0] + top[0]
  t_bwd = top[1] + d['inter'][1] + ov(sparse_bwd, bottom[1])
  t_bwd = ov(t_bwd, bd['allreduce_intra'] + bd['allreduce_inter'])
  device = t_fwd + t_bwd + bd['dense_optimizer'] + bd['overhead']
  return smax(device, STEP_FLOOR)  # one graph, host_overlap 1


COMPOSITIONS = [
  (0.0, 'epilogue', False),
  (0.5, 'epilogue', False),
  (1.0, 'epilogue', False),
  (1.0, 'none', True),
  (0.5, 'elementwise', True),
]


def composition_case(fusion, one_device, o):
  s = tiny_stack(
    mlp_fusion=fusion,
    bottom_mlp='one_device' if one_device else 'data_parallel',
  )
  plan = make_plan(frac=(1.0, 0.5, 0.0), overlap=o)
  return run(tiny_platform(), tiny_workload(), plan, s), (
    B if one_device else 1024
  )


@pytest.mark.parametrize('o, fusion, one_device', COMPOSITIONS)
def test_step_composition(o, fusion, one_device):
  r, bottom_b = composition_case(fusion, one_device, o)
  bd = r['breakdown']
  step = composed_step(bd, o, fusion, bottom_b)
  close(r['step'], step)
  close(r['throughput'], B / step)
  assert r['bottleneck'] == max(bd, key=bd.get)


def test_capex_and_power():
  r = run(tiny_platform(), tiny_workload(), make_plan())
  # Per node: chassis 5000; 2 sockets x (1000 + 100 GB x 5 USD/GB);
  # 4 accelerators x (10000 + 10 GB x 20 USD/GB); fabric 4 accelerators x
  # 4 links x 25 GB/s x 5 USD per GB/s; NICs 2 x 12.5 GB/s x 100 USD per
  # GB/s.
  node_usd = 5000 + 2 * 1500 + 4 * 10200 + 4 * 100 * 5 + 25 * 100
  assert node_usd == 53300
  # The network (terms.switching): 2 nodes x 2 NICs = 4 endpoints fit one
  # switch of 64 ports: 64 x 12.5 GB/s x 100 USD per GB/s; 4 links x 12.5
  # GB/s x 200 USD per GB/s.
  net_usd = 64 * 12.5 * 100 + 4 * 12.5 * 200
  assert net_usd == 90000
  close(r['capex'], 2 * node_usd + net_usd)
  # Per node: 500 W; 2 x (200 + 100 GB x 0.1 W/GB); 4 x (300 + 100 GB/s x
  # 0.05 W per GB/s), at the wall: x (1 + 0.15 fans) / 0.94 supplies
  # (terms.wall_power); NICs 25 GB/s x 1 W per GB/s. The network: 64 ports
  # x 12.5 GB/s x 1 W per GB/s; 4 links x 12.5 GB/s x 2 W per GB/s.
  node_w = (500 + 2 * 210 + 4 * 305) * 1.15 / 0.94 + 25
  net_w = 64 * 12.5 + 4 * 12.5 * 2
  close(r['power'], 2 * node_w + net_w)
  close(r['perf_per_usd'], r['throughput'] / (2 * node_usd + net_usd))
  close(r['perf_per_watt'], r['throughput'] / (2 * node_w + net_w))


def test_node_power_at_the_wall_against_datasheets():
  """DGX H100 preset: parts at TDP 1000 W chassis + 2 x (350 W + 1024 GB x
  0.1 W/GB) + 8 x (700 W + 22.5 W of fabric links, fabric_power) =
  7684.8 W; at the wall x 1.15 / 0.94 = 9401.8 W, plus 8 NICs x 50 GB/s
  x 0.5 W per GB/s = 200 W: 9.60 kW against the 10.2 kW datasheet
  maximum (was 7.88 kW, the sum of TDPs). DGX A100 (80 GB): 4975.2 W of
  parts, 6.09 kW at the wall + 100 W of NICs against 6.5 kW."""
  from codesign.model.terms import budget
  from codesign.spec import platform_presets

  assert budget.wall_power(1000.0) == pytest.approx(1000 * 1.15 / 0.94)
  h100 = platform_presets.get('dgx_h100')
  parts = 1000 + 2 * (350 + 102.4) + 8 * (700 + 22.5)
  assert parts == pytest.approx(7684.8)
  _, node_w = budget.nodes_capex_and_power(h100)
  close(node_w, parts * 1.15 / 0.94)
  _, total_w = budget.capex_and_power(h100)
  close(total_w, parts * 1.15 / 0.94 + 200)
  assert 0.9 < float(total_w) / budget.DATASHEET_MAX_W['dgx_h100'] < 1.0
  a100 = platform_presets.get('dgx_a100_80gb')
  parts = 1000 + 2 * (225 + 102.4) + 8 * (400 + 15.0)
  _, total_w = budget.capex_and_power(a100)
  close(total_w, parts * 1.15 / 0.94 + 100)
  assert 0.9 < float(total_w) / budget.DATASHEET_MAX_W['dgx_a100'] < 1.0


# ---- memory as the stack keeps it (issue 21) --------------------------------


def test_host_copy_only_for_tables_partly_outside_hbm():
  import numpy as np

  from codesign.model import terms as ct

  frac = np.array([0.0, 0.5, 0.99, 0.9995, 1.0])
  s = tiny_stack(uvm_caching=True)
  uvm = ct.host_copy(s, frac)
  # FUSED_UVM_CACHING keeps the whole table in DDR; FUSED (whole in HBM)
  # keeps none: a table within the knee (1e-3) of whole is whole, exactly.
  np.testing.assert_array_equal(uvm, [1.0, 1.0, 1.0, 0.0, 0.0])
  np.testing.assert_array_equal(
    ct.whole_in_hbm(frac), [False, False, False, True, True]
  )
  # The gradient is the smoothed step's: a search feels the DDR a table
  # saves as it fills HBM (0.9995: half the knee outside HBM), and none
  # far from the knee.
  grad = jax.vmap(jax.grad(lambda f: ct.host_copy(s, f)))(frac)
  assert float(grad[3]) < -100.0
  assert abs(float(grad[0])) < 1e-12 and abs(float(grad[1])) < 1e-12
  # Without UVM caching the split is static: the rows outside HBM.
  np.testing.assert_allclose(
    ct.host_copy(tiny_stack(), frac), 1.0 - frac, rtol=0, atol=0
  )


def test_ddr_holds_only_what_lives_there():
  # UVM caching, tables 1 and 2 wholly in HBM, table 3 half: only table 3
  # (4000 rows x 64 B) has a host copy, whole, over 2 nodes.
  p, w = tiny_platform(), tiny_workload()
  s = tiny_stack(uvm_caching=True)
  r = run(p, w, make_plan(frac=(1.0, 1.0, 0.5)), s)
  close(r['required']['ddr'], 4000 * 64 / 2)
  # Every table partly outside HBM: all three whole in DDR.
  r = run(p, w, make_plan(frac=(0.5, 0.5, 0.5)), s)
  close(r['required']['ddr'], (1000 + 2000 + 4000) * 64 / 2)


def test_stack_hbm_reservations():
  # Per accelerator: KJT 20 copies x (1024 local samples x 7 lookups x 4 B
  # ids) = 573,440 B; the sparse-dist pipeline's 2 x the global batch's
  # ids of the sharded tables over 8 ranks: 2 x 8192 x 7 x 4 / 8 = 57,344
  # B; cache bookkeeping of table 3 (cached at frac 0.5): 4000 rows x
  # (4 + 16 x 0.5) B over 8 ranks = 6,000 B.
  p, w = tiny_platform(), tiny_workload()
  plan = make_plan(frac=(1.0, 1.0, 0.5))
  base = run(p, w, plan, tiny_stack(uvm_caching=True))['required']['hbm']
  cases = (
    (dict(kjt_copies=20), 573_440.0),
    (dict(train_pipeline='sparse_dist'), 57_344.0),
  )
  for changes, extra in cases:
    s = tiny_stack(uvm_caching=True, **changes)
    close(run(p, w, plan, s)['required']['hbm'], base + extra)
  plain = run(p, w, plan, tiny_stack())['required']['hbm']
  close(base, plain + 6_000.0)
  # The planner's HBM need is the cost model's.
  from codesign.model import planner
  from codesign.spec import hardware

  s = tiny_stack(uvm_caching=True, kjt_copies=20, train_pipeline='sparse_dist')
  need = planner.hbm_need(
    w, hardware.as_arrays(p), s, plan.sharding, plan.hbm_fraction
  )
  close(float(need), run(p, w, plan, s)['required']['hbm'])


def test_racks_at_a_rack_power():
  """10 DGX H100 nodes of 9601.8 W at the wall (with their 200 W of NICs,
  as above) at 40 kW per rack: floor(40 / 9.6018) = 4 nodes per rack, 3
  racks; at 8 kW a node alone does not fit."""
  from codesign.core.pytree import replace
  from codesign.model.terms import budget
  from codesign.spec import platform_presets

  p = replace(platform_presets.get('dgx_h100'), nodes=10.0)
  r = budget.racks(p, 40e3)
  node_w = 7684.8 * 1.15 / 0.94 + 200
  assert r['node_kw'] == pytest.approx(node_w / 1e3)
  # The search's rack row reads the same node power, traced.
  assert float(budget.node_wall_power(p)) == pytest.approx(node_w)
  assert (r['nodes_per_rack'], r['racks'], r['fits']) == (4, 3, True)
  r = budget.racks(p, 8e3)
  assert (r['nodes_per_rack'], r['racks'], r['fits']) == (0, 10, False)


def test_racks_count_from_both_power_and_space():
  """Rack units beside power (codesign/data/facility.json): an air rack
  is 42U less 2U of switches, 40U for nodes. 10 DGX H100 (8U) at 142 kW
  per rack are air-cooled (9.6 kW a node): 4 by power, 5 by space (40 /
  8), power binds, 3 racks, 80U used. A GB200 NVL72 domain is 18 trays
  of 1U and 9 switch trays, 27U, within the 38U of a liquid rack (48U
  less 8 power shelves and 2 switches)."""
  from codesign.core.pytree import replace
  from codesign.model.terms import budget
  from codesign.spec import platform_presets

  p = replace(platform_presets.get('dgx_h100'), nodes=10.0)
  r = budget.racks(p, 142e3)
  assert (r['node_u'], r['usable_u'], r['rack_u']) == (8.0, 40.0, 42.0)
  assert (r['units_by_power'], r['units_by_space'], r['binds']) == (
    4,
    5,
    'power',
  )
  assert (r['racks'], r['u_used']) == (3, 80.0)
  nvl = platform_presets.get('gb200_nvl72')
  r = budget.racks(nvl, 142e3)
  assert (r['cooling'], r['unit_u'], r['usable_u']) == ('liquid', 27.0, 38.0)
  assert (r['racks'], r['fits'], r['space_fits']) == (1, True, True)
  # The traced rows read the same numbers.
  assert float(budget.rack_unit_space(nvl)) == 27.0
  assert float(budget.usable_rack_units(nvl)) == 38.0


def test_space_binds_where_a_rack_has_power_to_spare():
  """50 two-socket CPU nodes (2U, under 1 kW at the wall): 42 by the
  air rack's power, 20 by its 40U: space binds, 3 racks; one-socket
  nodes (1U) fit 40. The rack units are smooth in the accelerators per
  node between the table's counts (log2) and exact at them: a board of
  12 GPUs lies between the 8U of 8 and the 10U of 16."""
  from codesign.core.pytree import replace
  from codesign.model.terms import budget
  from codesign.spec import platform_presets

  cpu = replace(platform_presets.get('cpu_2s'), nodes=50.0)
  r = budget.racks(cpu, 142e3)
  assert (r['node_u'], r['units_by_space'], r['binds']) == (2.0, 20, 'space')
  assert r['units_by_power'] > 20 and r['racks'] == 3
  one = replace(cpu, sockets_per_node=1.0)
  assert budget.racks(one, 142e3)['units_by_space'] == 40
  board = platform_presets.get('dgx_h100')
  assert (
    budget.node_rack_units(replace(board, accelerators_per_node=16.0)) == 10
  )
  twelve = replace(board, accelerators_per_node=12.0)
  assert 8.0 < budget.node_rack_units(twelve) < 10.0


def test_tco_is_capex_plus_energy_over_the_life():
  """10 kW for 5 years (8766 h each) x PUE 1.58 = 692,514 kWh; at 0.08
  USD/kWh 55,401.12 USD, beside 1e6 USD of capex."""
  from codesign.model.terms import budget

  t = budget.tco(1e6, 10e3, 5.0, 0.08, 1.58)
  assert t['energy_kwh'] == pytest.approx(692514.0)
  assert t['energy_usd'] == pytest.approx(55401.12)
  assert t['total_usd'] == pytest.approx(1055401.12)


def test_energy_usd_per_w():
  """8766 h x 5 years x PUE 1.58 x 0.08 USD/kWh / 1000 = 5.540112 USD of
  energy per W of power over the life."""
  from codesign.model.terms import budget

  assert budget.energy_usd_per_w(5.0, 0.08, 1.58) == pytest.approx(5.540112)
