"""Known answers for the collectives as NCCL runs them
(`codesign.model.terms.collectives`), worked by hand from NCCL's tuning model
(src/graph/tuning.cc): the allreduce by ring, tree, SHARP and NVLS on 2
and 16 nodes, the all-to-all's concurrent sends (flat and hierarchical),
the NIC bounded by its slot and the GPU's host link, the switch tiers
and oversubscription; and the new platform leaves' gradients against
central differences (float64)."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model import cost_model, planner
from codesign.model import terms as ct
from codesign.model.terms import collectives as co
from codesign.spec import (
  hardware,
  platform_presets,
  stack_presets,
  workload_presets,
)
from tests.model.fixtures import choose

REL = 1e-10
US = 1e-6


def setup(nodes, a, hosts=1):
  """`nodes` hosts of `a` ranks, `hosts` of them to a scale-up domain."""
  r = float(nodes * a)
  one = jnp.float64(1.0)
  return ct.Setup(
    ranks=r * one,
    per_node=a * one,
    per_domain=a * hosts * one,
    domains=nodes / hosts * one,
    batch=1024.0,
    local=1024.0 / r * one,
    table_ranks=r * one,
    bottom_batch=1024.0 / r * one,
    one_device=False,
    dedicated=0.0 * one,
    cpu_trainer=False,
  )


def fabric(
  nodes, ar=300e9, nic=400e9, alpha=1 * US, net=2.7 * US, hosts=1, **kw
):
  """`nodes` hosts, `hosts` of them to a domain; `nic` per host."""
  one = jnp.float64(1.0)
  f = dict(
    direct=ar * one,
    direct_share=one,
    relay=50e9 * one,
    allreduce=ar * one,
    alpha=alpha * one,
    nic=nic * one,
    nic_alpha=net * one,
    post=1 * US * one,
    domains=float(nodes) / hosts * one,
    hosts=float(hosts) * one,
    in_network=0.0,
    nvls=0.0,
  )
  f.update(kw)
  return co.Fabric(**f)


def got(pairs):
  return {k: (float(i), float(e)) for k, (i, e) in pairs.items()}


def test_ring_on_two_nodes_large_message():
  # 2 nodes x 8 GPUs, 256 MB: NVLink ring at 300 GB/s, 400 GB/s of NICs
  # per node, 1 us NVLink and 2.7 us network latency.
  b, st, fab = 256e6, setup(2, 8), fabric(2)
  algos = got(co.allreduce_algorithms(b, st, fab))
  several = 1 - math.exp(-4)
  plateau = 1 + 0.4 * several  # inter-node Simple rings x 1.4
  # Ring Simple: 2 x 7/8 x 256 MB / 300 GB/s = 1.493 ms inside, 2 x 1/2 x
  # 256 MB / 400 GB/s = 0.64 ms across; 2 n (a - 1) = 28 NVLink steps of
  # 1 + (3.4 - 0.6) us, 2 (n - 1) = 2 network steps of 2.7 + (14 - 2.7) us.
  ring = (
    1.4933333333333333e-3 + plateau * 28 * 3.8 * US,
    0.64e-3 + plateau * 2 * 14.0 * US,
  )
  assert algos['ring_simple'] == pytest.approx(ring, rel=REL)
  # Tree Simple: the same bytes at 0.92 of the bus bandwidth; 2 (a - 1) =
  # 14 NVLink steps of 1 + 3.4 us, 2 log2(2) = 2 network steps of 14 us.
  tree = (
    1.4933333333333333e-3 / 0.92 + 14 * 4.4 * US,
    0.64e-3 / 0.92 + 28 * US,
  )
  assert algos['tree_simple'] == pytest.approx(tree, rel=REL)
  # LL: half the ring's bandwidth, 1 / 3.8 of the tree's; no plateau.
  ll = (2 * 1.4933333333333333e-3 + 28 * US, 2 * 0.64e-3 + 2 * 2.7 * US)
  assert algos['ring_ll'] == pytest.approx(ll, rel=REL)
  # The ring wins, 2.3205 ms against 2.4085 ms of the tree: the p-norm
  # minimum, (2.3205^-32 + 2.4085^-32)^(-1/32) ms = 2.3013 ms (the LL
  # options add nothing), is 0.8% below the ring, split as the ring
  # (weight 1) and the tree (weight (2.3205 / 2.4085)^32 = 0.304) split.
  assert sum(ring) == pytest.approx(2.3205e-3, rel=1e-4)
  assert sum(tree) == pytest.approx(2.4085e-3, rel=1e-4)
  intra, inter = co.pick_fastest(co.allreduce_algorithms(b, st, fab))
  want = choose(algos)
  assert (float(intra), float(inter)) == pytest.approx(want, rel=REL)
  assert sum(want) == pytest.approx(2.3013e-3, rel=1e-4)


def test_tree_on_sixteen_nodes_small_message():
  # 16 nodes x 8 GPUs, 1 MB: the ring's 2 x 127 steps cost far more than
  # the tree's 2 x 7 NVLink and 2 x log2(16) = 8 network steps.
  b, st, fab = 1e6, setup(16, 8), fabric(16)
  algos = got(co.allreduce_algorithms(b, st, fab))
  several = 1 - math.exp(-4 * 15)
  plateau = 1 + 0.4 * several
  bw_i = 2 * 7 / 8 * 1e6 / 300e9  # 5.833 us
  bw_e = 2 * 15 / 16 * 1e6 / 400e9  # 4.6875 us
  ring = (bw_i + plateau * 2 * 16 * 7 * 3.8 * US, bw_e + plateau * 30 * 14 * US)
  assert algos['ring_simple'] == pytest.approx(ring, rel=REL)
  tree = (bw_i / 0.92 + 14 * 4.4 * US, bw_e / 0.92 + 8 * 14 * US)
  assert algos['tree_simple'] == pytest.approx(tree, rel=REL)
  # Tree LL: 1/3.8 of the tree's bandwidth, 0.6 - 0.6 us NVLink and
  # 5.0 - 2.7 us network overhead per step.
  tree_ll = (
    bw_i / 0.92 * 3.8 + 14 * 1 * US,
    bw_e / 0.92 * 3.8 + 8 * 5.0 * US,
  )
  assert algos['tree_ll'] == pytest.approx(tree_ll, rel=REL)
  # 0.19 ms for the tree (LL), 2.13 ms for the ring: the tree is chosen.
  intra, inter = co.pick_fastest(co.allreduce_algorithms(b, st, fab))
  assert float(intra + inter) == pytest.approx(sum(tree_ll), rel=2e-3)
  assert (float(intra), float(inter)) == pytest.approx(choose(algos), rel=REL)
  assert sum(ring) > 10 * sum(tree_ll)


def test_sharp_halves_the_network_bytes():
  # With SHARP (CollNet Direct) each node's bytes cross its NICs once each
  # way at 0.85 of the bus bandwidth; 2 (3.7 - 0.6 + 1 us + 7 x 0.4 us)
  # inside the node, one network step of 2.7 + (31 - 2.7) us.
  b, st = 256e6, setup(16, 8)
  fab = fabric(16, in_network=1.0)
  algos = got(co.allreduce_algorithms(b, st, fab))
  several = 1 - math.exp(-4 * 15)
  collnet = (
    2 * 7 / 8 * b / 300e9 + 2 * (4.1 + 7 * 0.4) * US,
    several * (b / (0.85 * 400e9) + 31 * US),
  )
  assert algos['collnet'] == pytest.approx(collnet, rel=REL)
  without = co.pick_fastest(co.allreduce_algorithms(b, st, fabric(16)))
  with_sharp = co.pick_fastest(co.allreduce_algorithms(b, st, fab))
  assert float(with_sharp[1]) < 0.65 * float(without[1])


def test_nvls_inside_the_node():
  # NVLS: the NVSwitch reduces, 2 x 0.85 the ring's rate inside the node,
  # one NVLink step of 1 + (25 - 0.6) us; on one node nothing crosses.
  b, st = 64e6, setup(1, 8)
  fab = fabric(1, nvls=1.0)
  algos = got(co.allreduce_algorithms(b, st, fab))
  ring_i = 2 * 7 / 8 * b / 300e9
  assert algos['nvls'] == pytest.approx((ring_i / 1.7 + 25.4 * US, 0.0))
  intra, inter = co.pick_fastest(co.allreduce_algorithms(b, st, fab))
  assert float(inter) == 0.0
  assert float(intra) == pytest.approx(ring_i / 1.7 + 25.4 * US, rel=1e-3)


@pytest.mark.parametrize(
  'nodes, kind, posts',
  [
    (2, 'flat', 8),
    (16, 'flat', 120),
    (2, 'hierarchical', 1),
    (16, 'hierarchical', 15),
  ],
)
def test_alltoall_posts_every_send_at_once(nodes, kind, posts):
  # One call: the node's 8 ranks send v = 1 MB each across its 400 GB/s
  # of NICs, one network latency at NCCL's Simple overhead (14 us) and
  # 1 us per posted message: a (n - 1) flat, n - 1 hierarchical.
  st, fab = setup(nodes, 8), fabric(nodes)
  s = dataclasses.replace(stack_presets.get('hugectr'), alltoall=kind)
  several = 1 - math.exp(-4 * (nodes - 1))
  want = 8e6 / 400e9 + several * 14 * US + posts * US
  assert float(co.alltoall_inter(1e6, 1.0, s, st, fab)) == pytest.approx(
    want, rel=REL
  )
  # Not (n - 1) x a latency per peer: flat on 16 nodes, 20 + 14 + 120 us.
  # Hierarchical: the gather and the scatter on NVLink, 2 x 7/8 of v.
  extra = float(co.alltoall_extra_intra(jnp.float64(1e6), s, st))
  assert extra == pytest.approx(2 * 7 / 8 * 1e6 if posts < nodes else 0.0)


def test_oneccl_allreduce_on_two_nodes_by_hand():
  """oneCCL (CPU trainer, 2 sockets per node, 2 nodes): 64 MB by the ring
  (16M fp32 elements, above 1,048,576), 16 KB (4,096 elements) by
  recursive doubling, 1 MB (262,144 elements) star-like. Socket link 40
  GB/s at 2 us, NICs 25 GB/s per node at 2.7 us, 1 us per post."""
  st = setup(2, 2)
  fab = fabric(2, ar=40e9, nic=25e9, alpha=2 * US)
  algos = got(co.oneccl_algorithms(64e6, st, fab))
  # Ring: 2 x 1/2 x 64 MB / 40 GB/s + 2 x 2 x 1 steps of 2 us inside;
  # 2 x 1/2 x 64 MB / 25 GB/s + 2 x 1 steps of (2.7 + 1) us across.
  ring = (1.6e-3 + 4 * 2 * US, 2.56e-3 + 2 * 3.7 * US)
  assert algos['ring'] == pytest.approx(ring, rel=REL)
  # Recursive doubling, 16 KB: log2 2 = 1 step inside (2 us + 16 KB / 40
  # GB/s) and 1 across, both sockets' 16 KB through the NICs.
  rd = got(co.oneccl_algorithms(16384.0, st, fab))['recursive_doubling']
  assert rd == pytest.approx(
    (2 * US + 16384 / 40e9, 3.7 * US + 2 * 16384 / 25e9), rel=REL
  )
  # Star-like, 1 MB over R = 4 ranks: inside, 2 x (1/4 MB / 40 GB/s + 2
  # us); across, 2 x (2 sockets x 1/2 MB / 25 GB/s + 2.7 us) and 2 x 2
  # remote posts of 1 us.
  star = got(co.oneccl_algorithms(1e6, st, fab))['starlike']
  several = 1 - math.exp(-4)
  want = (
    2 * (0.25e6 / 40e9 + 2 * US),
    2 * (2 * 0.5e6 / 25e9 + several * 2.7 * US) + 4 * US,
  )
  assert star == pytest.approx(want, rel=REL)
  # The size table: each size gets its algorithm (16M and 1,024 elements,
  # 16 and 8 times past a threshold: the others weigh below 1e-7).
  for b, name in ((64e6, 'ring'), (4096.0, 'recursive_doubling')):
    pairs = co.oneccl_algorithms(b, st, fab)
    picked = co.oneccl_pick(pairs, b / 4.0)
    assert tuple(map(float, picked)) == pytest.approx(
      got(pairs)[name], rel=1e-6
    )


def test_oneccl_ring_on_sixteen_nodes_by_hand():
  """16 nodes x 2 sockets, 64 MB by the ring: 2 x 15/16 of it across each
  node's NICs and 2 x 15 network steps; recursive doubling would take
  log2 16 = 4 network steps with both sockets' whole message each."""
  st, fab = setup(16, 2), fabric(16, ar=40e9, nic=25e9, alpha=2 * US)
  algos = got(co.oneccl_algorithms(64e6, st, fab))
  ring = (1.6e-3 + 2 * 16 * 2 * US, 2 * 15 / 16 * 64e6 / 25e9 + 30 * 3.7 * US)
  assert algos['ring'] == pytest.approx(ring, rel=REL)
  rd = (2 * US + 64e6 / 40e9, 4 * (3.7 * US + 2 * 64e6 / 25e9))
  assert algos['recursive_doubling'] == pytest.approx(rd, rel=REL)


