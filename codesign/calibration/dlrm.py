"""A small, real DLRM in Flax, built from the same `Workload` as the model.

It exists to ground the analytic counts and the cost model: its parameter
count equals `workload.param_count`, XLA's cost analysis of its compiled
train step is compared with `workload.dense_flops_per_sample`, and its
measured step time is compared with `cost_model.evaluate`.

Flax Linen, not NNX: a Linen module is a pure `init`/`apply` pair over a
plain dict of arrays, so the train step below is one pure function that
`jax.jit(...).lower(...).compile().cost_analysis()` sees whole, the dense
parameters go straight to Optax, and the embedding tables can be updated
sparsely (only the looked-up rows) without splitting and merging module
state on every step.

The step, for a batch of B samples:
  forward:  per table, an embedding bag: sum over its L_t lookup slots of
            the looked-up rows, each scaled by a slot weight (1 for a real
            lookup, 0 for padding, so bags hold a variable number of ids);
            bottom MLP (ReLU after every layer) on the dense features;
            interaction (`dot`, `cat` or `dcnv2`); top MLP (ReLU after
            all but the last layer); binary cross-entropy on the logit;
  backward: gradients of the dense parameters and of the pooled vectors;
  update:   the dense parameters through the Optax optimizer the workload
            names; the embedding rows sparsely, only the rows looked up,
            with the same optimizer's update rule (see `sparse_update`).
"""

import functools
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from codesign.spec import workload as wl

COMPUTE_DTYPES = {
  'fp32': jnp.float32,
  'tf32': jnp.float32,
  'bf16': jnp.bfloat16,
  'fp16': jnp.float16,
}
# Adagrad and Adam constants, the Optax defaults (so that sparse and dense
# updates agree exactly).
ADAGRAD_INITIAL_ACCUMULATOR = 0.1
ADAGRAD_EPS = 1e-7
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-8


def bag_slots(pooling: float) -> int:
  """Lookup slots per sample of a table with mean `pooling` lookups."""
  return max(1, int(np.ceil(pooling)))


def dot_precision(dense_precision: str):
  """The `jax.lax.Precision` of the dense GEMMs of a workload whose
  `dense_precision` is this ('fp32', 'tf32', 'bf16' or 'fp16')."""
  # fp32 asks for full fp32 GEMMs; tf32 lets the backend use TF32 units
  # (GPUs); 16-bit inputs run at their own precision.
  if dense_precision == 'fp32':
    return jax.lax.Precision.HIGHEST
  return jax.lax.Precision.DEFAULT


def _dense_init_bias(key, shape, dtype=jnp.float32):
  # DLRM's reference initializes biases from N(0, 1/n); a small normal
  # keeps the synthetic task well conditioned.
  return jax.random.normal(key, shape, dtype) * np.sqrt(1.0 / shape[0])


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def gram(s, precision):
  """Z = S S^T per sample: (B, F, d) -> (B, F, F).

  The backward is written out, dS = dZ S + dZ^T S: two batched GEMMs in
  the plain (B, F, F)(B, F, d) layout, 4 F^2 d FLOPs per sample as the
  analytic count has it. Autodiff would put one of them on a transposed
  operand, which XLA's CPU backend runs on a slow generic path.
  """
  return jnp.matmul(s, jnp.swapaxes(s, 1, 2), precision=precision)


def _gram_fwd(s, precision):
  return gram(s, precision), s


def _gram_bwd(precision, s, dz):
  dzt = jnp.swapaxes(dz, 1, 2)
  ds = jnp.matmul(dz, s, precision=precision)
  return (ds + jnp.matmul(dzt, s, precision=precision),)


gram.defvjp(_gram_fwd, _gram_bwd)


