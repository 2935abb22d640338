"""What is trained: the DLRM workload and its analytic counters.

A `Workload` is static (hashable, made of ints, floats, strings and tuples), so
`jit` specializes on it and every counter below is plain Python arithmetic.
Names follow the facebookresearch/dlrm flags: `bottom_mlp` is
`--arch-mlp-bot` without its input width, `top_mlp` is `--arch-mlp-top`
without its input width, `interaction` is `--arch-interaction-op`.

FLOP conventions (used everywhere, and checked against XLA in issue 3):
- a GEMM of (m x k) by (k x n) costs 2 m k n FLOPs forward;
- backward costs the weight gradient (2 m k n) plus the input gradient
  (2 m k n), except for the first bottom-MLP layer, whose input (the dense
  features) needs no gradient;
- the dot interaction is one batched GEMM per sample, (F x d) by (d x F),
  over all F = T + 1 feature vectors (the full product, as a compiled model
  computes it), of which the upper triangle is kept;
- bias adds cost one FLOP per output element forward and one per output
  element in the bias gradient; activations are not counted.
"""

import dataclasses
import math
import numbers
from typing import NamedTuple

# Bytes per element of each storage or compute precision.
PRECISION_BYTES = {
  'fp32': 4,
  'tf32': 4,
  'bf16': 2,
  'fp16': 2,
  'fp8': 1,
  'int8': 1,
}
# bf16 and fp16 mean mixed precision: fp32 master weights, 16-bit GEMMs.
DENSE_PRECISIONS = ('fp32', 'tf32', 'bf16', 'fp16')
TABLE_PRECISIONS = ('fp32', 'fp16', 'bf16', 'int8')
OPTIMIZERS = ('sgd', 'adagrad', 'rowwise_adagrad', 'adam')
INTERACTIONS = ('dot', 'cat', 'dcnv2')


@dataclasses.dataclass(frozen=True)
class Table:
  """One embedding table.

  Attributes:
    rows: number of rows (hash size).
    dim: embedding dimension (elements per row).
    pooling: mean lookups per sample (1 for one-hot, >1 for multi-hot).
    precision: storage precision of the rows, a key of `PRECISION_BYTES`.
  """

  rows: int
  dim: int
  pooling: float = 1.0
  precision: str = 'fp32'

  @property
  def row_bytes(self) -> int:
    return self.dim * PRECISION_BYTES[self.precision]

  @property
  def bytes(self) -> int:
    return self.rows * self.row_bytes


@dataclasses.dataclass(frozen=True)
class Workload:
  """A DLRM and how it is trained.

  Attributes:
    name: preset name or a label.
    tables: the embedding tables, in feature order.
    num_dense: number of dense (continuous) input features.
    bottom_mlp: output widths of the bottom MLP layers; for `dot` and
      `dcnv2` the last one equals the embedding dimension.
    top_mlp: output widths of the top MLP layers (the last is usually 1).
    interaction: `dot`, `cat` or `dcnv2`.
    dcn_layers: number of DCN-v2 cross layers (`dcnv2` only).
    dcn_rank: low rank r of each cross layer (`dcnv2` only).
    global_batch: samples per synchronous step, over all devices.
    optimizer: `sgd`, `adagrad`, `rowwise_adagrad` or `adam`; it sets the
      optimizer-state bytes and the update traffic.
    dense_precision: GEMM precision, `fp32`, `tf32`, or mixed `bf16`/`fp16`.
    popularity_skew: k in the cache curve hit(f) = 1 - (1 - f)^k, the share
      of lookups that hit the hottest fraction f of a table's rows. k = 1 is
      uniform access; power-law (Zipf) traffic gives k >> 1.
    zipf_exponent: a where single hot rows count (HugeCTR's hybrid
      embedding keeps a row data-parallel when a step looks it up often
      enough): the i-th hottest of a table's N rows draws i^-a / H_N(a)
      of its lookups (`terms.hybrid_split`). 0: not given; the cache
      curve (`popularity_skew`) stands for single rows too.
    source: where the numbers come from.
  """

  name: str
  tables: tuple[Table, ...]
  num_dense: int
  bottom_mlp: tuple[int, ...]
  top_mlp: tuple[int, ...]
  interaction: str = 'dot'
  dcn_layers: int = 0
  dcn_rank: int = 0
  global_batch: int = 2048
  optimizer: str = 'sgd'
  dense_precision: str = 'fp32'
  popularity_skew: float = 1.0
  zipf_exponent: float = 0.0
  source: str = ''

  @property
  def num_tables(self) -> int:
    return len(self.tables)

  @property
  def num_features(self) -> int:
    """F: the vectors that interact (tables plus the bottom-MLP output)."""
    return self.num_tables + 1


