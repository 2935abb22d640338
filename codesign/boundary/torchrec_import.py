"""A TorchRec model and cluster in: codesign's workload, platform, plan and
stack of what a TorchRec user states.

A description is a dict in the export's own format
(`export.torchrec_planner`: `tables`, `topology`, `batch_size`, and as
far as they are known `dense`, `optimizer`, `constraints`,
`sharding_plan`, `storage_reservation`, `pipeline_type`), read from a
JSON file, or made by `describe` from TorchRec's objects as a user builds
them (`EmbeddingBagConfig`s or an `EmbeddingBagCollection`, a DLRM, a
`Topology`, `ParameterConstraints`, a `ShardingPlan`; read by attribute,
so TorchRec need not be imported here). `read_python` runs a user's
Python file and describes what it builds.

`to_inputs(d)` makes the four inputs as JSON dicts (what `evaluate` and
`propose` take) and says every guess it makes:
- the workload: the tables (rows, dim, precision from `data_type`,
  lookups per sample from `pooling_factors`), the dense part (DLRM's
  arguments), the global batch (batch per rank x world size), the
  optimizer, and the popularity skew from a cached table's cache
  statistics (`cacheability` = 1 / (k + 1));
- the platform: the export's own platform where the description is an
  export (its `codesign` section), else the nearest preset (trainer, HBM
  per accelerator, HBM bandwidth, ranks per node), adjusted to the
  Topology: nodes and ranks per node, HBM and DDR capacity, HBM and DDR
  bandwidth, and the fabric, NIC and host link scaled to its intra-host,
  inter-host and HBM-to-DDR bandwidths;
- the plan: per table the sharding type and kernel of the sharding plan
  or the constraints, the HBM fraction from the kernel (fused: whole,
  fused_uvm_caching: its load factor, fused_uvm: none);
- the stack: TorchRec's, with the reservation's HBM share and the
  pipeline type.
What the description does not state comes from the export's `codesign`
section where there is one (an export read back gives the same figures),
else from TorchRec's own defaults or the auto plan, each said in a guess.
"""

import dataclasses
import math
import runpy
from typing import NamedTuple

import numpy as np

from codesign.boundary import export
from codesign.core.errors import InputError
from codesign.model import planner, rank_stats, terms
from codesign.spec import hardware, platform_presets, schema, stack_presets
from codesign.spec import workload as wl

DATA_TYPES = {'FP32': 'fp32', 'FP16': 'fp16', 'BF16': 'bf16', 'INT8': 'int8'}
# Optimizer classes (last dotted name) and fbgemm_gpu EmbOptimType names.
OPTIMIZERS = {
  'SGD': 'sgd',
  'EXACT_SGD': 'sgd',
  'Adagrad': 'adagrad',
  'EXACT_ADAGRAD': 'adagrad',
  'RowWiseAdagrad': 'rowwise_adagrad',
  'EXACT_ROWWISE_ADAGRAD': 'rowwise_adagrad',
  'ROWWISE_ADAGRAD': 'rowwise_adagrad',
  'Adam': 'adam',
  'ADAM': 'adam',
}
PIPELINES = {'TRAIN_SPARSE_DIST': 'sparse_dist', 'NONE': 'none'}
# What TorchRec's planner takes where a description is silent
# (torchrec/distributed/planner/constants.py).
POOLING_FACTOR = 1.0
UVM_CACHING_RATIO = 0.2
# TorchRec's DLRM example (torchrec/examples/... dlrm_main.py defaults)
# where no dense part is given: 13 dense features (Criteo), dense arch
# 512-256-D, over arch 512-512-256-1.
DEFAULT_DENSE = (13, (512, 256), (512, 512, 256, 1))
# Relative difference under which a Topology number is the base's own.
SAME = 1e-9


class Imported(NamedTuple):
  """The four inputs as JSON dicts, and every guess made for them."""

  workload: dict
  platform: dict
  plan: dict
  stack: dict
  guesses: list


def _name(x) -> str:
  """A TorchRec enum member's or a string's name."""
  return getattr(x, 'name', None) or str(x)