@jax.custom_vjp
def upper_triangle(z):
  """The strict upper triangle of each (F, F) matrix, row by row (the
  order of `np.triu_indices(F, 1)`): (B, F, F) -> (B, F (F - 1) / 2).

  Written with static slices and a hand-made backward that lays the
  gradient rows back in one pass; an index gather would have a scatter as
  its backward, and autodiff of the slices sums F padded copies.
  """
  f = z.shape[1]
  return jnp.concatenate([z[:, i, i + 1 :] for i in range(f - 1)], axis=1)


def _upper_triangle_fwd(z):
  return upper_triangle(z), z.shape


def _upper_triangle_bwd(shape, g):
  b, f, _ = shape
  rows, start = [], 0
  for i in range(f):
    n = f - i - 1
    part = g[:, start : start + n]
    rows.append(jnp.pad(part, ((0, 0), (i + 1, 0))))
    start += n
  return (jnp.stack(rows, axis=1),)


upper_triangle.defvjp(_upper_triangle_fwd, _upper_triangle_bwd)


class DLRM(nn.Module):
  """The DLRM of a `Workload`.

  Attributes:
    workload: the static DLRM description (tables, MLPs, interaction).

  Parameters (Flax names): `embedding_{t}` of shape (rows_t, dim_t);
  `bottom_{i}`, `top_{i}` dense layers (kernel, bias); for `dcnv2`,
  `cross_{l}_u` (kernel only, width -> rank) and `cross_{l}_v` (kernel and
  bias, rank -> width).
  """

  workload: wl.Workload

  def setup(self):
    w = self.workload
    dtype = COMPUTE_DTYPES[w.dense_precision]
    prec = dot_precision(w.dense_precision)

    def dense(n, name, bias=True):
      return nn.Dense(
        n,
        use_bias=bias,
        dtype=dtype,
        param_dtype=jnp.float32,
        precision=prec,
        kernel_init=nn.initializers.variance_scaling(1.0, 'fan_avg', 'normal'),
        bias_init=_dense_init_bias,
        name=name,
      )

    self.tables = [
      self.param(
        f'embedding_{i}',
        nn.initializers.uniform(scale=2.0 / np.sqrt(t.rows)),
        (t.rows, t.dim),
        jnp.float32,
      )
      for i, t in enumerate(w.tables)
    ]
    self.bottom = [dense(n, f'bottom_{i}') for i, n in enumerate(w.bottom_mlp)]
    self.top = [dense(n, f'top_{i}') for i, n in enumerate(w.top_mlp)]
    if w.interaction == 'dcnv2':
      width = w.num_features * w.bottom_mlp[-1]
      self.cross_u = [
        dense(w.dcn_rank, f'cross_{i}_u', bias=False)
        for i in range(w.dcn_layers)
      ]
      self.cross_v = [dense(width, f'cross_{i}_v') for i in range(w.dcn_layers)]

  def pool(self, indices, weights):
    """Embedding bags.

    Args:
      indices: per table, int32 row ids of shape (B, L_t).
      weights: per table, float32 slot weights of shape (B, L_t).

    Returns:
      Per table, the pooled vectors, shape (B, dim_t), float32.
    """
    out = []
    for table, idx, wt in zip(self.tables, indices, weights, strict=True):
      # One gather per slot, summed: XLA fuses this into one loop, where
      # a (B, L, d) gather followed by a reduction materializes B*L rows.
      acc = table[idx[:, 0]] * wt[:, :1]
      for s in range(1, idx.shape[1]):
        acc = acc + table[idx[:, s]] * wt[:, s : s + 1]
      out.append(acc)
    return tuple(out)

  def dense(self, dense_features, pooled):
    """The dense part: bottom MLP, interaction, top MLP.

    Args:
      dense_features: float32 (B, num_dense).
      pooled: per table, float32 (B, dim_t).

    Returns:
      Logits, float32 (B,).
    """
    w = self.workload
    dtype = COMPUTE_DTYPES[w.dense_precision]
    x = dense_features.astype(dtype)
    for layer in self.bottom:
      x = nn.relu(layer(x))
    feats = [x] + [p.astype(dtype) for p in pooled]
    if w.interaction == 'dot':
      stack = jnp.stack(feats, axis=1)  # (B, F, d)
      z = gram(stack, dot_precision(w.dense_precision))
      y = jnp.concatenate([x, upper_triangle(z)], axis=1)
    elif w.interaction == 'cat':
      y = jnp.concatenate(feats, axis=1)
    else:  # dcnv2: x_{l+1} = x_0 * (V (U x_l) + b) + x_l
      x0 = jnp.concatenate(feats, axis=1)
      y = x0
      for u, v in zip(self.cross_u, self.cross_v, strict=True):
        y = x0 * v(u(y)) + y
    for i, layer in enumerate(self.top):
      y = layer(y)
      if i < len(self.top) - 1:
        y = nn.relu(y)
    return y[:, 0].astype(jnp.float32)

  def __call__(self, dense_features, indices, weights):
    return self.dense(dense_features, self.pool(indices, weights))


