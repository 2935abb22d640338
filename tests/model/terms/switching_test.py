"""Known answers for the scale-out network as built and billed
(`codesign.model.terms.switching`): the fat tree's switches per tier and
links for 2, 9, 16, 17, 33, 128 and 1,024 nodes of 8 rails of 64-port
switches, worked by hand; the same counts from an integer construction tier by
tier at every node count of a grid; whole counts at whole nodes and
continuous between; finite gradients inside the bounds (float32 and
float64); the bill's USD and W at the preset prices."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.core.pytree import replace
from codesign.model import report, terms
from codesign.model.terms import switching as sw
from codesign.spec import hardware, platform_presets


def by_hand(nodes: int, rails: int, k: int) -> tuple[list[int], int]:
  """(switches per tier bottom up, links) of a full-bisection fat tree,
  built tier by tier with integers: the NICs packed onto leaves of k/2
  down ports, one uplink per used down port at every tier."""
  if nodes == 1:
    return [], 0
  endpoints = nodes * rails
  if endpoints <= k:
    return [1], endpoints
  leaves = math.ceil(endpoints / (k // 2))
  tiers, links, up = [leaves], endpoints, endpoints
  reach = k  # leaves the tiers above reach
  while leaves > reach:  # a middle tier: k/2 down, k/2 up per switch
    tiers.append(math.ceil(up / (k // 2)))
    links += up
    reach *= k // 2
  tiers.append(math.ceil(up / k))  # the top: k down
  return tiers, links + up


# (nodes, rails, radix): switches per tier, links; by hand:
# - 2 x 8 = 16 NICs fit one 64-port switch: 16 links;
# - 9 x 8 = 72 NICs: 3 leaves of 32 down ports (32, 32, 8 used), 72
#   uplinks to 2 spines (72 / 64): 5 switches, 72 + 72 links (not 8 rail
#   leaves buying 32 uplinks each: 12 switches, 328 links);
# - 16 x 8 = 128 NICs: 4 leaves + 2 spines; 128 + 128 links;
# - 17 x 8 = 136 NICs: 5 leaves (the last with 8 NICs) + 3 spines (136 /
#   64); 136 + 136 links;
# - 33 x 8 = 264 NICs: 9 leaves + 5 spines (264 / 64); 264 + 264 links;
# - 128 x 8: 32 leaves, 1,024 / 64 = 16 spines; 1,024 + 1,024 links (the
#   1,024-GPU NDR tree of 32 leaves + 16 spines);
# - 1,024 x 8: 256 leaves > 64 a two-tier tree reaches: a middle tier of
#   8,192 / 32 = 256, a top of 8,192 / 64 = 128 (640 = 5 x 8,192 / 64);
#   8,192 + 8,192 + 8,192 links.
KNOWN = {
  (2, 8, 64): ([1], 16),
  (9, 8, 64): ([3, 2], 144),
  (16, 8, 64): ([4, 2], 256),
  (17, 8, 64): ([5, 3], 272),
  (33, 8, 64): ([9, 5], 528),
  (128, 8, 64): ([32, 16], 2048),
  (1024, 8, 64): ([256, 256, 128], 24576),
}


@pytest.mark.parametrize('case', list(KNOWN))
def test_known_trees(case):
  tiers, links = KNOWN[case]
  assert by_hand(*case) == (tiers, links)
  t = sw.fat_tree(*(float(x) for x in case), 1.0)
  assert [c for _, c in sw.tiers_listing(t)] == tiers
  assert float(t['switches']) == sum(tiers)
  assert float(t['links']) == links
  assert float(t['tiers']) == len(tiers)


def test_one_node_has_no_network():
  t = sw.fat_tree(1.0, 8.0, 64.0, 1.0)
  assert all(float(v) == 0.0 for v in t.values())
  assert sw.tiers_listing(t) == []


def test_integer_construction_at_every_grid_point():
  """numpy (the report) and jax (the search, jitted, float32) give the
  integer construction's counts at whole nodes, rails and radices."""
  nodes = np.arange(1, 1025, dtype=np.float64)
  traced = jax.jit(jax.vmap(sw.fat_tree, in_axes=(0, None, None, None)))
  for rails, k in ((1, 64), (8, 64), (16, 36), (4, 40), (2, 4)):
    got = sw.fat_tree(nodes, float(rails), float(k), 1.0)
    jgot = traced(jnp.asarray(nodes, jnp.float32), rails * 1.0, k * 1.0, 1.0)
    for n in (1, 2, 3, 17, 18, 19, 33, 64, 100, 648, 649, 1000, 1024):
      tiers, links = by_hand(n, rails, k)
      for t in (got, jgot):
        assert float(t['switches'][n - 1]) == sum(tiers), (n, rails, k)
        assert float(t['links'][n - 1]) == links, (n, rails, k)
        assert float(t['tiers'][n - 1]) == len(tiers), (n, rails, k)


def test_continuous_between_whole_node_counts():
  """A ramp over one NIC past each multiple of the leaf's down ports:
  32 1/16 nodes of 8 rails (256.5 NICs) sit halfway between 32 (8 leaves
  + 4 spines) and 33 (9 + 5), which the 257th NIC makes."""
  t = sw.fat_tree(np.array([32.0, 32.0 + 1 / 16, 33.0]), 8.0, 64.0, 1.0)
  np.testing.assert_allclose(t['switches'], [12.0, 13.0, 14.0])
  # No jump where the tree gains a tier (one switch to two tiers at 8
  # nodes, two to three at 256): the largest move between neighbouring
  # points shrinks with their distance (steep, about 8,500 switches per
  # node over 1/256 node, but continuous).
  for lo in (7.5, 255.5):
    moves = []
    for points in (20001, 200001):
      x = np.linspace(lo, lo + 2.0, points)
      s = sw.fat_tree(x, 8.0, 64.0, 1.0)['switches']
      moves.append(np.max(np.abs(np.diff(s))))
    assert moves[1] < 0.15 * moves[0] and moves[1] < 0.1, moves


