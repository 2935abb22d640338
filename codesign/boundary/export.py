"""A design as the inputs of the tools people train with (no file I/O).

`torchrec_planner(workload, platform, plan, stack)` returns, as a JSON
dict, what TorchRec's sharding planner
(`torchrec.distributed.planner.EmbeddingShardingPlanner`) takes:

  topology        keyword arguments of `planner.Topology`: world_size,
                  local_world_size (the ranks of one scale-up domain:
                  a node's, or `Fabric.hosts_per_domain` nodes', the
                  ranks TorchRec's intra_host_bw joins), compute_device,
                  hbm_cap and ddr_cap (bytes per rank), intra_host_bw,
                  inter_host_bw, hbm_mem_bw, ddr_mem_bw, hbm_to_ddr_mem_bw
                  (TorchRec's unit: bytes per millisecond, per rank);
  batch_size      samples per rank per step (the planner's batch_size);
  storage_reservation
                  keyword arguments of `HeuristicalStorageReservation`
                  (the share of HBM the stack keeps free);
  tables          keyword arguments of `EmbeddingBagConfig` per table
                  (`data_type` is a `DataType` member name);
  constraints     per table name, keyword arguments of
                  `ParameterConstraints`: sharding_types, compute_kernels,
                  pooling_factors, min_partition (column-wise), and
                  cache_params (keyword arguments of `CacheParams`) with
                  `load_factor` for the tables UVM-cached in part;
  codesign        the same numbers in SI (bytes, bytes/s) and per table
                  the plan's HBM fraction and bytes, for reference;
  header          what was exported, by what, and the assumptions.

In TorchRec (field names as in torchrec/distributed/planner/types.py and
torchrec/distributed/types.py):

  d = json.load(open('RUN/torchrec_planner.json'))
  constraints = {
    name: ParameterConstraints(**{
      **c, 'cache_params': CacheParams(**c['cache_params'])
      if 'cache_params' in c else None})
    for name, c in d['constraints'].items()}
  planner = EmbeddingShardingPlanner(
    topology=Topology(**d['topology']), batch_size=d['batch_size'],
    constraints=constraints, storage_reservation=
    HeuristicalStorageReservation(**d['storage_reservation']))
"""

import numpy as np

from codesign.model import planner, terms
from codesign.spec import hardware
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

FORMAT = 'codesign-torchrec-planner-inputs/1'
# Our sharding names -> torchrec.distributed.types.ShardingType values.
SHARDING_TYPES = {
  'table_wise': 'table_wise',
  'row_wise': 'row_wise',
  'table_row_wise': 'table_row_wise',
  'column_wise': 'column_wise',
  'data_parallel': 'data_parallel',
}
# torchrec.distributed.embedding_types.EmbeddingComputeKernel values.
DENSE, FUSED, FUSED_UVM, FUSED_UVM_CACHING = (
  'dense',
  'fused',
  'fused_uvm',
  'fused_uvm_caching',
)
# Table precisions -> torchrec.types.DataType member names (no fp8 one).
DATA_TYPES = {
  'fp32': 'FP32',
  'tf32': 'FP32',
  'bf16': 'BF16',
  'fp16': 'FP16',
  'int8': 'INT8',
}
# A plan fraction within this of 0 or 1 is a table wholly in DDR or HBM
# (the planner's water-filling bisects to about 1e-12).
WHOLE = 1e-6
# TorchRec states bandwidths in bytes per millisecond (planner constants.py:
# INTRA_NODE_BANDWIDTH = 600 * 1024**3 / 1000  # bytes/ms).
MS_PER_S = 1e3

ASSUMPTIONS = (
  'Tables are named t_cat_<i> with one feature cat_<i> each, as in '
  "TorchRec's DLRM example; rename them to your model's.",
  'Bandwidths are per rank in bytes/ms (TorchRec planner constants): '
  "intra_host_bw is the cost model's achievable fabric bandwidth of one "
  'rank (links x link rate x efficiency), inter_host_bw its share of its '
  "node's achievable NIC bandwidth, hbm_to_ddr_mem_bw its share of the "
  'host link; hbm_mem_bw and ddr_mem_bw are peak HBM bandwidth and its '
  "share of its node's peak DDR bandwidth (TorchRec applies its own "
  'kernel factors to these two).',
  'hbm_cap is the whole HBM of one accelerator; storage_reservation keeps '
  "the stack's HBM reserve free, as the cost model does.",
  "ddr_cap is the node's DDR divided over its ranks (TorchRec gives every "
  'rank its own DDR capacity).',
  'Older TorchRec releases lack the hbm_mem_bw, ddr_mem_bw and '
  'hbm_to_ddr_mem_bw arguments of Topology; drop them there.',
  'A table wholly in HBM gets the fused kernel; one partly in HBM gets '
  'fused_uvm_caching with load_factor = its HBM fraction when the stack '
  'caches in UVM (TorchRec does), else fused_uvm (TorchRec has no static '
  'HBM/DDR split of one table, nor CPU-pooled lookups for a GPU trainer, '
  'so its HBM share is not kept); data-parallel tables get dense.',
  "Each table is pinned to the plan's one sharding type and kernel, so "
  "TorchRec's planner only places the shards; widen the lists to let it "
  'choose.',
)