def table_names(w: wl.Workload) -> list[str]:
  return [f'embedding_{i}' for i in range(w.num_tables)]


def split_params(w: wl.Workload, params: dict) -> tuple[dict, tuple]:
  """Flax `params` -> (dense parameters, tuple of tables)."""
  names = table_names(w)
  dense = {k: v for k, v in params.items() if k not in names}
  return dense, tuple(params[n] for n in names)


def merge_params(w: wl.Workload, dense: dict, tables) -> dict:
  return {**dense, **dict(zip(table_names(w), tables, strict=True))}


def count_params(params) -> int:
  """Number of scalar parameters in a pytree."""
  return int(sum(np.prod(x.shape) for x in jax.tree.leaves(params)))


def dummy_inputs(w: wl.Workload, batch: int):
  """Zero inputs of the right shapes (for `init` and lowering)."""
  dense = jnp.zeros((batch, w.num_dense), jnp.float32)
  idx = tuple(
    jnp.zeros((batch, bag_slots(t.pooling)), jnp.int32) for t in w.tables
  )
  wts = tuple(
    jnp.ones((batch, bag_slots(t.pooling)), jnp.float32) for t in w.tables
  )
  return dense, idx, wts


def init(w: wl.Workload, key: jax.Array) -> dict:
  """Flax parameters of `DLRM(w)` (the `params` collection).

  Flax creates parameters by running a method once, op by op. The dense
  method is enough: `setup` makes every table, in the same order and so
  from the same keys, whichever method runs, and the MLPs see the pooled
  vectors' shapes. The embedding bags would add a gather per slot of
  every table, for nothing: the FLOP checks of `calibrate --smoke` took
  2.0-2.3 s with them and 1.5 s without (2 cores). Same parameters to
  the bit (22 workloads)."""
  dense = jnp.zeros((1, w.num_dense), jnp.float32)
  pooled = tuple(jnp.zeros((1, t.dim), jnp.float32) for t in w.tables)
  return DLRM(w).init(key, dense, pooled, method=DLRM.dense)['params']


def bce_loss(logits, labels):
  """Mean binary cross-entropy of logits (B,) against 0/1 labels (B,)."""
  return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, labels))


def dense_optimizer(name: str, learning_rate: float):
  """The Optax optimizer of the dense parameters.

  Rowwise Adagrad is dense Adagrad on the MLPs, as in TorchRec (and as
  `workload.optimizer_state_elems_per_param` counts it).
  """
  if name == 'sgd':
    return optax.sgd(learning_rate)
  if name in ('adagrad', 'rowwise_adagrad'):
    return optax.adagrad(
      learning_rate,
      initial_accumulator_value=ADAGRAD_INITIAL_ACCUMULATOR,
      eps=ADAGRAD_EPS,
    )
  if name == 'adam':
    return optax.adam(learning_rate, ADAM_B1, ADAM_B2, ADAM_EPS)
  raise ValueError(f'unknown optimizer {name!r}')


