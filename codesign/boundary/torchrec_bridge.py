"""TorchRec's own objects from an export, and its planner's view of them.

Needs TorchRec's CPU build (`tools/install_torchrec.sh`); nothing here
imports torch before it is called, and `missing()` says why TorchRec
cannot be used where it cannot.

- `objects(d)` builds, from an export dict (`export.torchrec_planner`),
  what a TorchRec user builds: the `EmbeddingBagConfig`s in an
  `EmbeddingBagCollection` on the meta device at the export's module
  path, with the embedding optimizer applied
  (`apply_optimizer_in_backward`, which the planner reads), the
  `ParameterConstraints` (cache statistics as `EmbeddingOffloadStats`),
  the `Topology`, the storage reservation, an enumerator whose storage
  estimator knows the training pipeline, the sharder with its fused
  parameters, and the export's `ShardingPlan` (`sharding_plan`).
- `plan_both(d)` plans in TorchRec's `EmbeddingShardingPlanner` (the
  plan TorchRec itself finds under the export's constraints) and prices
  the export's own plan, shard for shard, with TorchRec's estimators: per
  rank HBM and DDR bytes (shards plus TorchRec's dense and input
  reservations) and step milliseconds (`Perf`: compute, prefetch, comms),
  whether each plan fits TorchRec's reserved storage, and per table the
  sharding type and kernel of TorchRec's plan.
- `compare_table(d, both)` prints both tools' per-rank estimates side by
  side (`codesign export --compare`).
"""

import importlib
import logging
import types
import warnings

import numpy as np

from codesign.core.errors import InputError

INSTALL = 'tools/install_torchrec.sh'


# TorchRec and FBGEMM log every library they load and every planner
# step at INFO; the bridge prints what it finds itself.
QUIET = ('torchrec', 'fbgemm_gpu')


def missing() -> str | None:
  """None where TorchRec's planner imports; else one sentence of why."""
  for name in QUIET:
    logging.getLogger(name).setLevel(logging.ERROR)
  try:
    importlib.import_module('torchrec.distributed.planner')
  except Exception as e:  # ImportError, or a broken build's OSError
    return (
      f'TorchRec cannot be imported ({type(e).__name__}: {e}); install '
      f'its CPU build with {INSTALL}'
    )
  return None


def require() -> None:
  """`InputError` in one sentence unless TorchRec imports."""
  why = missing()
  if why is not None:
    raise InputError(why)


def _class(path: str):
  """The class of a dotted name (`torch.optim.Adam`)."""
  module, _, name = path.rpartition('.')
  return getattr(importlib.import_module(module), name)


def _tables(d: dict) -> list:
  from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig

  return [
    EmbeddingBagConfig(**{**t, 'data_type': DataType[t['data_type']]})
    for t in d['tables']
  ]


def _module(d: dict, tables: list):
  """(root module, its EmbeddingBagCollection at the export's path) on
  the meta device, the embedding optimizer applied."""
  import torch
  from torch.distributed.optim import _apply_optimizer_in_backward
  from torchrec.modules.embedding_modules import EmbeddingBagCollection

  ebc = EmbeddingBagCollection(tables=tables, device=torch.device('meta'))
  opt = d['optimizer']
  _apply_optimizer_in_backward(
    _class(opt['class']), ebc.parameters(), dict(opt['kwargs'])
  )
  root = torch.nn.Module()
  parent = root
  *parents, leaf = d['sharding_plan']['module_path'].split('.')
  for name in parents:
    child = torch.nn.Module()
    parent.add_module(name, child)
    parent = child
  parent.add_module(leaf, ebc)
  return root, ebc


def _cache_params(c: dict | None):
  """TorchRec's CacheParams of an exported `cache_params` dict."""
  if not c:
    return None
  import torch
  from torchrec.distributed.planner.shard_estimators import (
    EmbeddingOffloadStats,
  )
  from torchrec.distributed.types import CacheParams

  stats = c.get('stats')
  if stats is not None:
    stats = EmbeddingOffloadStats(
      cacheability=stats['cacheability'],
      expected_lookups=stats['expected_lookups'],
      mrc_hist_counts=torch.tensor(stats['mrc_hist_counts']),
      height=stats['height'],
    )
  return CacheParams(load_factor=c.get('load_factor'), stats=stats)


