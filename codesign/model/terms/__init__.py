"""The named terms of one DLRM training step, each a small pure function.

`codesign.model.cost_model.evaluate` composes them. One module per part of
the step: `shared` (the `Setup`), `dense`, `embedding`, `collectives`,
`host`, `budget`; this package re-exports their public names. Beside
the step, `ingestion` (a sample's bytes, a reader's rate) and
`checkpoint` (failure rates, the Young/Daly interval, goodput) serve
`model.whole_system`; import them as modules. `structure` holds a
platform's wiring (topology, host link, NIC attachment) as numbers, so
that one program costs every accelerator platform
(`cost_model.evaluate_design`).

Every term takes the platform (`hardware.Platform`, leaves possibly
traced), the static workload, the plan and the software stack
(`stack.Stack`) or the `Setup` derived from them, and returns seconds,
bytes or counts in SI. No term branches on a traced value; maxima are
smooth p-norms, and every division has a floor, so values and gradients
are finite inside `hardware.BOUNDS` and `stack.BOUNDS`.

Terms, with the physics each one stands for:
- `dense_times`, `mlp_elementwise`, `interaction_times`,
  `dense_optimizer_time`: the dense half (GEMM rooflines with a
  tile-size efficiency; unfused bias/activation passes; the dot
  interaction as a fused kernel or as tiny batched GEMMs).
- `hbm_hits`, `distinct_rows`, `busiest_rank`, `embedding_hbm`,
  `embedding_ddr`, `pooled_to_host`: embedding lookups and row updates
  per tier (updates touch each distinct row once, after the stack's
  sort-and-aggregate), and the load of the busiest rank when whole
  tables pack unevenly.
- `alltoall_pooled`, `alltoall_ids`, `allreduce_dense`: collectives as
  NCCL runs them (peers over PCIe through the servers' switches, root
  complexes and socket links as built: `pcie_peer_rate`,
  `pcie_ring_rate`) (its tuning model's latencies per algorithm and
  protocol; ring, tree, SHARP or NVLS by size and node count; every
  all-to-all send posted at once, flat or hierarchical), over NICs
  bounded by their slots and the accelerators' host links, with the
  stack's software latency per call.
- `hybrid.split`: HugeCTR's hybrid embedding, each table's frequent rows
  replicated and the rest exchanged (import it as a module).
- `kernel_counts`, `host_time`, `compose`: the host side (operators the
  framework dispatches, CUDA graphs, all at the host CPU's speed:
  `host_speed`), device-side kernel gaps, and how host and device time
  combine.
- `memory`, `capex_and_power`: feasibility per tier and the bill (nodes
  at the wall: `wall_power`, fans and supplies; `node_wall_power` and
  `racks` at a rack's kW and rack units, `rack_unit_space`; `tco`,
  capex plus energy over a life);
  `network_bill`: the scale-out network as built (a rail-optimized fat
  tree: switches per tier, links, NICs) and its price and power.
"""

from codesign.model.terms import hybrid, structure
from codesign.model.terms.budget import (
  AIR_RACK_W,
  HOST_COPY_KNEE,
  LIQUID_RACK_W,
  LIQUID_USD_PER_W,
  capex_and_power,
  cooling_capex,
  energy_usd_per_w,
  fabric_capex_and_power,
  host_copy,
  liquid_share,
  memory,
  node_rack_units,
  node_wall_power,
  nodes_capex_and_power,
  rack_unit_power,
  rack_unit_space,
  racks,
  stack_hbm_parts,
  stack_hbm_reserved,
  system_class,
  table_tiers,
  tco,
  usable_rack_units,
  wall_power,
  whole_in_hbm,
)
from codesign.model.terms.collectives import (
  Fabric,
  allreduce_algorithms,
  allreduce_bytes,
  allreduce_calls,
  allreduce_dense,
  allreduce_elem_bytes,
  alltoall_ids,
  alltoall_inter,
  alltoall_pooled,
  direct_share,
  fabric,
  intra_node_seconds,
  network_latency,
  nic_rate,
  pair_ring,
  pcie_cards,
  pcie_peer_rate,
  pcie_ring_rate,
  pick_fastest,
  several_nodes,
  several_ranks,
  split_volume,
  switch_tiers,
  torus_alltoall,
  torus_hops,
)
from codesign.model.terms.dense import (
  MLP_FORWARD_SHARE,
  MLP_KERNELS,
  MLP_KERNELS_FORWARD,
  MLP_PASSES,
  dense_hbm_bytes,
  dense_optimizer_time,
  dense_times,
  gemm_table,
  interaction_times,
  mlp_elementwise,
)
from codesign.model.terms.embedding import (
  SEARCHED_SHARDINGS,
  DdrTerms,
  Lookups,
  busiest_loads,
  busiest_rank,
  data_parallel_mask,
  distinct_rows,
  embedding_ddr,
  embedding_hbm,
  embedding_rate_factor,
  hbm_hits,
  hbm_loads,
  load_orders,
  lookups,
  one_hot_sharding,
  per_rank,
  pooled_cast_bytes,
  pooled_to_host,
  present,
  sharding_names,
  table_arrays,
  table_arrays_mixed,
  update_bytes,
)
from codesign.model.terms.host import (
  HOST_GROUPS,
  Counts,
  batch_loading_time,
  compose,
  host_time,
  ids_on_critical_path,
  kernel_counts,
  op_time,
  step_host_floor,
  with_pipelined_ids,
)
from codesign.model.terms.shared import (
  HOST_THREADS_PER_RANK,
  ONE_DEVICE_DEDICATED_ABOVE,
  STREAM_EFFICIENCY,
  Setup,
  core_share,
  dense_device,
  domain_hosts,
  gemm_rate,
  host_link_rate,
  host_speed,
  peak_flops,
  ranks_per_node,
  setup,
)
from codesign.model.terms.switching import (
  fat_tree,
  network_bill,
  tiers_listing,
)

