"""A design as the inputs of the tools people train with (no file I/O).

`torchrec_planner(workload, platform, plan, stack)` returns, as a JSON
dict in TorchRec's own names and units, what TorchRec's sharding planner
(`torchrec.distributed.planner.EmbeddingShardingPlanner`) and its model
take, so that TorchRec counts the same memory and plans the same shards:

  topology        keyword arguments of `planner.Topology`: world_size,
                  local_world_size (the ranks of one scale-up domain:
                  a node's, or `Fabric.hosts_per_domain` nodes', the
                  ranks TorchRec's intra_host_bw joins), compute_device,
                  hbm_cap and ddr_cap (bytes per rank: HBM in the binary
                  GB it is sold in), intra_host_bw, inter_host_bw,
                  hbm_mem_bw, ddr_mem_bw, hbm_to_ddr_mem_bw (TorchRec's
                  unit: bytes per millisecond, per rank);
  batch_size      samples per rank per step (an int where the global
                  batch divides over the ranks, else the exact quotient,
                  with a warning);
  storage_reservation
                  keyword arguments of `HeuristicalStorageReservation`:
                  the share of HBM the stack keeps free and the dense
                  model's bytes per rank (`dense_tensor_estimate`, the
                  cost model's dense weights, gradients, optimizer state
                  and activations);
  pipeline_type   the `torchrec.distributed.types.PipelineType` member
                  of the stack's training pipeline (the storage
                  estimator's `pipeline_type`);
  optimizer       the embedding optimizer: `class` and `kwargs` for
                  `apply_optimizer_in_backward` (which the planner reads
                  to size optimizer state) and `fused_params` for the
                  sharder (`EmbOptimType` member name);
  dense           the dense part as `torchrec.models.dlrm.DLRM` (or
                  `DLRM_DCN`) takes it: model, dense_in_features,
                  dense_arch_layer_sizes, over_arch_layer_sizes, and
                  dcn_num_layers, dcn_low_rank_dim; its parameters;
  tables          keyword arguments of `EmbeddingBagConfig` per table
                  (`data_type` is a `DataType` member name);
  constraints     per table name, keyword arguments of
                  `ParameterConstraints`: sharding_types, compute_kernels,
                  pooling_factors, min_partition (column-wise), and for a
                  UVM-cached table cache_params: `load_factor` (its HBM
                  fraction) and `stats`, the keyword arguments of
                  `EmbeddingOffloadStats` (the workload's popularity skew
                  as a miss-ratio curve: `cacheability`,
                  `expected_lookups`, `mrc_hist_counts`, `height`);
  sharding_plan   the plan as TorchRec's `ShardingPlan` holds it: for
                  `module_path`, per table its sharding_type,
                  compute_kernel, ranks and shards (rank, offsets and
                  sizes in rows and columns), cut by TorchRec's own rules
                  and placed as ranks.json places them
                  (`rank_stats.place`);
  codesign        the same numbers in SI (bytes, bytes/s), per table the
                  plan's HBM fraction and bytes, per rank the bytes
                  ranks.json holds, and the run's inputs in full (what
                  TorchRec does not describe: `import_torchrec` reads
                  them back);
  header          what was exported, by what, the assumptions and the
                  warnings (what TorchRec cannot express as planned).

Every table's HBM and DDR bytes and its kernel follow the one memory
truth of the cost model (`terms.table_tiers`): a table with at least
1 - `terms.HOST_COPY_KNEE` of its rows in HBM is whole there (FUSED).
`codesign.boundary.torchrec_bridge` builds the TorchRec objects from
this dict.
"""

import numpy as np

from codesign.model import planner, rank_stats, terms
from codesign.spec import hardware, schema
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

