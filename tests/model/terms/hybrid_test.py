"""HugeCTR's hybrid embedding: the frequent-row threshold and the split of
each table by hand, the split's place in the step (exchange, allreduce,
busiest rank), and the releases that differ."""

import dataclasses

import jax
import numpy as np
import pytest

from codesign.core.errors import InputError
from codesign.model import cost_model, planner
from codesign.model import terms as ct
from codesign.model.terms import hybrid
from codesign.spec import hardware, platform_presets, stack_presets
from codesign.spec import workload as wl
from codesign.spec import workload_presets as presets

REL = 1e-9


def _setup(stack, nodes, batch, platform='dgx_h100'):
  p = dataclasses.replace(platform_presets.get(platform), nodes=float(nodes))
  w = dataclasses.replace(presets.get('mlperf_dlrm_v1'), global_batch=batch)
  s = stack_presets.get(stack)
  return p, w, s, ct.setup(hardware.as_arrays(p), w, s)


def test_threshold_by_hand():
  # 4 nodes x 8 GPUs, HugeCTR's MLPerf v2.1 config: 32 x 4/3 x 23.75e9 /
  # 1.3e11 = 7.79 lookups a step. One node, batch 55,296 over 8 GPUs
  # (M = 6,912) at p_dup_max 0.03: 55,296 sqrt(0.06 / (6,912 x 6,911)).
  _, _, s, st = _setup('hugectr@2022', 4, 71680)
  assert float(hybrid.threshold(s, st)) == pytest.approx(
    32 * 4 / 3 * 23.75e9 / 1.3e11, rel=REL
  )
  _, _, s, st = _setup('hugectr@2022', 1, 55296)
  assert float(hybrid.threshold(s, st)) == pytest.approx(
    55296 * np.sqrt(0.06 / (6912 * 6911)), rel=REL
  )


@pytest.mark.parametrize('a', [0.5, 1.0, 1.68, 2.0, 4.0])
def test_harmonic_is_the_sum(a):
  for x in (1, 2, 7, 16, 17, 100, 12345):
    exact = np.sum(np.arange(1.0, x + 1.0) ** -a)
    assert float(hybrid.harmonic(np.float64(x), a)) == pytest.approx(
      exact, rel=1e-4
    )
  assert float(hybrid.harmonic(np.float64(0.0), a)) == 0.0


def test_zipf_split_by_hand():
  # N = 100 rows at a = 2 and a threshold at which rows 1..10 are
  # frequent: theta = L / (10^2 H_100(2)); they draw H_10(2) / H_100(2).
  a, n, lookups = 2.0, 100.0, 5000.0
  h = lambda m: np.sum(np.arange(1.0, m + 1.0) ** -a)  # noqa: E731
  theta = lookups / (10.0**a * h(100))
  out = hybrid.zipf_split(np.array([n]), lookups, theta, a)
  assert float(out.frequent_rows[0]) == pytest.approx(10.0, rel=1e-4)
  assert float(out.infrequent[0]) == pytest.approx(
    1.0 - h(10) / h(100), rel=1e-3
  )
  # Far above the hottest row's count nothing is frequent (below one
  # row the count is relaxed linearly); a table whose coldest row clears
  # the threshold is all frequent.
  none = hybrid.zipf_split(np.array([n]), lookups, 1e6 * lookups, a)
  every = hybrid.zipf_split(np.array([n]), lookups, 1e-9, a)
  assert float(none.infrequent[0]) == pytest.approx(1.0, abs=1e-3)
  assert float(every.infrequent[0]) == pytest.approx(0.0, abs=1e-12)
  assert float(every.frequent_rows[0]) == n


def test_cache_curve_split_by_hand():
  # 65,536 lookups a step, threshold 64, skew k = 2: rows are frequent up
  # to 1 - x* = 64 N / (65,536 x 2), drawing 1 - (1 - x*)^2. N = 1,024:
  # 1 - x* = 0.5, share 0.75; N = 4,096: none; N = 256: 1 - 0.125^2.
  rows = np.array([1024.0, 4096.0, 256.0])
  out = hybrid.cache_curve_split(rows, 65536.0, 64.0, 2.0)
  np.testing.assert_allclose(
    1.0 - np.asarray(out.infrequent), [0.75, 0.0, 1 - 0.125**2], rtol=REL
  )
  np.testing.assert_allclose(out.frequent_rows, [512.0, 0.0, 224.0], rtol=REL)
  uniform = hybrid.cache_curve_split(rows, 65536.0, 64.0, 1.0)
  np.testing.assert_array_equal(uniform.infrequent, [0.0, 1.0, 0.0])


def test_mlperf_v1_on_four_dgx_h100_leaves_the_configs_share():
  """The preset's Zipf exponent reproduces what it was derived from: at
  HugeCTR v2.1's 4 x 8 threshold, 1.56% of the global batch's lookups
  infrequent (29,120 of 1,863,680), a few thousand rows frequent; on one
  node (a lower threshold) fewer lookups are infrequent."""
  _, w, s, st = _setup('hugectr@2022', 4, 71680)
  out = hybrid.split(w, s, st)
  assert float(np.mean(out.infrequent)) == pytest.approx(
    29120 / 1863680, abs=5e-4
  )
  assert 2000 < float(np.sum(out.frequent_rows)) < 5000
  _, w1, s1, st1 = _setup('hugectr@2022', 1, 55296)
  one = hybrid.split(w1, s1, st1)
  assert float(np.mean(one.infrequent)) < float(np.mean(out.infrequent))


