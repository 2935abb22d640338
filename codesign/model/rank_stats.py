"""Per-rank statistics of a plan, like the stats table of TorchRec's planner.

The cost model never assigns tables to ranks: it bounds the load of the
busiest rank analytically (`terms.per_rank`: every rank's share, and the
packing bounds of whole tables in `terms.busiest_rank`). A per-rank table
needs a concrete assignment, so `assign` makes the simple one whose
busiest rank those bounds approximate:
- table_wise: whole tables, largest load first, each onto the table rank
  with the least load so far among those it fits on (greedy LPT; Graham
  1969: its busiest rank is at most 4/3 - 1/(3R) times the best
  possible); where that order overflows a rank's HBM, largest bytes
  first, the order of TorchRec's greedy partitioner
  (torchrec/distributed/planner/partitioners.py GreedyPerfPartitioner,
  sort_by STORAGE);
- table_row_wise: each table, largest first, onto the scale-up domain
  (a node, or `Fabric.hosts_per_domain` nodes) whose busiest table rank
  would then be least loaded, its rows evenly over that domain's table
  ranks;
- column_wise: each table in the column shards TorchRec makes of it
  (`column_pieces`), each shard placed as a whole table;
- row_wise, data_parallel: evenly over every table rank.
Table ranks are all R ranks, except rank 0 when the stack runs the
bottom MLP alone on it (`terms.setup`: one device, more than 4 ranks).

A table's load is its embedding seconds per step at the model's rates,
from the model's own per-table arrays (`terms.table_arrays`,
`terms.lookups`, `terms.hbm_loads`): on an accelerator trainer the HBM
gathers, row updates and pooled casts (the work `terms.embedding_hbm`
charges the busiest rank; DDR-resident rows are read over the host link
or by the CPUs, which the model charges to the whole cluster, so they are
not in a rank's seconds, only in its DDR lookups); on a CPU trainer the
DDR gathers and updates at one socket's rate (`terms.embedding_ddr`,
which spreads them evenly). Data-parallel tables add their dense
replica update to every rank.

`compute` returns per rank the HBM and DDR bytes of table rows (with
optimizer state; data-parallel replicas on every rank), as the step's
memory counts them (`terms.table_tiers`: a UVM-cached table's whole host
copy, none for a table whole in HBM; on a CPU trainer each rank's dense
replica too, so that a node's ranks sum to result.json's DDR need), the
lookups per
step served from HBM and from DDR, the embedding seconds and their share
of the busiest rank's; and a summary: mean, greedy maximum and imbalance
(max/mean), beside the model's bound on the same per-table loads
(`terms.per_rank`) and the embedding seconds of the model's step
breakdown (each kind of work packed in its own order).
"""

import jax.numpy as jnp
import numpy as np

from codesign.core import memory
from codesign.model import terms
from codesign.spec import hardware
from codesign.spec import stack as stack_lib
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.plan import Plan
from codesign.spec.stack import Stack

SPREAD = ('row_wise', 'data_parallel')
# TorchRec cuts a column-wise table into blocks of columns that are a
# multiple of 4 wide and divide its dim, the narrowest at least
# `min_partition` (torchrec/distributed/sharding_plan.py
# _get_block_size_for_cw_shard and _find_base_dim): FBGEMM's kernels take
# dims in multiples of 4.
CW_BLOCK_MULTIPLE = 4
# Rows of the printed table; larger clusters print their busiest ranks
# (ranks.json holds every rank).
PRINTED_RANKS = 16


def _f(x) -> np.ndarray:
  return np.asarray(x, dtype=np.float64)