__all__ = [
  'hybrid',
  'structure',
  'Counts',
  'DdrTerms',
  'Fabric',
  'HOST_GROUPS',
  'Lookups',
  'MLP_FORWARD_SHARE',
  'MLP_KERNELS',
  'MLP_KERNELS_FORWARD',
  'MLP_PASSES',
  'ONE_DEVICE_DEDICATED_ABOVE',
  'STREAM_EFFICIENCY',
  'Setup',
  'allreduce_bytes',
  'allreduce_elem_bytes',
  'allreduce_calls',
  'allreduce_dense',
  'alltoall_ids',
  'alltoall_pooled',
  'busiest_loads',
  'busiest_rank',
  'AIR_RACK_W',
  'LIQUID_RACK_W',
  'LIQUID_USD_PER_W',
  'capex_and_power',
  'cooling_capex',
  'liquid_share',
  'node_wall_power',
  'rack_unit_power',
  'rack_unit_space',
  'node_rack_units',
  'usable_rack_units',
  'system_class',
  'fabric_capex_and_power',
  'nodes_capex_and_power',
  'racks',
  'tco',
  'energy_usd_per_w',
  'wall_power',
  'fat_tree',
  'network_bill',
  'tiers_listing',
  'HOST_COPY_KNEE',
  'host_copy',
  'compose',
  'dense_device',
  'dense_hbm_bytes',
  'dense_optimizer_time',
  'dense_times',
  'direct_share',
  'distinct_rows',
  'embedding_ddr',
  'embedding_hbm',
  'embedding_rate_factor',
  'fabric',
  'gemm_table',
  'hbm_hits',
  'hbm_loads',
  'host_link_rate',
  'host_time',
  'host_speed',
  'HOST_THREADS_PER_RANK',
  'op_time',
  'step_host_floor',
  'batch_loading_time',
  'ids_on_critical_path',
  'interaction_times',
  'intra_node_seconds',
  'pair_ring',
  'pcie_cards',
  'pcie_peer_rate',
  'pcie_ring_rate',
  'core_share',
  'kernel_counts',
  'with_pipelined_ids',
  'load_orders',
  'lookups',
  'memory',
  'stack_hbm_parts',
  'stack_hbm_reserved',
  'table_tiers',
  'whole_in_hbm',
  'mlp_elementwise',
  'gemm_rate',
  'peak_flops',
  'per_rank',
  'pooled_cast_bytes',
  'pooled_to_host',
  'ranks_per_node',
  'domain_hosts',
  'split_volume',
  'torus_alltoall',
  'torus_hops',
  'setup',
  'several_ranks',
  'SEARCHED_SHARDINGS',
  'data_parallel_mask',
  'one_hot_sharding',
  'present',
  'sharding_names',
  'table_arrays',
  'table_arrays_mixed',
  'update_bytes',
  'allreduce_algorithms',
  'alltoall_inter',
  'network_latency',
  'nic_rate',
  'pick_fastest',
  'several_nodes',
  'switch_tiers',
]
