"""Known answers, worked by hand, for the model: tables partly in host DDR.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import dataclasses
import math

import jax
import numpy as np
import pytest

from codesign.model import cost_model
from codesign.model import terms as ct
from codesign.spec import hardware
from tests.model.fixtures import (
  ACC_GATHER,
  ACC_KERNEL,
  ACT_ELEMS,
  CPU_GATHER,
  CPU_PCIE,
  DDR_BW,
  DDR_CAP,
  DENSE_PARAMS,
  DIM,
  HBM_BW,
  HBM_CAP,
  HOST_BW,
  HOST_LAT,
  PENALTY,
  POOL,
  ROWS,
  SOCKET_LINK_BW,
  TINY_GAPS,
  UVM_EFF,
  UVM_FILL,
  B,
  close,
  hand_busiest,
  make_plan,
  plan_static,
  run,
  smax,
  smin,
  tiny_platform,
  tiny_stack,
  tiny_workload,
  trapezoid,
)

# ---- tables partly in host DDR ------------------------------------------


def ddr_case():
  """W0 with skewed traffic, tables partly in DDR, 3/4 of DDR lookups on
  the CPU sockets."""
  w = tiny_workload(popularity_skew=2.0)
  plan = make_plan(frac=(0.5, 0.25, 0.0), cpu_lookup_fraction=0.75)
  return w, plan


# Share of lookups that hit the rows in HBM, hit(f) = 1 - (1 - f)^2.
DDR_HIT = (0.75, 0.4375, 0.0)
DDR_LOOKUPS = B * (1 * 0.25 + 2 * 0.5625 + 4 * 1.0)  # B x pool x miss


@pytest.mark.parametrize('uvm_eff', [UVM_EFF, 1.0])
def test_embedding_ddr_host_and_socket_terms(uvm_eff):
  w, plan = ddr_case()
  p = tiny_platform()
  p = dataclasses.replace(
    p,
    host_link=dataclasses.replace(
      p.host_link, random_access_efficiency=uvm_eff
    ),
  )
  bd = run(p, w, plan)['breakdown']
  assert DDR_HIT == tuple(1 - (1 - f) ** 2 for f in (0.5, 0.25, 0.0))
  hbm_loads = [B * pool * h * 64 for pool, h in zip(POOL, DDR_HIT)]
  ddr_gather = 64 * DDR_LOOKUPS
  c = 0.75
  # HBM side: table-wise over 8 ranks. The packing order comes from the
  # plan's (concrete) HBM fractions: the 2000-row table first (0.875 B
  # lookups from HBM), then the 1000-row one (0.75 B), then the 4000-row
  # one (none): the busiest rank holds the first, 4.3x the mean.
  hbm_rate = HBM_BW * ACC_GATHER / PENALTY
  busiest = hand_busiest(hbm_loads, 8)
  assert busiest > 4 * sum(hbm_loads) / 8
  close(bd['embedding_gather_hbm'], busiest / hbm_rate)
  # DDR side: the CPU sockets of both nodes gather c of the DDR lookups at
  # 2 nodes x 2 sockets x 100 GB/s x 0.5 = 200 GB/s; the accelerators read
  # the rest row by row over PCIe (UVM) at uvm_eff of the host link, and those
  # reads also load DDR (which matters when uvm_eff = 1).
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  host_node = smin(4 * HOST_BW, 2 * CPU_PCIE)  # 4 x 16 vs 2 x 40 GB/s
  uvm_rate = 2 * host_node * uvm_eff
  cpu_t = c * ddr_gather / ddr_rate
  uvm_t = (1 - c) * ddr_gather * smax(1 / uvm_rate, 1 / ddr_rate)
  close(bd['embedding_gather_ddr'], cpu_t + uvm_t)
  # Update (scatter, SGD): read and write each looked-up row.
  close(bd['embedding_update_ddr'], 2 * (cpu_t + uvm_t))
  # Pooled vectors the sockets send to the accelerators: one 64 B vector
  # per sample and table unless all its lookups hit HBM (hit^pooling).
  all_hit = [0.75**1, 0.4375**2, 0.0**4]
  pooled = c * sum(B * 64 * (1 - a) for a in all_hit) / 2  # per node
  host_1 = pooled / host_node + HOST_LAT
  close(bd['host_transfer'], 2 * host_1)  # forward and backward
  # Half of the vectors (those on the other socket) cross a socket link:
  # 2 sockets x 2 links x 20 GB/s, halved (each link joins two sockets).
  upi = 2 * 2 * SOCKET_LINK_BW / 2
  close(bd['socket_links'], 2 * pooled * (1 / 2) / upi)


def test_packing_order_of_traced_fractions():
  # `load_orders` orders by the plan's HBM fractions when they are
  # concrete; traced (under jit, as in a search) it orders by the tables'
  # sizes alone, as if wholly in HBM: the 4000-row table (4 lookups) first,
  # the 1000-row one last. The HBM loads of the DDR case in that order are
  # 0, 0.875 and 0.75 B x 64 B: the largest stays exact (j = 0), the
  # positions 8 and 16 saturate past the tables and read nothing.
  w, plan = ddr_case()
  p, s = hardware.as_arrays(tiny_platform()), tiny_stack()
  t = ct.table_arrays(w, plan_static(plan), (64, 64))
  orders = ct.load_orders(w, plan, s, t)
  np.testing.assert_array_equal(orders['gather'], [1, 0, 2])
  np.testing.assert_array_equal(orders['bytes'], [0, 1, 2])

  def gather(frac):
    traced = dataclasses.replace(plan, hbm_fraction=frac)
    return cost_model.evaluate(p, w, traced, s).breakdown[
      'embedding_gather_hbm'
    ]

  got = float(jax.jit(gather)(plan.hbm_fraction))
  loads = [B * pool * h * 64 for pool, h in zip(POOL, DDR_HIT)]
  busiest = hand_busiest(loads[::-1], 8, in_order=True)
  close(busiest, smax(sum(loads) / 8, max(loads)), rel=1e-6)
  close(got, busiest / (HBM_BW * ACC_GATHER / PENALTY))


def test_updates_use_their_own_efficiency():
  """Row read-modify-write runs at update_efficiency, gathers at
  gather_efficiency: with update efficiencies of 0.2 (CPU) and 0.25
  (accelerator), only the update terms change."""
  w, plan = ddr_case()
  base = tiny_platform()
  p = dataclasses.replace(
    base,
    cpu=dataclasses.replace(base.cpu, update_efficiency=0.2),
    accelerator=dataclasses.replace(base.accelerator, update_efficiency=0.25),
  )
  bd0 = run(base, w, plan)['breakdown']
  bd = run(p, w, plan)['breakdown']
  for k in ('embedding_gather_hbm', 'embedding_gather_ddr', 'host_transfer'):
    close(bd[k], bd0[k])
  close(
    bd['embedding_update_hbm'], bd0['embedding_update_hbm'] * ACC_GATHER / 0.25
  )
  # DDR side by hand, as in test_embedding_ddr_host_and_socket_terms with
  # the update rate of the sockets at 0.2.
  update_bytes = 2 * 64 * DDR_LOOKUPS  # scatter, SGD: read and write a row
  c = 0.75
  update_rate = 2 * 2 * DDR_BW * 0.2
  host_node = smin(4 * HOST_BW, 2 * CPU_PCIE)
  uvm_rate = 2 * host_node * UVM_EFF
  cpu_t = c * update_bytes / update_rate
  uvm_t = (1 - c) * update_bytes * smax(1 / uvm_rate, 1 / update_rate)
  close(bd['embedding_update_ddr'], cpu_t + uvm_t)


def test_fused_update_in_ddr_uses_the_distinct_rows_of_the_ddr_rows():
  # Fused update, skew k = 2, all DDR lookups on the CPUs (c = 1): the
  # sockets sort the DDR lookups' ids, read the pooled gradient of every
  # bag with at least one DDR lookup (1 - hit^pooling of the B bags), and
  # read-modify-write the distinct rows among the coldest 1 - f of each
  # table, rows x integral_f^1 [1 - exp(-n k (1-x)^(k-1) / rows)] dx.
  w, plan = ddr_case()
  plan = dataclasses.replace(plan, cpu_lookup_fraction=1.0)
  s = tiny_stack(update_path='fused')
  bd = run(tiny_platform(), w, plan, s)['breakdown']
  moved = 0.0
  for rows, pool, f, hit in zip(ROWS, POOL, (0.5, 0.25, 0.0), DDR_HIT):
    n = B * pool

    def touched(x, n=n, rows=rows):
      return -np.expm1(-n * 2 * (1 - x) / rows)

    distinct = rows * trapezoid(touched, f, 1.0)
    lookups = n * (1 - hit)
    bags = B * (1 - hit**pool)
    moved += lookups * 4 * 8 + bags * 64 + distinct * 128
  update_rate = 2 * 2 * DDR_BW * CPU_GATHER
  close(bd['embedding_update_ddr'], moved / update_rate, rel=1e-6)


def test_uvm_caching_fill_traffic_and_memory():
  # UVM caching: the plan's HBM fraction is a cache of the hottest rows;
  # every miss crosses the host link at the stack's fill efficiency (0.5)
  # (and loads DDR); the CPU sockets do nothing, no pooled vectors cross
  # PCIe, whatever the plan's cpu_lookup_fraction.
  w, plan = ddr_case()
  s = tiny_stack(uvm_caching=True)
  r = run(tiny_platform(), w, plan, s)
  bd = r['breakdown']
  gather = 64 * DDR_LOOKUPS
  fill = 2 * smin(4 * HOST_BW, 2 * CPU_PCIE) * UVM_FILL  # both nodes
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  close(bd['embedding_gather_ddr'], smax(gather / fill, gather / ddr_rate))
  moved = 2 * gather  # scatter, SGD
  close(bd['embedding_update_ddr'], smax(moved / fill, moved / ddr_rate))
  assert bd['host_transfer'] == 0.0 and bd['socket_links'] == 0.0
  # Cache lookup and insert: 2 more kernel gaps.
  close(bd['overhead'], (TINY_GAPS + 2) * ACC_KERNEL)
  # Memory: the tables (each partly outside HBM) stay whole in DDR (7000 x
  # 64 B over 2 nodes); HBM holds the cached rows as without caching, and
  # the cache bookkeeping (TorchRec planner: 4 B a row, 16 B a slot) over
  # 8 ranks: (1000 x (4 + 16 x 0.5) + 2000 x (4 + 16 x 0.25) + 4000 x 4)
  # / 8 = 5,500 B.
  close(r['required']['ddr'], sum(ROWS) * 64 / 2)
  no_cache = run(tiny_platform(), w, plan)
  close(r['required']['hbm'], no_cache['required']['hbm'] + 5_500.0)
  close(no_cache['required']['ddr'], (0.5 * 1000 + 0.75 * 2000 + 4000) * 32)
  # Data-parallel tables are whole in HBM, never in DDR.
  dp = dataclasses.replace(
    plan, sharding=('data_parallel', 'table_wise', 'table_wise')
  )
  close(run(tiny_platform(), w, dp, s)['required']['ddr'], 6000 * 64 / 2)


def test_memory_per_tier_and_margin():
  w, plan = ddr_case()
  r = run(tiny_platform(), w, plan)
  table_bytes = [rows * 64 for rows in ROWS]  # SGD: rows only
  on_hbm = [0.5 * table_bytes[0], 0.25 * table_bytes[1], 0.0]
  # HBM per accelerator: the busiest rank's table shards, the dense model
  # (weight and gradient, fp32) and activations: b x (219 GEMM elements +
  # 3 x 4 pooled vectors x 16) x 4 B. The tables pack in the order of
  # their bytes in HBM (the plan's fractions): a rank holds 32 kB.
  dense = DENSE_PARAMS * 8 + 1024 * (ACT_ELEMS * 4 + 3 * 4 * DIM * 4)
  hbm = hand_busiest(on_hbm, 8) + dense
  close(r['required']['hbm'], hbm)
  close(r['available']['hbm'], HBM_CAP)
  # DDR per node: what is not in HBM, split over 2 nodes.
  ddr = sum(t - h for t, h in zip(table_bytes, on_hbm)) / 2
  close(r['required']['ddr'], ddr)
  close(r['available']['ddr'], 2 * DDR_CAP)
  assert r['feasible']
  # Soft minimum of the per-tier margins 1 - required / available at
  # temperature 0.01, shifted so that two equal margins give that margin.
  m = [1 - ddr / (2 * DDR_CAP), 1 - hbm / HBM_CAP]
  t = 0.01
  soft = -t * math.log(sum(math.exp(-x / t) for x in m)) + t * math.log(2)
  close(r['margin'], soft)
  # A smaller HBM that the shards overflow: infeasible, negative margin.
  small = run(tiny_platform(hbm_capacity=0.5 * hbm), w, plan)
  assert not small['feasible'] and small['margin'] < 0
  close(small['required']['hbm'], hbm)


def test_hbm_reserve():
  # The stack keeps 25% of HBM free: 7.5 GB available per accelerator; a
  # design that needs 8 GB then overflows.
  w, plan = ddr_case()
  r = run(tiny_platform(), w, plan, tiny_stack(hbm_reserve=0.25))
  close(r['available']['hbm'], 0.75 * HBM_CAP)
  need = r['required']['hbm']
  p = tiny_platform(hbm_capacity=need / 0.8)
  assert run(p, w, plan)['feasible']
  assert not run(p, w, plan, tiny_stack(hbm_reserve=0.25))['feasible']


def _c2c(p, gbps):
  """`p` with NVLink-C2C host links of `gbps` GB/s per accelerator."""
  link = dataclasses.replace(p.host_link, kind='c2c', bandwidth=gbps * 1e9)
  return dataclasses.replace(p, host_link=link)


def test_c2c_host_link_is_not_capped_by_the_sockets_pcie():
  # Over PCIe the 4 accelerators of a node reach host memory at
  # smin(4 x 50, 2 sockets x 40 GB/s) ~ 80 GB/s; over NVLink-C2C (GH200)
  # each has its own link into its Grace: 4 x 50 = 200 GB/s, whatever the
  # sockets' PCIe lanes.
  pcie = tiny_platform()
  pcie = dataclasses.replace(
    pcie, host_link=dataclasses.replace(pcie.host_link, bandwidth=50e9)
  )
  c2c = _c2c(tiny_platform(), 50.0)
  close(ct.host_link_rate(hardware.as_arrays(pcie)), smin(4 * 50e9, 80e9))
  close(ct.host_link_rate(hardware.as_arrays(c2c)), 4 * 50e9)
  # No gradient to the sockets' PCIe lanes over C2C (finite, exactly 0).
  g = jax.grad(lambda p: ct.host_link_rate(p) / 1e9)(hardware.as_arrays(c2c))
  assert float(g.cpu.pcie_bandwidth) == 0.0
  assert np.isfinite(float(g.host_link.bandwidth)) and g.host_link.bandwidth > 0


def test_c2c_uvm_reads_and_pooled_vectors_use_the_c2c_rate():
  # The DDR case of test_embedding_ddr_host_and_socket_terms over C2C at
  # 50 GB/s per accelerator: the UVM reads (1 - c of the DDR lookups) run
  # at 2 nodes x 4 x 50 GB/s x UVM_EFF = 40 GB/s, not the PCIe-capped
  # 2 x smin(200, 80) x UVM_EFF ~ 16 GB/s, still no faster than DDR.
  w, plan = ddr_case()
  bd = run(_c2c(tiny_platform(), 50.0), w, plan)['breakdown']
  c = 0.75
  ddr_gather = 64 * DDR_LOOKUPS
  ddr_rate = 2 * 2 * DDR_BW * CPU_GATHER
  uvm_rate = 2 * 4 * 50e9 * UVM_EFF
  cpu_t = c * ddr_gather / ddr_rate
  uvm_t = (1 - c) * ddr_gather * smax(1 / uvm_rate, 1 / ddr_rate)
  close(bd['embedding_gather_ddr'], cpu_t + uvm_t)
  # The sockets' pooled vectors reach the accelerators at 4 x 50 GB/s a
  # node.
  all_hit = [0.75**1, 0.4375**2, 0.0**4]
  pooled = c * sum(B * 64 * (1 - a) for a in all_hit) / 2  # per node
  close(bd['host_transfer'], 2 * (pooled / (4 * 50e9) + HOST_LAT))
