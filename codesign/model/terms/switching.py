"""The scale-out network as it is built and billed: a non-blocking (or
oversubscribed) fat tree (folded Clos) of switches of `Nic.switch_radix`
ports, its switches per tier, its links, and their price and power.

The tree, right-sized to the ports it serves:
- endpoints: every NIC of every node (nodes x NICs per node); one node
  has no scale-out network (its NIC is a front-end NIC: `buildability`
  `nics` rule), so the bill is gated by `nodes - 1`, and one scale-up
  domain of several hosts (one NVL72 rack) buys no switch or link
  (`_one_domain_gate`);
- one switch holds the whole cluster when the endpoints fit its ports;
- else leaves with `down = k o / (1 + o)` of their k ports toward the
  NICs (o: the oversubscription), the NICs packed onto them: leaves =
  ceil(endpoints / down) (at a DGX SuperPOD scalable unit, 32 nodes x 8
  rails, the 8 leaves of its rail-optimized tree: NVIDIA DGX H100
  SuperPOD reference architecture; below a unit, rails share leaves
  rather than leave ports unused);
- each leaf buys the uplinks its used down ports need, used / o: a
  cluster's uplinks are endpoints / o (whole at 1:1; oversubscribed,
  fractional, a link's share), not every leaf's spare ports (a leaf of 9
  NICs needs 9 uplinks, not 32);
- above the leaves, middle tiers of switches with k/2 ports down and k/2
  up, ceil(uplinks / (k/2)) each, while the leaves exceed what the tiers
  above reach (k leaves under 2 tiers, x k/2 per middle tier), and a top
  tier with all k ports down, ceil(uplinks / k);
- links: one per endpoint and one per uplink at each tier above;
- price and power: every switch whole (all k ports, used or not) and
  every link (a transceiver at each end and the fiber), per B/s of the
  NIC rate (`Nic.switch_port_price`, `switch_port_power`, `link_price`,
  `link_power`; their sources in `codesign.spec.platform_presets`).
Known answers (tests/model/terms/switching_test.py): 9 nodes of 8 NICs on
64-port switches are 3 leaves + 2 spines and 144 links; 1,024 such
nodes 256 leaves, 256 middle and 128 top switches and 24,576 links.

The same arithmetic serves the traced search and the concrete report:
every count is whole at whole node and NIC counts (`ceil_div`, `step`),
continuous between them (a ramp over one unit), with finite gradients.
The latency model (`collectives.switch_tiers`) keeps its own smooth tier
count (a leaf reaches k/2 nodes): it sets hops, not the bill.
"""

import jax.numpy as jnp
import numpy as np

from codesign.model.terms.shared import domain_hosts
from codesign.spec.hardware import Platform

# Tiers above the leaves the tree may need: k = 4 ports (the bound's
# minimum) and 64 NICs x 1,024 nodes need 14; more is a flat sum.
MAX_EXTRA_TIERS = 16


def _xp(*xs):
  """numpy for concrete numbers (float64: the report's counts and USD
  exact), jax.numpy when any is traced or a JAX array."""
  concrete = all(isinstance(x, (int, float, np.number, np.ndarray)) for x in xs)
  return np if concrete else jnp


def step(x):
  """0 at x <= 0, 1 at x >= 1, linear between (a whole-number test that
  is continuous in x)."""
  return _xp(x).clip(x, 0.0, 1.0)


def ceil_div(a, b):
  """ceil(a / b) at whole a >= 0 and b >= 1; continuous in a (a ramp over
  the first unit past each multiple of b); gradients finite."""
  f = _xp(a, b).floor(a / b)
  return f + step(a - b * f)


def _powers(xp, x, n):
  """[1, x, x^2, ..., x^(n-1)] along a new last axis, by repeated
  multiplication: exact at whole x while the powers are (x^j by `pow`
  goes through exp and log, and costs a batched search more than the
  rest of the tree)."""
  out = [xp.ones_like(x)]
  for _ in range(n - 1):
    out.append(out[-1] * x)
  return xp.stack(out, axis=-1)


