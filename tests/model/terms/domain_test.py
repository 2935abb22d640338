"""Known answers, worked by hand, for scale-up domains larger than a host
(`Fabric.hosts_per_domain`, issue 22 item 1) and the torus fabric: the
allreduce's steps over 2 and 16 domains, GB200 NVL72's shape (72 GPUs on
18 hosts of 4) against the same GPUs as 18 ordinary nodes, the all-to-
all's intra and inter seconds, a domain of h hosts as one node of h
times the GPUs and NICs, the torus's hop count by enumeration, the
gradient of the new leaf against central differences, finite gradients
in float32 and float64, old files, the schema and the buildability
rule."""

import dataclasses
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.model import terms as ct
from codesign.model.terms import collectives as co
from codesign.search import buildability
from codesign.spec import hardware, platform_presets, schema, stack_presets
from tests.model.fixtures import tiny_platform, tiny_stack, tiny_workload
from tests.model.terms.network_test import REL, US, fabric, got, setup


def domain(p, hosts, **changes):
  """`p` with `hosts` hosts a scale-up domain (and other changes)."""
  f = dataclasses.replace(p.fabric, hosts_per_domain=float(hosts))
  return dataclasses.replace(p, fabric=f, **changes)


# ---- the allreduce's steps -------------------------------------------------


def test_ring_and_tree_over_two_domains_of_72():
  # 2 NVL72 racks: 36 hosts of 4 GPUs, 18 hosts a domain, 256 MB. NVLink
  # ring at 300 GB/s, 400 GB/s of NICs per host (18 x 400 a domain).
  b, st, fab = 256e6, setup(36, 4, hosts=18), fabric(36, hosts=18)
  algos = got(co.allreduce_algorithms(b, st, fab))
  # Ring Simple: 2 x 71/72 x 256 MB / 300 GB/s inside; 2 x 1/2 x 256 MB
  # / 7.2 TB/s across; 2 n (a - 1) = 2 x 2 x 71 = 284 NVLink steps of
  # 1 + (3.4 - 0.6) us and 2 (n - 1) = 2 network steps of 14 us; no
  # plateau (tuning.cc skips it under multi-node NVLink).
  bw_i = 2 * 71 / 72 * b / 300e9
  bw_e = b / (18 * 400e9)
  ring = (bw_i + 284 * 3.8 * US, bw_e + 2 * 14.0 * US)
  assert algos['ring_simple'] == pytest.approx(ring, rel=REL)
  # Tree Simple: 2 (a - 1) = 142 NVLink steps of 4.4 us, 2 log2(2) = 2
  # network steps of 14 us.
  tree = (bw_i / 0.92 + 142 * 4.4 * US, bw_e / 0.92 + 2 * 14.0 * US)
  assert algos['tree_simple'] == pytest.approx(tree, rel=REL)
  # The ring's steps number 2 (R - 1) = 2 x 143 = 286 in all.
  assert 284 + 2 == 2 * (72 * 2 - 1)


def test_tree_over_sixteen_domains_of_72():
  # 16 racks (288 hosts), 1 MB: the ring's 2 x 16 x 71 = 2,272 NVLink
  # steps lose to the tree's 142 and 2 log2(16) = 8 network steps.
  b, st, fab = 1e6, setup(288, 4, hosts=18), fabric(288, hosts=18)
  algos = got(co.allreduce_algorithms(b, st, fab))
  bw_i = 2 * 71 / 72 * b / 300e9
  bw_e = 2 * 15 / 16 * b / (18 * 400e9)
  ring = (bw_i + 2272 * 3.8 * US, bw_e + 30 * 14.0 * US)
  assert algos['ring_simple'] == pytest.approx(ring, rel=REL)
  tree_ll = (bw_i / 0.92 * 3.8 + 142 * 1.0 * US, bw_e / 0.92 * 3.8 + 8 * 5 * US)
  assert algos['tree_ll'] == pytest.approx(tree_ll, rel=REL)
  intra, inter = co.pick_fastest(co.allreduce_algorithms(b, st, fab))
  # 0.21 ms by the LL tree, against 8.8 ms for the Simple ring.
  assert float(intra + inter) == pytest.approx(sum(tree_ll), rel=1e-6)
  assert sum(ring) > 40 * sum(tree_ll)


