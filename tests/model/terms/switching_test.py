"""Known answers for the scale-out network as built and billed
(`codesign.model.terms.switching`): the fat tree's switches per tier and
links for 2, 16, 128 and 1,024 nodes of 8 rails of 64-port switches,
worked by hand; the same counts from an integer construction tier by
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
  built tier by tier with integers."""
  if nodes == 1:
    return [], 0
  endpoints = nodes * rails
  if endpoints <= k:
    return [1], endpoints
  leaves = rails * math.ceil(nodes / (k // 2))
  tiers, links, up = [leaves], endpoints, leaves * (k // 2)
  reach = k  # leaves the tiers above reach
  while leaves > reach:  # a middle tier: k/2 down, k/2 up per switch
    middle = math.ceil(up / (k // 2))
    tiers.append(middle)
    links += up
    up = middle * (k // 2)
    reach *= k // 2
  tiers.append(math.ceil(up / k))  # the top: k down
  return tiers, links + up


# (nodes, rails, radix): switches per tier, links; by hand:
# - 2 x 8 = 16 NICs fit one 64-port switch: 16 links;
# - 16 x 8 = 128 NICs: 8 leaves (one per rail, 16 of 32 down ports
#   used) + 8 x 32 uplinks / 64 = 4 spines; 128 + 256 links (DGX
#   SuperPOD scalable unit: 8 leaves, 4 spines);
# - 128 x 8: 8 x 4 = 32 leaves, 32 x 32 / 64 = 16 spines; 1,024 + 1,024
#   links (the 1,024-GPU NDR tree of 32 leaves + 16 spines);
# - 1,024 x 8: 8 x 32 = 256 leaves > 64 a two-tier tree reaches: a
#   middle tier of 256 x 32 / 32 = 256, a top of 256 x 32 / 64 = 128
#   (640 = 5 x 8,192 / 64); 8,192 + 8,192 + 8,192 links.
KNOWN = {
  (2, 8, 64): ([1], 16),
  (16, 8, 64): ([8, 4], 384),
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
  """A ramp over one node past each multiple of the leaf's down ports:
  32.5 nodes of 8 rails sit halfway between 32 (12 switches) and 33
  (24)."""
  t = sw.fat_tree(np.array([32.0, 32.5, 33.0]), 8.0, 64.0, 1.0)
  np.testing.assert_allclose(t['switches'], [12.0, 18.0, 24.0])
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


def test_oversubscription_halves_the_upper_tiers():
  """3:1 leaves (48 of 64 ports down, 16 up) for 1,024 x 8: 8 x 22 = 176
  leaves > 64: one middle tier of 176 x 16 / 32 = 88, a top of 88 x 32 /
  64 = 44."""
  t = sw.fat_tree(1024.0, 8.0, 64.0, 3.0)
  assert [c for _, c in sw.tiers_listing(t)] == [176, 88, 44]


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
  """16 DGX H100 (8 x 400 Gb/s NICs each): 12 switches of 64 ports at
  36,000 USD, 384 links at 1,000 USD, 128 NICs at 2,000 USD; W: 12 x 750
  + 384 x 17 + 128 x 25. The cost model's capex is the nodes' plus it."""
  p = replace(platform_presets.get('dgx_h100'), nodes=16.0)
  bill = terms.network_bill(p)
  assert bill['switch_usd'] == pytest.approx(12 * 36000.0, rel=1e-12)
  assert bill['link_usd'] == pytest.approx(384 * 1000.0, rel=1e-12)
  assert bill['nic_usd'] == pytest.approx(128 * 2000.0, rel=1e-12)
  assert bill['w'] == pytest.approx(12 * 750 + 384 * 17 + 128 * 25, rel=1e-12)
  b = report.capex_breakdown(p)
  assert b['network']['switches_by_tier'] == {'leaf': 8, 'top': 4}
  usd, w = terms.capex_and_power(p)
  assert float(usd) == pytest.approx(b['total_usd'], rel=1e-12)
  assert float(w) == pytest.approx(b['total_w'], rel=1e-12)
  line = report.capex_line(b)
  assert '8 leaf + 4 top' in line and '384 links' in line
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
    x0 = x0.at[-1].set(16.5)  # halfway up the ramp to 17 nodes

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