def fat_tree(nodes, rails, radix, oversubscription):
  """Counts of the fat tree (traced or concrete numbers).

  Args:
    nodes: nodes in the cluster.
    rails: NICs per node.
    radix: ports per switch.
    oversubscription: leaf downlinks over uplinks (1: full bisection).

  Returns:
    dict of arrays: endpoints, tiers (1 for a single switch), leaves,
    middle (switches in each middle tier), middle_tiers, top (switches in
    the top tier; 0 for a single switch), switches, links; all 0 at one
    node.
  """
  xp = _xp(nodes, rails, radix, oversubscription)
  k = radix
  endpoints = nodes * rails
  down = k * oversubscription / (1.0 + oversubscription)
  leaves = ceil_div(endpoints, down)
  reach = k * _powers(xp, 0.5 * k, MAX_EXTRA_TIERS)
  middle_tiers = xp.sum(step(xp.asarray(leaves)[..., None] - reach), axis=-1)
  uplinks = endpoints / oversubscription
  middle = ceil_div(uplinks, 0.5 * k)
  any_middle = step(middle_tiers)
  top = ceil_div(uplinks, k)
  several = step(endpoints - k)  # 0: one switch holds every endpoint
  out = step(nodes - 1.0)  # 0: one node, no scale-out network
  inter = uplinks * (1.0 + middle_tiers)
  tree = leaves + middle_tiers * middle + top
  return {
    'endpoints': out * endpoints,
    'tiers': out * (1.0 + several * (1.0 + middle_tiers)),
    'leaves': out * (1.0 + several * (leaves - 1.0)),
    'middle': out * several * any_middle * middle,
    'middle_tiers': out * several * middle_tiers,
    'top': out * several * top,
    'switches': out * (1.0 + several * (tree - 1.0)),
    'links': out * (endpoints + several * inter),
  }


def _one_domain_gate(p: Platform):
  """0 where the whole cluster is one scale-up domain of several hosts
  (one GB200 NVL72 rack: nothing crosses the network, so no switch or
  link is bought; the trays' NICs are), 1 from two domains on, a ramp
  between; exactly the float 1.0 where a domain is one host (every
  design without domains keeps its bill to the bit)."""
  h, nodes = p.fabric.hosts_per_domain, p.nodes
  if p.trainer == 'cpu':
    return 1.0
  concrete = all(isinstance(x, (int, float, np.number)) for x in (h, nodes))
  if concrete and h == 1.0:
    return 1.0
  hosts = domain_hosts(p)  # clamped to [1, nodes]
  if concrete:
    return float(step(float(nodes) / float(hosts) - 1.0))
  return jnp.where(hosts == 1.0, 1.0, step(nodes / hosts - 1.0))


def network_bill(p: Platform) -> dict:
  """(USD and W) of the scale-out network of `p`, with its counts.

  Returns:
    dict: the `fat_tree` counts, and nic_usd, switch_usd, link_usd,
    nic_w, switch_w, link_w (whole cluster), usd and w (their sums).
  """
  nic = p.nic
  tree = fat_tree(p.nodes, nic.count, nic.switch_radix, nic.oversubscription)
  gate = _one_domain_gate(p)
  if not (isinstance(gate, float) and gate == 1.0):
    tree = {k: v * gate for k, v in tree.items()}
  ports = tree['switches'] * nic.switch_radix * nic.bandwidth
  rate = tree['links'] * nic.bandwidth
  nic_bw = p.nodes * nic.count * nic.bandwidth
  out = {
    **tree,
    'nic_usd': nic_bw * nic.bandwidth_price,
    'switch_usd': ports * nic.switch_port_price,
    'link_usd': rate * nic.link_price,
    'nic_w': nic_bw * nic.bandwidth_power,
    'switch_w': ports * nic.switch_port_power,
    'link_w': rate * nic.link_power,
  }
  out['usd'] = out['nic_usd'] + out['switch_usd'] + out['link_usd']
  out['w'] = out['nic_w'] + out['switch_w'] + out['link_w']
  return out


def tiers_listing(tree: dict) -> list[tuple[str, int]]:
  """The concrete switches per tier, bottom up: [('leaf', n), ('middle 1',
  n), ..., ('top', n)]; [('single', 1)] for one switch; [] for none."""
  tiers = int(round(float(tree['tiers'])))
  if float(tree['switches']) < 0.5:
    return []
  if tiers == 1:
    return [('single', 1)]
  middle = int(round(float(tree['middle'])))
  out = [('leaf', int(round(float(tree['leaves']))))]
  out += [(f'middle {i + 1}', middle) for i in range(tiers - 2)]
  return out + [('top', int(round(float(tree['top']))))]