def test_nvl72_against_eighteen_ordinary_nodes_step_counts():
  # The same 72 GPUs as 18 nodes of 4: the tree takes 2 x 3 = 6 NVLink
  # and 2 log2(18) = 8.34 network steps, not 142 NVLink and none; the
  # ring 2 x 18 x 3 = 108 NVLink and 2 x 17 = 34 network steps (x 1.4
  # plateau), not 142 NVLink and none.
  b = 1e6
  one = got(co.allreduce_algorithms(b, setup(18, 4, 18), fabric(18, hosts=18)))
  plain = got(co.allreduce_algorithms(b, setup(18, 4), fabric(18)))
  bw = 2 * 71 / 72 * b / 300e9
  assert one['tree_simple'] == pytest.approx((bw / 0.92 + 142 * 4.4 * US, 0))
  assert one['ring_simple'] == pytest.approx((bw + 142 * 3.8 * US, 0))
  bw_i, bw_e = 2 * 3 / 4 * b / 300e9, 2 * 17 / 18 * b / 400e9
  plateau = 1 + 0.4 * (1 - math.exp(-4 * 17))
  want = bw_e / 0.92 + 2 * math.log2(18) * 14 * US
  assert plain['tree_simple'] == pytest.approx(
    (bw_i / 0.92 + 6 * 4.4 * US, want), rel=REL
  )
  assert plain['ring_simple'] == pytest.approx(
    (bw_i + plateau * 108 * 3.8 * US, bw_e + plateau * 34 * 14 * US), rel=REL
  )


# ---- the all-to-all --------------------------------------------------------


def test_alltoall_nvl72_stays_on_the_fabric():
  # Each of 72 ranks sends 72 MB spread over all ranks. One NVL72 domain:
  # 71 MB to its domain's peers over NVLink (300 GB/s: 236.7 us), nothing
  # across the NICs (no message, no latency). 18 ordinary nodes of 4: 3
  # MB over NVLink (10 us); 68 MB across, 4 ranks' worth over a node's 400
  # GB/s of NICs (680 us), one network latency (14 us) and 4 x 17 = 68
  # posted messages (1 us each), flat.
  send = 72e6
  s = dataclasses.replace(stack_presets.get('hugectr'), alltoall='flat')
  st1, fab1 = setup(18, 4, hosts=18), fabric(18, hosts=18)
  v_intra, v_inter = ct.split_volume(send, st1)
  assert (float(v_intra), float(v_inter)) == pytest.approx((71e6, 0.0))
  intra = float(co.intra_node_seconds(v_intra, fab1))
  assert intra == pytest.approx(71e6 / 300e9, rel=REL)
  assert float(co.alltoall_inter(v_inter, 1.0, s, st1, fab1)) == 0.0
  st2, fab2 = setup(18, 4), fabric(18)
  v_intra, v_inter = ct.split_volume(send, st2)
  assert (float(v_intra), float(v_inter)) == pytest.approx((3e6, 68e6))
  intra = float(co.intra_node_seconds(v_intra, fab2))
  assert intra == pytest.approx(10 * US, rel=REL)
  several = 1 - math.exp(-4 * 17)
  want = 68e6 * 4 / 400e9 + several * 14 * US + 68 * US
  inter = float(co.alltoall_inter(v_inter, 1.0, s, st2, fab2))
  assert inter == pytest.approx(want, rel=REL)
  assert inter + intra > 2.9 * float(co.intra_node_seconds(71e6, fab1))


@pytest.mark.parametrize('kind, posts', [('flat', 72 * 3), ('hierarchical', 3)])
def test_alltoall_across_four_domains(kind, posts):
  # 4 racks (72 hosts): a rank's 1 MB to other domains leaves through its
  # own host's NICs, a host's 4 ranks over its 400 GB/s (10 us); flat:
  # one message per remote rank, 72 x 3; hierarchical: one per domain,
  # 3, after gathering 2 x 71/72 of it over NVLink.
  st, fab = setup(72, 4, hosts=18), fabric(72, hosts=18)
  s = dataclasses.replace(stack_presets.get('hugectr'), alltoall=kind)
  several = 1 - math.exp(-4 * 3)
  want = 4e6 / 400e9 + several * 14 * US + posts * US
  got_s = float(co.alltoall_inter(1e6, 1.0, s, st, fab))
  assert got_s == pytest.approx(want, rel=REL)
  extra = float(co.alltoall_extra_intra(jnp.float64(1e6), s, st))
  assert extra == pytest.approx(2 * 71 / 72 * 1e6 if kind != 'flat' else 0.0)