def test_oneccl_alltoall_has_no_nccl_protocol_overhead():
  """The CPU stack's all-to-all (oneCCL scatter) waits one network
  latency and its posts, without NCCL's Simple protocol overhead."""
  st, fab = setup(16, 2), fabric(16)
  s = stack_presets.get('ipex_cpu')
  assert s.collective_library == 'oneccl'
  several = 1 - math.exp(-4 * 15)
  want = 2e6 / 400e9 + several * 2.7 * US + 2 * 15 * US
  assert float(co.alltoall_inter(1e6, 1.0, s, st, fab)) == pytest.approx(
    want, rel=REL
  )


def node(nodes=2.0, **nic_changes):
  p = platform_presets.get('dgx_h100')
  p = dataclasses.replace(
    p, nodes=float(nodes), nic=dataclasses.replace(p.nic, **nic_changes)
  )
  return hardware.as_arrays(p)


def smin(*xs):
  return 1.0 / sum((1.0 / x) ** 8 for x in xs) ** (1 / 8)


def test_nic_bounded_by_slot_and_host_link():
  # 8 x 800 Gb/s at 0.9 would be 720 GB/s; a Gen5 x16 slot carries 63
  # GB/s, the H100's own Gen5 x16 link 63 GB/s: about 8 x 63 / 2^(1/8).
  p = node(bandwidth=100e9)
  rate = float(co.nic_rate(p, False))
  assert rate == pytest.approx(smin(smin(720e9, 8 * 63e9), 8 * 63e9), rel=REL)
  assert rate < 8 * 63e9
  # The DGX H100 as built: 8 x 400 Gb/s x 0.9 = 360 GB/s, the bounds
  # above it (504 GB/s each) cost it 2%.
  p = node()
  assert float(co.nic_rate(p, False)) == pytest.approx(
    smin(smin(360e9, 504e9), 504e9), rel=REL
  )


