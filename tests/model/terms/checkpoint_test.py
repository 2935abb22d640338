"""Known answers for failures and checkpoints
(`codesign.model.terms.checkpoint`): Young's and Daly's intervals and
Daly's goodput worked by hand; the failure rate of 1,024 H100s from the
Llama 3 counts; goodput in (0, 1), falling with the node count, rising
with incremental checkpoints; finite gradients in float32 and float64."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from codesign.model.terms import checkpoint as ckpt
from codesign.spec import whole_system as ws
from codesign.spec import workload_presets as wp


def test_young_interval_by_hand():
  # delta 60 s, M 24 h = 86,400 s: sqrt(2 x 60 x 86,400) = sqrt(10,368,000)
  # = 3,219.94 s.
  assert ckpt.young_interval(60.0, 86400.0) == pytest.approx(3219.94, abs=0.01)
  # delta 2 s, M 50 h = 180,000 s: sqrt(720,000) = 848.53 s.
  assert ckpt.young_interval(2.0, 180000.0) == pytest.approx(848.53, abs=0.01)


def test_daly_interval_by_hand():
  # delta 60, M 86,400: x = 60 / 172,800 = 3.4722e-4, sqrt(x) = 0.018634;
  # 3,219.94 x (1 + 0.0062113 + 0.0000386) - 60 = 3,240.07 - 60 = 3,180.07.
  assert ckpt.daly_interval(60.0, 86400.0) == pytest.approx(3180.07, abs=0.05)
  # delta = M: x = 1/2, sqrt(2) M (1 + 0.23570 + 0.05556) - M
  # = 1.41421 x 1.29126 M - M = 0.82612 M.
  assert ckpt.daly_interval(100.0, 100.0) == pytest.approx(82.612, abs=0.01)


def test_daly_is_young_less_the_checkpoint_for_small_delta():
  # For delta << M the higher orders vanish: tau -> sqrt(2 delta M) - delta.
  delta, m = 1.0, 1e9
  assert ckpt.daly_interval(delta, m) == pytest.approx(
    math.sqrt(2 * delta * m) - delta, rel=1e-4
  )


def test_goodput_by_hand():
  # tau 3,180.07, delta 60, R 600, M 86,400: exp(600 / 86,400) =
  # 1.0069686; expm1(3,240.07 / 86,400) = expm1(0.0375008) = 0.0375008 +
  # 0.0007032 + 0.0000088 + 0.0000001 = 0.0382128; goodput = 3,180.07 /
  # (86,400 x 1.0069686 x 0.0382128) = 3,180.07 / 3,324.60 = 0.95653.
  g = ckpt.goodput(3180.07, 60.0, 600.0, 86400.0)
  assert g == pytest.approx(0.95653, abs=2e-5)


def test_goodput_without_failures_tends_to_one():
  assert ckpt.goodput(1e3, 1e-3, 0.0, 1e15) == pytest.approx(1.0, abs=1e-5)


def test_failure_rate_of_1024_h100s_from_the_llama3_counts():
  # 419 interruptions in 54 days on 16,384 GPUs (2,048 nodes): 58.7% per
  # GPU, the rest per node; at 1,024 GPUs in 128 nodes the rate is 1/16
  # of the cluster's: 419 / (54 x 24) / 16 = 0.02021 per hour.
  rate = ckpt.failure_rate(1024.0, 128.0) * 3600.0
  assert rate == pytest.approx(419 / (54 * 24) / 16, rel=2e-3)


def _goodput_at(gpus, mode):
  w = wp.get('mlperf_dlrm_dcnv2')
  written, kept = ckpt.written_and_kept(w, mode)
  mtbf = 1.0 / ckpt.failure_rate(gpus, gpus / 8.0)
  write = 40e9  # one storage node's write rate (whole_system.json)
  delta = written / write
  tau = ckpt.daly_interval(delta, mtbf)
  return ckpt.goodput(tau, delta, 600.0 + kept / 50e9, mtbf)


def test_goodput_at_1024_gpus_in_the_unit_interval_falls_with_nodes():
  g = [_goodput_at(n, 'full') for n in (64, 256, 1024, 4096)]
  assert 0.0 < g[-1] < g[2] < g[1] < g[0] < 1.0


def test_incremental_checkpoints_raise_goodput():
  assert _goodput_at(1024, 'incremental') > _goodput_at(1024, 'full')


def test_incremental_checkpoint_bytes_follow_check_n_run():
  w = wp.get('mlperf_dlrm_dcnv2')
  full = ckpt.checkpoint_bytes(w)
  written, kept = ckpt.written_and_kept(w, 'incremental')
  p = ws.parts()
  assert written == pytest.approx(full / p.write_reduction)
  assert kept == pytest.approx(full / p.capacity_reduction)
  assert full > w.tables[0].bytes


@pytest.mark.parametrize('dtype', [jnp.float32, jnp.float64])
def test_goodput_gradients_finite_in_nodes(dtype):
  def g(nodes):
    mtbf = 1.0 / ckpt.failure_rate(8.0 * nodes, nodes)
    delta = jnp.asarray(3.0, dtype)
    tau = ckpt.daly_interval(delta, mtbf)
    return ckpt.goodput(tau, delta, jnp.asarray(600.0, dtype), mtbf)

  nodes = jnp.asarray(np.geomspace(1.0, 1024.0, 50), dtype)
  vals, grads = jax.vmap(jax.value_and_grad(g))(nodes)
  assert np.all(np.isfinite(np.asarray(grads)))
  assert np.all(np.asarray(grads) < 0)  # more nodes, less goodput
  assert np.all((np.asarray(vals) > 0) & (np.asarray(vals) < 1))