class Gemm(NamedTuple):
  """One dense GEMM of a training step, per sample.

  For MLP layers the GEMM's m dimension is the batch (`batched_over_m`);
  for the dot interaction each sample runs its own (F x d)(d x F) product.
  """

  component: str  # 'bottom_mlp', 'interaction' or 'top_mlp'
  m: int  # rows per sample (1 for MLP layers)
  k: int
  n: int
  input_grad: bool  # whether backward also computes the input gradient
  bias: bool  # whether a bias of n elements is added


def _mlp(component, widths_in, widths_out, first_has_input_grad):
  gemms = []
  for i, (k, n) in enumerate(zip(widths_in, widths_out, strict=True)):
    grad = first_has_input_grad or i > 0
    gemms.append(Gemm(component, 1, k, n, grad, True))
  return gemms


def interaction_output_width(w: Workload) -> int:
  """Width of the top-MLP input."""
  d = w.bottom_mlp[-1]
  f = w.num_features
  if w.interaction == 'dot':
    return d + f * (f - 1) // 2
  if w.interaction == 'cat':
    return d + sum(t.dim for t in w.tables)
  return f * d  # dcnv2 keeps the width of the concatenated features


def gemms(w: Workload) -> list[Gemm]:
  """All GEMMs of one sample's forward pass, in execution order."""
  bottom_in = (w.num_dense, *w.bottom_mlp[:-1])
  out = _mlp('bottom_mlp', bottom_in, w.bottom_mlp, False)
  d = w.bottom_mlp[-1]
  f = w.num_features
  if w.interaction == 'dot':
    out.append(Gemm('interaction', f, d, f, True, False))
  elif w.interaction == 'dcnv2':
    width = f * d
    for _ in range(w.dcn_layers):
      out.append(Gemm('interaction', 1, width, w.dcn_rank, True, False))
      out.append(Gemm('interaction', 1, w.dcn_rank, width, True, True))
  top_in = (interaction_output_width(w), *w.top_mlp[:-1])
  out += _mlp('top_mlp', top_in, w.top_mlp, True)
  return out


def gemm_flops(g: Gemm) -> tuple[float, float]:
  """(forward, backward) FLOPs of one GEMM for one sample."""
  mac = g.m * g.k * g.n
  fwd = 2.0 * mac + (g.m * g.n if g.bias else 0.0)
  bwd = 2.0 * mac * (2.0 if g.input_grad else 1.0)
  bwd += g.m * g.n if g.bias else 0.0
  return fwd, bwd


def dense_param_count(w: Workload) -> int:
  """Parameters of the MLPs and the interaction (weights and biases)."""
  count = 0
  for g in gemms(w):
    if g.component == 'interaction' and w.interaction == 'dot':
      continue  # the dot product has no parameters
    count += g.k * g.n + (g.n if g.bias else 0)
  return count


def bottom_mlp_param_count(w: Workload) -> int:
  """Parameters of the bottom MLP (weights and biases)."""
  return sum(
    g.k * g.n + (g.n if g.bias else 0)
    for g in gemms(w)
    if g.component == 'bottom_mlp'
  )


def embedding_param_count(w: Workload) -> int:
  return sum(t.rows * t.dim for t in w.tables)


def param_count(w: Workload) -> int:
  return dense_param_count(w) + embedding_param_count(w)


