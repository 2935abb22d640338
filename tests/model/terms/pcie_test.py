"""Known answers for PCIe servers as built: cards behind PCIe switches
that share one x16 uplink, on two sockets whose peers meet across the
socket links (`terms.pcie_peer_rate`, `terms.pcie_ring_rate`), and the
all-to-all and allreduce of a PCIe-only node bound by them.

The tiny platform (`tests.model.fixtures`): x16 host links of 16 GB/s a
card, 2 sockets of 40 GB/s of PCIe lanes and 2 socket links of 20 GB/s.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from codesign.model import cost_model
from codesign.model import terms as ct
from codesign.spec import hardware, platform_presets
from tests.model.fixtures import (
  CPU_PCIE,
  HOST_BW,
  SOCKET_LINK_BW,
  SOCKET_LINKS,
  close,
  make_plan,
  run,
  tiny_platform,
  tiny_stack,
  tiny_workload,
)


def pcie_server(cards=8.0, per_switch=2.0, **cpu):
  p = tiny_platform(topology='pcie_only', nodes=1.0, accels=cards)
  link = dataclasses.replace(p.host_link, cards_per_switch=per_switch)
  return dataclasses.replace(
    p, host_link=link, cpu=dataclasses.replace(p.cpu, **cpu)
  )


def rate(p):
  return float(ct.pcie_peer_rate(hardware.as_arrays(p)))


def test_the_all_to_all_by_hand():
  # 8 cards, 4 a socket, 2 a switch; each sends V, V/7 to each peer.
  # Per byte of V: the uplink 2 x 6/7, the socket's lanes 4 x 6/7, the
  # socket links 4 x 4/7; the rate is V over their p = 8 norm in time.
  times = np.array(
    [
      2 * 6 / 7 / HOST_BW,
      4 * 6 / 7 / CPU_PCIE,
      4 * 4 / 7 / (SOCKET_LINKS * SOCKET_LINK_BW),
    ]
  )
  want = 1.0 / np.sum(times**8) ** (1 / 8)
  close(rate(pcie_server()), want, rel=1e-9)
  # Without switches each card is alone on its x16 link: its rate, but
  # for the lanes and the socket links (far below it here).
  wide = {'pcie_bandwidth': 1e12, 'socket_link_bandwidth': 1e12}
  close(rate(pcie_server(per_switch=1.0, **wide)), HOST_BW, rel=1e-9)


def test_shared_uplinks_bind_the_all_to_all():
  # With lanes and socket links to spare, two cards a switch move 7/12
  # of a card's x16 rate; four cards a switch (one switch a socket),
  # 7/16.
  wide = {'pcie_bandwidth': 1e12, 'socket_link_bandwidth': 1e12}
  close(rate(pcie_server(per_switch=2.0, **wide)), HOST_BW * 7 / 12, 1e-6)
  close(rate(pcie_server(per_switch=4.0, **wide)), HOST_BW * 7 / 16, 1e-6)


def test_the_socket_link_binds_the_all_to_all():
  # Slow socket links (2 x 1 GB/s): each socket's 4 cards send 4/7 of
  # their bytes across, 4 x 4/7 V over 2 GB/s. On one socket nothing
  # crosses: the uplinks bind.
  slow = pcie_server(socket_link_bandwidth=1e9, pcie_bandwidth=1e12)
  close(rate(slow), 2e9 / (4 * 4 / 7), rel=1e-6)
  one = dataclasses.replace(slow, sockets_per_node=1.0)
  close(rate(one), HOST_BW * 7 / 12, rel=1e-6)


def test_the_ring_crosses_each_link_once():
  # A ring meets one flow on every link: the card's x16 rate, whatever
  # the switches; slow socket links bind it.
  close(
    float(
      ct.pcie_ring_rate(
        hardware.as_arrays(
          pcie_server(pcie_bandwidth=1e12, socket_link_bandwidth=1e12)
        )
      )
    ),
    HOST_BW,
    rel=1e-6,
  )
  slow = pcie_server(socket_link_bandwidth=1e9, pcie_bandwidth=1e12)
  close(float(ct.pcie_ring_rate(hardware.as_arrays(slow))), 2e9, rel=1e-6)


def test_a_pcie_only_node_all_to_all_is_slower_behind_shared_uplinks():
  # The cost model's intra-node all-to-all on a PCIe-only node: behind
  # switches (2 a switch) it takes 12/7 of the time it takes with a root
  # port per card, with lanes and socket links to spare.
  w, plan, s = tiny_workload(), make_plan(), tiny_stack()
  wide = {'pcie_bandwidth': 1e12, 'socket_link_bandwidth': 1e12}
  alone = run(pcie_server(per_switch=1.0, **wide), w, plan, s)
  shared = run(pcie_server(per_switch=2.0, **wide), w, plan, s)
  st = ct.setup(pcie_server(), w, s)
  fab1 = ct.fabric(
    hardware.as_arrays(pcie_server(per_switch=1.0, **wide)), s, st
  )
  fab2 = ct.fabric(
    hardware.as_arrays(pcie_server(per_switch=2.0, **wide)), s, st
  )
  close(float(fab1.relay) / float(fab2.relay), 12 / 7, rel=1e-6)
  assert (
    shared['breakdown']['alltoall_intra'] > alone['breakdown']['alltoall_intra']
  )
  assert shared['step'] > alone['step']


def test_h100_pcie_8_is_built_with_two_cards_a_switch():
  p = platform_presets.get('h100_pcie_8')
  assert p.host_link.cards_per_switch == 2.0
  assert 'cards_per_switch' in dict(p.host_link.sources)
  # Its six PCIe peers: below a card's Gen5 x16 rate (63 GB/s), bound by
  # the shared uplinks (7/12 of it) and the socket links.
  got = rate(p)
  assert got < 63e9 * 7 / 12


def test_pcie_gradients_are_finite_in_float64():
  w, plan, s = tiny_workload(), make_plan(), tiny_stack()
  base = hardware.as_arrays(pcie_server(), jnp.float64)

  def step(k, upi):
    p = dataclasses.replace(
      base,
      host_link=dataclasses.replace(base.host_link, cards_per_switch=k),
      cpu=dataclasses.replace(base.cpu, socket_link_bandwidth=upi),
    )
    return cost_model.evaluate(p, w, plan, s).step_time

  grad = jax.jit(jax.grad(step, argnums=(0, 1)))
  for k in (1.0, 1.5, 2.0, 4.0):
    gk, gu = (float(g) for g in grad(jnp.float64(k), jnp.float64(2e9)))
    assert np.isfinite(gk) and np.isfinite(gu)
    assert gu < 0.0  # faster socket links, a shorter step
