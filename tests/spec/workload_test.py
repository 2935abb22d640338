"""Parameter, FLOP and byte counters of `codesign.spec.workload` against hand
counts.

The hand counts are written out from the layer widths and the conventions of
the `codesign/workload.py` docstring:
- a layer k -> n has k n weights and n biases;
- a GEMM of (m x k) by (k x n) costs 2 m k n FLOPs forward; backward costs
  the weight gradient (2 m k n) plus the input gradient (2 m k n), except
  for the first bottom-MLP layer, whose input needs no gradient;
- a bias costs one FLOP per output forward and one in its gradient;
- the dot interaction is the full (F x d)(d x F) product per sample.
"""

import dataclasses

import pytest

from codesign.core.errors import InputError
from codesign.spec import workload as wl
from codesign.spec import workload_presets

# Criteo Kaggle vocabulary sizes of the 26 categorical features, as printed
# by facebookresearch/dlrm (tools/visualize.py; shared/reference/catalog.md).
KAGGLE_ROWS = (
  1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683,
  8351593, 3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15,
  286181, 105, 142572,
)  # fmt: skip
# MLPerf DLRM v1 (Criteo Terabyte hashed at 40M), same source.
MLPERF_V1_ROWS = (
  39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951,
  2953546, 403346, 10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295,
  39664984, 585935, 12972, 108, 36,
)  # fmt: skip


def test_criteo_kaggle_parameter_count():
  w = workload_presets.get('criteo_kaggle')
  assert [t.rows for t in w.tables] == list(KAGGLE_ROWS)
  assert sum(KAGGLE_ROWS) == 33_762_577
  # 26 tables of dim 16.
  embedding = 33_762_577 * 16
  assert embedding == 540_201_232
  # Bottom MLP 13-512-256-64-16: weights plus biases per layer.
  bottom = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 64 + 64)
  bottom += 64 * 16 + 16
  assert bottom == 155_984
  # Top MLP input: d + F (F - 1) / 2 = 16 + 27 * 26 / 2 = 367 (27 vectors:
  # 26 tables plus the bottom-MLP output). Then 367-512-256-1.
  assert 16 + 27 * 26 // 2 == 367
  top = (367 * 512 + 512) + (512 * 256 + 256) + (256 * 1 + 1)
  assert top == 320_001
  assert wl.interaction_output_width(w) == 367
  assert wl.embedding_param_count(w) == embedding
  assert wl.dense_param_count(w) == bottom + top == 475_985
  assert wl.param_count(w) == 540_677_217
  # SGD keeps no state: fp32 tables only.
  assert wl.embedding_bytes(w) == 4 * 540_201_232


def test_criteo_kaggle_flops_per_sample():
  w = workload_presets.get('criteo_kaggle')
  bottom_macs = 13 * 512 + 512 * 256 + 256 * 64 + 64 * 16
  bottom_bias = 512 + 256 + 64 + 16
  inter_macs = 27 * 16 * 27  # (F x d)(d x F), F = 27, d = 16
  top_macs = 367 * 512 + 512 * 256 + 256 * 1
  top_bias = 512 + 256 + 1
  first = 13 * 512  # the first layer has no input gradient
  expected = {
    'bottom_mlp': (
      2 * bottom_macs + bottom_bias,
      4 * bottom_macs - 2 * first + bottom_bias,
    ),
    'interaction': (2 * inter_macs, 4 * inter_macs),
    'top_mlp': (2 * top_macs + top_bias, 4 * top_macs + top_bias),
    # One add per looked-up element forward, one gradient copy backward.
    'embedding': (26 * 16, 26 * 16),
  }
  got = wl.flops_per_sample(w)
  assert set(got) == set(expected)
  for k, (fwd, bwd) in expected.items():
    assert got[k] == (fwd, bwd), k
  total = sum(sum(expected[k]) for k in ('bottom_mlp', 'interaction'))
  total += sum(expected['top_mlp'])
  assert wl.dense_flops_per_sample(w) == total


def test_mlperf_dlrm_v1_counts():
  w = workload_presets.get('mlperf_dlrm_v1')
  assert [t.rows for t in w.tables] == list(MLPERF_V1_ROWS)
  assert sum(MLPERF_V1_ROWS) == 187_767_399
  assert wl.embedding_param_count(w) == 187_767_399 * 128
  # Bottom 13-512-256-128, top (128 + 27 * 26 / 2 = 479)-1024-1024-512-256-1.
  assert wl.interaction_output_width(w) == 128 + 27 * 26 // 2 == 479
  bottom_w = 13 * 512 + 512 * 256 + 256 * 128
  bottom_b = 512 + 256 + 128
  top_w = 479 * 1024 + 1024 * 1024 + 1024 * 512 + 512 * 256 + 256 * 1
  top_b = 1024 + 1024 + 512 + 256 + 1
  assert bottom_w == 170_496 and top_w == 2_194_688
  assert wl.dense_param_count(w) == bottom_w + bottom_b + top_w + top_b
  assert wl.dense_param_count(w) == 2_368_897
  assert wl.param_count(w) == 24_034_227_072 + 2_368_897
  # FLOPs per training sample of the dense part.
  inter = 27 * 128 * 27  # dot interaction MACs
  macs = bottom_w + inter + top_w
  assert macs == 2_458_496
  fwd = 2 * macs + bottom_b + top_b
  bwd = 2 * macs + 2 * (macs - 13 * 512) + bottom_b + top_b
  assert fwd == 4_920_705 and bwd == 9_824_385
  assert wl.dense_flops_per_sample(w) == fwd + bwd == 14_745_090
  # The "about 14.5 MFLOP per training sample".
  assert 14.0e6 < wl.dense_flops_per_sample(w) < 15.0e6


