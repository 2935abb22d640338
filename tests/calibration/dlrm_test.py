"""The Flax DLRM against the analytic counts, and that it learns."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from codesign.calibration import dlrm, synthetic_data
from codesign.spec import workload as wl


def _small(interaction='dot', optimizer='sgd', batch=256, **kw):
  d = 16
  return wl.Workload(
    name=f'small_{interaction}',
    tables=(wl.Table(500, d, 1), wl.Table(300, d, 2.5), wl.Table(200, d, 4)),
    num_dense=13,
    bottom_mlp=(64, d),
    top_mlp=(64, 32, 1),
    interaction=interaction,
    dcn_layers=2,
    dcn_rank=8,
    global_batch=batch,
    optimizer=optimizer,
    **kw,
  )


@pytest.mark.parametrize('interaction', ['dot', 'cat', 'dcnv2'])
def test_param_count_matches_analytic(interaction):
  w = _small(interaction)
  shapes = jax.eval_shape(lambda k: dlrm.init(w, k), jax.random.PRNGKey(0))
  assert dlrm.count_params(shapes) == wl.param_count(w)
  dense, tables = dlrm.split_params(w, shapes)
  assert dlrm.count_params(dense) == wl.dense_param_count(w)
  assert [t.shape for t in tables] == [(t.rows, t.dim) for t in w.tables]


@pytest.mark.parametrize('interaction', ['dot', 'cat', 'dcnv2'])
def test_init_is_the_whole_models_init(interaction):
  """`init` runs the dense part alone; the parameters are those of the
  whole model's forward (embedding bags too), to the bit."""
  w = _small(interaction)
  key = jax.random.PRNGKey(3)
  dense, idx, wts = dlrm.dummy_inputs(w, 1)
  whole = dlrm.DLRM(w).init(key, dense, idx, wts)['params']
  got = dlrm.init(w, key)
  assert jax.tree.structure(got) == jax.tree.structure(whole)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(whole), strict=True):
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize('interaction', ['dot', 'dcnv2'])
def test_compiled_dense_flops_within_5_percent(interaction):
  w = dataclasses.replace(
    _small(interaction), bottom_mlp=(128, 16), top_mlp=(256, 128, 1)
  )
  b = w.global_batch
  shapes = jax.eval_shape(lambda k: dlrm.init(w, k), jax.random.PRNGKey(0))
  dense, tables = dlrm.split_params(w, shapes)
  opt = jax.eval_shape(dlrm.dense_optimizer('sgd', 0.1).init, dense)
  f32 = jnp.float32
  args = (
    dense,
    tables,
    opt,
    jax.ShapeDtypeStruct((b, w.num_dense), f32),
    tuple(jax.ShapeDtypeStruct((b, t.dim), f32) for t in w.tables),
    jax.ShapeDtypeStruct((b,), f32),
  )
  compiled = jax.jit(dlrm.make_dense_step(w, 0.1)).lower(*args).compile()
  ca = compiled.cost_analysis()
  ca = ca[0] if isinstance(ca, list | tuple) else ca
  ratio = ca['flops'] / (wl.dense_flops_per_sample(w) * b)
  # XLA also counts ReLUs, the loss and the optimizer: slightly above 1.
  assert 1.0 <= ratio < 1.05


def test_gram_and_triangle_gradients_match_autodiff():
  s = jax.random.normal(jax.random.PRNGKey(1), (3, 5, 4), jnp.float64)
  iu, ju = np.triu_indices(5, k=1)
  prec = jax.lax.Precision.HIGHEST

  def ours(s):
    y = dlrm.upper_triangle(dlrm.gram(s, prec))
    return jnp.sum(jnp.sin(y))

  def reference(s):
    z = jnp.einsum('bfd,bgd->bfg', s, s, precision=prec)
    return jnp.sum(jnp.sin(z[:, iu, ju]))

  np.testing.assert_allclose(ours(s), reference(s), rtol=1e-12)
  np.testing.assert_allclose(
    jax.grad(ours)(s), jax.grad(reference)(s), rtol=1e-10, atol=1e-12
  )