def _table(t) -> dict:
  """EmbeddingBagConfig keyword arguments of table object `t`."""
  return {
    'name': t.name,
    'num_embeddings': int(t.num_embeddings),
    'embedding_dim': int(t.embedding_dim),
    'feature_names': list(t.feature_names),
    'data_type': _name(t.data_type),
  }


def _constraint(c) -> dict:
  """ParameterConstraints keyword arguments of object `c` (the ones read
  here), its cache parameters' load factor and statistics."""
  out = {
    k: list(getattr(c, k))
    for k in ('sharding_types', 'compute_kernels', 'pooling_factors')
    if getattr(c, k, None)
  }
  if getattr(c, 'min_partition', None):
    out['min_partition'] = int(c.min_partition)
  cache = getattr(c, 'cache_params', None)
  if cache is not None and cache.load_factor is not None:
    out['cache_params'] = {'load_factor': float(cache.load_factor)}
    if cache.stats is not None:
      out['cache_params']['stats'] = {
        'cacheability': float(cache.stats.cacheability)
      }
  return out


def _topology(t) -> dict:
  """Topology keyword arguments of Topology object `t`."""
  storage = t.devices[0].storage
  return {
    'world_size': int(t.world_size),
    'local_world_size': int(t.local_world_size),
    'compute_device': t.compute_device,
    'hbm_cap': int(storage.hbm),
    'ddr_cap': int(storage.ddr),
    **{
      k: float(getattr(t, k))
      for k in (
        'intra_host_bw',
        'inter_host_bw',
        'hbm_mem_bw',
        'ddr_mem_bw',
        'hbm_to_ddr_mem_bw',
      )
    },
  }


def _plan(plan) -> dict:
  """The export's `sharding_plan` of a ShardingPlan object."""
  ((path, module),) = list(plan.plan.items())
  tables = {}
  for name, ps in module.items():
    shards = []
    if ps.sharding_spec is not None:
      shards = [
        {
          'rank': s.placement.rank(),
          'offsets': list(s.shard_offsets),
          'sizes': list(s.shard_sizes),
        }
        for s in ps.sharding_spec.shards
      ]
    tables[name] = {
      'sharding_type': ps.sharding_type,
      'compute_kernel': ps.compute_kernel,
      'ranks': list(ps.ranks or []),
      'shards': shards,
    }
    load = getattr(ps.cache_params, 'load_factor', None)
    if load:
      tables[name]['cache_params'] = {'load_factor': float(load)}
  return {'module_path': path, 'tables': tables}


def _ebc(model):
  """The EmbeddingBagCollection of a DLRM (or DLRMTrain) module."""
  model = getattr(model, 'model', model)
  return model.sparse_arch.embedding_bag_collection


def _linears(module) -> list:
  """The nn.Linear layers of `module`, in order (by duck type)."""
  return [
    m
    for m in module.modules()
    if hasattr(m, 'in_features') and hasattr(m, 'out_features')
  ]


def _dense(model) -> dict:
  """The export's `dense` section of a TorchRec DLRM module."""
  model = getattr(model, 'model', model)
  bottom = _linears(model.dense_arch)
  out = {
    'model': type(model).__name__,
    'dense_in_features': int(bottom[0].in_features),
    'dense_arch_layer_sizes': [int(m.out_features) for m in bottom],
    'over_arch_layer_sizes': [
      int(m.out_features) for m in _linears(model.over_arch)
    ],
  }
  cross = getattr(model.inter_arch, 'crossnet', None)
  if cross is not None:
    out['dcn_num_layers'] = int(cross._num_layers)
    out['dcn_low_rank_dim'] = int(cross._low_rank)
  return out


def _optimizer_of(tables_module) -> dict | None:
  """The export's `optimizer` of the embedding optimizer applied to a
  module's parameters (`apply_optimizer_in_backward`), if any."""
  for p in tables_module.parameters():
    classes = getattr(p, '_optimizer_classes', None)
    if classes:
      cls = classes[0]
      return {'class': f'{cls.__module__}.{cls.__qualname__}', 'kwargs': {}}
  return None