def per_table(w: wl.Workload, p: Platform, plan: Plan, s: Stack) -> dict:
  """Per-table numbers of one step, from the cost model's terms.

  Returns:
    A dict of arrays of shape (T,): `hbm_bytes` and `ddr_bytes` (rows and
    optimizer state resident per tier, one replica of a data-parallel
    table: `terms.table_tiers`), `hbm_lookups` and `ddr_lookups`
    (lookups per step over the global batch), `seconds` (embedding
    seconds per step of the table on the rank or ranks that hold it);
    and scalars `replica_seconds` (seconds per rank of updating the
    data-parallel replicas and, under the hybrid embedding, of serving
    its own samples' frequent lookups: those leave `seconds` and
    `hbm_lookups` for `own_hbm_lookups`, per rank), `ranks`,
    `per_node`, `per_domain` (ranks of one scale-up domain), `dedicated`
    (1 when rank 0 holds no tables, else 0),
    `dense_hbm_bytes` (dense model per rank in HBM), `dense_ddr_bytes`
    (per rank in DDR, a CPU trainer's), `hbm_available_bytes` (per
    rank, after the stack's reserve; 0 on a CPU trainer),
    `stack_hbm_bytes` (what the stack keeps in HBM per rank besides:
    `terms.stack_hbm_reserved`) and its parts (`terms.stack_hbm_parts`):
    `kjt_hbm_bytes` on every rank and `overhead_hbm_bytes` (T,) with each
    table's shards; `model_hbm_bytes` (the model's HBM
    requirement of the busiest rank, result.json's)
    and `model_bound_s` (the
    model's busiest-rank bound on `seconds`, plus `replica_seconds`).
  """
  pa = hardware.as_arrays(p)
  st = terms.setup(pa, w, s)
  t, lk, loads = _model_arrays(w, p, plan, s, st)
  dp = t['data_parallel']
  replica = np.sum(dp * t['table_bytes'] * 2.0)  # read and write each once
  inf = np.ones(w.num_tables) if st.cpu_trainer else _infrequent(w, s, st)
  if st.cpu_trainer:
    x = _cpu_trainer_loads(pa, st, s, t, lk, replica)
  else:
    x = _accelerator_loads(w, p, pa, st, s, t, lk, loads, replica, inf)
  dense = float(terms.dense_hbm_bytes(w, pa, s))
  hbm_lookups, own_lookups = terms.hybrid.served_by_owners(
    _f(lk.hbm), inf, float(st.ranks)
  )
  return {
    'hbm_bytes': _f(x['hbm_bytes']),
    'ddr_bytes': _f(x['ddr_bytes']),
    'hbm_lookups': _f(hbm_lookups),
    'own_hbm_lookups': float(own_lookups),
    'ddr_lookups': _f(lk.ddr),
    'seconds': _f(x['seconds']),
    'replica_seconds': float(x['replica_s']),
    'ranks': int(round(float(st.ranks))),
    'per_node': int(round(float(st.per_node))),
    'per_domain': int(round(float(st.per_domain))),
    'dedicated': int(round(float(st.dedicated))),
    'dense_hbm_bytes': 0.0 if st.cpu_trainer else dense,
    'dense_ddr_bytes': dense if st.cpu_trainer else 0.0,
    'model_hbm_bytes': float(x['model_hbm']),
    'stack_hbm_bytes': float(x['reserved']),
    'kjt_hbm_bytes': float(x['kjt']),
    'overhead_hbm_bytes': _f(x['overhead']),
    'hbm_available_bytes': float(x['available']),
    'model_bound_s': float(x['bound']) + float(x['replica_s']),
  }


def _model_arrays(w, p: Platform, plan: Plan, s: Stack, st):
  """(t, lk, loads): the model's per-table arrays of the design (`t`, with
  the load orders), its lookups and its HBM loads."""
  t = terms.table_arrays(
    w,
    (plan.sharding, plan.column_shards, plan.comm_precision),
    (p.accelerator.access_granularity, p.cpu.access_granularity),
  )
  t = {**t, 'orders': terms.load_orders(w, plan, s, t)}
  lk = terms.lookups(w, plan, t, st, 1.0)
  payload = min(
    stack_lib.payload_bytes(s, w.dense_precision),
    wl.PRECISION_BYTES[plan.comm_precision],
  )
  return t, lk, terms.hbm_loads(s, t, lk, st, payload)