def constraints(d: dict) -> dict:
  """Per table name, TorchRec's ParameterConstraints of the export."""
  from torchrec.distributed.planner.types import ParameterConstraints

  return {
    name: ParameterConstraints(
      **{**c, 'cache_params': _cache_params(c.get('cache_params'))}
    )
    for name, c in d['constraints'].items()
  }


def objects(d: dict) -> types.SimpleNamespace:
  """The TorchRec objects of export `d` (module docstring)."""
  require()
  from fbgemm_gpu.split_embedding_configs import EmbOptimType
  from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
  from torchrec.distributed.planner import Topology
  from torchrec.distributed.planner.enumerators import EmbeddingEnumerator
  from torchrec.distributed.planner.shard_estimators import (
    EmbeddingPerfEstimator,
    EmbeddingStorageEstimator,
  )
  from torchrec.distributed.planner.storage_reservations import (
    HeuristicalStorageReservation,
  )
  from torchrec.distributed.types import PipelineType

  tables = _tables(d)
  root, ebc = _module(d, tables)
  cons = constraints(d)
  topology = Topology(**d['topology'])
  estimators = [
    EmbeddingPerfEstimator(topology=topology, constraints=cons),
    EmbeddingStorageEstimator(
      topology=topology,
      constraints=cons,
      pipeline_type=PipelineType[d['pipeline_type']],
    ),
  ]
  fused = dict(d['optimizer']['fused_params'])
  fused['optimizer'] = EmbOptimType[fused['optimizer']]
  with warnings.catch_warnings():  # its advice to pass an estimate: done
    warnings.simplefilter('ignore', FutureWarning)
    reservation = HeuristicalStorageReservation(**d['storage_reservation'])
  return types.SimpleNamespace(
    tables=tables,
    module=root,
    ebc=ebc,
    constraints=cons,
    topology=topology,
    batch_size=d['batch_size'],
    reservation=reservation,
    enumerator=EmbeddingEnumerator(
      topology=topology,
      batch_size=d['batch_size'],
      constraints=cons,
      estimator=estimators,
    ),
    sharders=[EmbeddingBagCollectionSharder(fused_params=fused)],
  )


def sharding_plan(d: dict):
  """The export's `sharding_plan` as TorchRec's `ShardingPlan`, usable as
  given (`DistributedModelParallel(..., plan=...)`)."""
  require()
  from torchrec.distributed.planner.utils import placement
  from torchrec.distributed.types import (
    EmbeddingModuleShardingPlan,
    EnumerableShardingSpec,
    ParameterSharding,
    ShardingPlan,
    ShardMetadata,
  )

  topo = d['topology']
  module_plan = EmbeddingModuleShardingPlan()
  for name, x in d['sharding_plan']['tables'].items():
    spec = None
    if x['sharding_type'] != 'data_parallel':
      spec = EnumerableShardingSpec(
        [
          ShardMetadata(
            shard_offsets=list(s['offsets']),
            shard_sizes=list(s['sizes']),
            placement=placement(
              topo['compute_device'], s['rank'], topo['local_world_size']
            ),
          )
          for s in x['shards']
        ]
      )
    module_plan[name] = ParameterSharding(
      sharding_type=x['sharding_type'],
      compute_kernel=x['compute_kernel'],
      ranks=list(x['ranks']),
      sharding_spec=spec,
      cache_params=_cache_params(x.get('cache_params')),
    )
  return ShardingPlan({d['sharding_plan']['module_path']: module_plan})