FORMAT = 'codesign-torchrec-planner-inputs/2'
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
# Our optimizers -> (class for apply_optimizer_in_backward, its keyword
# arguments, fbgemm_gpu EmbOptimType member for the sharder's
# fused_params). The cost model has no learning rate: each is the class's
# own default (torch.optim.SGD and Adam 1e-3; Adagrad and TorchRec's
# RowWiseAdagrad 1e-2). TorchRec's storage estimator sizes state from the
# class (shard_estimators.py _get_optimizer_multipler: SGD 0, Adam 2,
# RowWiseAdagrad 1/dim, any other 1 x the table), as the cost model does.
OPTIMIZERS = {
  'sgd': ('torch.optim.SGD', {'lr': 1e-3}, 'EXACT_SGD'),
  'adagrad': ('torch.optim.Adagrad', {'lr': 1e-2}, 'EXACT_ADAGRAD'),
  'rowwise_adagrad': (
    'torchrec.optim.RowWiseAdagrad',
    {'lr': 1e-2},
    'EXACT_ROWWISE_ADAGRAD',
  ),
  'adam': ('torch.optim.Adam', {'lr': 1e-3}, 'ADAM'),
}
# Stack train_pipeline -> torchrec.distributed.types.PipelineType member.
PIPELINES = {'sparse_dist': 'TRAIN_SPARSE_DIST'}
# The module TorchRec's DLRM example keeps its tables in
# (torchrec.models.dlrm.DLRM.sparse_arch.embedding_bag_collection).
MODULE_PATH = 'sparse_arch.embedding_bag_collection'
# Bins of the exported miss-ratio curve (EmbeddingOffloadStats reads a
# histogram over cache sizes 0 to the table's rows).
MRC_BINS = 200
# TorchRec states bandwidths in bytes per millisecond (planner constants.py:
# INTRA_NODE_BANDWIDTH = 600 * 1024**3 / 1000  # bytes/ms).
MS_PER_S = 1e3

