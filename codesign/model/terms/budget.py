"""Feasibility per memory tier and the bill (capex, power at the wall,
racks)."""

import jax
import jax.numpy as jnp

from codesign.core.smooth import smooth_max
from codesign.model.terms.embedding import Lookups
from codesign.model.terms.shared import Setup, domain_hosts
from codesign.model.terms.switching import network_bill
from codesign.spec import facility
from codesign.spec.hardware import Platform

# TorchRec's planner (pytorch/torchrec@a48cef7 torchrec/distributed/
# planner/): a table wholly in HBM runs on the FUSED kernel and keeps no
# host copy; a table partly in HBM runs on FUSED_UVM_CACHING, the whole
# table in host DDR (UVM) and a cache of it in HBM (embedding_types.py
# storage_usage). A table with at least 1 - HOST_COPY_KNEE of its rows in
# HBM is whole in HBM (`whole_in_hbm`): every figure counts it so (the
# step's memory, ranks.json, the export); a search's gradient sees the
# step smoothed over this share of a table (`host_copy`).
HOST_COPY_KNEE = 1e-3
# shard_estimators.py _calculate_cache_aux_state_sizes: a cached shard
# holds 4 B per row of the table and 16 B per cache slot of auxiliary
# state in HBM (besides the cached rows themselves).
CACHE_AUX_BYTES_PER_ROW = 4.0
CACHE_AUX_BYTES_PER_SLOT = 16.0
# shard_estimators.py calculate_pipeline_io_cost: under
# TrainPipelineSparseDist a shard holds 2 x its input (the ids of two
# batches in flight).
PIPELINE_INPUT_COPIES = 2.0


def whole_in_hbm(frac):
  """Whether each table of HBM fraction `frac` (T,) is whole in HBM: at
  least 1 - `HOST_COPY_KNEE` of its rows there. The one threshold of the
  model, its reports and its export (TorchRec's FUSED kernel)."""
  return frac >= 1.0 - HOST_COPY_KNEE


def host_copy(s, frac):
  """Share of each sharded table (T,) kept whole in host DDR under UVM
  caching: 1 while part of it is outside HBM (FUSED_UVM_CACHING), 0 when
  it is whole in HBM (`whole_in_hbm`: FUSED), exactly; its gradient is
  the step's smoothed over `HOST_COPY_KNEE` (straight through), so that a
  search feels the DDR it saves as a table fills HBM. Without UVM caching
  the split is static: the rows outside HBM, 1 - frac."""
  if not s.uvm_caching:
    return 1.0 - frac
  # smin(1, x) written as x / smax(1, x): equal for x > 0, and exactly 0
  # with a finite gradient at x = 0, a table wholly in HBM (the
  # reciprocal form's derivative is inf x 0 = NaN there in float32).
  share = (1.0 - frac) / HOST_COPY_KNEE
  smooth = share / smooth_max(jnp.ones_like(frac), share)
  hard = jnp.where(whole_in_hbm(frac), 0.0, 1.0).astype(smooth.dtype)
  return hard + (smooth - jax.lax.stop_gradient(smooth))


def table_tiers(s, frac, table_bytes, data_parallel, cpu_trainer=False):
  """(hbm, ddr): the bytes of each table (T,), rows and optimizer state,
  in one accelerator's HBM and in host DDR, the one memory truth that
  the step's memory (`memory`), ranks.json (`rank_stats`) and the export
  read. HBM holds a sharded table's `frac` of rows and a data-parallel
  table's replica whole; DDR a sharded table's host copy (`host_copy`:
  whole while part of it is outside HBM under UVM caching, else the rows
  outside HBM). On a CPU trainer every table is in DDR (one replica of a
  data-parallel one). Traced or concrete."""
  tb, dp = table_bytes, data_parallel
  if cpu_trainer:
    return jnp.zeros_like(tb), tb
  hbm = (dp + (1.0 - dp) * frac) * tb
  return hbm, (1.0 - dp) * host_copy(s, frac) * tb