def test_switch_tiers_and_oversubscription():
  # Radix 64: a leaf serves 32 nodes; 1024 nodes take log_32(1024) = 2
  # tiers, 2 more switch traversals of 0.24 us each per message.
  p = node(nodes=1024.0)
  tiers = float(co.switch_tiers(p))
  assert tiers == pytest.approx((1 + 2.0**16) ** (1 / 16), rel=REL)
  assert float(co.network_latency(p)) == pytest.approx(
    2.7 * US + 2 * (tiers - 1) * 0.24 * US, rel=REL
  )
  # 2:1 oversubscribed leaves: 1 - 32/1024 of the peers sit beyond the
  # leaf, so the NICs move 1 / (1 + 1 x 0.96875) of their rate.
  full = float(co.nic_rate(node(nodes=1024.0), False))
  over = float(co.nic_rate(node(nodes=1024.0, oversubscription=2.0), False))
  assert over == pytest.approx(full / (1 + 0.96875), rel=REL)
  # Within one leaf nothing changes.
  assert float(
    co.nic_rate(node(nodes=16.0, oversubscription=2.0), False)
  ) == pytest.approx(float(co.nic_rate(node(nodes=16.0), False)), rel=REL)


def test_one_node_pays_no_network_latency():
  st, fab = setup(1, 8), fabric(1)
  s = stack_presets.get('hugectr')
  assert float(co.alltoall_inter(0.0, 3.0, s, st, fab)) == 0.0
  _, inter = co.pick_fastest(co.allreduce_algorithms(1e6, st, fab))
  assert float(inter) == 0.0