def test_a_domain_of_hosts_is_one_node_of_their_gpus_and_nics():
  # 4 hosts of 4 GPUs, 2 a domain, against 2 nodes of 8 GPUs with twice
  # the NICs: the same collectives, but the Simple ring's plateau (which
  # NCCL skips under multi-node NVLink).
  b = 64e6
  two = got(
    co.allreduce_algorithms(b, setup(4, 4, hosts=2), fabric(4, hosts=2))
  )
  big = got(co.allreduce_algorithms(b, setup(2, 8), fabric(2, nic=800e9)))
  for k in ('tree_simple', 'tree_ll', 'ring_ll'):
    assert two[k] == pytest.approx(big[k], rel=REL), k
  assert two['ring_simple'][0] < big['ring_simple'][0]
  s = stack_presets.get('hugectr')
  a = float(co.alltoall_inter(1e6, 1.0, s, setup(4, 4, 2), fabric(4, hosts=2)))
  b8 = float(co.alltoall_inter(1e6, 1.0, s, setup(2, 8), fabric(2, nic=800e9)))
  assert a == pytest.approx(b8, rel=REL)


def test_platform_setup_and_fabric_of_nvl72():
  # dgx_b200 as 18 hosts of 4 GPUs, one domain of 18: 72 ranks share the
  # fabric, one domain; its NICs are 18 hosts' (fab.hosts x fab.nic). A
  # domain asked larger than the cluster is the cluster.
  p = domain(
    platform_presets.get('dgx_b200'), 18, nodes=18.0, accelerators_per_node=4.0
  )
  pa = hardware.as_arrays(p)
  w, s = tiny_workload(), stack_presets.get('hugectr')
  st = ct.setup(pa, w, s)
  assert (float(st.per_node), float(st.per_domain)) == (4.0, 72.0)
  assert (float(st.ranks), float(st.domains)) == (72.0, 1.0)
  fab = ct.fabric(pa, s, st)
  assert (float(fab.domains), float(fab.hosts)) == (1.0, 18.0)
  assert float(fab.direct_share) == 1.0
  small = hardware.as_arrays(dataclasses.replace(p, nodes=9.0))
  st = ct.setup(small, w, s)
  assert (float(st.per_domain), float(st.domains)) == (36.0, 1.0)
  # A CPU trainer's domain is its host, whatever the fabric says.
  cpu = hardware.as_arrays(domain(tiny_platform(trainer='cpu', nodes=4.0), 4))
  st = ct.setup(cpu, w, tiny_stack())
  assert (float(st.per_domain), float(st.domains)) == (2.0, 4.0)


def test_planner_splits_rows_inside_one_domain():
  # The auto rule's large-table sharding: table-row-wise across domains,
  # row-wise inside one (18 hosts of one NVL72 are one domain).
  w = tiny_workload()
  base = platform_presets.get('dgx_b200')
  one = domain(base, 18, nodes=18.0, accelerators_per_node=4.0)
  plain = dataclasses.replace(base, nodes=18.0, accelerators_per_node=4.0)
  s = stack_presets.get('torchrec')
  big_w = dataclasses.replace(
    w, tables=tuple(dataclasses.replace(t, rows=10**9) for t in w.tables)
  )
  assert 'row_wise' in planner.auto_candidates(big_w, one, s, 1.0)[0]
  assert 'table_row_wise' in planner.auto_candidates(big_w, plain, s, 1.0)[0]


# ---- the torus -------------------------------------------------------------


def _torus_mean_hops(k: int, dims: int) -> float:
  """Mean minimal hops from a chip to the others, by enumeration."""
  ring = [min(i, k - i) for i in range(k)]
  total = sum(
    sum(ring[i] for i in c) for c in itertools.product(range(k), repeat=dims)
  )
  return total / (k**dims - 1)


@pytest.mark.parametrize('k', [4, 8, 16])
def test_torus_hops_by_enumeration(k):
  # TPU v4/v5p cubes: 4x4x4 (64 chips: 3 x 64/63 = 3.048 hops), 8x8x8
  # and 16x16x16; 6 links, a 3-D torus.
  n = float(k**3)
  assert float(ct.torus_hops(jnp.float64(n), 6.0)) == pytest.approx(
    _torus_mean_hops(k, 3), rel=REL
  )


def test_torus_alltoall_by_hand():
  # 4x4x4 with 6 links of 100 GB/s per direction (TPU v5p: 1,200 GB/s
  # bidirectional per chip): 600 GB/s / (3 x 64/63) = 196.875 GB/s a rank,
  # = 8 x 100 / 4 x 63/64, the bisection bound; 8x8x8: 99.80 GB/s.
  bw = ct.torus_alltoall(jnp.float64(64.0), 6.0, 100e9)
  assert float(bw) == pytest.approx(196.875e9, rel=REL)
  assert float(bw) == pytest.approx(8 * 100e9 / 4 * 63 / 64, rel=REL)
  bw = ct.torus_alltoall(jnp.float64(512.0), 6.0, 100e9)
  assert float(bw) == pytest.approx(600e9 * 511 / (6 * 512), rel=REL)