def stack_hbm_parts(w, s, t, st: Setup, frac, row_scale=1.0):
  """(per_rank, per_table): the HBM bytes the stack keeps besides tables
  and the dense model (TorchRec planner, pytorch/torchrec@a48cef7), on
  every accelerator and with each table's shards:
  - per rank, input features: `kjt_copies` x the rank's ids of a batch
    (local batch x lookups per sample x `id_bytes`;
    storage_reservations.py HeuristicalStorageReservation: 2 pipelined
    batches x 10 internal copies of the KJT in 8 B ids);
  - per table (T,), pipeline I/O: under TrainPipelineSparseDist its
    shards hold `PIPELINE_INPUT_COPIES` x their input, the global batch's
    ids of the table;
  - per table, cache bookkeeping: a cached table's shards hold 4 B per
    row and 16 B per cache slot (`host_copy` of it; slots = rows x frac).
  `frac` (T,) is each table's share of rows in HBM."""
  dp = t['data_parallel']
  ids = st.local * float(sum(t['pool'])) * s.id_bytes
  per_table = 0.0 * frac
  if s.train_pipeline == 'sparse_dist':
    shard_ids = st.batch * (1.0 - dp) * t['pool'] * s.id_bytes
    per_table = per_table + PIPELINE_INPUT_COPIES * shard_ids
  if s.uvm_caching:
    rows = t['rows'] * row_scale
    aux = rows * (CACHE_AUX_BYTES_PER_ROW + CACHE_AUX_BYTES_PER_SLOT * frac)
    per_table = per_table + (1.0 - dp) * host_copy(s, frac) * aux
  return s.kjt_copies * ids, per_table


def stack_hbm_reserved(w, s, t, st: Setup, frac, row_scale=1.0):
  """HBM bytes per accelerator the stack keeps besides tables and the
  dense model (`stack_hbm_parts`): the input features, and the tables'
  pipeline I/O and cache bookkeeping spread over the ranks that hold
  tables."""
  per_rank, per_table = stack_hbm_parts(w, s, t, st, frac, row_scale)
  return per_rank + jnp.sum(per_table) / st.table_ranks


def memory(p, w, s, t, lk: Lookups, st: Setup, dense_mem, busiest: dict):
  """(required, available) bytes per tier: HBM per accelerator (the
  busiest rank's resident rows, `busiest_loads`), DDR per node. With UVM
  caching a table partly in HBM stays whole in DDR and HBM holds its
  cached rows besides; a table wholly in HBM has no host copy
  (`host_copy`); HBM also holds the stack's reservations
  (`stack_hbm_reserved`)."""
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
  reserved = stack_hbm_reserved(w, s, t, st, lk.frac, t.get('row_scale', 1.0))
  hbm_req = busiest['resident'] + jnp.sum(dp * tb) + dense_mem + reserved
  hbm_avail = acc.hbm_capacity * (1.0 - s.hbm_reserve)
  _, in_ddr = table_tiers(s, lk.frac, tb, dp)
  ddr_req = jnp.sum(in_ddr) / p.nodes
  return {'hbm': hbm_req, 'ddr': ddr_req}, {'hbm': hbm_avail, 'ddr': ddr_avail}


# A node's wall power at its datasheet maximum is more than the sum of its
# parts' TDPs: its fans remove that heat and its power supplies convert it.
# - Fans at full speed draw 10-15% or more of a server's power (Neudorfer,
#   eWeek 2009, http://www.eweek.com/c/a/IT-Infrastructure/How-to-Optimize-
#   the-Energy-Efficiency-of-Your-Server/2/; medium): the upper end, as a
#   datasheet maximum is at full fan speed. Fan power is counted as a share
#   of the parts' power (the heat the fans move).
FAN_SHARE = 0.15
# - 80 PLUS Titanium, 230 V internal redundant (the DGX supplies: 3 kW and
#   3.3 kW units, load shared): 96% efficient at 50% load, 91% at 100%
#   (https://en.wikipedia.org/wiki/80_Plus, tomshardware.com 80-plus-psu-
#   efficiency,4848-2; high): 0.94 between the two.
PSU_EFFICIENCY = 0.94
# Datasheet maxima the form is judged against (WORKSPACE, Honest answers):
# DGX A100 6.5 kW (NVIDIA DGX A100 user guide, via pcnews.ru/news/
# ...-985106.html; medium), DGX H100 10.2 kW (DGX H100/H200 user guide,
# via unanswered.io/guide/nvidia-dgx-power-consumption-watts; medium), DGX
# B200 14.3 kW (https://docs.nvidia.com/dgx/dgxb200-user-guide/
# introduction-to-dgxb200.html; high).
DATASHEET_MAX_W = {'dgx_a100': 6500.0, 'dgx_h100': 10200.0, 'dgx_b200': 14300.0}