def flops_per_sample(w: Workload) -> dict[str, tuple[float, float]]:
  """(forward, backward) FLOPs per sample of each component.

  Components: `bottom_mlp`, `interaction`, `top_mlp` (the GEMMs and bias
  adds) and `embedding` (pooling adds forward, gradient broadcast adds
  backward: one FLOP per looked-up element each way).
  """
  out = {'bottom_mlp': [0.0, 0.0], 'interaction': [0.0, 0.0]}
  out['top_mlp'] = [0.0, 0.0]
  for g in gemms(w):
    fwd, bwd = gemm_flops(g)
    out[g.component][0] += fwd
    out[g.component][1] += bwd
  pooled = sum(t.pooling * t.dim for t in w.tables)
  out['embedding'] = [pooled, pooled]
  return {k: (v[0], v[1]) for k, v in out.items()}


def dense_flops_per_sample(w: Workload) -> float:
  """Forward plus backward FLOPs of the dense part per training sample."""
  parts = flops_per_sample(w)
  return sum(sum(parts[k]) for k in ('bottom_mlp', 'interaction', 'top_mlp'))


def optimizer_state_elems_per_row(optimizer: str, dim: int) -> int:
  """fp32 optimizer-state elements kept per embedding row."""
  return {
    'sgd': 0,
    'adagrad': dim,
    'rowwise_adagrad': 1,
    'adam': 2 * dim,
  }[optimizer]


def optimizer_state_elems_per_param(optimizer: str) -> int:
  """fp32 state elements per dense parameter (rowwise Adagrad is dense
  Adagrad on the MLPs, as in TorchRec)."""
  return {'sgd': 0, 'adagrad': 1, 'rowwise_adagrad': 1, 'adam': 2}[optimizer]


def table_state_bytes(w: Workload, t: Table) -> int:
  return 4 * optimizer_state_elems_per_row(w.optimizer, t.dim) * t.rows


def embedding_bytes(w: Workload) -> int:
  """Bytes of all tables with their optimizer state."""
  return sum(t.bytes + table_state_bytes(w, t) for t in w.tables)


def granule_bytes(nbytes: float, granule: int) -> float:
  """Bytes moved to touch `nbytes` contiguous bytes at `granule` access size.

  A 64 B row costs a full memory transaction; a 72 B row costs two. This is
  static (workload and hardware granule are Python numbers), so ceil is safe.
  """
  return float(granule * math.ceil(nbytes / granule))


def summary(w: Workload) -> dict:
  """Analytic counters that a person reads first."""
  fl = flops_per_sample(w)
  return {
    'tables': w.num_tables,
    'embedding_params': embedding_param_count(w),
    'dense_params': dense_param_count(w),
    'params': param_count(w),
    'embedding_bytes_with_state': embedding_bytes(w),
    'lookups_per_sample': sum(t.pooling for t in w.tables),
    'dense_flops_per_sample': dense_flops_per_sample(w),
    'flops_per_sample': {k: {'fwd': v[0], 'bwd': v[1]} for k, v in fl.items()},
  }


# The documented range of every number of a workload (inclusive; counts
# are integers). The cost model's tests cover these; inputs outside them
# are refused at the boundary (`problems`). Wide enough for every preset
# and for the sizes the studies sweep (a 1e13-row table, 1e5 tables).
BOUNDS: dict[str, tuple[float, float]] = {
  'global_batch': (1, 1e8),  # samples per step
  'num_dense': (1, 1e5),  # dense features
  'num_tables': (1, 1e5),
  'rows': (1, 1e13),  # rows per table
  'dim': (1, 8192),  # floats per row
  'pooling': (1e-3, 1e4),  # lookups per sample per table
  'popularity_skew': (1.0, 64.0),  # k of hit(f) = 1 - (1 - f)^k
  'zipf_exponent': (0.0, 4.0),  # a of the hottest rows' law (0: none given)
  'mlp_width': (1, 65536),  # outputs of one MLP layer
  'mlp_layers': (1, 64),
  'dcn_layers': (0, 64),
  'dcn_rank': (0, 65536),
}
INTEGERS = frozenset(BOUNDS) - {'pooling', 'popularity_skew', 'zipf_exponent'}