def plan_both(d: dict) -> dict:
  """TorchRec's own plan and the export's, priced by TorchRec.

  Returns:
    A dict: `torchrec` and `export`, each per rank `hbm_bytes`,
    `ddr_bytes` (shards plus, in HBM, TorchRec's dense and input
    reservations), `shard_hbm_bytes`, `perf_ms` (`Perf.total`),
    `compute_ms`, `prefetch_ms`, `comms_ms`, `fits` (every rank within
    TorchRec's reserved storage); `torchrec` also per table `sharding`
    and `kernel`; `reserved_hbm_bytes` (per rank: dense plus input
    features) and `room` (per rank, HBM and DDR for shards).
  """
  from torchrec.distributed.planner import EmbeddingShardingPlanner
  from torchrec.distributed.planner.types import PlannerError

  o = objects(d)
  best = []
  planner = EmbeddingShardingPlanner(
    topology=o.topology,
    batch_size=o.batch_size,
    enumerator=o.enumerator,
    storage_reservation=o.reservation,
    constraints=o.constraints,
    stats=[],
    callbacks=[lambda plan: best.extend(plan) or plan],
    debug=False,
  )
  try:
    planner.plan(o.module, o.sharders)
  except PlannerError as e:  # TorchRec finds no plan of its own
    best = str(e).strip().splitlines()[0]
  reserved = o.reservation.last_reserved_topology
  room = {
    'hbm': [dev.storage.hbm for dev in reserved.devices],
    'ddr': [dev.storage.ddr for dev in reserved.devices],
  }
  topo = d['topology']
  keep = 1.0 - d['storage_reservation']['percentage']
  overhead = int(keep * topo['hbm_cap']) - room['hbm'][0]
  options = o.enumerator.enumerate(o.module, o.sharders)
  ours = _export_options(d, options)
  own = {'error': best}
  if not isinstance(best, str):
    own = {
      **_per_rank(best, topo['world_size'], overhead, room),
      'tables': {
        so.name: {'sharding': so.sharding_type, 'kernel': so.compute_kernel}
        for so in best
      },
    }
  return {
    'torchrec': own,
    'export': _per_rank(ours, topo['world_size'], overhead, room),
    'reserved_hbm_bytes': overhead,
    'room': room,
  }


def _export_options(d: dict, options: list) -> list:
  """TorchRec's enumerated sharding options of the export's tables, each
  shard on the export's rank (matched by offsets: the export cuts shards
  by TorchRec's rules)."""
  plan = d['sharding_plan']['tables']
  out = []
  for so in options:
    want = plan[so.name]
    if (so.sharding_type, so.compute_kernel) != (
      want['sharding_type'],
      want['compute_kernel'],
    ):
      continue
    ranks = {tuple(s['offsets']): s['rank'] for s in want['shards']}
    if want['sharding_type'] == 'data_parallel':
      for shard, s in zip(so.shards, want['shards'], strict=True):
        shard.rank = s['rank']
    else:
      if {tuple(s.offset) for s in so.shards} != set(ranks):
        raise InputError(
          f'{so.name}: the exported shards are not the ones TorchRec cuts '
          f'for {so.sharding_type}'
        )
      for shard in so.shards:
        shard.rank = ranks[tuple(shard.offset)]
    out.append(so)
  if len(out) != len(plan):
    raise InputError('TorchRec enumerated no option for some exported tables')
  return out


def _per_rank(options: list, world: int, overhead: int, room: dict) -> dict:
  """Per rank bytes and milliseconds of `options` (shards with ranks)."""
  keys = ('shard_hbm', 'ddr', 'compute', 'prefetch', 'comms', 'perf')
  acc = {k: np.zeros(world) for k in keys}
  for so in options:
    for shard in so.shards:
      r, p = shard.rank, shard.perf
      acc['shard_hbm'][r] += shard.storage.hbm
      acc['ddr'][r] += shard.storage.ddr
      acc['compute'][r] += p.fwd_compute + p.bwd_compute
      acc['prefetch'][r] += p.prefetch_compute
      acc['comms'][r] += p.fwd_comms + p.bwd_comms + p.input_dist_comms
      acc['perf'][r] += p.total
  fits = bool(
    np.all(acc['shard_hbm'] <= np.asarray(room['hbm']))
    and np.all(acc['ddr'] <= np.asarray(room['ddr']))
  )
  return {
    'hbm_bytes': [float(x) + overhead for x in acc['shard_hbm']],
    'shard_hbm_bytes': [float(x) for x in acc['shard_hbm']],
    'ddr_bytes': [float(x) for x in acc['ddr']],
    'compute_ms': [float(x) for x in acc['compute']],
    'prefetch_ms': [float(x) for x in acc['prefetch']],
    'comms_ms': [float(x) for x in acc['comms']],
    'perf_ms': [float(x) for x in acc['perf']],
    'fits': fits,
  }


