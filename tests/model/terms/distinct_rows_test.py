"""Known answers, worked by hand, for the model: distinct rows and the
row updates.

The tiny DLRM, platform and stack are in `tests.model.fixtures`, whose
docstring gives their numbers.
"""

import math

import numpy as np
import pytest

from codesign.model import terms as ct
from tests.model.fixtures import (
  ACC_GATHER,
  HBM_BW,
  PENALTY,
  POOL,
  REL,
  ROWS,
  B,
  close,
  make_plan,
  run,
  tiny_platform,
  tiny_stack,
  tiny_workload,
  trapezoid,
)

# ---- distinct rows and the row updates -------------------------------------


@pytest.mark.parametrize(
  'rows, lookups, lo, hi',
  [
    (1000.0, 8192.0, 0.0, 1.0),
    (1e6, 5e3, 0.0, 1.0),
    (4000.0, 32768.0, 0.25, 1.0),
    (2000.0, 100.0, 0.0, 0.5),
  ],
)
def test_distinct_rows_uniform(rows, lookups, lo, hi):
  # k = 1: every row is equally likely; a row is missed by all `lookups`
  # draws with probability (1 - 1/rows)^lookups ~ exp(-lookups / rows).
  want = rows * (1 - math.exp(-lookups / rows)) * (hi - lo)
  close(float(ct.distinct_rows(rows, lookups, 1.0, lo, hi)), want)


@pytest.mark.parametrize('skew', [2.0, 8.0])
@pytest.mark.parametrize('rate', [0.01, 1.0, 8.192, 100.0])
@pytest.mark.parametrize('lo, hi', [(0.0, 1.0), (0.0, 0.25), (0.25, 1.0)])
def test_distinct_rows_skewed(skew, rate, lo, hi):
  # The row at rank fraction x is drawn with probability k (1 - x)^(k - 1)
  # / rows per lookup (the density of hit(f) = 1 - (1 - f)^k), so it is
  # touched with probability 1 - exp(-lookups k (1 - x)^(k-1) / rows).
  # Reference: the trapezoid rule on 100k points. The model's 16-point
  # Gauss-Legendre rule agrees to 1e-9 up to 1 lookup per row; the
  # integrand steepens near x = 1 with more (3e-6 at 8 lookups per row and
  # k = 8, 2e-4 at 100 lookups per row and k = 2).
  rows = 4000.0
  lookups = rate * rows

  def touched(x):
    return -np.expm1(-lookups * skew * (1 - x) ** (skew - 1) / rows)

  want = rows * trapezoid(touched, lo, hi)
  got = float(ct.distinct_rows(rows, lookups, skew, lo, hi))
  close(got, want, rel={0.01: 1e-8, 1.0: 1e-8, 8.192: 1e-5, 100.0: 1e-3}[rate])
  # Never more distinct rows than rows in the range, nor than lookups.
  assert got <= rows * (hi - lo) * (1 + 1e-12) and got <= lookups * (1 + 1e-9)


@pytest.mark.parametrize(
  'path, id_bytes',
  [('scatter', 4), ('fused', 4), ('fused', 8), ('sparse_grad', 4)],
)
def test_update_bytes_per_update_path(path, id_bytes):
  # W0 wholly in HBM, row-wise (the load spreads over 8 ranks), uniform
  # traffic: table t sees n = B x pooling lookups touching
  # rows (1 - exp(-n / rows)) distinct rows. A lookup gathers 64 B; an SGD
  # row update reads and writes 64 B.
  s = tiny_stack(update_path=path, id_bytes=id_bytes)
  bd = run(tiny_platform(), tiny_workload(), make_plan(sharding='row_wise'), s)
  bd = bd['breakdown']
  total = 0.0
  for rows, pool in zip(ROWS, POOL):
    n = B * pool
    distinct = rows * (1 - math.exp(-n / rows))
    sort = n * id_bytes * 2 * 4  # 4 radix passes, each reads and writes ids
    if path == 'scatter':  # every lookup read-modify-writes its row
      moved = n * 128
    elif path == 'fused':
      # sort the ids, read each of the B bags' fp32 pooled gradient
      # (16 x 4 B), read-modify-write each distinct row once.
      moved = sort + B * 64 + distinct * 128
    else:
      # sparse gradient: write a row per lookup, read and write it to
      # sort, read it to sum (4 x 64 B per lookup), write the sums
      # (64 B per distinct row), then read-modify-write the rows.
      moved = sort + 4 * n * 64 + distinct * (64 + 128)
    total += moved
  rate = HBM_BW * ACC_GATHER / PENALTY
  close(bd['embedding_update_hbm'], total / 8 / rate)
  # Gathers do not depend on the update path.
  close(bd['embedding_gather_hbm'], B * 7 * 64 / 8 / rate)


def test_update_bytes_term():
  # The term alone on made-up per-table numbers, two tables: lookups L,
  # distinct rows D, (gather, update) bytes per row (g, u), bags G, dims.
  t = {'dim': np.array([16.0, 32.0])}
  lookups, distinct = np.array([100.0, 50.0]), np.array([40.0, 50.0])
  g, u = np.array([64.0, 128.0]), np.array([256.0, 512.0])
  bags = np.array([30.0, 20.0])
  for path, ids in (('fused', 8), ('sparse_grad', 4), ('scatter', 8)):
    s = tiny_stack(update_path=path, id_bytes=ids)
    got = np.asarray(ct.update_bytes(s, t, lookups, distinct, (g, u), bags))
    sort = lookups * ids * 8
    want = {
      'fused': sort + bags * t['dim'] * 4 + distinct * u,
      'sparse_grad': sort + 4 * lookups * g + distinct * (g + u),
      'scatter': lookups * u,
    }[path]
    np.testing.assert_allclose(got, want, rtol=REL)