def _cpu_trainer_loads(pa, st, s: Stack, t: dict, lk, replica) -> dict:
  """A CPU trainer's per-table DDR gathers and updates at one socket's
  rate, as `terms.embedding_ddr` charges them (spread evenly): seconds,
  replica_s, hbm_bytes, ddr_bytes, bound, model_hbm, available."""
  cpu, tb = pa.cpu, t['table_bytes']
  gather_b, _ = t['touched_ddr']
  # As `terms.embedding_ddr` charges a CPU trainer: no pooled-gradient
  # reads (its `bags` are zero there).
  moved = terms.update_bytes(
    s, t, lk.ddr, lk.distinct_ddr, t['touched_ddr'], 0.0
  )
  update_rate = cpu.ddr_bandwidth * cpu.update_efficiency
  seconds = lk.ddr * gather_b / (cpu.ddr_bandwidth * cpu.gather_efficiency) + (
    moved / update_rate
  )
  return {
    'seconds': seconds,
    'replica_s': replica / update_rate,
    'hbm_bytes': np.zeros_like(tb),
    'ddr_bytes': tb,  # terms.table_tiers of a CPU trainer
    'reserved': 0.0,
    'kjt': 0.0,
    'overhead': np.zeros_like(tb),
    'bound': jnp.sum(seconds) / st.table_ranks,  # spread evenly
    'model_hbm': 0.0,
    'available': 0.0,
  }


def _accelerator_loads(
  w, p, pa, st, s: Stack, t, lk, loads, replica, inf
) -> dict:
  """An accelerator trainer's per-table HBM gathers, updates and pooled
  casts, and the model's busiest-rank bound on them: seconds, replica_s,
  hbm_bytes, ddr_bytes, bound, model_hbm, available. `inf` (T,): each
  table's share its own ranks serve (`_infrequent`)."""
  acc, tb, dp = pa.accelerator, t['table_bytes'], t['data_parallel']
  frac = _f(lk.frac)
  hbm, ddr = (_f(x) for x in terms.table_tiers(s, frac, tb, dp))
  update_rate = acc.hbm_bandwidth * acc.update_efficiency
  seconds = loads['gather'] / (acc.hbm_bandwidth * acc.gather_efficiency)
  seconds = seconds + loads['update'] / update_rate
  if 'cast' in loads:  # charged to the gather and to the update
    stream = acc.hbm_bandwidth * terms.STREAM_EFFICIENCY
    seconds = seconds + 2.0 * loads['cast'] / stream
  # The hybrid embedding: each rank serves its own samples' lookups of
  # the frequent rows (`terms.busiest_loads`); the table's ranks the rest.
  seconds, own_s = terms.hybrid.served_by_owners(
    _f(seconds), inf, float(st.ranks)
  )
  own_s = float(own_s)
  order = np.argsort(-_f(seconds), kind='stable')
  kjt, overhead = terms.stack_hbm_parts(w, s, t, st, lk.frac)
  reserved = terms.stack_hbm_reserved(w, s, t, st, lk.frac)
  model_hbm = (
    terms.per_rank(loads['resident'], t, st, t['orders']['bytes'])
    + np.sum(dp * tb)
    + terms.dense_hbm_bytes(w, pa, s)
    + reserved
  )
  return {
    'reserved': reserved,
    'kjt': kjt,
    'overhead': overhead,
    'seconds': seconds,
    'replica_s': replica / update_rate + own_s,
    'hbm_bytes': hbm,
    'ddr_bytes': ddr,
    'bound': terms.per_rank(seconds, t, st, order),
    'model_hbm': model_hbm,
    'available': float(p.accelerator.hbm_capacity) * (1.0 - s.hbm_reserve),
  }


def _infrequent(w: wl.Workload, s: Stack, st) -> np.ndarray:
  """Each table's share of lookups its ranks serve (T,): the infrequent
  share under the hybrid embedding (`terms.hybrid`), else all."""
  split = terms.hybrid.split(w, s, st)
  if split is None:
    return np.ones(w.num_tables)
  return _f(split.infrequent)