def wall_power(parts_w):
  """Wall power (W) of a node whose parts draw `parts_w` at TDP: the fans
  that cool them (`FAN_SHARE`) and the supplies' loss (`PSU_EFFICIENCY`)
  added."""
  return parts_w * (1.0 + FAN_SHARE) / PSU_EFFICIENCY


def fabric_capex_and_power(p: Platform):
  """(USD, W at TDP) of one node's accelerator fabric: its links and
  switches (NVSwitch or OAM baseboard, bridges), priced per B/s of link
  bandwidth (`Fabric.bandwidth_price`, `bandwidth_power`): no public price
  of a baseboard apart from its GPUs was found, so the fabric's share of
  the board is a price per B/s (platform_presets.FABRIC_USD_PER_GBPS)."""
  n_acc = 0.0 if p.trainer == 'cpu' else p.accelerators_per_node
  fab_bw = p.fabric.links_per_accelerator * p.fabric.link_bandwidth
  return (
    n_acc * fab_bw * p.fabric.bandwidth_price,
    n_acc * fab_bw * p.fabric.bandwidth_power,
  )


def nodes_capex_and_power(p: Platform):
  """(USD, W) of the nodes alone (chassis, sockets and DDR, accelerators
  and HBM, their fabric: `fabric_capex_and_power`), without the NICs and
  the network. Power is at the wall (`wall_power` of the parts' TDPs)."""
  cpu, acc = p.cpu, p.accelerator
  sockets, accels = p.sockets_per_node, p.accelerators_per_node
  n_acc = 0.0 if p.trainer == 'cpu' else accels
  fab_usd, fab_w = fabric_capex_and_power(p)
  node_usd = (
    p.node_price
    + sockets * (cpu.price + cpu.ddr_capacity * cpu.ddr_price)
    + n_acc * (acc.price + acc.hbm_capacity * acc.hbm_price)
    + fab_usd
  )
  node_w = (
    p.node_power
    + sockets * (cpu.power + cpu.ddr_capacity * cpu.ddr_power)
    + n_acc * acc.power
    + fab_w
  )
  return p.nodes * node_usd, p.nodes * wall_power(node_w)


# Rack classes. An air-cooled rack holds about 40 kW: NVIDIA's DGX
# SuperPOD data-center design puts four DGX H100 in a rack, 40.8 kW at
# their 10.2 kW maxima (unanswered.io/guide/nvidia-h100-gpu-density-per-
# node-rack, citing docs.nvidia.com/dgx-superpod/design-guides/dgx-
# superpod-data-center-design-h100; M); "the practical air-cooling
# ceiling is around 41 kW per rack" (app.aidatacenterguide.com, part 5,
# 5.4 direct-to-chip liquid cooling; M).
AIR_RACK_W = 40.8e3
# A liquid-cooled (direct-to-chip) rack: "a GB200 NVL72 rack draws
# roughly 132 kW" (same page; press: about 120 kW, kshirol-dev learnAI
# training clusters), and GB300 NVL72 racks are built for up to 142 kW
# (NVIDIA's enterprise reference architecture, as the gb200_nvl72 preset
# cites it; M): the class's rack supplies 142 kW, which the model's 133
# kW NVL72 (its parts' TDPs at the wall) fits.
LIQUID_RACK_W = 142e3
# What liquid cooling costs beyond air, per W of the IT it cools:
# direct-to-chip capex "roughly $1,875-$5,000 per installed kW of DLC
# versus $1,000-$2,500 per kW for air" (yobitel.com knowledge-base
# direct-to-chip-liquid-cooling; L): the difference of the ranges'
# midpoints, 3,437.5 - 1,750 = 1,687.5 USD per kW.
LIQUID_USD_PER_W = (0.5 * (1875.0 + 5000.0) - 0.5 * (1000.0 + 2500.0)) / 1e3
# A rack unit that draws above AIR_RACK_W is liquid-cooled; the cost
# ramps in over this share of AIR_RACK_W (continuous for the search,
# whole at a unit of 1.02 x AIR_RACK_W and above).
LIQUID_RAMP = 0.02