def test_torus_platform_fabric():
  # 16 hosts of 4 chips on one 4x4x4 torus: every peer over the fabric at
  # the torus rate; the ring allreduce on all 6 links (3 edge-disjoint
  # Hamiltonian cycles, both ways).
  p = tiny_platform(topology='torus', nodes=16.0, accels=4.0)
  f = dataclasses.replace(p.fabric, links_per_accelerator=6.0)
  p = domain(dataclasses.replace(p, fabric=f), 16)
  pa = hardware.as_arrays(p)
  s = tiny_stack()
  fab = ct.fabric(pa, s, ct.setup(pa, tiny_workload(), s))
  rate = float(p.fabric.link_bandwidth * p.fabric.efficiency)
  assert float(fab.direct_share) == 1.0
  assert float(fab.direct) == pytest.approx(6 * rate / (3 * 64 / 63), rel=REL)
  assert float(fab.allreduce) == pytest.approx(6 * rate, rel=REL)
  assert float(fab.domains) == 1.0


# ---- gradients -------------------------------------------------------------


@pytest.fixture(scope='module')
def step_of_domain():
  """Step seconds of the tiny DLRM on tiny 4-GPU hosts as a function of
  x = (hosts_per_domain, nodes), jitted value and gradient, per dtype."""
  w, s = tiny_workload(), tiny_stack(alltoall='hierarchical')
  base = tiny_platform(nodes=8.0, accels=4.0)
  plan = planner.make(w, base, s, placement='hbm', sharding='table_wise')

  def step(x):
    p0 = hardware.as_arrays(base, dtype=x.dtype)
    p = dataclasses.replace(
      p0,
      nodes=x[1],
      fabric=dataclasses.replace(p0.fabric, hosts_per_domain=x[0]),
    )
    return cost_model.evaluate(p, w, plan, s).step_time

  return jax.jit(step), jax.jit(jax.value_and_grad(step))


def test_hosts_per_domain_gradient_matches_central_differences(step_of_domain):
  step, vg = step_of_domain
  for hosts, nodes in ((2.5, 8.0), (4.0, 16.0), (6.0, 8.0)):
    x = jnp.array([hosts, nodes], jnp.float64)
    _, g = vg(x)
    g = np.asarray(g)
    h = 1e-5 * hosts
    fd = (float(step(x.at[0].add(h))) - float(step(x.at[0].add(-h)))) / (2 * h)
    assert g[0] == pytest.approx(fd, rel=1e-5), (hosts, nodes)
    assert g[0] != 0.0


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.float64])
def test_gradients_finite_with_large_domains(step_of_domain, dtype):
  _, vg = step_of_domain
  rng = np.random.default_rng(22)
  for _ in range(12):
    nodes = float(np.exp(rng.uniform(0.0, np.log(1024.0))))
    hosts = float(np.exp(rng.uniform(0.0, np.log(1024.0))))  # may exceed
    v, g = vg(jnp.array([hosts, nodes], dtype))
    assert np.isfinite(float(v)) and float(v) > 0.0
    assert np.all(np.isfinite(np.asarray(g))), (hosts, nodes)


# ---- inputs and rules ------------------------------------------------------


def test_old_files_load_with_a_domain_of_one_node():
  d = schema.platform_to_json(platform_presets.get('dgx_h100'))
  assert d['fabric']['hosts_per_domain'] == 1.0
  del d['fabric']['hosts_per_domain']
  p = schema.platform_from_json(d)
  assert float(p.fabric.hosts_per_domain) == 1.0
  rows = {e['key']: e for e in schema.schema_description()['platform']}
  e = rows['platform.fabric.hosts_per_domain']
  assert e['default'] == '1.0' and 'NVL72' in e['doc'] and 'v5p' in e['doc']
  assert 'torus' in rows['platform.fabric.topology']['choices']


def test_buildability_counts_the_domain():
  # B200-HGX's NVSwitch holds 8 GPUs: 18 hosts of 4 on it are 72, not a
  # board that exists (a GB200 part would bring its 72); a domain of 3
  # hosts on 2 nodes is no whole number of hosts of the cluster.
  base = platform_presets.get('dgx_b200')
  p = domain(base, 18, nodes=18.0, accelerators_per_node=4.0)
  rules = dict(buildability.violations(p))
  assert (
    '72 B200-HGX per domain of 18 hosts exceed the 8' in rules['fabric_domain']
  )
  rules = dict(buildability.violations(domain(base, 3, nodes=2.0)))
  assert 'not whole hosts' in rules['fabric_domain']
  assert 'fabric_domain' not in dict(buildability.violations(base))