def describe(
  *,
  tables=None,
  topology,
  batch_size,
  model=None,
  dense: dict | None = None,
  constraints: dict | None = None,
  plan=None,
  optimizer=None,
) -> dict:
  """A description in the export's format of TorchRec's objects.

  Args:
    tables: `EmbeddingBagConfig`s, or an `EmbeddingBagCollection`; None
      takes the model's.
    topology: the `Topology`.
    batch_size: samples per rank per step (the planner's batch_size).
    model: a TorchRec `DLRM` (or `DLRM_DCN`, `DLRMTrain`): its tables,
      dense part and embedding optimizer.
    dense: the dense part as the export's `dense` section (DLRM's
      arguments), where there is no model.
    constraints: per table name, `ParameterConstraints`.
    plan: a `ShardingPlan`.
    optimizer: the embedding optimizer class (`torch.optim.Adam`), or an
      `EmbOptimType`; None: the one applied to the tables, if any.

  Returns:
    A dict `to_inputs` reads.
  """
  ebc = tables if hasattr(tables, 'embedding_bag_configs') else None
  if ebc is None and model is not None:
    ebc = _ebc(model)
  configs = tables
  if tables is None or tables is ebc:
    configs = ebc.embedding_bag_configs() if ebc is not None else None
  if not configs:
    raise InputError('give the tables: EmbeddingBagConfigs or a DLRM model')
  d = {
    'tables': [_table(t) for t in configs],
    'topology': _topology(topology),
    'batch_size': batch_size,
    'constraints': {k: _constraint(c) for k, c in (constraints or {}).items()},
  }
  if model is not None:
    d['dense'] = _dense(model)
  elif dense is not None:
    d['dense'] = dict(dense)
  if plan is not None:
    d['sharding_plan'] = _plan(plan)
  if optimizer is not None:
    cls = getattr(optimizer, '__qualname__', None) or _name(optimizer)
    d['optimizer'] = {'class': cls, 'kwargs': {}}
  elif ebc is not None and _optimizer_of(ebc) is not None:
    d['optimizer'] = _optimizer_of(ebc)
  return d


def read_python(path: str) -> dict:
  """Runs a user's Python file and describes what it builds: `tables`
  (or any list of EmbeddingBagConfigs), a DLRM module, a `Topology`,
  `batch_size`, and where present `constraints`, `plan` (a ShardingPlan),
  `optimizer` and `dense` (DLRM's arguments)."""
  try:
    g = runpy.run_path(path, run_name='codesign_import')
  except Exception as e:  # the user's code: say what it raised, no trace
    raise InputError(
      f'{path} raised {type(e).__name__} when run: {e}'.split('\n')[0]
    ) from None
  found = {
    'topology': _find(g, 'topology', lambda x: hasattr(x, 'devices')),
    'model': _find(g, 'model', lambda x: _has_ebc(x)),
    'plan': _find(g, 'plan', lambda x: hasattr(x, 'plan')),
  }
  tables = _find(g, 'tables', _is_table_list)
  batch = g.get('batch_size')
  missing = [k for k in ('topology',) if found[k] is None]
  missing += [] if isinstance(batch, int | float) else ['batch_size']
  missing += [] if tables or found['model'] else ['tables (or a DLRM model)']
  if missing:
    raise InputError(
      f'{path} builds no {", ".join(missing)}: name them topology, '
      'batch_size and tables (or model)'
    )
  return describe(
    tables=tables,
    topology=found['topology'],
    batch_size=batch,
    model=found['model'],
    dense=g.get('dense') if isinstance(g.get('dense'), dict) else None,
    constraints=g.get('constraints'),
    plan=found['plan'],
    optimizer=g.get('optimizer'),
  )


def _has_ebc(x) -> bool:
  try:
    return hasattr(_ebc(x), 'embedding_bag_configs')
  except AttributeError:
    return False


def _is_table_list(x) -> bool:
  return (
    isinstance(x, list | tuple)
    and len(x) > 0
    and all(hasattr(t, 'num_embeddings') for t in x)
  )


def _find(g: dict, name: str, test):
  """`g[name]` where it passes `test`, else the one global that does."""
  if name in g and test(g[name]):
    return g[name]
  hits = [v for k, v in g.items() if not k.startswith('_') and test(v)]
  return hits[0] if len(hits) == 1 else None