ASSUMPTIONS = (
  'Tables are named t_cat_<i> with one feature cat_<i> each, in the '
  "module sparse_arch.embedding_bag_collection, as in TorchRec's DLRM "
  "example; rename them to your model's.",
  'Bandwidths are per rank in bytes/ms (TorchRec planner constants): '
  "intra_host_bw is the cost model's achievable fabric bandwidth of one "
  'rank (links x link rate x efficiency), inter_host_bw its share of its '
  "node's achievable NIC bandwidth, hbm_to_ddr_mem_bw its share of the "
  'host link; hbm_mem_bw and ddr_mem_bw are peak HBM bandwidth and its '
  "share of its node's peak DDR bandwidth (TorchRec applies its own "
  'kernel factors to these two).',
  'hbm_cap is the whole HBM of one accelerator in bytes (HBM is sold in '
  "binary GB); storage_reservation keeps the stack's HBM reserve free "
  "and reserves the cost model's dense bytes per rank, as the cost model "
  'does.',
  "ddr_cap is the node's DDR divided over its ranks (TorchRec gives every "
  'rank its own DDR capacity).',
  'A table with at least 1 - 1e-3 of its rows in HBM is whole there and '
  'gets the fused kernel (the cost model counts it so); one partly in '
  'HBM gets fused_uvm_caching with load_factor = its HBM fraction and '
  "the workload's popularity skew as cache statistics when the stack "
  'caches in UVM (TorchRec does), else fused_uvm; data-parallel tables '
  'get dense.',
  "Each table is pinned to the plan's one sharding type and kernel, and "
  'sharding_plan places every shard as ranks.json does: load it as '
  "TorchRec's ShardingPlan, or let TorchRec's planner place the shards "
  '(widen the constraint lists to let it choose more).',
  'The learning rates are placeholders (each optimizer class default): '
  'the cost model does not depend on them.',
)


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
    (whole in HBM: `terms.whole_in_hbm`, or on a CPU trainer),
    `fused_uvm_caching` (partly in HBM under UVM caching) or `fused_uvm`.
  """
  if sharding == 'data_parallel':
    return DENSE
  if cpu_trainer or bool(terms.whole_in_hbm(hbm_fraction)):
    return FUSED
  if uvm_caching and hbm_fraction > 0.0:
    return FUSED_UVM_CACHING
  return FUSED_UVM


def table_names(w: wl.Workload) -> list[str]:
  """TorchRec table names t_cat_<i>, one per table (see ASSUMPTIONS)."""
  return [f't_cat_{i}' for i in range(w.num_tables)]


def torchrec_planner(
  w: wl.Workload,
  p: Platform,
  plan: Plan,
  s: Stack,
  source: dict | None = None,
  figures: dict | None = None,
) -> dict:
  """The design as TorchRec inputs (module docstring).

  Args:
    w: the workload.
    p: the platform (concrete numbers).
    plan: the plan; `hbm_fraction` of shape (T,).
    s: the software stack.
    source: provenance merged into the header (run directory, file,
      codesign version, git SHA).
    figures: the design's evaluation (`api.evaluate`'s dict), whose
      memory and feasibility the header and `codesign` record.

  Returns:
    A JSON-able dict (module docstring's keys).
  """
  topology, bw = _topology(w, p, s)
  pt, share = rank_stats.place(w, p, plan, s)
  tables, constraints, ours, warnings = _tables(w, p, plan, s)
  sharding_plan, plan_warnings = _sharding_plan(w, p, plan, share, topology)
  for name, x in sharding_plan.items():
    x['compute_kernel'] = constraints[name]['compute_kernels'][0]
    if 'cache_params' in constraints[name]:
      load = constraints[name]['cache_params']['load_factor']
      x['cache_params'] = {'load_factor': load}
  batch, batch_warnings = _batch_size(w, topology['world_size'])
  warnings += plan_warnings + batch_warnings + _stack_warnings(w, s)
  header = {
    'format': FORMAT,
    'workload': w.name,
    'platform': p.name,
    'stack': s.name,
    'trainer': p.trainer,
    'assumptions': list(ASSUMPTIONS),
    'warnings': warnings,
    **_feasibility(figures),
    **(source or {}),
  }
  return {
    'header': header,
    'topology': topology,
    'batch_size': batch,
    'storage_reservation': {
      'percentage': float(s.hbm_reserve),
      'dense_tensor_estimate': int(round(pt['dense_hbm_bytes'])),
    },
    'pipeline_type': PIPELINES.get(s.train_pipeline, 'NONE'),
    'optimizer': optimizer(w),
    'dense': dense_arch(w),
    'tables': tables,
    'constraints': constraints,
    'sharding_plan': {'module_path': MODULE_PATH, 'tables': sharding_plan},
    'codesign': _ours(w, p, plan, s, (pt, share, bw, ours, figures)),
  }


def optimizer(w: wl.Workload) -> dict:
  """The embedding optimizer in TorchRec's terms (module docstring)."""
  cls, kwargs, fused = OPTIMIZERS[w.optimizer]
  return {
    'class': cls,
    'kwargs': dict(kwargs),
    'fused_params': {'optimizer': fused, 'learning_rate': kwargs['lr']},
  }


def dense_arch(w: wl.Workload) -> dict:
  """The dense part as TorchRec's DLRM (or DLRM_DCN) takes it."""
  out = {
    'model': 'DLRM_DCN' if w.interaction == 'dcnv2' else 'DLRM',
    'dense_in_features': w.num_dense,
    'dense_arch_layer_sizes': list(w.bottom_mlp),
    'over_arch_layer_sizes': list(w.top_mlp),
    'interaction': w.interaction,
    'precision': w.dense_precision,
    'parameters': wl.dense_param_count(w),
  }
  if w.interaction == 'dcnv2':
    out['dcn_num_layers'] = w.dcn_layers
    out['dcn_low_rank_dim'] = w.dcn_rank
  return out


def _feasibility(figures: dict | None) -> dict:
  """The header's `feasible` and `overflowing_tiers` of the evaluation."""
  if figures is None:
    return {}
  return {
    'feasible': bool(figures['feasible']),
    'overflowing_tiers': list(figures['overflowing_tiers']),
  }


def _ranks(p: Platform) -> tuple[int, int]:
  """(nodes, ranks per node) of platform `p`."""
  per_node = int(round(float(terms.ranks_per_node(p))))
  return int(round(float(p.nodes))), per_node


def domain_hosts(p: Platform) -> int:
  """Hosts per scale-up domain (`terms.domain_hosts`; 1 on CPUs)."""
  return int(round(float(terms.domain_hosts(hardware.as_arrays(p)))))


def node_ddr(p: Platform) -> float:
  """DDR bytes per node."""
  return float(p.sockets_per_node) * float(p.cpu.ddr_capacity)


def fabric(w: wl.Workload, p: Platform, s: Stack) -> dict[str, float]:
  """Per-rank bandwidths (bytes/s) of the platform as the model sees it."""
  pa = hardware.as_arrays(p)
  st = terms.setup(pa, w, s)
  fab = terms.fabric(pa, s, st)
  per_node = float(terms.ranks_per_node(p))
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
    * float(p.cpu.ddr_bandwidth)
    / per_node,
    'hbm_to_ddr_mem_bytes_per_s': host,
  }