NEW_LEAVES = (
  'latency',
  'slot_bandwidth',
  'post_overhead',
  'switch_latency',
  'switch_radix',
  'oversubscription',
)


@pytest.fixture(scope='module')
def step_of_nic():
  w = workload_presets.get('mlperf_dlrm_v1')
  w = dataclasses.replace(w, global_batch=65536)
  s = stack_presets.get('hugectr')
  base = platform_presets.get('dgx_h100')
  # 64 nodes on 2:1 leaves, 800 Gb/s NICs in Gen5 slots: every new leaf
  # moves the step.
  base = dataclasses.replace(
    base,
    nodes=64.0,
    nic=dataclasses.replace(base.nic, bandwidth=100e9, oversubscription=2.0),
  )
  plan = planner.make(w, base, s, placement='hbm', sharding='table_wise')
  p0 = hardware.as_arrays(base)

  @jax.jit
  def step(x):
    nic = dataclasses.replace(
      p0.nic, **{k: x[i] for i, k in enumerate(NEW_LEAVES)}
    )
    p = dataclasses.replace(p0, nic=nic)
    return cost_model.evaluate(p, w, plan, s).step_time

  x0 = jnp.array([float(getattr(base.nic, k)) for k in NEW_LEAVES])
  return step, x0


def test_new_leaves_gradients_match_central_differences(step_of_nic):
  step, x0 = step_of_nic
  g = np.asarray(jax.grad(step)(x0))
  assert np.all(np.isfinite(g))
  for i, k in enumerate(NEW_LEAVES):
    h = 1e-4 * float(x0[i])
    e = jnp.zeros_like(x0).at[i].set(h)
    fd = (float(step(x0 + e)) - float(step(x0 - e))) / (2 * h)
    assert g[i] == pytest.approx(fd, rel=1e-5, abs=1e-12 / h), k
    assert g[i] != 0.0, k