def to_inputs(d: dict) -> Imported:
  """The workload, platform, plan and stack of description `d` (module
  docstring), as JSON dicts, and the guesses made."""
  if not isinstance(d, dict) or not {'tables', 'topology'} <= set(d):
    raise InputError(
      'a TorchRec description needs tables and topology (the format '
      'codesign export writes)'
    )
  base = d.get('codesign', {}).get('inputs', {})
  guesses = []
  w = _workload(d, base.get('workload'), guesses)
  s = _stack(d, base.get('stack'), guesses)
  p = _platform(d, base.get('platform'), w, s, guesses)
  plan = _plan_json(d, base.get('plan'), w, p, s, guesses)
  return Imported(
    schema.workload_to_json(w),
    schema.platform_to_json(p),
    plan,
    schema.stack_to_json(s),
    guesses,
  )


def _workload(d: dict, base: dict | None, guesses: list) -> wl.Workload:
  """The workload of description `d` over `base` (the export's own)."""
  b = schema.workload_from_json(base) if base else None
  world = int(d['topology']['world_size'])
  tables = _tables_of(d, b, guesses)
  num_dense, bottom, top, extra = _dense_of(d, b, tables, guesses)
  batch = float(d['batch_size']) * world
  if abs(batch - round(batch)) > 1e-6 * batch:
    raise InputError(
      f'batch_size {d["batch_size"]} x world_size {world} is not a whole '
      'global batch'
    )
  fields = dict(
    name=d.get('header', {}).get('workload') or 'torchrec_model',
    tables=tables,
    num_dense=num_dense,
    bottom_mlp=bottom,
    top_mlp=top,
    global_batch=int(round(batch)),
    optimizer=_optimizer_name(d, b, guesses),
    popularity_skew=_skew(d, b, guesses),
    **extra,
  )
  if b is not None:
    return dataclasses.replace(b, **fields)
  if 'dense_precision' not in fields:
    guesses.append('workload: dense precision fp32 (not described)')
  return wl.Workload(**fields, source='imported from a TorchRec description')


def _tables_of(d: dict, b, guesses: list) -> tuple:
  """The workload's tables: rows, dim, precision, lookups per sample."""
  out, unpooled = [], []
  for i, t in enumerate(d['tables']):
    c = d.get('constraints', {}).get(t['name'], {})
    pool = c.get('pooling_factors')
    if not pool:
      unpooled.append(t['name'])
    if t['data_type'] not in DATA_TYPES:
      raise InputError(f'table {t["name"]}: no codesign type {t["data_type"]}')
    precision = DATA_TYPES[t['data_type']]
    if b is not None and i < b.num_tables:
      same = export.DATA_TYPES.get(b.tables[i].precision) == t['data_type']
      precision = b.tables[i].precision if same else precision
    out.append(
      wl.Table(
        rows=int(t['num_embeddings']),
        dim=int(t['embedding_dim']),
        pooling=float(np.sum(pool)) if pool else POOLING_FACTOR,
        precision=precision,
      )
    )
  if unpooled:
    guesses.append(
      f'workload: {len(unpooled)} table(s) without pooling_factors take '
      f"TorchRec's {POOLING_FACTOR:g} lookup per sample ({unpooled[0]}, ...)"
    )
  return tuple(out)


def _dense_of(d: dict, b, tables: tuple, guesses: list) -> tuple:
  """(num_dense, bottom_mlp, top_mlp, interaction fields) of `d`."""
  x = d.get('dense')
  if x is None and b is not None:
    return b.num_dense, b.bottom_mlp, b.top_mlp, {}
  if x is None:
    n, bottom, top = DEFAULT_DENSE
    bottom = (*bottom, tables[0].dim)
    guesses.append(
      f"workload: no dense part: TorchRec's DLRM example's, {n} dense "
      f'features, dense arch {"-".join(map(str, bottom))}, over arch '
      f'{"-".join(map(str, top))}'
    )
    return n, bottom, top, {'interaction': 'dot'}
  extra = {'interaction': x.get('interaction', 'dot')}
  if x.get('model') == 'DLRM_DCN' or 'dcn_num_layers' in x:
    extra = {
      'interaction': 'dcnv2',
      'dcn_layers': int(x['dcn_num_layers']),
      'dcn_rank': int(x['dcn_low_rank_dim']),
    }
  if 'precision' in x:
    extra['dense_precision'] = x['precision']
  return (
    int(x['dense_in_features']),
    tuple(int(v) for v in x['dense_arch_layer_sizes']),
    tuple(int(v) for v in x['over_arch_layer_sizes']),
    extra,
  )