def _topology(w: wl.Workload, p: Platform, s: Stack) -> tuple[dict, dict]:
  """(topology, bw): TorchRec's Topology arguments (bandwidths in bytes
  per ms) and the bandwidths they come from (`fabric`, bytes/s)."""
  cpu_trainer = p.trainer == 'cpu'
  nodes, per_node = _ranks(p)
  bw = fabric(w, p, s)
  topology = {
    'world_size': nodes * per_node,
    'local_world_size': per_node * domain_hosts(p),
    'compute_device': 'cpu' if cpu_trainer else 'cuda',
    'hbm_cap': 0 if cpu_trainer else int(float(p.accelerator.hbm_capacity)),
    'ddr_cap': int(node_ddr(p) / per_node),
    'intra_host_bw': bw['intra_host_bytes_per_s'] / MS_PER_S,
    'inter_host_bw': bw['inter_host_bytes_per_s'] / MS_PER_S,
    'hbm_mem_bw': bw['hbm_mem_bytes_per_s'] / MS_PER_S,
    'ddr_mem_bw': bw['ddr_mem_bytes_per_s'] / MS_PER_S,
    'hbm_to_ddr_mem_bw': bw['hbm_to_ddr_mem_bytes_per_s'] / MS_PER_S,
  }
  return topology, bw


def _batch_size(w: wl.Workload, world: int) -> tuple[int | float, list]:
  """The batch per rank, exact: an int where the ranks divide the global
  batch, else the quotient (TorchRec's estimates take it) and a
  warning."""
  if w.global_batch % world == 0:
    return w.global_batch // world, []
  per_rank = w.global_batch / world
  return per_rank, [
    f'the global batch {w.global_batch:,} does not divide over {world} '
    f'ranks: batch_size is {per_rank:.6g} samples per rank (TorchRec '
    'trains an int per rank; round it, and the global batch with it)'
  ]


def _stack_warnings(w: wl.Workload, s: Stack) -> list[str]:
  """What of the stack and workload TorchRec does not train as planned."""
  out = []
  if s.name != 'torchrec':
    out.append(
      f'the plan was made for the {s.name} stack, not TorchRec; its '
      'placement may not be what TorchRec would choose'
    )
  if w.interaction == 'cat':
    out.append(
      'the cat interaction has no TorchRec DLRM class; dense describes '
      'it for a model of your own'
    )
  state = wl.optimizer_state_elems_per_param(w.optimizer)
  low = sorted({t.precision for t in w.tables if t.precision != 'fp32'})
  if state and low:
    out.append(
      f'TorchRec sizes {w.optimizer} state in the table dtype ('
      f'{", ".join(low)}), the cost model in fp32: TorchRec counts less '
      'optimizer state for those tables'
    )
  return out


def _tables(w: wl.Workload, p: Platform, plan: Plan, s: Stack):
  """(tables, constraints, ours, warnings): per table TorchRec's
  EmbeddingBagConfig and ParameterConstraints arguments, the plan's own
  numbers (`terms.table_tiers`), and what TorchRec cannot express as
  planned."""
  cpu_trainer = p.trainer == 'cpu'
  frac = np.asarray(plan.hbm_fraction, np.float64)
  dp = np.array([x == 'data_parallel' for x in plan.sharding], np.float64)
  frac = 0.0 * frac if cpu_trainer else dp + (1.0 - dp) * frac
  tb = planner.table_bytes(w)
  hbm, ddr = (
    np.asarray(x, np.float64)
    for x in terms.table_tiers(s, frac, tb, dp, cpu_trainer)
  )
  warnings, tables, constraints, ours = [], [], {}, {}
  for i, (t, name) in enumerate(zip(w.tables, table_names(w), strict=True)):
    sharding, f = plan.sharding[i], float(frac[i])
    kernel = compute_kernel(
      sharding, f, cpu_trainer=cpu_trainer, uvm_caching=s.uvm_caching
    )
    tables.append(_table_config(t, name))
    constraints[name] = _constraint(w, t, sharding, kernel, f, plan)
    ours[name] = {
      'sharding': sharding,
      'compute_kernel': kernel,
      'hbm_fraction': f,
      'table_bytes': float(tb[i]),
      'hbm_bytes': float(hbm[i]),
      'ddr_bytes': float(ddr[i]),
      'lookups_per_sample': float(t.pooling),
    }
    warnings += _table_warnings(name, t, sharding, kernel, f, cpu_trainer)
  return tables, constraints, ours, warnings