def column_block(dim: int, column_shards: int) -> int:
  """Columns per shard TorchRec makes of a column-wise table of `dim`
  columns asked in `column_shards` shards (its min_partition, dim //
  column_shards): the narrowest width of at least that which divides dim
  and is a multiple of `CW_BLOCK_MULTIPLE`, else the whole dim."""
  low = max(1, dim // column_shards)
  for width in range(low, dim):
    if dim % width == 0 and width % CW_BLOCK_MULTIPLE == 0:
      return width
  return dim


def column_pieces(w: wl.Workload, plan: Plan) -> np.ndarray:
  """(T,) the shards of each table placed as whole pieces: TorchRec's
  column shards of a column-wise table (`column_block`), 1 otherwise."""
  return np.array(
    [
      t.dim // column_block(t.dim, plan.column_shards)
      if x == 'column_wise'
      else 1
      for t, x in zip(w.tables, plan.sharding, strict=True)
    ]
  )


def assign(
  sharding: tuple[str, ...],
  load: np.ndarray,
  size: np.ndarray,
  ranks: int,
  per_node: int,
  dedicated: int = 0,
  capacity: float = np.inf,
  pieces: np.ndarray | None = None,
  target: float = np.inf,
) -> np.ndarray:
  """The greedy placement of the module docstring.

  Args:
    sharding: per table, one of `plan.SHARDINGS`.
    load: (T,) each table's load (seconds): larger goes first.
    size: (T,) each table's bytes, the tie-break; where the load's order
      overflows a rank (`capacity`), larger bytes go first (TorchRec's
      greedy partitioner sorts by storage), if that overflows less.
    ranks: R, all ranks.
    per_node: ranks per table-row-wise group: one scale-up domain's
      (`Setup.per_domain`).
    dedicated: 1 when rank 0 holds no tables.
    capacity: bytes of `size` one rank can hold: a table goes to the
      least-loaded rank (node) it fits on, as TorchRec's greedy
      partitioner skips devices without room; where it fits nowhere, to
      the one holding the fewest bytes (the stats then show the
      overflow).
    pieces: (T,) the equal shards a column-wise table is placed in, each
      as a whole table (`column_pieces`); None: one.
    target: bytes of `size` the busiest rank should hold (the cost
      model's bound on it): whole tables are moved and swapped off the
      rank holding the most while it holds more (`_repair`).

  Returns:
    (T, R): the share of each table's rows (and work) on each rank; every
    row sums to 1.
  """
  t = len(sharding)
  pieces = np.ones(t, int) if pieces is None else np.asarray(pieces)
  holders = np.arange(dedicated, ranks)
  groups = [holders[holders // per_node == n] for n in range(ranks // per_node)]
  groups = [n for n in groups if len(n)]
  target = min(capacity, target)
  tables = (sharding, load, size, pieces, holders, groups, capacity, target)
  share, held = _greedy(tables, lambda i: (-load[i], -size[i], i))
  if np.max(held) > capacity:  # the bytes bind: TorchRec's order
    share_b, held_b = _greedy(tables, lambda i: (-size[i], -load[i], i))
    if np.max(held_b) < np.max(held):
      share = share_b
  return share


def _greedy(tables, key) -> tuple[np.ndarray, np.ndarray]:
  """(share, held): `assign`'s placement of `tables` in the order of
  `key` (a sort key per table index), repaired towards the target bytes
  (`_repair`), and the bytes it puts on each rank."""
  sharding, load, size, pieces, holders, groups, capacity, target = tables
  t, ranks = len(sharding), int(holders[-1]) + 1
  share = np.zeros((t, ranks))
  for i, x in enumerate(sharding):
    if x in SPREAD:
      share[i, holders] = 1.0 / len(holders)
  work, held = load @ share, size @ share
  order = sorted(range(t), key=key)
  state = (share, work, held, capacity)
  for i in order:
    if sharding[i] == 'table_row_wise':
      _place_split(i, groups, load, size, state)
  placed = []
  for i in order:
    if sharding[i] in ('table_wise', 'column_wise'):
      part = (load[i] / pieces[i], size[i] / pieces[i], 1.0 / pieces[i])
      for _ in range(int(pieces[i])):
        placed.append([i, _place_whole(i, holders, part, state), *part])
  _repair(placed, state, holders, target)
  return share, held


def _repair(placed: list, state, holders, target: float) -> None:
  """Moves and swaps of whole pieces (`placed`: [table, rank, load,
  bytes, share] each) off the rank holding the most bytes while it holds
  more than `target`: each round the move or swap that leaves the least
  work on the two ranks, among those that leave both below the bytes the
  first had (a local search; at most 4 rounds per piece)."""
  share, work, held, _ = state
  for _ in range(4 * len(placed)):
    a = int(np.argmax(held))
    if held[a] <= target:
      return
    best = _best_exchange(placed, work, held, holders, a)
    if best is None:
      return
    k, b, m = best
    _shift(placed[k], b, state)
    if m is not None:
      _shift(placed[m], a, state)


def _best_exchange(placed: list, work, held, holders, a: int):
  """(piece k on rank a, rank b, piece m on b or None) of `_repair`'s
  best move (m None) or swap, or None where none lowers rank a's bytes
  without raising another's to them."""
  rank = np.array([x[1] for x in placed])
  load = np.array([x[2] for x in placed])
  size = np.array([x[3] for x in placed])
  others = holders[holders != a]
  swap = np.flatnonzero(rank != a)
  best, found = None, None
  for k in np.flatnonzero(rank == a):
    # Moves to every other rank, then swaps with every piece elsewhere.
    to = np.concatenate([others, rank[swap]])
    back_s = np.concatenate([np.zeros(len(others)), size[swap]])
    back_l = np.concatenate([np.zeros(len(others)), load[swap]])
    ha = held[a] - size[k] + back_s
    hb = held[to] + size[k] - back_s
    wa = work[a] - load[k] + back_l
    wb = work[to] + load[k] - back_l
    ok = np.maximum(ha, hb) < held[a]
    if not np.any(ok):
      continue
    score = np.where(ok, np.maximum(wa, wb), np.inf)
    j = int(np.argmin(score))
    if best is None or score[j] < best:
      m = None if j < len(others) else int(swap[j - len(others)])
      best, found = score[j], (int(k), int(to[j]), m)
  return found


def _shift(piece: list, to: int, state) -> None:
  """Moves a placed piece ([table, rank, load, bytes, share]) to rank
  `to`, updating the shares, work and bytes of `state`."""
  share, work, held, _ = state
  i, r, load, size, fraction = piece
  share[i, r] -= fraction
  work[r] -= load
  held[r] -= size
  share[i, to] += fraction
  work[to] += load
  held[to] += size
  piece[1] = to


def _place_split(i, groups, load, size, state) -> None:
  """Table `i` evenly over the ranks of the group (scale-up domain) whose
  busiest rank is then least loaded among those it fits in."""
  share, work, held, capacity = state

  def after(n):
    full = np.max(held[n] + size[i] / len(n)) > capacity
    busy, most = np.max(work[n] + load[i] / len(n)), np.max(held[n])
    return (full, most, busy, n[0]) if full else (full, busy, most, n[0])

  n = min(groups, key=after)
  share[i, n] += 1.0 / len(n)
  work[n] += load[i] / len(n)
  held[n] += size[i] / len(n)


def _place_whole(i, holders, part, state) -> int:
  """`part` (load, bytes, share) of table `i`, a whole table or one of
  its column shards, onto the least-loaded rank it fits on: that rank."""
  share, work, held, capacity = state
  load, size, fraction = part

  def fill(r):
    full = held[r] + size > capacity
    return (full, held[r], work[r], r) if full else (full, work[r], held[r], r)

  r = min(holders, key=fill)
  share[i, r] += fraction
  work[r] += load
  held[r] += size
  return int(r)


# The placement's (T, R) shares and their replicas, float64, and a copy.
BYTES_PER_TABLE_RANK = 24


def check_memory(tables: int, ranks: int) -> None:
  """Refuses, before the placement, one beyond this machine's memory.

  Raises:
    InputError: naming the tables, the ranks and both amounts.
  """
  memory.check(
    BYTES_PER_TABLE_RANK * tables * ranks,
    f'the placement of {tables:,} tables on {ranks:,} ranks',
    'the number of tables or of nodes',
  )


def compute(
  w: wl.Workload,
  p: Platform,
  plan: Plan,
  s: Stack,
  breakdown_s: dict | None = None,
) -> dict:
  """Per-rank statistics of the greedy placement (module docstring).

  Args:
    w, p, plan, s: the design (concrete numbers).
    breakdown_s: the step breakdown of the same design (result.json's
      `breakdown_s`), to report the model's embedding seconds beside.

  Returns:
    A JSON-able dict: `ranks`, a list of R dicts (`rank`, `node`,
    `holds_tables`, `hbm_bytes`, `ddr_bytes`, `hbm_lookups`,
    `ddr_lookups` (per step), `embedding_s`, `of_busiest` (embedding_s
    over the busiest rank's)); and `summary`: `embedding_s` (`mean`,
    `greedy_max`, `imbalance` = max/mean, `model_bound` and, with
    `breakdown_s`, `model_breakdown`), `hbm_bytes` and `ddr_bytes`
    (`mean`, `max`, `imbalance`), `busiest_hbm_bytes` (greedy max plus
    the dense model and the stack's reservations) beside
    `model_hbm_required_bytes` (result.json's), and `placement` (a
    sentence).
  """
  pt, share = place(w, p, plan, s)
  cpu = p.trainer == 'cpu'
  dp = np.array([x == 'data_parallel' for x in plan.sharding])
  replicas = share.copy()
  replicas[dp] = 1.0  # a replica on every rank
  seconds = pt['seconds'] @ share + pt['replica_seconds']
  hbm = pt['hbm_bytes'] @ replicas + pt['overhead_hbm_bytes'] @ share
  ddr = pt['ddr_bytes'] @ replicas + pt['dense_ddr_bytes']
  return {
    'ranks': _rank_rows(pt, share, seconds, hbm, ddr),
    'summary': {
      'embedding_s': _embedding_summary(pt, seconds, breakdown_s, cpu),
      'hbm_bytes': _spread(hbm),
      'ddr_bytes': _spread(ddr),
      'dense_hbm_bytes_per_rank': pt['dense_hbm_bytes'],
      'stack_hbm_bytes_per_rank': pt['stack_hbm_bytes'],
      'kjt_hbm_bytes_per_rank': pt['kjt_hbm_bytes'],
      'busiest_hbm_bytes': float(np.max(hbm))
      + pt['dense_hbm_bytes']
      + pt['kjt_hbm_bytes'],
      'model_hbm_required_bytes': pt['model_hbm_bytes'],
      'hbm_available_bytes': pt['hbm_available_bytes'],
      'table_ranks': pt['ranks'] - pt['dedicated'],
      'placement': (
        'greedy: whole tables (and the column shards TorchRec makes of a '
        'column-wise table) largest first onto the least-loaded rank, '
        'table-row-wise tables over one scale-up domain, the rest '
        "evenly; the model's bound approximates its busiest rank"
      ),
    },
  }


def place(w: wl.Workload, p: Platform, plan: Plan, s: Stack):
  """(pt, share): the per-table numbers (`per_table`) and the (T, R)
  shares of `assign`'s placement of the design, each rank holding at most
  the HBM the stack allows less the dense model, the input features and
  the data-parallel replicas, a table counted with its shards' pipeline
  I/O and cache bookkeeping (`terms.stack_hbm_parts`); no limit on a CPU
  trainer (DDR is per node). ranks.json and the export's sharding plan
  read this one placement.

  Raises:
    InputError: where the placement would not fit this machine's memory.
  """
  pt = per_table(w, p, plan, s)
  check_memory(w.num_tables, pt['ranks'])
  cpu = p.trainer == 'cpu'
  size = pt['ddr_bytes'] if cpu else pt['hbm_bytes'] + pt['overhead_hbm_bytes']
  dp = np.array([x == 'data_parallel' for x in plan.sharding])
  fixed = pt['dense_hbm_bytes'] + pt['kjt_hbm_bytes'] + float(np.sum(size * dp))
  room = np.inf if cpu else pt['hbm_available_bytes'] - fixed
  target = np.inf if cpu else pt['model_hbm_bytes'] - fixed
  share = assign(
    plan.sharding,
    pt['seconds'],
    size,
    pt['ranks'],
    pt['per_domain'],
    pt['dedicated'],
    capacity=room,
    pieces=column_pieces(w, plan),
    target=target,
  )
  return pt, share


def _rank_rows(pt: dict, share, seconds, hbm, ddr) -> list[dict]:
  """`compute`'s `ranks`: one dict per rank."""
  busiest = float(np.max(seconds))
  a = pt['per_node']
  return [
    {
      'rank': i,
      'node': i // a,
      'holds_tables': bool(i >= pt['dedicated']),
      'hbm_bytes': float(hbm[i]),
      'ddr_bytes': float(ddr[i]),
      'hbm_lookups': float(pt['hbm_lookups'] @ share[:, i])
      + pt['own_hbm_lookups'],
      'ddr_lookups': float(pt['ddr_lookups'] @ share[:, i]),
      'embedding_s': float(seconds[i]),
      'of_busiest': float(seconds[i] / busiest) if busiest > 0 else 0.0,
    }
    for i in range(pt['ranks'])
  ]


def _spread(x) -> dict:
  """Mean, maximum and imbalance (max/mean, 1 when the mean is 0)."""
  mean = float(np.mean(x))
  top = float(np.max(x))
  return {'mean': mean, 'max': top, 'imbalance': top / mean if mean else 1.0}


def _embedding_summary(pt: dict, seconds, breakdown_s, cpu: bool) -> dict:
  """`compute`'s summary of the ranks' embedding seconds: mean, greedy
  maximum, imbalance, the model's bound and, with `breakdown_s`, the
  step breakdown's embedding seconds."""
  emb = _spread(seconds)
  emb = {
    'mean': emb['mean'],
    'greedy_max': emb['max'],
    'imbalance': emb['imbalance'],
    'model_bound': pt['model_bound_s'],
  }
  if breakdown_s is not None:
    tier = 'ddr' if cpu else 'hbm'
    emb['model_breakdown'] = float(
      breakdown_s[f'embedding_gather_{tier}']
      + breakdown_s[f'embedding_update_{tier}']
    )
  return emb


def table(stats: dict) -> str:
  """The per-rank table of `compute`, with an imbalance summary."""
  rows = stats['ranks']
  shown = rows
  if len(rows) > PRINTED_RANKS:
    shown = sorted(rows, key=lambda x: -x['embedding_s'])[: PRINTED_RANKS // 2]
    shown = sorted(shown, key=lambda x: x['rank'])
  lines = [
    f'per rank (greedy placement; lookups per step; emb us: embedding '
    f'work of the rank){"" if shown is rows else "; busiest ranks only"}',
    f'{"rank":>5s} {"node":>5s} {"HBM GB":>9s} {"DDR GB":>9s} '
    f'{"HBM lookups":>12s} {"DDR lookups":>12s} {"emb us":>9s} '
    f'{"of busiest":>10s}',
  ]
  for x in shown:
    mark = '' if x['holds_tables'] else '  (no tables)'
    lines.append(
      f'{x["rank"]:5d} {x["node"]:5d} {x["hbm_bytes"] / 1e9:9.2f} '
      f'{x["ddr_bytes"] / 1e9:9.2f} {x["hbm_lookups"]:12.4g} '
      f'{x["ddr_lookups"]:12.4g} {x["embedding_s"] * 1e6:9.4g} '
      f'{100 * x["of_busiest"]:9.1f}%{mark}'
    )
  s = stats['summary']
  e = s['embedding_s']
  model = f'model bound {e["model_bound"] * 1e6:.4g} us'
  if 'model_breakdown' in e:
    model += f', step breakdown {e["model_breakdown"] * 1e6:.4g} us'
  lines.append(
    f'imbalance (max/mean): embedding {e["imbalance"]:.3f}, HBM '
    f'{s["hbm_bytes"]["imbalance"]:.3f}, DDR '
    f'{s["ddr_bytes"]["imbalance"]:.3f}; busiest rank '
    f'{e["greedy_max"] * 1e6:.4g} us greedy ({model})'
  )
  return '\n'.join(lines)


RANK_COLUMNS = (
  'rank',
  'node',
  'hbm_bytes',
  'ddr_bytes',
  'hbm_lookups',
  'ddr_lookups',
  'embedding_s',
  'of_busiest',
  'holds_tables',
)


def csv_table(stats: dict) -> tuple[list[str], list[list]]:
  """(header, rows) of every rank of `compute`, for ranks.csv: bytes of
  table rows, lookups per step, embedding seconds per step and its share
  of the busiest rank's."""
  return list(RANK_COLUMNS), [
    [x[k] for k in RANK_COLUMNS] for x in stats['ranks']
  ]