def _fabric(w: wl.Workload, p: Platform, s: Stack) -> dict[str, float]:
  """Per-rank bandwidths (bytes/s) of the platform as the model sees it."""
  pa = hardware.as_arrays(p)
  st = terms.setup(pa, w, s)
  fab = terms.fabric(pa, s, st)
  per_node = float(terms.ranks_per_node(p))
  cpu = p.cpu
  if p.trainer == 'cpu':
    hbm, host = 0.0, 0.0
  else:
    hbm = float(p.accelerator.hbm_bandwidth)
    host = float(terms.host_link_rate(pa)) / per_node
  return {
    'intra_host_bytes_per_s': float(fab.direct),
    'inter_host_bytes_per_s': float(fab.nic) / per_node,
    'hbm_mem_bytes_per_s': hbm,
    'ddr_mem_bytes_per_s': float(p.sockets_per_node)
    * float(cpu.ddr_bandwidth)
    / per_node,
    'hbm_to_ddr_mem_bytes_per_s': host,
  }


def compute_kernel(
  sharding: str, hbm_fraction: float, *, cpu_trainer: bool, uvm_caching: bool
) -> str:
  """TorchRec's compute kernel for one table of the plan (see ASSUMPTIONS).

  Args:
    sharding: one of `plan.SHARDINGS`.
    hbm_fraction: share of the table's rows in HBM, in [0, 1].
    cpu_trainer: the platform trains on its CPU sockets.
    uvm_caching: the stack caches DDR-resident tables in HBM.

  Returns:
    An `EmbeddingComputeKernel` value: `dense` (data-parallel), `fused`
    (wholly in HBM, or on a CPU trainer), `fused_uvm_caching` (partly in
    HBM under UVM caching) or `fused_uvm`.
  """
  if sharding == 'data_parallel':
    return DENSE
  if cpu_trainer or hbm_fraction >= 1.0 - WHOLE:
    return FUSED
  if uvm_caching and hbm_fraction > WHOLE:
    return FUSED_UVM_CACHING
  return FUSED_UVM


def table_names(w: wl.Workload) -> list[str]:
  """TorchRec table names t_cat_<i>, one per table (see ASSUMPTIONS)."""
  return [f't_cat_{i}' for i in range(w.num_tables)]


def torchrec_planner(
  w: wl.Workload, p: Platform, plan: Plan, s: Stack, source: dict | None = None
) -> dict:
  """The design as TorchRec sharding-planner inputs (module docstring).

  Args:
    w: the workload.
    p: the platform (concrete numbers).
    plan: the plan; `hbm_fraction` of shape (T,).
    s: the software stack.
    source: provenance merged into the header (run directory, file,
      codesign version, git SHA).

  Returns:
    A JSON-able dict: `header`, `topology`, `batch_size`,
    `storage_reservation`, `tables`, `constraints`, `codesign`.
  """
  nodes, per_node = _ranks(p)
  topology, bw = _topology(w, p, s)
  tables, constraints, ours, warnings = _tables(w, p, plan, s)
  if s.name != 'torchrec':
    warnings.append(
      f'the plan was made for the {s.name} stack, not TorchRec; its '
      'placement may not be what TorchRec would choose'
    )
  header = {
    'format': FORMAT,
    'workload': w.name,
    'platform': p.name,
    'stack': s.name,
    'trainer': p.trainer,
    'assumptions': list(ASSUMPTIONS),
    'warnings': warnings,
    **(source or {}),
  }
  return {
    'header': header,
    'topology': topology,
    'batch_size': int(round(w.global_batch / topology['world_size'])),
    'storage_reservation': {'percentage': float(s.hbm_reserve)},
    'tables': tables,
    'constraints': constraints,
    'codesign': {
      'nodes': nodes,
      'ranks_per_node': per_node,
      'global_batch': w.global_batch,
      'hbm_capacity_bytes_per_rank': topology['hbm_cap'],
      'ddr_capacity_bytes_per_node': _node_ddr(p),
      'bandwidths_bytes_per_s': bw,
      'cpu_lookup_fraction': float(plan.cpu_lookup_fraction),
      'column_shards': plan.column_shards,
      'tables': ours,
    },
  }


def _ranks(p: Platform) -> tuple[int, int]:
  """(nodes, ranks per node) of platform `p`."""
  per_node = int(round(float(terms.ranks_per_node(p))))
  return int(round(float(p.nodes))), per_node