def test_oversubscription_thins_the_upper_tiers():
  """3:1 leaves (48 of 64 ports down) for 1,024 x 8 = 8,192 NICs: 171
  leaves > 64, 8,192 / 3 = 2,730.7 uplinks: one middle tier of 2,730.7 /
  32 = 86, a top of 2,730.7 / 64 = 43."""
  t = sw.fat_tree(1024.0, 8.0, 64.0, 3.0)
  assert [c for _, c in sw.tiers_listing(t)] == [171, 86, 43]
  assert float(t['links']) == pytest.approx(8192 + 2 * 8192 / 3, rel=1e-12)


def test_one_more_node_buys_its_own_share_once_two_tiers_stand():
  """Once the tree has its two tiers, a node more adds its NICs' leaf
  ports and uplinks, not a leaf's worth of unused uplinks: 9 to 10 nodes
  of 8 NICs add 16 links and no switch; 16 to 17 add 16 links, one leaf
  and one spine (the 129th NIC opens them). From 8 nodes (64 NICs: one
  64-port switch) to 9 the second tier is bought: 4 switches."""
  t = sw.fat_tree(np.arange(8.0, 18.0), 8.0, 64.0, 1.0)
  links = np.diff(t['links'])
  assert links[1] == 16.0 and np.all(links[1:] == 16.0)
  assert float(t['switches'][2] - t['switches'][1]) == 0.0
  assert float(t['switches'][1] - t['switches'][0]) == 4.0


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.float64])
def test_gradients_finite_inside_the_bounds(dtype):
  lo = np.array([hardware.BOUNDS[k][0] for k in KEYS])
  hi = np.array([hardware.BOUNDS[k][1] for k in KEYS])
  x = np.random.default_rng(0).uniform(lo, hi, size=(1000, len(KEYS)))
  with jax.enable_x64(dtype == jnp.float64):

    def f(v):
      t = sw.fat_tree(*v)
      return t['switches'] + t['links'] + t['tiers']

    v, g = jax.jit(jax.vmap(jax.value_and_grad(f)))(jnp.asarray(x, dtype))
    assert g.dtype == dtype
  assert np.all(np.isfinite(v)) and np.all(np.isfinite(g))


KEYS = ('nodes', 'nic.count', 'nic.switch_radix', 'nic.oversubscription')


def test_the_bill_at_the_preset_prices():
  """16 DGX H100 (8 x 400 Gb/s NICs each): 6 switches of 64 ports at
  36,000 USD, 256 links at 1,000 USD, 128 NICs at 2,000 USD; W: 6 x 750
  + 256 x 17 + 128 x 25. The cost model's capex is the nodes' plus it."""
  p = replace(platform_presets.get('dgx_h100'), nodes=16.0)
  bill = terms.network_bill(p)
  assert bill['switch_usd'] == pytest.approx(6 * 36000.0, rel=1e-12)
  assert bill['link_usd'] == pytest.approx(256 * 1000.0, rel=1e-12)
  assert bill['nic_usd'] == pytest.approx(128 * 2000.0, rel=1e-12)
  assert bill['w'] == pytest.approx(6 * 750 + 256 * 17 + 128 * 25, rel=1e-12)
  b = report.capex_breakdown(p)
  assert b['network']['switches_by_tier'] == {'leaf': 4, 'top': 2}
  usd, w = terms.capex_and_power(p)
  assert float(usd) == pytest.approx(b['total_usd'], rel=1e-12)
  assert float(w) == pytest.approx(b['total_w'], rel=1e-12)
  line = report.capex_line(b)
  assert '4 leaf + 2 top' in line and '256 links' in line
  # The nodes' NVSwitch baseboards: 16 x 8 H100 x 18 NVLink4 links x 25
  # GB/s at 5 USD per GB/s = 288,000 USD, inside the nodes' capex.
  assert b['fabric_usd'] == pytest.approx(16 * 8 * 18 * 25 * 5.0, rel=1e-12)
  assert 'accelerator fabric $288,000' in line


def test_capex_gradient_matches_central_differences():
  """jax.grad of the cost model's capex with respect to the network's new
  leaves (and the node count between whole counts, on a ramp) equals
  central differences (float64)."""
  p = replace(platform_presets.get('dgx_h100'), nodes=16.0)
  paths = (
    'nic.switch_port_price',
    'nic.switch_port_power',
    'nic.link_price',
    'nic.link_power',
    'nodes',
  )
  with jax.enable_x64(True):
    base = hardware.as_arrays(p, jnp.float64)
    x0 = jnp.array([float(hardware.get_value(p, k)) for k in paths])
    # Halfway up the 129th NIC's ramp (16 1/16 nodes of 8 NICs).
    x0 = x0.at[-1].set(16.0 + 1 / 16)

    def capex_w(x):
      q = base
      for k, v in zip(paths, x, strict=True):
        q = hardware.with_value(q, k, v)
      usd, w = terms.capex_and_power(q)
      return usd + w

    g = jax.jit(jax.grad(capex_w))(x0)
    h = 1e-3 * x0
    e = jnp.diag(h)
    value = jax.jit(jax.vmap(capex_w))
    fd = (value(x0 + e) - value(x0 - e)) / (2 * h)
    for i, path in enumerate(paths):
      assert float(g[i]) == pytest.approx(float(fd[i]), rel=1e-6), path