def test_gradients_finite_across_the_bounds(step_of_nic):
  step, x0 = step_of_nic
  rng = np.random.default_rng(0)
  lo = np.array([hardware.BOUNDS['nic.' + k][0] for k in NEW_LEAVES])
  hi = np.array([hardware.BOUNDS['nic.' + k][1] for k in NEW_LEAVES])
  grad = jax.jit(jax.grad(step))
  for _ in range(20):
    u = rng.uniform(size=len(NEW_LEAVES))
    x = jnp.asarray(lo * (hi / lo) ** u)
    assert np.isfinite(float(step(x)))
    assert np.all(np.isfinite(np.asarray(grad(x))))


def test_files_written_before_the_network_fields_still_load():
  # A platform and a stack without the new keys (an older run's
  # config.json) load with the defaults: a Gen5 x16 slot, 1 us per post,
  # no SHARP or NVLS, flat all-to-alls.
  from codesign.spec import schema

  d = schema.platform_to_json(platform_presets.get('dgx_a100_80gb'))
  new = (
    'slot_bandwidth_gb_per_s',
    'post_overhead_us',
    'switch_latency_us',
    'switch_radix',
    'oversubscription',
    'in_network_reduction',
  )
  for k in new:
    del d['nic'][k]
  del d['fabric']['in_switch_reduction']
  p = schema.platform_from_json(d)
  assert float(p.nic.slot_bandwidth) == 63e9
  assert float(p.nic.post_overhead) == 1e-6
  assert not p.nic.in_network_reduction and not p.fabric.in_switch_reduction
  s = schema.stack_to_json(stack_presets.get('hugectr'))
  del s['alltoall']
  del s['allreduce_precision']
  old = schema.stack_from_json(s)
  assert old.alltoall == 'flat' and old.allreduce_precision == 'fp32'


def test_hugectr_reduces_its_mixed_precision_gradients_in_fp16():
  # HugeCTR's allreduce of a mixed-precision model runs on __half
  # (stack_presets source); an fp32 model, and TorchRec's DDP on fp32
  # parameters, reduce 4 bytes an element. A plan's narrower comm
  # precision (quantized communication) still wins.
  from codesign.spec import workload_presets

  hugectr = stack_presets.get('hugectr')
  assert 'AllReduceInPlaceComm' in dict(hugectr.sources)['allreduce_precision']
  mixed = workload_presets.get('mlperf_dlrm_v1')
  fp32 = dataclasses.replace(mixed, dense_precision='fp32')
  p = platform_presets.get('dgx_a100_80gb')
  plan = planner.make(mixed, p, hugectr)
  assert ct.allreduce_elem_bytes(mixed, hugectr, plan) == 2.0
  assert ct.allreduce_elem_bytes(fp32, hugectr, plan) == 4.0
  torchrec = stack_presets.get('torchrec')
  assert ct.allreduce_elem_bytes(mixed, torchrec, plan) == 4.0
  fp8 = dataclasses.replace(plan, comm_precision='fp8')
  assert ct.allreduce_elem_bytes(mixed, hugectr, fp8) == 1.0
  # Half the bytes, and the step's allreduce shrinks with them.
  r16 = cost_model.evaluate(hardware.as_arrays(p), mixed, plan, hugectr)
  r32 = cost_model.evaluate(
    hardware.as_arrays(p),
    mixed,
    plan,
    dataclasses.replace(hugectr, allreduce_precision='fp32'),
  )
  ar16 = float(r16.breakdown['allreduce_intra'])
  ar32 = float(r32.breakdown['allreduce_intra'])
  assert 0.4 * ar32 < ar16 < 0.75 * ar32