@pytest.mark.parametrize('optimizer', ['sgd', 'adagrad'])
def test_sparse_update_equals_dense_optax_step(optimizer):
  # Updating only the looked-up rows must equal Optax on the whole table
  # (untouched rows have zero gradient), duplicates included.
  rows, d, b, slots = 10, 3, 4, 3
  key = jax.random.PRNGKey(2)
  table = jax.random.normal(key, (rows, d))
  idx = jnp.array([[1, 1, 2], [3, 1, 0], [9, 9, 9], [2, 5, 0]], jnp.int32)
  wt = jnp.array([[1, 1, 1], [1, 1, 0], [1, 0, 1], [1, 1, 1]], jnp.float64)
  grad = jax.random.normal(jax.random.PRNGKey(3), (b, d))
  w = wl.Workload('t', (wl.Table(rows, d, slots),), 1, (d,), (1,))
  w = dataclasses.replace(w, optimizer=optimizer)
  (state,) = dlrm.embedding_state(w)
  new, _ = dlrm.sparse_update(
    optimizer, 0.1, table, state, idx, wt, grad, jnp.zeros((), int)
  )

  def pooled_loss(t):
    pooled = jnp.einsum('bsd,bs->bd', t[idx], wt)
    return jnp.sum(pooled * grad)  # d loss / d pooled = grad

  dense_grad = jax.grad(pooled_loss)(table)
  tx = dlrm.dense_optimizer(optimizer, 0.1)
  upd, _ = tx.update(dense_grad, tx.init(table), table)
  np.testing.assert_allclose(
    new, optax.apply_updates(table, upd), rtol=1e-6, atol=1e-7
  )


@pytest.mark.parametrize('optimizer', ['rowwise_adagrad', 'adam'])
def test_other_optimizers_touch_only_looked_up_rows(optimizer):
  w = dataclasses.replace(_small(), optimizer=optimizer, global_batch=32)
  gen = synthetic_data.SyntheticCriteo(w, seed=1)
  batch = gen.batch(0, 32)
  state = dlrm.init_state(w, jax.random.PRNGKey(0), 0.05)
  new, loss = jax.jit(dlrm.make_train_step(w, 0.05))(state, batch)
  assert np.isfinite(float(loss))
  for i, name in enumerate(dlrm.table_names(w)):
    changed = np.any(
      np.asarray(new.params[name]) != np.asarray(state.params[name]), axis=1
    )
    looked_up = np.zeros(w.tables[i].rows, bool)
    looked_up[np.asarray(batch.indices[i])[batch.weights[i] > 0]] = True
    assert changed.any()
    assert not np.any(changed & ~looked_up)


def test_dlrm_learns_the_planted_signal():
  w = _small()
  gen = synthetic_data.SyntheticCriteo(w, seed=0)
  state = dlrm.init_state(w, jax.random.PRNGKey(0), 0.1)
  step = jax.jit(dlrm.make_train_step(w, 0.1), donate_argnums=0)
  predict = jax.jit(dlrm.make_predict(w))
  held_out = gen.batch(10**6, 4096)  # an index no training step uses
  losses = []
  for i in range(300):
    state, loss = step(state, gen.batch(i, w.global_batch))
    losses.append(float(loss))
  assert np.mean(losses[-50:]) < np.mean(losses[:10]) - 0.05
  auc = synthetic_data.auc(held_out.labels, predict(state.params, held_out))
  assert auc > 0.7


def test_synthetic_data_is_deterministic_and_criteo_like():
  w = _small()
  gen = synthetic_data.SyntheticCriteo(w, seed=3)
  a, b = gen.batch(7, 2000), synthetic_data.SyntheticCriteo(w, 3).batch(7, 2000)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(x, y)
  c = gen.batch(8, 2000)
  assert not np.array_equal(a.labels, c.labels)
  for t, idx, wt in zip(w.tables, a.indices, a.weights, strict=True):
    assert idx.shape == (2000, dlrm.bag_slots(t.pooling))
    assert abs(wt.sum(axis=1).mean() - t.pooling) < 0.1
    counts = np.bincount(idx[wt > 0], minlength=t.rows)
    # Zipf: the hottest row is far more popular than the median row.
    assert counts.max() > 20 * max(np.median(counts), 1)
  assert 0.1 < a.labels.mean() < 0.6


def test_auc_matches_pairwise_count():
  rng = np.random.default_rng(0)
  labels = rng.random(60) < 0.4
  scores = np.round(rng.random(60), 1)  # with ties
  pos, neg = scores[labels], scores[~labels]
  pairs = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
  assert synthetic_data.auc(labels, scores) == pytest.approx(pairs.mean())