def test_only_the_hybrid_embedding_splits_and_multi_hot_stays_whole():
  _, w, _, st = _setup('hugectr', 4, 71680)
  assert hybrid.split(w, stack_presets.get('hugectr'), st) is None
  assert hybrid.split(w, stack_presets.get('torchrec'), st) is None
  s = stack_presets.get('hugectr@2022')
  multi = dataclasses.replace(
    w, tables=(dataclasses.replace(w.tables[0], pooling=3.0),) + w.tables[1:]
  )
  out = hybrid.split(multi, s, st)
  assert float(out.infrequent[0]) == 1.0
  assert float(out.frequent_rows[0]) == 0.0


def _report(stack, nodes, batch, **changes):
  p, w, s, _ = _setup(stack, nodes, batch)
  s = dataclasses.replace(s, **changes)
  plan = planner.make(w, p, s)
  return cost_model.evaluate(hardware.as_arrays(p), w, plan, s), plan


def test_frequent_rows_leave_the_exchange_for_the_allreduce():
  """The same plan and stack with and without the hybrid embedding: the
  pooled exchange shrinks towards the infrequent share (1.6% of the
  bytes; the messages' latencies stay), the allreduce grows by the
  frequent rows' gradients."""
  hyb, plan = _report('hugectr@2022', 4, 71680)
  p, w, s, st = _setup('hugectr@2022', 4, 71680)
  flat = dataclasses.replace(s, planner='auto')
  r = cost_model.evaluate(hardware.as_arrays(p), w, plan, flat)
  inter = float(hyb.breakdown['alltoall_inter'])
  assert inter < 0.15 * float(r.breakdown['alltoall_inter'])
  assert float(hyb.breakdown['allreduce_inter']) > float(
    r.breakdown['allreduce_inter']
  )
  split = hybrid.split(w, s, st)
  t = ct.table_arrays(w, (plan.sharding, plan.column_shards, 'fp32'))
  extra = ct.allreduce_bytes(w, s, {**t, **split._asdict()}, plan, 1.0)
  base = ct.allreduce_bytes(w, s, t, plan, 1.0)
  cb = ct.allreduce_elem_bytes(w, s, plan)
  assert float(extra - base) == pytest.approx(
    cb * float(np.sum(split.frequent_rows * t['dim'])), rel=REL
  )


def test_an_allreduce_that_waits_for_the_backward_lengthens_the_step():
  on, _ = _report('hugectr@2021-05', 8, 71680, allreduce_overlap=True)
  off, _ = _report('hugectr@2021-05', 8, 71680)
  assert float(off.step_time) > float(on.step_time)


def test_hybrid_sharding_needs_a_hybrid_stack():
  p, w, _, _ = _setup('hugectr', 1, 55296)
  with pytest.raises(InputError, match='hybrid embedding'):
    planner.make(w, p, stack_presets.get('torchrec'), sharding='hybrid')
  plan = planner.make(
    w, p, stack_presets.get('hugectr@2022'), sharding='hybrid'
  )
  assert 'data_parallel' not in plan.sharding


def test_gradients_through_the_split_are_finite():
  """d(step)/d(nodes, NIC bandwidth) of a hybrid design: the threshold's
  node-count branches and the split's clips keep gradients finite."""
  p, w, s, _ = _setup('hugectr@2022', 4, 71680)
  plan = planner.make(w, p, s)
  hw = hardware.as_arrays(p)

  def step(nodes, nic):
    q = dataclasses.replace(
      hw, nodes=nodes, nic=dataclasses.replace(hw.nic, bandwidth=nic)
    )
    return cost_model.evaluate(q, w, plan, s).step_time

  for nodes in (1.0, 2.0, 4.0):
    g = jax.grad(step, argnums=(0, 1))(nodes, float(hw.nic.bandwidth))
    assert all(np.isfinite(float(x)) for x in g), nodes


def test_zipf_exponent_is_checked():
  w = presets.get('mlperf_dlrm_v1')
  assert not wl.problems(dataclasses.replace(w, zipf_exponent=0.0))
  bad = wl.problems(dataclasses.replace(w, zipf_exponent=5.0))
  assert any('zipf_exponent' in x for x in bad)


def test_summary_says_what_the_split_decides():
  p, w, s, _ = _setup('hugectr@2022', 4, 71680)
  pa = hardware.as_arrays(p)
  d = hybrid.summary(w, s, pa)
  assert 0.01 < d['infrequent_share'] < 0.02
  assert d['threshold_lookups_per_step'] == pytest.approx(7.7949, rel=1e-4)
  line = hybrid.sentence(d)
  assert '1.5% of lookups infrequent' in line and 'Zipf exponent 1.68' in line
  assert hybrid.summary(w, stack_presets.get('torchrec'), pa) is None