def embedding_state(w: wl.Workload) -> tuple:
  """Per table, the optimizer state of its rows (fp32).

  sgd: (); adagrad: (sum of squares (rows, d),); rowwise_adagrad: (mean
  square per row (rows,),); adam: (first moment, second moment), each
  (rows, d). Adam's step count is the train state's `step`.
  """
  out = []
  for t in w.tables:
    if w.optimizer == 'sgd':
      out.append(())
    elif w.optimizer == 'adagrad':
      out.append((jnp.full((t.rows, t.dim), ADAGRAD_INITIAL_ACCUMULATOR),))
    elif w.optimizer == 'rowwise_adagrad':
      out.append((jnp.full((t.rows,), ADAGRAD_INITIAL_ACCUMULATOR),))
    else:
      z = jnp.zeros((t.rows, t.dim), jnp.float32)
      out.append((z, z))
  return tuple(out)


def sparse_update(
  optimizer: str, learning_rate: float, table, state, idx, wt, grad, step
):
  """Updates only the looked-up rows of one table.

  For `sgd` the per-lookup gradients are scatter-added (exact, as the
  update is linear). The other optimizers first sum the gradients of each
  distinct row (`jnp.unique` with a static size, padding with an out-of-
  range id that the scatters drop), then apply the Optax rule to those
  rows: `sgd` and `adagrad` equal a dense Optax step on the full table
  exactly (untouched rows have zero gradient); rowwise Adagrad keeps one
  accumulator per row (the mean square over the row, as FBGEMM does);
  `adam` is lazy Adam (moments of untouched rows do not decay).

  Args:
    optimizer: a name of `workload.OPTIMIZERS`.
    learning_rate: step size.
    table: (rows, d) float32.
    state: the table's entry of `embedding_state`.
    idx: (B, L) int32 row ids; wt: (B, L) slot weights.
    grad: (B, d) gradient of the loss with respect to the pooled vectors.
    step: int32 scalar, steps taken before this one.

  Returns:
    (new table, new state).
  """
  rows, d = table.shape
  n = idx.size
  flat = idx.reshape(n)
  g = (grad[:, None, :] * wt[:, :, None]).reshape(n, d)
  if optimizer == 'sgd':
    return table.at[flat].add(-learning_rate * g), state
  uniq, inv = jnp.unique(flat, size=n, fill_value=rows, return_inverse=True)
  gsum = jax.ops.segment_sum(g, inv.reshape(n), num_segments=n)
  if optimizer == 'adagrad':
    (acc,) = state
    sos = acc.at[uniq].get(mode='fill', fill_value=0.0) + gsum * gsum
    upd = jnp.where(sos > 0, jax.lax.rsqrt(sos + ADAGRAD_EPS), 0.0) * gsum
    table = table.at[uniq].add(-learning_rate * upd, mode='drop')
    return table, (acc.at[uniq].set(sos, mode='drop'),)
  if optimizer == 'rowwise_adagrad':
    (acc,) = state
    sos = acc.at[uniq].get(mode='fill', fill_value=0.0)
    sos = sos + jnp.mean(gsum * gsum, axis=1)
    upd = jax.lax.rsqrt(sos + ADAGRAD_EPS)[:, None] * gsum
    table = table.at[uniq].add(-learning_rate * upd, mode='drop')
    return table, (acc.at[uniq].set(sos, mode='drop'),)
  mu, nu = state
  count = (step + 1).astype(jnp.float32)
  m = ADAM_B1 * mu.at[uniq].get(mode='fill', fill_value=0.0)
  m = m + (1.0 - ADAM_B1) * gsum
  v = ADAM_B2 * nu.at[uniq].get(mode='fill', fill_value=0.0)
  v = v + (1.0 - ADAM_B2) * gsum * gsum
  m_hat = m / (1.0 - ADAM_B1**count)
  v_hat = v / (1.0 - ADAM_B2**count)
  upd = m_hat / (jnp.sqrt(v_hat) + ADAM_EPS)
  table = table.at[uniq].add(-learning_rate * upd, mode='drop')
  mu = mu.at[uniq].set(m, mode='drop')
  nu = nu.at[uniq].set(v, mode='drop')
  return table, (mu, nu)


