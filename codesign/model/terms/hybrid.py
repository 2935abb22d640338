"""HugeCTR's hybrid embedding: each table's frequent rows data-parallel,
its infrequent rows model-parallel.

HybridSparseEmbedding counts every category over its first
`num_iterations_statistics` batches and keeps a category frequent (its
row replicated on every GPU, its gradient allreduced, its lookups served
by the GPU that holds the sample) when it is looked up more often than a
threshold; the rest are sharded and their lookups exchanged
(NVIDIA-Merlin/HugeCTR HugeCTR/src/embeddings/hybrid_embedding/
model.cu Model::init_hybrid_model, calibration_data.cu
ModelInitializationFunctors::calculate_threshold). The split is the
software's, made inside every table, so the cost model applies it
whatever the plan's sharding, for a stack whose planner is `hybrid`:
the exchanges carry the infrequent share of each table's lookups
(`collectives.alltoall_pooled`, `alltoall_ids`), the allreduce the
frequent rows' gradients (`allreduce_bytes`), and each GPU serves its
own samples' frequent lookups (`embedding.busiest_loads`). The frequent
rows' replicas are not added to a GPU's HBM (a few thousand rows of
Criteo's 188 million at MLPerf's thresholds).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from codesign.core.smooth import TINY, safe_div
from codesign.model.terms.shared import Setup, setup
from codesign.spec import workload as wl
from codesign.spec.hardware import Platform
from codesign.spec.stack import Stack


class HybridSplit(NamedTuple):
  """Per table, shape (T,): the share of its lookups that go to its
  infrequent rows (exchanged) and the count of its frequent rows
  (replicated, their gradients allreduced)."""

  infrequent: object
  frequent_rows: object


def threshold(s: Stack, st: Setup):
  """Lookups a step at or above which HugeCTR keeps a row frequent
  (`calculate_threshold`, its count over the statistics batches divided
  by their number). Across n nodes of G GPUs in all
  (IB_NVLink_Hierarchical): a row's lookups cost more to exchange than
  its gradient to allreduce above G n / (n - 1) x
  max_all_to_all_bandwidth / max_all_reduce_bandwidth x
  efficiency_bandwidth_ratio (`Stack.hybrid_bandwidth_ratio`). On one
  node (NVLink_SingleNode): above B sqrt(2 p_dup_max / (M (M - 1))) with
  M = B / G samples a GPU, where a GPU's batch holds the row twice with
  probability p_dup_max (`Stack.hybrid_p_dup_max`)."""
  g, b = st.ranks, st.batch
  nodes = st.ranks / st.per_node
  m = b / g
  single = b * jnp.sqrt(
    2.0 * s.hybrid_p_dup_max / jnp.maximum(m * (m - 1.0), TINY)
  )
  multi = g * s.hybrid_bandwidth_ratio * safe_div(nodes, nodes - 1.0)
  return jnp.where(nodes > 1.5, multi, single)


# Terms of `harmonic` summed exactly; the rest by the midpoint rule.
_EXACT_TERMS = 16


def harmonic(x, a: float):
  """H_x(a) = sum over i <= x of i^-a, continuous in x >= 0: the first
  `_EXACT_TERMS` terms each enter linearly over [i - 1, i] (exact at
  integers), the rest as the integral of t^-a from 16.5 to x + 0.5
  (within 0.1% of the sum at every integer x for a in (0, 4])."""
  x = jnp.asarray(x)
  i = np.arange(1.0, _EXACT_TERMS + 1.0)
  head = jnp.sum(i**-a * jnp.clip(x[..., None] - i + 1.0, 0.0, 1.0), axis=-1)
  lo = _EXACT_TERMS + 0.5
  hi = jnp.maximum(x, _EXACT_TERMS) + 0.5
  if abs(a - 1.0) < 1e-9:
    tail = jnp.log(hi / lo)
  else:
    tail = (hi ** (1.0 - a) - lo ** (1.0 - a)) / (1.0 - a)
  return head + tail


def zipf_split(rows, lookups, theta, a: float) -> HybridSplit:
  """The split under a Zipf law of exponent a: row i of N draws
  i^-a / H_N(a) of the L lookups, so rows i <= m = (L / (theta H_N))^(1/a)
  are frequent and draw H_m / H_N."""
  h_n = harmonic(rows, a)
  m = jnp.clip((lookups / (theta * h_n)) ** (1.0 / a), 0.0, rows)
  return HybridSplit(1.0 - harmonic(m, a) / h_n, m)


def cache_curve_split(rows, lookups, theta, k: float) -> HybridSplit:
  """The split under the cache curve hit(f) = 1 - (1 - f)^k: the row at
  rank fraction x draws k (1 - x)^(k - 1) / N of the L lookups, so rows
  are frequent up to 1 - x* = r^(1/(k - 1)), r = theta N / (L k), and
  draw 1 - r^(k / (k - 1)); uniform (k = 1): all or none."""
  ratio = theta * rows / (lookups * k)
  if k == 1.0:
    share = jnp.where(ratio <= 1.0, 1.0, 0.0)
    return HybridSplit(1.0 - share, share * rows)
  r = jnp.minimum(ratio, 1.0)
  return HybridSplit(
    r ** (k / (k - 1.0)), (1.0 - r ** (1.0 / (k - 1.0))) * rows
  )


def split(w: wl.Workload, s: Stack, st: Setup) -> HybridSplit | None:
  """Each table's `HybridSplit` under the workload's popularity
  (`Workload.zipf_exponent`, else its cache curve) at the stack's
  `threshold`; None unless the stack's embedding is hybrid
  (`Stack.planner`). Multi-hot tables are not split (HybridSparseEmbedding
  takes one id per table and sample)."""
  if s.planner != 'hybrid':
    return None
  return _split_at(w, st, threshold(s, st))


def _split_at(w: wl.Workload, st: Setup, theta) -> HybridSplit:
  """`split` at the threshold `theta` (lookups a step)."""
  rows = np.array([float(t.rows) for t in w.tables])
  pool = _pooling(w)
  lookups = st.batch * pool
  if w.zipf_exponent > 0.0:
    out = zipf_split(rows, lookups, theta, float(w.zipf_exponent))
  else:
    out = cache_curve_split(rows, lookups, theta, float(w.popularity_skew))
  one_hot = pool <= 1.0
  return HybridSplit(
    jnp.where(one_hot, out.infrequent, 1.0),
    jnp.where(one_hot, out.frequent_rows, 0.0),
  )


def _pooling(w: wl.Workload) -> np.ndarray:
  return np.array([float(t.pooling) for t in w.tables])


def served_by_owners(load, infrequent, ranks):
  """(load the tables' ranks serve, load every rank serves): the
  infrequent share of per-table `load` (..., T) stays with the ranks
  that hold the table; each rank serves its own samples' frequent
  lookups, an even share (...) of the rest. numpy in, numpy out."""
  own = (load * (1.0 - infrequent)).sum(axis=-1) / ranks
  return load * infrequent, own


def summary(w: wl.Workload, s: Stack, p: Platform) -> dict | None:
  """What the hybrid embedding decides for a concrete design (platform
  arrays `p`), for result.json and the printout: the infrequent share of
  all lookups, the frequent rows, the threshold, and the popularity that
  set them (with its source); None unless the stack's embedding is
  hybrid (and then nothing is computed)."""
  if s.planner != 'hybrid':
    return None
  st = setup(p, w, s)
  theta = threshold(s, st)
  out = _split_at(w, st, theta)
  pool = _pooling(w)
  inf = np.asarray(out.infrequent, np.float64)
  zipf = w.zipf_exponent > 0.0
  return {
    'infrequent_share': float(np.sum(inf * pool) / np.sum(pool)),
    'frequent_rows': float(np.sum(np.asarray(out.frequent_rows))),
    'threshold_lookups_per_step': float(theta),
    'popularity': (
      f'Zipf exponent {w.zipf_exponent:g} of the hottest rows'
      if zipf
      else f'the cache curve (popularity_skew {w.popularity_skew:g})'
    ),
  }


def sentence(d: dict) -> str:
  """One line of `summary`."""
  return (
    f'hybrid embedding: {100 * d["infrequent_share"]:.1f}% of lookups '
    f'infrequent (exchanged), {d["frequent_rows"]:,.0f} frequent rows '
    "replicated (their gradients allreduced), at HugeCTR's threshold of "
    f'{d["threshold_lookups_per_step"]:.1f} lookups a step under '
    f'{d["popularity"]}'
  )