def liquid_share(p: Platform):
  """1 where a rack unit (a node, or a scale-up domain's hosts:
  `rack_unit_power`) draws more than an air-cooled rack holds
  (`AIR_RACK_W`), so its racks are liquid-cooled; 0 where air cools it;
  a ramp over `LIQUID_RAMP` of AIR_RACK_W between. Traced or concrete."""
  over = (rack_unit_power(p) - AIR_RACK_W) / (LIQUID_RAMP * AIR_RACK_W)
  if isinstance(over, float):
    return min(max(over, 0.0), 1.0)
  return jnp.clip(over, 0.0, 1.0)


def cooling_capex(p: Platform):
  """USD of liquid cooling beyond air (`LIQUID_USD_PER_W` of the nodes'
  wall power, where `liquid_share` says their racks need it); 0 for a
  platform whose rack units air cools."""
  _, nodes_w = nodes_capex_and_power(p)
  return liquid_share(p) * nodes_w * LIQUID_USD_PER_W


def capex_and_power(p: Platform):
  """(USD, W) of the whole cluster at its maximum: the nodes at the wall
  (`nodes_capex_and_power`), the network (the NICs, the fat tree's
  switches and links at their rated power: `network_bill`) and the
  liquid cooling of racks above an air-cooled rack's power
  (`cooling_capex`)."""
  usd, w = nodes_capex_and_power(p)
  net = network_bill(p)
  return usd + net['usd'] + cooling_capex(p), w + net['w']


def node_wall_power(p: Platform):
  """W of one node at the wall with its NICs (`nodes_capex_and_power`;
  the NICs as `network_bill` powers them, per B/s of their line rate).
  Traced or concrete."""
  _, nodes_w = nodes_capex_and_power(p)
  nic = p.nic
  return nodes_w / p.nodes + nic.count * nic.bandwidth * nic.bandwidth_power


def rack_unit_power(p: Platform):
  """W of what one rack must hold whole: a node, or the hosts of one
  scale-up domain (`shared.domain_hosts`; GB200 NVL72's 18 trays share
  a copper NVLink spine inside one rack: NVIDIA DGX GB200 user guide,
  hardware.html). The search's rack row; traced or concrete."""
  return node_wall_power(p) * domain_hosts(p)


def system_class(p: Platform) -> str:
  """The system class of `p` (`facility.SYSTEM_CLASSES`), from its static
  fields: a CPU trainer; superchips (an NVLink-C2C host link); PCIe cards
  (bridged pairs or PCIe only); else a board."""
  if p.trainer == 'cpu':
    return 'cpu'
  if p.host_link.kind == 'c2c':
    return 'superchip'
  if p.fabric.topology in ('bridged_pairs', 'pcie_only'):
    return 'pcie'
  return 'board'


def node_rack_units(p: Platform):
  """Rack units of one node (`facility.node_rack_units` of its system
  class by accelerators, a CPU trainer's by sockets), interpolated in
  log2 of the count between the table's counts (the relaxation's
  continuous counts), exact at them. Traced or concrete."""
  system = system_class(p)
  counts, units = facility.node_rack_units(system)
  x = p.sockets_per_node if system == 'cpu' else p.accelerators_per_node
  logc = jnp.log2(jnp.asarray(counts))
  return jnp.interp(jnp.log2(jnp.maximum(x, 1.0)), logc, jnp.asarray(units))


def rack_unit_space(p: Platform):
  """Rack units of what one rack must hold whole (`rack_unit_power`'s
  unit): a node, or the hosts of one scale-up domain with their NVLink
  switch trays (`facility.domain_switch_rack_units`, ramped in between
  one host and two). Traced or concrete."""
  hosts = domain_hosts(p)
  trays = facility.domain_switch_rack_units()
  several = jnp.clip(hosts - 1.0, 0.0, 1.0)
  return node_rack_units(p) * hosts + trays * several