def _table_config(t: wl.Table, name: str) -> dict:
  """EmbeddingBagConfig keyword arguments of table `t`."""
  return {
    'name': name,
    'num_embeddings': t.rows,
    'embedding_dim': t.dim,
    'feature_names': [name.removeprefix('t_')],
    'data_type': DATA_TYPES.get(t.precision),
  }


def _constraint(w: wl.Workload, t: wl.Table, sharding, kernel, f, plan):
  """TorchRec's ParameterConstraints of table `t`: its sharding type,
  compute kernel and pooling factor; its column shards' smallest size;
  its UVM cache's load factor (`f`, the HBM fraction) and statistics."""
  c = {
    'sharding_types': [SHARDING_TYPES[sharding]],
    'compute_kernels': [kernel],
    'pooling_factors': [float(t.pooling)],
  }
  if sharding == 'column_wise':
    c['min_partition'] = max(1, t.dim // plan.column_shards)
  if kernel == FUSED_UVM_CACHING:
    c['cache_params'] = {'load_factor': f, 'stats': cache_stats(w, t)}
  return c


def cache_stats(w: wl.Workload, t: wl.Table) -> dict:
  """`EmbeddingOffloadStats` keyword arguments of table `t` under the
  workload's popularity skew k (hit(f) = 1 - (1 - f)^k of the hottest
  share f of rows, `terms.hbm_hits`): `cacheability`, the area under the
  miss-ratio curve, 1 / (k + 1); `expected_lookups`, the distinct rows a
  global batch touches (`terms.distinct_rows`); `mrc_hist_counts`, the
  lookups each 1/`MRC_BINS` of cache size adds hits for (per global
  batch); `height`, the rows."""
  k = float(w.popularity_skew)
  lookups = w.global_batch * float(t.pooling)
  edges = np.linspace(0.0, 1.0, MRC_BINS + 1)
  hits = 1.0 - (1.0 - edges) ** k
  distinct = terms.distinct_rows(float(t.rows), lookups, k, 0.0, 1.0)
  return {
    'cacheability': 1.0 / (k + 1.0),
    'expected_lookups': int(round(float(distinct))),
    'mrc_hist_counts': [float(x) for x in lookups * np.diff(hits)],
    'height': t.rows,
  }


def _table_warnings(name, t: wl.Table, sharding, kernel, f, cpu_trainer):
  """What TorchRec cannot express of table `name` as planned: its
  precision, a row-wise sharding on CPU, HBM rows under fused_uvm."""
  warnings = []
  if t.precision not in DATA_TYPES:
    warnings.append(f'{name}: TorchRec has no {t.precision} table type')
  if cpu_trainer and sharding in ('row_wise', 'table_row_wise'):
    warnings.append(f'{name}: TorchRec shards {sharding} on cuda only')
  if not cpu_trainer and kernel == FUSED_UVM and f > 0.0:
    warnings.append(
      f'{name}: {f:.3g} of it is in HBM in the plan, none under fused_uvm'
    )
  return warnings


def row_blocks(rows: int, parts: int) -> list[int]:
  """Rows of each of `parts` row shards as TorchRec cuts them
  (torchrec/distributed/sharding_plan.py
  _calculate_rw_shard_sizes_and_offsets: ceil(rows / parts) each, the
  rest on the last, none after it)."""
  block = -(-rows // parts)
  full = rows // block
  return [
    block if r < full else (rows - block * full if r == full else 0)
    for r in range(parts)
  ]


def _sharding_plan(w, p: Platform, plan: Plan, share, topology) -> tuple:
  """(per table TorchRec's ParameterSharding as JSON, warnings): each
  table's shards, cut by TorchRec's rules, on the ranks of `share` (the
  (T, R) placement of `rank_stats.place`)."""
  world, local = topology['world_size'], topology['local_world_size']
  out, warnings = {}, []
  for i, (t, name) in enumerate(zip(w.tables, table_names(w), strict=True)):
    sharding = plan.sharding[i]
    held = np.flatnonzero(share[i] > 1e-12)
    if sharding == 'column_wise':
      shards = _column_shards(t, plan.column_shards, share[i])
      if len(shards) != plan.column_shards:
        warnings.append(
          f'{name}: TorchRec cuts its {t.dim} columns in blocks of a '
          f'multiple of 4: {len(shards)} shards, not the '
          f'{plan.column_shards} of the plan'
        )
    elif sharding == 'table_wise':
      shards = [_shard(int(held[0]), 0, t.rows, 0, t.dim)]
    elif sharding == 'data_parallel':
      shards = [_shard(r, 0, t.rows, 0, t.dim) for r in range(world)]
    else:
      ranks = _group(held, world, local, sharding)
      if len(held) != len(ranks):
        warnings.append(
          f'{name}: {sharding} over {len(held)} ranks in the plan; '
          f'TorchRec shards it over {len(ranks)}'
        )
      shards = _row_shards(t, ranks)
    out[name] = {
      'sharding_type': SHARDING_TYPES[sharding],
      'ranks': [x['rank'] for x in shards],
      'shards': shards,
    }
  return out, warnings


def _group(held, world: int, local: int, sharding: str) -> list[int]:
  """The ranks TorchRec shards a row-wise (all) or table-row-wise (one
  scale-up domain, the one of the plan's first rank) table over."""
  if sharding == 'row_wise':
    return list(range(world))
  first = int(held[0]) // local * local
  return list(range(first, first + local))


def _shard(rank: int, row0: int, rows: int, col0: int, cols: int) -> dict:
  return {'rank': rank, 'offsets': [row0, col0], 'sizes': [rows, cols]}


def _row_shards(t: wl.Table, ranks) -> list[dict]:
  """The row shards of table `t` over `ranks`, in rank order."""
  ranks = [int(r) for r in ranks]
  blocks = row_blocks(t.rows, len(ranks))
  starts = np.concatenate([[0], np.cumsum(blocks)[:-1]])
  return [
    _shard(r, int(a), b, 0, t.dim)
    for r, a, b in zip(ranks, starts, blocks, strict=True)
  ]


def _column_shards(t: wl.Table, column_shards: int, share) -> list[dict]:
  """The column shards of table `t` (`rank_stats.column_block` wide) on
  the ranks of its placement `share` (R,), in column order."""
  width = rank_stats.column_block(t.dim, column_shards)
  pieces = t.dim // width
  ranks = []
  for r in np.flatnonzero(share > 1e-12):
    ranks += [int(r)] * int(round(share[r] * pieces))
  return [_shard(r, 0, t.rows, k * width, width) for k, r in enumerate(ranks)]


def _ours(w, p: Platform, plan: Plan, s: Stack, parts) -> dict:
  """The `codesign` section: SI numbers, per table and per rank the
  plan's bytes (ranks.json's placement), and the inputs in full."""
  pt, share, bw, ours, figures = parts
  nodes, per_node = _ranks(p)
  dp = np.array([x == 'data_parallel' for x in plan.sharding])
  replicas = share.copy()
  replicas[dp] = 1.0
  table_hbm = pt['hbm_bytes'] @ replicas + pt['overhead_hbm_bytes'] @ share
  out = {
    'nodes': nodes,
    'ranks_per_node': per_node,
    'global_batch': w.global_batch,
    'hbm_capacity_bytes_per_rank': 0.0
    if p.trainer == 'cpu'
    else float(p.accelerator.hbm_capacity),
    'ddr_capacity_bytes_per_node': node_ddr(p),
    'bandwidths_bytes_per_s': bw,
    'cpu_lookup_fraction': float(plan.cpu_lookup_fraction),
    'column_shards': plan.column_shards,
    'tables': ours,
    'ranks': {
      'table_hbm_bytes': [float(x) for x in table_hbm],
      'table_ddr_bytes': [
        float(x) for x in pt['ddr_bytes'] @ replicas + pt['dense_ddr_bytes']
      ],
      'dense_hbm_bytes': pt['dense_hbm_bytes'],
      'kjt_hbm_bytes': pt['kjt_hbm_bytes'],
      'model_hbm_required_bytes': pt['model_hbm_bytes'],
      'embedding_s': [
        float(x) for x in pt['seconds'] @ share + pt['replica_seconds']
      ],
    },
    'inputs': {
      'workload': schema.workload_to_json(w),
      'platform': schema.platform_to_json(p),
      'plan': schema.plan_to_json(plan),
      'stack': schema.stack_to_json(s),
    },
  }
  if figures is not None:
    out['memory'] = figures['memory']
    out['step_time_s'] = figures['step_time_s']
    b = figures['breakdown_s']
    out['ranks']['alltoall_s'] = b['alltoall_intra'] + b['alltoall_inter']
  return out


EXPORTERS = {'torchrec': torchrec_planner}
