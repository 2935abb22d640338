"""Deterministic synthetic click data with Criteo-like statistics.

For a `Workload`, each sample has:
- `num_dense` dense features, log(1 + count) of heavy-tailed counts, as
  DLRM preprocesses Criteo: count = floor(exp(1 + 1.5 z)) with z ~ N(0, 1);
- per table t, a bag of ids: its size is floor(p) or ceil(p) so that the
  mean is the table's pooling factor p, padded to `dlrm.bag_slots(p)`
  slots with weight 0; ids follow a Zipf law over the rows (the r-th most
  popular row has probability proportional to 1 / r^s), and a fixed random
  permutation of each table scatters the popular rows over the table;
- a click label drawn from a planted logistic model,
    logit = bias + signal * (u_dense + sum_t u_t) / sqrt(T + 1),
  where u_dense = v . z (v a fixed unit vector) and u_t is the mean of a
  fixed N(0, 1) score per row over the bag, standardized under the Zipf
  law; each term has about unit variance, so `signal` is the standard
  deviation of the logit, the Bayes AUC is high, and a DLRM that learns
  per-row scores can approach it.

Batch `i` of a generator depends only on (seed, i), so any batch can be
regenerated on its own.
"""

from typing import NamedTuple

import numpy as np

from codesign.calibration.dlrm import bag_slots
from codesign.spec import workload as wl


class Batch(NamedTuple):
  """One batch of B samples (numpy arrays; JAX accepts them as they are).

  Attributes:
    dense: float32 (B, num_dense).
    indices: per table, int32 (B, L_t).
    weights: per table, float32 (B, L_t): 1 for a lookup, 0 for padding.
    labels: float32 (B,), 0 or 1.
  """

  dense: np.ndarray
  indices: tuple
  weights: tuple
  labels: np.ndarray


class SyntheticCriteo:
  """A deterministic generator of `Batch`es for one workload.

  Args:
    workload: the DLRM whose tables, pooling and dense width are used.
    seed: integer seed; same seed and batch index give the same batch.
    zipf_exponent: s of the Zipf law of row popularity (Criteo's
      categorical features are close to s = 1).
    signal: standard deviation of the planted logit (larger is easier).
    bias: intercept of the planted logit (about -1 gives ~30% clicks).
  """

  def __init__(
    self,
    workload: wl.Workload,
    seed: int = 0,
    zipf_exponent: float = 1.05,
    signal: float = 3.0,
    bias: float = -1.0,
  ):
    self.workload = workload
    self.seed = int(seed)
    self.signal = float(signal)
    self.bias = float(bias)
    rng = np.random.default_rng([self.seed, 0])
    self._cdf, self._perm, self._score = [], [], []
    for t in workload.tables:
      ranks = np.arange(1, t.rows + 1, dtype=np.float64)
      p = ranks**-zipf_exponent
      cdf = np.cumsum(p)
      self._cdf.append(cdf / cdf[-1])
      self._perm.append(rng.permutation(t.rows).astype(np.int32))
      self._score.append(rng.standard_normal(t.rows))
    self._dense_w = rng.standard_normal(workload.num_dense)
    self._dense_w /= np.linalg.norm(self._dense_w)
    # Each table's term is a mean over a bag of Zipf-drawn rows: its spread
    # is set by the few hottest rows. Normalize each term by its spread over
    # the popularity law (exact, from the cdf) so every term has unit
    # variance and `signal` is the logit's standard deviation.
    self._scale = []
    for cdf, perm, score in zip(
      self._cdf, self._perm, self._score, strict=True
    ):
      prob = np.diff(cdf, prepend=0.0)
      s = score[perm]
      mean = float(np.sum(prob * s))
      var = float(np.sum(prob * (s - mean) ** 2))
      self._scale.append((mean, np.sqrt(max(var, 1e-12))))

  def batch(self, index: int, batch_size: int) -> Batch:
    """Batch number `index` of `batch_size` samples."""
    w = self.workload
    rng = np.random.default_rng([self.seed, 1, int(index)])
    b = int(batch_size)
    z = rng.standard_normal((b, w.num_dense))
    counts = np.floor(np.exp(1.0 + 1.5 * z))
    dense = np.log1p(counts).astype(np.float32)
    terms = [z @ self._dense_w]
    indices, weights = [], []
    for t, cdf, perm, score, (mu, sd) in zip(
      w.tables, self._cdf, self._perm, self._score, self._scale, strict=True
    ):
      slots = bag_slots(t.pooling)
      lo = int(np.floor(t.pooling))
      frac = t.pooling - lo
      sizes = lo + (rng.random(b) < frac)
      sizes = np.maximum(sizes, 1)
      wt = (np.arange(slots)[None, :] < sizes[:, None]).astype(np.float32)
      ranks = np.searchsorted(cdf, rng.random((b, slots)), side='right')
      ranks = np.minimum(ranks, t.rows - 1)
      ids = perm[ranks]
      ids = np.where(wt > 0, ids, 0).astype(np.int32)
      bag_mean = np.sum(score[ids] * wt, axis=1) / np.sum(wt, axis=1)
      # A bag of n ids has n times less variance than one id; scale it
      # back so the term's variance stays about 1 for any pooling.
      terms.append((bag_mean - mu) / sd * np.sqrt(np.mean(sizes)))
      indices.append(ids)
      weights.append(wt)
    logit = self.bias + self.signal * np.sum(terms, axis=0) / np.sqrt(
      len(terms)
    )
    labels = (rng.random(b) < 1.0 / (1.0 + np.exp(-logit))).astype(np.float32)
    return Batch(dense, tuple(indices), tuple(weights), labels)


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
  """Area under the ROC curve (Mann-Whitney), ties counted as one half."""
  labels = np.asarray(labels) > 0.5
  scores = np.asarray(scores, dtype=np.float64)
  pos, neg = int(labels.sum()), int((~labels).sum())
  if pos == 0 or neg == 0:
    return float('nan')
  order = np.argsort(scores, kind='mergesort')
  ranks = np.empty(len(scores))
  sorted_scores = scores[order]
  # Average ranks over ties.
  _, start, counts = np.unique(
    sorted_scores, return_index=True, return_counts=True
  )
  avg = start + (counts - 1) / 2.0 + 1.0
  ranks[order] = np.repeat(avg, counts)
  return float((ranks[labels].sum() - pos * (pos + 1) / 2.0) / (pos * neg))