def usable_rack_units(p: Platform):
  """Rack units one of `p`'s racks holds for nodes: the air-cooled
  class's where air cools a rack unit, the liquid-cooled class's where
  it does not (`liquid_share`, a ramp between); each class's height
  less its switches and power (`facility.usable_rack_units`)."""
  air = facility.usable_rack_units('air')
  liquid = facility.usable_rack_units('liquid')
  return air + (liquid - air) * liquid_share(p)


def racks(p: Platform, rack_w: float) -> dict:
  """The racks a concrete platform needs where a rack may draw up to
  `rack_w` W: air-cooled racks of `AIR_RACK_W` where a rack unit (a
  node, or a scale-up domain's hosts: `rack_unit_power`) fits one, else
  liquid-cooled racks of `rack_w` (`cooling`); each node at its wall
  power with its NICs (`node_wall_power`), as many whole units per rack
  as both the rack's power and its rack units hold (`rack_unit_space`,
  `usable_rack_units`; `binds` says which sets the count: 'power',
  'space' or 'both'); the scale-out network's switches in racks of
  their own (`network_racks`, air-cooled). `fits` is False when one
  unit alone exceeds a rack's power or space (then each is counted as a
  rack of its own); the search refuses such designs (its `rack` and
  `rack_space` rows)."""
  import math

  nodes = float(p.nodes)
  hosts = float(domain_hosts(p))
  node_w = float(node_wall_power(p))
  air = node_w * hosts <= AIR_RACK_W
  rack_w = min(rack_w, AIR_RACK_W) if air else rack_w
  cooling = 'air' if air else 'liquid'
  unit_u = float(rack_unit_space(p))
  usable = facility.usable_rack_units(cooling)
  by_power = math.floor(rack_w / (node_w * hosts))
  by_space = math.floor(usable / unit_u + 1e-9)
  units = min(by_power, by_space)
  binds = (
    'both'
    if by_power == by_space
    else ('power' if by_power < by_space else 'space')
  )
  racks_needed = math.ceil(nodes / max(units * hosts, hosts))
  switches = float(network_bill(p)['switches'])
  switch_u = switches * facility.network_switch_rack_units()
  return {
    'cooling': cooling,
    'cooling_usd': float(cooling_capex(p)),
    'rack_kw': rack_w / 1e3,
    'node_kw': node_w / 1e3,
    'unit_hosts': hosts,
    'unit_kw': node_w * hosts / 1e3,
    'node_u': float(node_rack_units(p)),
    'unit_u': unit_u,
    'rack_u': facility.rack_units(cooling),
    'usable_u': usable,
    'units_by_power': by_power,
    'units_by_space': by_space,
    'binds': binds,
    'nodes_per_rack': int(round(units * hosts)),
    'racks': racks_needed,
    'u_used': unit_u * nodes / hosts,
    'network_switches': int(round(switches)),
    'network_racks': math.ceil(
      switch_u / facility.usable_rack_units('air') - 1e-9
    ),
    'fits': units >= 1,
    'power_fits': by_power >= 1,
    'space_fits': by_space >= 1,
  }


HOURS_PER_YEAR = 8766.0  # 365.25 days


def energy_usd_per_w(life_years, usd_per_kwh, pue) -> float:
  """USD of energy per W drawn without a pause for `life_years` at
  `usd_per_kwh`, times the facility's `pue`."""
  return HOURS_PER_YEAR * life_years * pue * usd_per_kwh / 1e3


def tco(capex_usd, power_w, life_years, usd_per_kwh, pue) -> dict:
  """Total cost of ownership: capex plus the energy of `power_w` (the
  cluster at its maximum: an upper bound of what it draws) drawn for
  `life_years`, the facility's overhead included (`pue`, power usage
  effectiveness: facility power over IT power), at `usd_per_kwh`."""
  energy_kwh = power_w / 1e3 * HOURS_PER_YEAR * life_years * pue
  energy_usd = power_w * energy_usd_per_w(life_years, usd_per_kwh, pue)
  return {
    'life_years': life_years,
    'usd_per_kwh': usd_per_kwh,
    'pue': pue,
    'energy_kwh': energy_kwh,
    'energy_usd': energy_usd,
    'capex_usd': capex_usd,
    'total_usd': capex_usd + energy_usd,
  }
