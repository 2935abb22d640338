"""Known answers for feeding the trainers
(`codesign.model.terms.ingestion`): bytes of a sample counted by hand,
a reader node's rate, whole counts in a report and continuous ones in a
traced search."""

import jax
import jax.numpy as jnp
import pytest

from codesign.model.terms import ingestion as ing
from codesign.spec import whole_system as ws
from codesign.spec import workload_presets as wp


def test_bytes_of_a_criteo_sample_are_hugectrs_40_ints():
  # HugeCTR's Raw Criteo sample: a label, 13 dense, 26 one-hot ids, each
  # 4 bytes: 40 x 4 = 160 B.
  assert ing.bytes_per_sample(wp.get('mlperf_dlrm_v1')) == 160.0


def test_bytes_of_a_dcnv2_sample_count_its_multi_hot_ids():
  w = wp.get('mlperf_dlrm_dcnv2')
  ids = sum(t.pooling for t in w.tables)
  multi = sum(1 for t in w.tables if t.pooling != 1)
  assert ing.bytes_per_sample(w) == 4 + 13 * 4 + 4 * ids + 4 * multi
  # About 214 ids a sample: 0.9-1.0 kB.
  assert 900 < ing.bytes_per_sample(w) < 1100


def test_a_preprocessed_reader_is_bound_by_its_nics():
  # 96 cores x 1 GB/s beat two 100 Gb/s NICs (25 GB/s): 25e9 / 160 B.
  w = wp.get('mlperf_dlrm_v1')
  assert ing.reader_rate(w, 'preprocessed') == pytest.approx(25e9 / 160)


def test_an_online_reader_is_bound_by_its_transforms():
  w = wp.get('mlperf_dlrm_v1')
  assert ing.reader_rate(w, 'online') == pytest.approx(
    ws.parts().online_bps / 160
  )
  assert ing.reader_rate(w, 'online') < ing.reader_rate(w, 'preprocessed')


def test_counts_are_whole_when_concrete_and_smooth_when_traced():
  assert ing.whole(2.3) == 3.0
  assert ing.whole(3.0) == 3.0
  grad = jax.grad(lambda x: ing.whole(ing.readers_needed(x, 10.0, 1.1)))(
    jnp.asarray(23.0)
  )
  assert float(grad) == pytest.approx(0.11)


def test_smooth_min_numpy_matches_the_cores():
  a, b = 3.0, 5.0
  traced = jax.jit(lambda x, y: ing.smooth_min(x, y))(a, b)
  assert ing.smooth_min(a, b) == pytest.approx(float(traced), rel=1e-6)
  assert ing.smooth_min(a, b) <= min(a, b)
  assert ing.smooth_max(a, b) >= max(a, b)