def _optimizer_name(d: dict, b, guesses: list) -> str:
  """Our optimizer of the description's embedding optimizer."""
  opt = d.get('optimizer')
  if opt is None:
    if b is not None:
      return b.optimizer
    guesses.append('workload: no embedding optimizer given: SGD')
    return 'sgd'
  name = str(opt.get('class', '')).rpartition('.')[2]
  fused = opt.get('fused_params', {}).get('optimizer')
  found = OPTIMIZERS.get(name) or OPTIMIZERS.get(str(fused))
  if found is None:
    raise InputError(
      f'embedding optimizer {name or fused!r} is not one codesign models '
      '(SGD, Adagrad, RowWiseAdagrad, Adam)'
    )
  return found


def _skew(d: dict, b, guesses: list) -> float:
  """The popularity skew k of a cached table's statistics (cacheability
  1 / (k + 1)), else the base's, else uniform (a guess)."""
  for c in d.get('constraints', {}).values():
    stats = c.get('cache_params', {}).get('stats')
    if stats and stats.get('cacheability'):
      return 1.0 / float(stats['cacheability']) - 1.0
  if b is not None:
    return b.popularity_skew
  guesses.append(
    'workload: popularity skew 1 (uniform traffic): no cache statistics'
  )
  return 1.0


def _stack(d: dict, base: dict | None, guesses: list):
  """TorchRec's stack (or the export's), with the description's HBM
  reservation and pipeline."""
  s = schema.stack_from_json(base) if base else stack_presets.get('torchrec')
  changes = {}
  pct = d.get('storage_reservation', {}).get('percentage')
  if pct is not None and abs(float(pct) - float(s.hbm_reserve)) > SAME:
    changes['hbm_reserve'] = float(pct)
  pipe = d.get('pipeline_type')
  if pipe is not None and PIPELINES.get(pipe, 'sparse_dist') != (
    s.train_pipeline
  ):
    changes['train_pipeline'] = PIPELINES.get(pipe, 'sparse_dist')
  if pipe is not None and pipe not in PIPELINES:
    guesses.append(f'stack: pipeline {pipe} modelled as sparse_dist')
  if changes:
    s = dataclasses.replace(s, **changes)
    guesses.append(
      'stack: ' + ', '.join(f'{k} {v}' for k, v in changes.items())
    )
  return s


def nearest_preset(topo: dict) -> str:
  """The platform preset nearest a Topology: the same trainer, then the
  least sum of |log ratio| of HBM per accelerator, HBM bandwidth and
  ranks per node."""
  cpu = topo['compute_device'] == 'cpu'

  def distance(name):
    p = platform_presets.get(name)
    if (p.trainer == 'cpu') != cpu:
      return math.inf
    per_node = float(p.sockets_per_node if cpu else p.accelerators_per_node)
    pairs = [(float(topo['local_world_size']), per_node)]
    if not cpu:
      a = p.accelerator
      pairs += [
        (float(topo['hbm_cap']), float(a.hbm_capacity)),
        (float(topo['hbm_mem_bw']) * export.MS_PER_S, float(a.hbm_bandwidth)),
      ]
    return sum(abs(math.log(max(x, 1.0) / max(y, 1.0))) for x, y in pairs)

  return min(platform_presets.PLATFORMS, key=distance)


def _platform(d: dict, base, w, s, guesses: list) -> hardware.Platform:
  """The base platform (the export's, else the nearest preset) adjusted
  to the description's Topology; each change said in `guesses`."""
  topo = d['topology']
  if base:
    p = schema.platform_from_json(base)
  else:
    name = nearest_preset(topo)
    p = platform_presets.get(name)
    guesses.append(f'platform: the nearest preset, {name}, adjusted below')
  p = _ranks(p, topo, guesses)
  return _capacities_and_rates(p, topo, w, s, guesses)