class TrainState(NamedTuple):
  """Everything a train step changes.

  Attributes:
    params: Flax `params` of `DLRM` (dense layers and tables).
    opt_state: Optax state of the dense parameters.
    emb_state: `embedding_state` of the tables.
    step: int32 scalar, steps taken.
  """

  params: dict
  opt_state: Any
  emb_state: tuple
  step: jax.Array


def init_state(w: wl.Workload, key: jax.Array, learning_rate: float):
  params = init(w, key)
  dense, _ = split_params(w, params)
  opt_state = dense_optimizer(w.optimizer, learning_rate).init(dense)
  return TrainState(params, opt_state, embedding_state(w), jnp.zeros((), int))


def make_dense_step(w: wl.Workload, learning_rate: float):
  """The dense part of a train step, alone (for XLA's FLOP count).

  Returns:
    `dense_step(dense_params, tables, opt_state, dense_features, pooled,
    labels) -> (loss, dense_params, opt_state, pooled_grad)`: forward,
    backward (including the gradient of the pooled vectors) and the Optax
    update. `tables` are only passed through to Flax (the dense method
    does not read them; XLA drops them), so abstract shapes will do.
  """
  model = DLRM(w)
  tx = dense_optimizer(w.optimizer, learning_rate)

  def dense_step(
    dense_params, tables, opt_state, dense_features, pooled, labels
  ):
    def loss_fn(dp, pooled):
      logits = model.apply(
        {'params': merge_params(w, dp, tables)},
        dense_features,
        pooled,
        method=DLRM.dense,
      )
      return bce_loss(logits, labels)

    loss, (gd, gp) = jax.value_and_grad(loss_fn, argnums=(0, 1))(
      dense_params, pooled
    )
    updates, opt_state = tx.update(gd, opt_state, dense_params)
    return loss, optax.apply_updates(dense_params, updates), opt_state, gp

  return dense_step


def make_train_step(w: wl.Workload, learning_rate: float):
  """A pure train step: `train_step(state, batch) -> (state, loss)`.

  `batch` is a `synthetic_data.Batch` (or any object with `dense`,
  `indices`, `weights`, `labels`). The caller jits it, donating `state` so
  that the tables are updated in place.
  """
  model = DLRM(w)
  dense_step = make_dense_step(w, learning_rate)

  def train_step(state: TrainState, batch):
    dense, tables = split_params(w, state.params)
    pooled = model.apply(
      {'params': state.params}, batch.indices, batch.weights, method=DLRM.pool
    )
    loss, dense, opt_state, gp = dense_step(
      dense, tables, state.opt_state, batch.dense, pooled, batch.labels
    )
    new_tables, new_emb = [], []
    for table, st, idx, wt, g in zip(
      tables, state.emb_state, batch.indices, batch.weights, gp, strict=True
    ):
      table, st = sparse_update(
        w.optimizer, learning_rate, table, st, idx, wt, g, state.step
      )
      new_tables.append(table)
      new_emb.append(st)
    params = merge_params(w, dense, new_tables)
    new = TrainState(params, opt_state, tuple(new_emb), state.step + 1)
    return new, loss

  return train_step


def make_predict(w: wl.Workload):
  """`predict(params, batch) -> probabilities (B,)`; the caller jits."""
  model = DLRM(w)

  def predict(params, batch):
    logits = model.apply(
      {'params': params}, batch.dense, batch.indices, batch.weights
    )
    return jax.nn.sigmoid(logits)

  return predict
