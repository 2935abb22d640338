"""The benchmark study in process: the smallest timing of the cost model
(no timing is asserted, only what the numbers must satisfy)."""

import jax
import numpy as np
import pytest

from codesign.core.errors import InputError
from codesign.search import design_space
from codesign.spec import hardware, platform_presets, workload_presets
from codesign.studies import benchmark


def test_designs_are_reproducible_and_within_bounds():
  p = platform_presets.get('cpu_2s')
  a = benchmark.designs(p, 64, seed=3)
  b = benchmark.designs(p, 64, seed=3)
  c = benchmark.designs(p, 64, seed=4)
  paths = hardware.leaf_paths(p)
  leaves_p = jax.tree.leaves(p)
  leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
  assert any(
    not np.array_equal(x, y)
    for x, y in zip(leaves_a, jax.tree.leaves(c), strict=True)
  )
  for path, x, y, centre in zip(
    paths, leaves_a, leaves_b, leaves_p, strict=True
  ):
    np.testing.assert_array_equal(x, y)
    assert x.shape == (64,)
    if path == 'accelerators_per_node':  # a CPU trainer has none
      assert np.all(x == 0.0)
      continue
    lo, hi = hardware.BOUNDS[path]
    assert np.all((x >= lo) & (x <= hi)), path
    # Scaled by at most a factor of 2 either way (before clipping).
    assert np.all(x <= max(2.0 * float(centre), lo) * (1 + 1e-6)), path
    assert np.all(x >= min(0.5 * float(centre), hi) * (1 - 1e-6)), path


@pytest.mark.heavy
def test_benchmark_study_smallest_run():
  progress = []
  settings = benchmark.Settings(
    batches=(1, 4), grad_batch=2, eager_designs=1, min_time_s=0.0
  )
  r, metrics = benchmark.run(settings, progress.append)
  assert metrics == [] and len(progress) == 4
  assert r['workload'] == 'criteo_kaggle' and r['platform'] == 'dgx_a100_80gb'
  assert r['dtype'] == 'float32' and r['grad_batch'] == 2
  assert set(r['evals_per_s']) == set(r['compile_s']) == {'1', '4'}
  assert set(r['pytree_evals_per_s']) == {'4'}  # the largest of one block
  rates = [
    *r['evals_per_s'].values(),
    *r['pytree_evals_per_s'].values(),
    r['grads_per_s'],
    r['eager_evals_per_s'],
  ]
  assert all(np.isfinite(x) and x > 0 for x in rates)
  assert r['speedup_vs_eager'] == pytest.approx(
    max(r['evals_per_s'].values()) / r['eager_evals_per_s']
  )
  # XLA's FLOPs per design do not depend on how many are vmapped at once.
  flops = r['flops_per_eval']
  assert flops['1'] > 0 and flops['4'] == pytest.approx(flops['1'], rel=0.05)
  header, rows = benchmark.csv_table(r)
  assert header[0] == 'design_batch' and [row[0] for row in rows] == [1, 4]
  assert rows[1][1] == r['evals_per_s']['4']
  assert 'FLOP/eval' in benchmark.table(r)
  assert 'as pytrees' in benchmark.table(r)


def test_designs_as_a_matrix_get_the_reports_of_designs_as_pytrees():
  """The timed program (designs as the columns of one matrix, reports as
  its rows) computes what the cost model gives a batch of `Platform`s,
  in one vmap and in `lax.map` over blocks (padded: 5 = 2 + 2 + 1)."""
  n = 5
  bench = benchmark.bench_of(benchmark.Settings(platform='big_basin'))
  cols = bench.columns_of(n, seed=1)
  # Column j is design j: the leaves of `batch_of` in pytree order.
  batch = bench.batch_of(n, seed=1)
  for leaf, row in zip(jax.tree.leaves(batch), cols, strict=True):
    np.testing.assert_array_equal(leaf, row)
  reports = jax.tree.leaves(jax.jit(jax.vmap(bench.evaluate))(batch))
  for block in (8, 2):
    got = benchmark.blocked(bench.evaluate, n, block, bench.base)(cols)
    assert got.shape == (len(reports), n) and got.dtype == cols.dtype
    for leaf, row in zip(reports, got, strict=True):
      np.testing.assert_allclose(row, np.asarray(leaf, row.dtype), rtol=1e-6)


@pytest.mark.parametrize(
  'change, fragment',
  [
    ({'batches': (0,)}, 'positive integer'),
    ({'batches': ()}, 'positive integer'),
    ({'min_time_s': -1.0}, 'must not be negative'),
    ({'platform': 'no_such_platform'}, 'no_such_platform'),
  ],
)
def test_benchmark_study_bad_settings_are_one_sentence(change, fragment):
  with pytest.raises(InputError, match=fragment) as e:
    benchmark.run(benchmark.Settings(**change))
  assert '\n' not in str(e.value)


@pytest.mark.heavy
def test_job_benchmark_smallest_run():
  from codesign.studies import job_benchmark

  settings = job_benchmark.Settings(
    workload='dlrm_benchmark',
    max_nodes=1,
    relaxed_designs=2,
    planned_designs=4,
    min_time_s=0.0,
  )
  lines = []
  r = job_benchmark.run(settings, lines.append)
  assert len(lines) == 4
  assert r['job_workload'] == 'dlrm_benchmark'
  rates = ('relaxed_evals_per_s', 'relaxed_auto_evals_per_s')
  for key in (*rates, 'planned_designs_per_s'):
    assert 0 < r[key] < float('inf')
  for key in ('relaxed', 'relaxed_auto', 'planned'):
    assert r[f'{key}_first_call_s'] > 0
  # The enumeration judges every design of the auto-plan space.
  w = workload_presets.get(settings.workload)
  space = design_space.make_space(w, settings.max_nodes, plan_mode='auto')
  assert r['exhaustive_designs'] == space.size
  assert r['exhaustive_budget_usd'] == 1e6  # the job's budget
  assert r['exhaustive_designs_per_s'] == space.size / r['exhaustive_s']
  assert r['exhaustive_first_call_s'] > 0
  text = benchmark.table({**_tiny_result(), **r})
  assert 'relaxed designs/s' in text and 'auto plan/s' in text
  assert f'exhaustive enumeration of its {space.size:,} designs' in text
  assert 'designs at $1,000,000:' in text


def _tiny_result():
  return {
    'workload': 'w',
    'platform': 'p',
    'dtype': 'float32',
    'evals_per_s': {'1': 1.0},
    'compile_s': {'1': 1.0},
    'flops_per_eval': {'1': 1.0},
    'grad_batch': 1,
    'block': 1,
    'grads_per_s': 1.0,
    'grad_compile_s': 1.0,
    'eager_evals_per_s': 1.0,
    'speedup_vs_eager': 1.0,
  }