def _domain_hosts(p: Platform) -> int:
  """Hosts per scale-up domain (`terms.domain_hosts`; 1 on CPUs)."""
  return int(round(float(terms.domain_hosts(hardware.as_arrays(p)))))


def _node_ddr(p: Platform) -> float:
  """DDR bytes per node."""
  return float(p.sockets_per_node) * float(p.cpu.ddr_capacity)


def _topology(w: wl.Workload, p: Platform, s: Stack) -> tuple[dict, dict]:
  """(topology, bw): TorchRec's Topology arguments (bandwidths in bytes
  per ms) and the bandwidths they come from (`_fabric`, bytes/s)."""
  cpu_trainer = p.trainer == 'cpu'
  nodes, per_node = _ranks(p)
  bw = _fabric(w, p, s)
  topology = {
    'world_size': nodes * per_node,
    'local_world_size': per_node * _domain_hosts(p),
    'compute_device': 'cpu' if cpu_trainer else 'cuda',
    'hbm_cap': 0 if cpu_trainer else int(float(p.accelerator.hbm_capacity)),
    'ddr_cap': int(_node_ddr(p) / per_node),
    'intra_host_bw': bw['intra_host_bytes_per_s'] / MS_PER_S,
    'inter_host_bw': bw['inter_host_bytes_per_s'] / MS_PER_S,
    'hbm_mem_bw': bw['hbm_mem_bytes_per_s'] / MS_PER_S,
    'ddr_mem_bw': bw['ddr_mem_bytes_per_s'] / MS_PER_S,
    'hbm_to_ddr_mem_bw': bw['hbm_to_ddr_mem_bytes_per_s'] / MS_PER_S,
  }
  return topology, bw


def _tables(w: wl.Workload, p: Platform, plan: Plan, s: Stack):
  """(tables, constraints, ours, warnings): per table TorchRec's
  EmbeddingBagConfig and ParameterConstraints arguments, the plan's own
  numbers, and what TorchRec cannot express as planned."""
  cpu_trainer = p.trainer == 'cpu'
  frac = np.asarray(plan.hbm_fraction, np.float64)
  tb = planner.table_bytes(w)
  warnings = []
  tables, constraints, ours = [], {}, {}
  for i, (t, name) in enumerate(zip(w.tables, table_names(w), strict=True)):
    sharding = plan.sharding[i]
    f = 1.0 if sharding == 'data_parallel' else float(frac[i])
    f = 0.0 if cpu_trainer else f
    kernel = compute_kernel(
      sharding, f, cpu_trainer=cpu_trainer, uvm_caching=s.uvm_caching
    )
    tables.append(
      {
        'name': name,
        'num_embeddings': t.rows,
        'embedding_dim': t.dim,
        'feature_names': [name.removeprefix('t_')],
        'data_type': DATA_TYPES.get(t.precision),
      }
    )
    constraints[name] = _constraint(t, sharding, kernel, f, plan.column_shards)
    in_ddr = 1.0 if kernel in (FUSED_UVM, FUSED_UVM_CACHING) else 0.0
    ours[name] = {
      'sharding': sharding,
      'hbm_fraction': f,
      'table_bytes': float(tb[i]),
      'hbm_bytes': f * float(tb[i]),
      'ddr_bytes': float(tb[i]) * (1.0 if cpu_trainer else in_ddr),
      'lookups_per_sample': float(t.pooling),
    }
    warnings += _table_warnings(name, t, sharding, kernel, f, cpu_trainer)
  return tables, constraints, ours, warnings


def _constraint(t: wl.Table, sharding, kernel, f, column_shards) -> dict:
  """TorchRec's ParameterConstraints of table `t`: its sharding type,
  compute kernel and pooling factor; its column shards' smallest size;
  its UVM cache's load factor (`f`, the HBM fraction)."""
  c = {
    'sharding_types': [SHARDING_TYPES[sharding]],
    'compute_kernels': [kernel],
    'pooling_factors': [float(t.pooling)],
  }
  if sharding == 'column_wise':
    c['min_partition'] = max(1, t.dim // column_shards)
  if kernel == FUSED_UVM_CACHING:
    c['cache_params'] = {'load_factor': f}
  return c


def _table_warnings(name, t: wl.Table, sharding, kernel, f, cpu_trainer):
  """What TorchRec cannot express of table `name` as planned: its
  precision, a row-wise sharding on CPU, HBM rows under fused_uvm."""
  warnings = []
  if t.precision not in DATA_TYPES:
    warnings.append(f'{name}: TorchRec has no {t.precision} table type')
  if cpu_trainer and sharding in ('row_wise', 'table_row_wise'):
    warnings.append(f'{name}: TorchRec shards {sharding} on cuda only')
  if not cpu_trainer and kernel == FUSED_UVM and f > WHOLE:
    warnings.append(
      f'{name}: {f:.3g} of it is in HBM in the plan, none under fused_uvm'
    )
  return warnings


EXPORTERS = {'torchrec': torchrec_planner}