def _tiny(**changes):
  w = wl.Workload(
    name='tiny',
    tables=(wl.Table(100, 8), wl.Table(50, 8, 3.0), wl.Table(10, 8, 2.0)),
    num_dense=5,
    bottom_mlp=(6, 8),
    top_mlp=(4, 1),
  )
  return dataclasses.replace(w, **changes)


def test_dcnv2_and_cat_counts_by_hand():
  # dcnv2: F = 4 vectors of d = 8 concatenated, width 32; each of 2 cross
  # layers is a 32 -> 3 GEMM (no bias) then a 3 -> 32 GEMM with bias.
  w = _tiny(interaction='dcnv2', dcn_layers=2, dcn_rank=3)
  assert wl.interaction_output_width(w) == 32
  fwd, bwd = wl.flops_per_sample(w)['interaction']
  assert fwd == 2 * (2 * 32 * 3 + 2 * 3 * 32 + 32)
  assert bwd == 2 * (4 * 32 * 3 + 4 * 3 * 32 + 32)
  dense = (5 * 6 + 6) + (6 * 8 + 8)  # bottom
  dense += 2 * (32 * 3 + 3 * 32 + 32)  # cross layers
  dense += (32 * 4 + 4) + (4 * 1 + 1)  # top
  assert wl.dense_param_count(w) == dense
  # cat: the top MLP reads d + the sum of table dims = 8 + 24; no GEMM.
  w = _tiny(interaction='cat')
  assert wl.interaction_output_width(w) == 32
  assert wl.flops_per_sample(w)['interaction'] == (0.0, 0.0)
  # Embedding pooling: one add per looked-up element: 8 (1 + 3 + 2) = 48.
  assert wl.flops_per_sample(w)['embedding'] == (48.0, 48.0)


@pytest.mark.parametrize(
  'optimizer, state_bytes_per_row',
  [
    ('sgd', 0),
    ('adagrad', 4 * 8),  # one fp32 accumulator per element
    ('rowwise_adagrad', 4),  # one fp32 accumulator per row
    ('adam', 2 * 4 * 8),  # two fp32 moments per element
  ],
)
def test_optimizer_state_bytes(optimizer, state_bytes_per_row):
  w = _tiny(optimizer=optimizer)
  rows = 100 + 50 + 10
  assert wl.embedding_bytes(w) == rows * (8 * 4 + state_bytes_per_row)


def test_granule_bytes():
  # A 64 B row is one transaction, a 72 B row two, a 4 B state one.
  assert wl.granule_bytes(64, 64) == 64
  assert wl.granule_bytes(72, 64) == 128
  assert wl.granule_bytes(4, 64) == 64
  assert wl.granule_bytes(72, 32) == 96


def test_fp16_table_bytes():
  t = wl.Table(rows=1000, dim=64, precision='fp16')
  assert t.row_bytes == 128 and t.bytes == 128_000


@pytest.mark.parametrize(
  'changes, words',
  [
    (dict(interaction='dott'), 'interaction'),
    (dict(optimizer='lamb'), 'optimizer'),
    (dict(global_batch=0), 'global_batch'),
    (dict(bottom_mlp=(6, 4)), 'dim'),
    (dict(popularity_skew=0.5), 'popularity_skew'),
    (dict(interaction='dcnv2'), 'dcn_layers'),
  ],
)
def test_validate_names_the_problem(changes, words):
  with pytest.raises(InputError, match=words):
    wl.validate(_tiny(**changes))


def test_mlperf_presets_are_at_mlperf_settings():
  # Issue 21: the batch and mixed precision the published MLPerf results
  # trained at, each with its source.
  v1 = workload_presets.get('mlperf_dlrm_v1')
  assert (v1.global_batch, v1.dense_precision) == (55296, 'fp16')
  assert 'config_DGXA100' in v1.source and 'mixed' in v1.source
  dcn = workload_presets.get('mlperf_dlrm_dcnv2')
  assert (dcn.global_batch, dcn.dense_precision) == (65536, 'fp16')
  assert {t.precision for t in v1.tables + dcn.tables} == {'fp32'}


def test_readme_mlperf_example_gives_the_published_figure():
  # README: evaluate mlperf_dlrm_v1 on dgx_a100_80gb with HugeCTR, the
  # preset's defaults; MLPerf v1.0 published 35.78M samples/s (C6).
  import codesign

  r = codesign.evaluate('mlperf_dlrm_v1', 'dgx_a100_80gb', stack='hugectr')
  assert abs(r['throughput_samples_per_s'] / 35.78e6 - 1.0) < 0.15