def ours_per_rank(d: dict) -> dict:
  """The export's own per-rank figures (its `codesign` section): HBM
  (tables with their shards' pipeline I/O and cache bookkeeping, the
  dense model, the input features) and DDR bytes."""
  r = d['codesign']['ranks']
  extra = r['dense_hbm_bytes'] + r['kjt_hbm_bytes']
  hbm = [x + extra for x in r['table_hbm_bytes']]
  if d['topology']['compute_device'] == 'cpu':
    hbm = [0.0 for _ in hbm]
  return {'hbm_bytes': hbm, 'ddr_bytes': list(r['table_ddr_bytes'])}


def compare_table(d: dict, both: dict) -> str:
  """Both tools' per-rank estimates side by side: HBM and DDR GB of the
  export's plan (codesign's, TorchRec's), the busiest rank of TorchRec's
  own plan, and step milliseconds: codesign's embedding work of the rank
  and the step's all-to-all (`codesign.ranks`), TorchRec's Perf (compute
  and prefetch, and comms)."""
  ours, tr = ours_per_rank(d), both['export']
  r = d['codesign']['ranks']
  a2a = r.get('alltoall_s', float('nan')) * 1e3
  lines = [
    'per rank, the exported plan as codesign and TorchRec price it (ms: '
    "codesign's embedding work and all-to-all, TorchRec's compute + "
    'prefetch and comms)',
    f'{"rank":>5s} {"HBM GB":>9s} {"TorchRec":>9s} {"DDR GB":>9s} '
    f'{"TorchRec":>9s} {"emb ms":>8s} {"TorchRec":>9s} {"a2a ms":>8s} '
    f'{"TorchRec":>9s}',
  ]
  for i in range(len(ours['hbm_bytes'])):
    lines.append(
      f'{i:5d} {ours["hbm_bytes"][i] / 1e9:9.2f} '
      f'{tr["hbm_bytes"][i] / 1e9:9.2f} {ours["ddr_bytes"][i] / 1e9:9.2f} '
      f'{tr["ddr_bytes"][i] / 1e9:9.2f} {r["embedding_s"][i] * 1e3:8.3f} '
      f'{tr["compute_ms"][i] + tr["prefetch_ms"][i]:9.3f} {a2a:8.3f} '
      f'{tr["comms_ms"][i]:9.3f}'
    )
  lines.append(_busiest_line(ours, tr, both['torchrec']))
  return '\n'.join(lines)


def _busiest_line(ours: dict, tr: dict, own: dict) -> str:
  """One line: the busiest rank's HBM by both tools, and whether each
  plan fits TorchRec's reserved storage."""
  if 'error' in own:
    made = f'TorchRec finds no plan of its own ({own["error"]})'
  else:
    made = (
      f'{max(own["hbm_bytes"]) / 1e9:.2f} GB on the plan TorchRec makes '
      f'({"fits" if own["fits"] else "does not fit"})'
    )
  return (
    f'busiest HBM: codesign {max(ours["hbm_bytes"]) / 1e9:.2f} GB, '
    f'TorchRec {max(tr["hbm_bytes"]) / 1e9:.2f} GB on this plan '
    f'({"fits" if tr["fits"] else "DOES NOT FIT"} its reserved storage); '
    + made
  )