def problems(w: Workload) -> list[str]:
  """Every reason `w` is not a valid workload, one sentence each. Fields
  that are None (unreadable in a JSON file, reported there) are skipped."""
  out = _choice(w.interaction, INTERACTIONS, 'interaction')
  out += _choice(w.optimizer, OPTIMIZERS, 'optimizer')
  out += _choice(w.dense_precision, DENSE_PRECISIONS, 'dense precision')
  out += _table_problems(w)
  for key in ('num_dense', 'global_batch', 'popularity_skew'):
    out += _within(getattr(w, key), f'workload.{key}', key)
  for key in ('dcn_layers', 'dcn_rank'):
    out += _within(getattr(w, key), f'workload.{key}', key)
  out += _within(w.zipf_exponent, 'workload.zipf_exponent', 'zipf_exponent')
  out += _mlp_problems(w)
  return out + _interaction_problems(w)


def _choice(value, choices, what: str) -> list[str]:
  """The sentence when `value` is not one of `choices` (none for None)."""
  if value is not None and value not in choices:
    return [f'unknown {what} {value!r} (valid choices: {", ".join(choices)})']
  return []


def _within(value, where: str, bound: str) -> list[str]:
  """The sentence when `value` is not a finite number (an integer for
  counts) inside BOUNDS[bound] (none for None)."""
  if value is None:
    return []
  lo, hi = BOUNDS[bound]
  integer = bound in INTEGERS
  kind = 'an integer' if integer else 'a number'
  ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
  ok = ok and math.isfinite(value) and lo <= value <= hi
  if ok and integer:
    ok = float(value).is_integer()
  if ok:
    return []
  try:
    shown = f'{value:.6g}' if isinstance(value, numbers.Real) else value
  except OverflowError:
    shown = 'a number beyond the float range'
  return [f'{where} must be {kind} in [{lo:g}, {hi:g}], got {shown!s}']


def _tables(w: Workload) -> tuple:
  """`w.tables`, or () when unreadable (None)."""
  return () if w.tables is None else w.tables


def _table_problems(w: Workload) -> list[str]:
  """The tables' problems: none at all, too many, and each table's
  precision, rows, dim and pooling."""
  out = []
  tables = _tables(w)
  if w.tables is not None and not w.tables:
    out.append('workload has no embedding tables')
  if tables:
    out += _within(len(tables), 'the number of workload.tables', 'num_tables')
  for i, t in enumerate(tables):
    if t is None:
      continue
    out += _choice(t.precision, TABLE_PRECISIONS, f'precision of table {i}')
    for key in ('rows', 'dim', 'pooling'):
      out += _within(getattr(t, key), f'workload.tables.{i}.{key}', key)
  return out


def _mlp_problems(w: Workload) -> list[str]:
  """The MLPs' problems: no layer, too many, and each layer's width."""
  out = []
  for key in ('bottom_mlp', 'top_mlp'):
    widths = getattr(w, key)
    if widths is None:
      continue
    if widths:
      out += _within(
        len(widths), f'the number of layers of workload.{key}', 'mlp_layers'
      )
    else:
      out.append(f'workload.{key} needs at least one layer')
    for j, x in enumerate(widths):
      out += _within(x, f'workload.{key}.{j}', 'mlp_width')
  return out


def _interaction_problems(w: Workload) -> list[str]:
  """The interaction's problems: a dot or DCN-v2 interaction needs every
  table dim equal to the last bottom MLP width; DCN-v2 needs layers and
  a rank."""
  out = []
  tables = _tables(w)
  if w.interaction in ('dot', 'dcnv2') and w.bottom_mlp:
    d = w.bottom_mlp[-1]
    bad = [
      i
      for i, t in enumerate(tables)
      if t is not None and t.dim is not None and t.dim != d
    ]
    if bad:
      out.append(
        f'{w.interaction} interaction needs every table dim equal to the '
        f'last bottom_mlp width {d} (table {bad[0]} has dim '
        f'{tables[bad[0]].dim})'
      )
  layers, rank = w.dcn_layers, w.dcn_rank
  if (
    w.interaction == 'dcnv2'
    and layers is not None
    and rank is not None
    and not (layers > 0 and rank > 0)
  ):
    out.append('dcnv2 interaction needs dcn_layers > 0 and dcn_rank > 0')
  return out


def validate(w: Workload) -> Workload:
  """Raises `InputError` naming every problem if `w` is not a valid
  workload (`problems`); returns `w`."""
  from codesign.core.errors import raise_problems

  raise_problems(problems(w), what='workload')
  return w