def _ranks(p, topo: dict, guesses: list):
  """`p` with the Topology's nodes, ranks per node and domain."""
  cpu = p.trainer == 'cpu'
  world, local = int(topo['world_size']), int(topo['local_world_size'])
  per_node = int(round(float(terms.ranks_per_node(p))))
  hosts = export.domain_hosts(p) if not cpu else 1
  if local != per_node * hosts:
    field = 'sockets_per_node' if cpu else 'accelerators_per_node'
    p = hardware.with_value(p, field, float(local))
    if not cpu:
      p = hardware.with_value(p, 'fabric.hosts_per_domain', 1.0)
    guesses.append(f'platform: {field} {local} (local_world_size)')
    per_node = local
  if world % per_node:
    raise InputError(
      f'world_size {world} is not a whole number of nodes of {per_node} '
      'ranks (local_world_size)'
    )
  if world // per_node != int(round(float(p.nodes))):
    p = hardware.with_value(p, 'nodes', float(world // per_node))
    guesses.append(f'platform: nodes {world // per_node} (world_size)')
  return p


def _capacities_and_rates(p, topo: dict, w, s, guesses: list):
  """`p` with the Topology's HBM and DDR capacity and its bandwidths."""
  per_node = float(terms.ranks_per_node(p))
  sockets = float(p.sockets_per_node)
  changes = {'cpu.ddr_capacity': float(topo['ddr_cap']) * per_node / sockets}
  if p.trainer != 'cpu':
    changes['accelerator.hbm_capacity'] = float(topo['hbm_cap'])
  have = export.fabric(w, p, s)
  want = {k: float(topo[k]) * export.MS_PER_S for k in _RATES}
  for key, (field, per) in _RATES.items():
    now = have[_RATE_NAMES[key]]
    if now > 0 and per == 'scale':
      changes[field] = _at(p, field) * want[key] / now
    elif per == 'node':
      changes[field] = want[key] * per_node / sockets
    elif now > 0:
      changes[field] = want[key]
  for field, value in changes.items():
    old = _at(p, field)
    if abs(value - old) > SAME * max(abs(old), 1.0) + _slack(field, per_node):
      p = hardware.with_value(p, field, value)
      guesses.append(f'platform: {field} {value:.6g} (was {old:.6g})')
  return p


# Topology bandwidth -> (platform field it sets, how): `scale` scales the
# field by the ratio of the Topology's to the model's achievable rate;
# `node` is a per-rank share of the node's sockets; `rate` is the field.
_RATES = {
  'hbm_mem_bw': ('accelerator.hbm_bandwidth', 'rate'),
  'ddr_mem_bw': ('cpu.ddr_bandwidth', 'node'),
  'intra_host_bw': ('fabric.link_bandwidth', 'scale'),
  'inter_host_bw': ('nic.bandwidth', 'scale'),
  'hbm_to_ddr_mem_bw': ('host_link.bandwidth', 'scale'),
}
_RATE_NAMES = {
  'hbm_mem_bw': 'hbm_mem_bytes_per_s',
  'ddr_mem_bw': 'ddr_mem_bytes_per_s',
  'intra_host_bw': 'intra_host_bytes_per_s',
  'inter_host_bw': 'inter_host_bytes_per_s',
  'hbm_to_ddr_mem_bw': 'hbm_to_ddr_mem_bytes_per_s',
}


def _slack(field: str, per_node: float) -> float:
  """Bytes a capacity may differ by from the Topology's (the export
  writes whole bytes per rank)."""
  return per_node if field.endswith('capacity') else 0.0


def _at(p, field: str) -> float:
  """The value of a dotted platform field."""
  x = p
  for part in field.split('.'):
    x = getattr(x, part)
  return float(x)


def _plan_json(d: dict, base, w, p, s, guesses: list) -> dict:
  """The plan of the description (sharding, kernel, load factor per
  table) over `base` (the export's), else over the auto plan."""
  b = schema.plan_from_json(base, w) if base else None
  auto = None
  if b is None:
    auto = planner.make(w, p, s)
  ref = b if b is not None else auto
  names = [t['name'] for t in d['tables']]
  shardings, fracs, defaulted = [], [], []
  for i, name in enumerate(names):
    sharding, kernel, load = _pinned(d, name)
    if sharding is None or kernel is None:
      defaulted.append(name)
      auto = auto if auto is not None else planner.make(w, p, s)
      sharding = sharding or auto.sharding[i]
    shardings.append(sharding)
    frac = float(np.asarray(ref.hbm_fraction)[i])
    if p.trainer != 'cpu':  # a CPU trainer's rows are all in DDR
      frac = _fraction(kernel, load, frac, name, guesses)
    fracs.append(frac)
  if defaulted:
    guesses.append(
      f'plan: {len(defaulted)} table(s) without one sharding type and '
      f"kernel take the auto plan's ({defaulted[0]}, ...)"
    )
  fields = _plan_fields(d, b, auto, w, p, s, guesses)
  plan = {
    'hbm_fraction': fracs,
    'sharding': shardings,
    **fields,
  }
  return schema.plan_to_json(schema.plan_from_json(plan, w))


def _pinned(d: dict, name: str) -> tuple:
  """(sharding, kernel, load factor) of table `name`: its sharding
  plan's, else its constraints' where they name one (None: not stated)."""
  x = d.get('sharding_plan', {}).get('tables', {}).get(name)
  if x is not None:
    load = x.get('cache_params', {}).get('load_factor')
    sharding, kernel = x['sharding_type'], x['compute_kernel']
  else:
    c = d.get('constraints', {}).get(name, {})
    one = [c.get(k) for k in ('sharding_types', 'compute_kernels')]
    sharding, kernel = (v[0] if v and len(v) == 1 else None for v in one)
    load = None
  if load is None:
    c = d.get('constraints', {}).get(name, {})
    load = c.get('cache_params', {}).get('load_factor')
  return sharding, kernel, load


def _fraction(kernel, load, ref: float, name: str, guesses: list) -> float:
  """The HBM fraction of a table under `kernel`: the reference plan's
  where it agrees with the kernel (an export's own plan), else whole
  (fused, dense), the load factor (fused_uvm_caching) or none."""
  whole = bool(terms.whole_in_hbm(ref))
  if kernel is None:
    return ref
  if kernel in (export.FUSED, export.DENSE):
    return ref if whole else 1.0
  if kernel == export.FUSED_UVM_CACHING:
    if load is None:
      guesses.append(
        f"plan: {name} caches at TorchRec's load factor {UVM_CACHING_RATIO}"
      )
      return UVM_CACHING_RATIO
    return float(load)
  if kernel == export.FUSED_UVM:
    return ref if ref == 0.0 else 0.0
  raise InputError(f'table {name}: compute kernel {kernel!r} is not modelled')


def _plan_fields(d: dict, b, auto, w, p, s, guesses: list) -> dict:
  """The plan fields TorchRec does not state: the base plan's, else the
  auto plan's (each a guess); column shards from the column-wise tables'
  shards where there are any."""
  ref = b
  if ref is None:
    ref = auto if auto is not None else planner.make(w, p, s)
    guesses.append(
      'plan: cpu_lookup_fraction, overlap and comm_precision are the auto '
      f"plan's ({float(ref.cpu_lookup_fraction):g}, {float(ref.overlap):g}, "
      f'{ref.comm_precision})'
    )
  return {
    'cpu_lookup_fraction': float(ref.cpu_lookup_fraction),
    'overlap': float(ref.overlap),
    'column_shards': _column_shards(d, ref.column_shards),
    'comm_precision': ref.comm_precision,
  }


def _column_shards(d: dict, ref: int) -> int:
  """Shards per column-wise table: the reference plan's where it gives
  the described shards, else the first column-wise table's."""
  for t in d['tables']:
    x = d.get('sharding_plan', {}).get('tables', {}).get(t['name'])
    c = d.get('constraints', {}).get(t['name'], {})
    if x is not None and x['sharding_type'] == 'column_wise':
      return ref if _width_ok(t, ref, x) else len(x['shards'])
    if c.get('sharding_types') == ['column_wise'] and c.get('min_partition'):
      return max(1, int(t['embedding_dim']) // int(c['min_partition']))
  return ref


def _width_ok(t: dict, column_shards: int, x: dict) -> bool:
  """Whether `column_shards` cuts table `t` into the shards of `x`."""
  width = rank_stats.column_block(int(t['embedding_dim']), column_shards)
  return len(x['shards']) == int(t['embedding_dim']) // width
