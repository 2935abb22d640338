"""Feasibility per memory tier and the bill (capex and power)."""

import jax.numpy as jnp

from codesign.model.terms.embedding import Lookups
from codesign.model.terms.shared import Setup
from codesign.spec.hardware import Platform


def memory(p, w, s, t, lk: Lookups, st: Setup, dense_mem, busiest: dict):
  """(required, available) bytes per tier: HBM per accelerator (the
  busiest rank's resident rows, `busiest_loads`), DDR per node. With UVM
  caching the tables stay whole in DDR and HBM holds the cached rows
  besides."""
  tb = t['table_bytes']  # already scaled by row_scale (see evaluate)
  dp = t['data_parallel']
  cpu, acc = p.cpu, p.accelerator
  ddr_avail = p.sockets_per_node * cpu.ddr_capacity
  if st.cpu_trainer:
    a = st.per_node
    # Sharded tables spread over the nodes; every socket holds a replica
    # of each data-parallel table.
    ddr_req = jnp.sum(tb * (1.0 - dp)) / p.nodes + a * (
      jnp.sum(tb * dp) + dense_mem
    )
    return {'hbm': jnp.zeros(()), 'ddr': ddr_req}, {
      'hbm': jnp.zeros(()),
      'ddr': ddr_avail,
    }
  hbm_req = busiest['resident'] + jnp.sum(dp * tb) + dense_mem
  hbm_avail = acc.hbm_capacity * (1.0 - s.hbm_reserve)
  in_ddr = (1.0 - dp) if s.uvm_caching else (1.0 - lk.frac)
  ddr_req = jnp.sum(in_ddr * tb) / p.nodes
  return {'hbm': hbm_req, 'ddr': ddr_req}, {'hbm': hbm_avail, 'ddr': ddr_avail}


def capex_and_power(p: Platform):
  """(USD, W) of the whole cluster at TDP."""
  cpu, acc = p.cpu, p.accelerator
  sockets, accels = p.sockets_per_node, p.accelerators_per_node
  n_acc = 0.0 if p.trainer == 'cpu' else accels
  fab_bw = p.fabric.links_per_accelerator * p.fabric.link_bandwidth
  nic_bw = p.nic.count * p.nic.bandwidth
  node_usd = (
    p.node_price
    + sockets * (cpu.price + cpu.ddr_capacity * cpu.ddr_price)
    + n_acc * (acc.price + acc.hbm_capacity * acc.hbm_price)
    + n_acc * fab_bw * p.fabric.bandwidth_price
    + nic_bw * p.nic.bandwidth_price
  )
  node_w = (
    p.node_power
    + sockets * (cpu.power + cpu.ddr_capacity * cpu.ddr_power)
    + n_acc * (acc.power + fab_bw * p.fabric.bandwidth_power)
    + nic_bw * p.nic.bandwidth_power
  )
  return p.nodes * node_usd, p.nodes * node_w
