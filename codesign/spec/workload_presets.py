"""Named DLRM workloads. Real numbers come from the catalog
(`codesign/data/catalog.json`, a copy of `shared/reference/catalog.json`);
each preset's `source` names the entry and the original repository.
"""

import json
import math

from codesign.core.errors import InputError
from codesign.core.paths import DATA_DIR
from codesign.spec.workload import Table, Workload


def _models():
  return json.loads((DATA_DIR / 'catalog.json').read_text())['models']


def _tables(rows, dim, pooling=None, precision='fp32'):
  pooling = pooling or [1] * len(rows)
  return tuple(
    Table(int(r), int(dim), float(p), precision)
    for r, p in zip(rows, pooling, strict=True)
  )


def _catalog_source(key):
  return f'catalog.json models.{key}: ' + '; '.join(_models()[key]['source'])


def criteo_kaggle() -> Workload:
  """DLRM on Criteo Kaggle (facebookresearch/dlrm bench script), batch 128."""
  m = _models()['criteo_kaggle_dlrm']
  return Workload(
    name='criteo_kaggle',
    tables=_tables(m['table_rows'], m['embedding_dim']),
    num_dense=13,
    bottom_mlp=(512, 256, 64, 16),
    top_mlp=(512, 256, 1),
    interaction='dot',
    global_batch=128,
    optimizer='sgd',
    dense_precision='fp32',
    source=_catalog_source('criteo_kaggle_dlrm'),
  )


def criteo_terabyte() -> Workload:
  """DLRM on Criteo Terabyte, 10M hash, batch 2048 (dlrm bench script)."""
  m = _models()['criteo_terabyte_dlrm_10M']
  return Workload(
    name='criteo_terabyte',
    tables=_tables(m['table_rows'], m['embedding_dim']),
    num_dense=13,
    bottom_mlp=(512, 256, 64),
    top_mlp=(512, 512, 256, 1),
    global_batch=2048,
    source=_catalog_source('criteo_terabyte_dlrm_10M'),
  )


# MLPerf settings of the two MLPerf presets (issue 21): the global batch
# and precision the published MLPerf results trained at.
MLPERF_V1_BATCH = (
  55296,
  'mlcommons/training_results_v0.7 and v1.0 NVIDIA DGX A100 DLRM configs '
  '(config_DGXA100.sh: 55,296, the batch of the published 16.9M and 35.8M '
  'samples/s, calibration cases C5 and C6; the reference code of '
  'facebookresearch/dlrm runs 2,048 on one device)',
)
MLPERF_MIXED = (
  'fp16',
  'MLPerf closed DLRM submissions train the dense model in mixed '
  'precision (NVIDIA PyTorch apex AMP and HugeCTR fp16: calibration '
  'cases C5, C6, C8); the tables stay fp32',
)
MLPERF_DCNV2_BATCH = (
  65536,
  'mlcommons/training recommendation_v2/torchrec_dlrm README: global '
  'batch 65,536 (catalog models.mlperf_dlrm_dcnv2)',
)


# The popularity of Criteo 1TB's rows (40M hash): an assumption. The
# sizes NVIDIA gives HugeCTR's hybrid embedding bound it from one side
# only: HugeCTR reads `max_num_infrequent_samples` as a count over the
# whole global batch (InfrequentEmbedding_IB_NVLink_Hier::init_comms:
# p = max_num_infrequent_samples / (get_batch_size(true) x slot_num),
# get_batch_size(true) being the solver's global batch), so its MLPerf
# configs expect about 1.6% of all lookups infrequent. This family's
# head (the hottest row draws k / N of a table's lookups) cannot be that
# heavy: at any skew of its range it leaves most lookups of the 40M-row
# tables infrequent (`terms.hybrid`'s cache-curve split); single rows
# follow `CRITEO_1TB_ZIPF`.
CRITEO_1TB_SKEW = (
  8.0,
  'assumption (the power-law default, as zion_scale): the hottest 20% of '
  "rows draw 83% of the lookups. HugeCTR's MLPerf configs at batch "
  '71,680 set max_num_infrequent_samples to "mean num of infrequent plus '
  '10-sigma guardband": 29,120 + 1,707 on 4x8 GPUs (mlcommons/'
  'training_results_v2.1 NVIDIA/benchmarks/dlrm/implementations/'
  'hugectr-preview/dgx_h100_4x8x2240.py), a count over the global '
  "batch's 1,863,680 lookups (HugeCTR InfrequentEmbedding_IB_NVLink_Hier"
  "::init_comms): 1.6% infrequent. At skew 8 HugeCTR's frequent rule "
  "would leave most lookups of the 40M-row tables infrequent: Criteo's "
  'head is heavier than this family can express (the hottest rows follow '
  'the Zipf exponent instead)',
)


# The Zipf exponent of the hottest rows of Criteo 1TB (40M hash): the one
# at which HugeCTR's own frequent rule reproduces what its MLPerf config
# measured. dgx_h100_4x8x2240.py (4 x 8 GPUs, batch 71,680) thresholds at
# 32 x 23.75e9 / 1.3e11 x 4 / 3 = 7.8 lookups a step
# (`terms.hybrid.threshold`) and expects a mean of 29,120 infrequent
# lookups in the global batch's 1,863,680 (1.56%); a = 1.676 leaves
# exactly that under `terms.hybrid.split` (3,067 frequent rows).
CRITEO_1TB_ZIPF = (
  1.68,
  "derived: the exponent at which HugeCTR's frequent-row threshold on "
  '4x8 GPUs (7.8 lookups a step) leaves the 1.56% of lookups infrequent '
  'that its MLPerf v2.1 config measured ("mean num of infrequent" '
  '29,120 of 1,863,680; mlcommons/training_results_v2.1 NVIDIA/'
  'benchmarks/dlrm/implementations/hugectr-preview/'
  'dgx_h100_4x8x2240.py)',
)


# The presets whose popularity skew is read from a source (every other
# preset's skew is an assumption): name -> where it comes from, in a few
# words. None today: mlperf_dlrm_v1's is bounded by a source, not read
# from one (`CRITEO_1TB_SKEW`).
SKEW_BASIS: dict[str, str] = {}


def mlperf_dlrm_v1() -> Workload:
  """MLPerf Training DLRM v0.7-v2.1 (40M hash) at MLPerf settings: global
  batch 55,296 and mixed precision (`MLPERF_V1_BATCH`, `MLPERF_MIXED`),
  and the power-law popularity skew 8 (`CRITEO_1TB_SKEW`: an
  assumption; Criteo's head is heavier, `CRITEO_1TB_ZIPF`)."""
  m = _models()['mlperf_dlrm_v1']
  return Workload(
    name='mlperf_dlrm_v1',
    tables=_tables(m['table_rows'], m['embedding_dim']),
    num_dense=13,
    bottom_mlp=(512, 256, 128),
    top_mlp=(1024, 1024, 512, 256, 1),
    global_batch=MLPERF_V1_BATCH[0],
    dense_precision=MLPERF_MIXED[0],
    popularity_skew=CRITEO_1TB_SKEW[0],
    zipf_exponent=CRITEO_1TB_ZIPF[0],
    source=_catalog_source('mlperf_dlrm_v1')
    + f'; batch: {MLPERF_V1_BATCH[1]}; dense precision: {MLPERF_MIXED[1]}'
    + f'; popularity skew: {CRITEO_1TB_SKEW[1]}'
    + f'; Zipf exponent of the hottest rows: {CRITEO_1TB_ZIPF[1]}',
  )


def mlperf_dlrm_dcnv2() -> Workload:
  """MLPerf Training DLRM-DCNv2 (multi-hot Criteo 1TB) at MLPerf settings:
  batch 65536 (`MLPERF_DCNV2_BATCH`), mixed precision (`MLPERF_MIXED`),
  3 cross layers of rank 512. Its `--adagrad` trains the tables with
  row-wise Adagrad (one state value per row) and the MLPs with Adagrad:
  mlcommons/training recommendation_v2/torchrec_dlrm/dlrm_main.py,
  fused_params optimizer OptimType.EXACT_ROWWISE_ADAGRAD if args.adagrad
  (so `rowwise_adagrad` here)."""
  m = _models()['mlperf_dlrm_dcnv2']
  return Workload(
    name='mlperf_dlrm_dcnv2',
    tables=_tables(m['table_rows'], m['embedding_dim'], m['lookups_per_table']),
    num_dense=13,
    bottom_mlp=(512, 256, 128),
    top_mlp=(1024, 1024, 512, 256, 1),
    interaction='dcnv2',
    dcn_layers=3,
    dcn_rank=512,
    global_batch=MLPERF_DCNV2_BATCH[0],
    dense_precision=MLPERF_MIXED[0],
    optimizer='rowwise_adagrad',
    source=_catalog_source('mlperf_dlrm_dcnv2')
    + '; tables with row-wise Adagrad (torchrec_dlrm dlrm_main.py); batch: '
    + MLPERF_DCNV2_BATCH[1]
    + f'; dense precision: {MLPERF_MIXED[1]}',
  )


def criteo_1tb() -> Workload:
  """TorchRec's DLRM on Criteo 1TB with the full (unhashed) vocabulary:
  26 one-hot tables of dim 128 (91 GB fp32), the MLPerf-v1 dense arch,
  dot interaction, SGD, global batch 16384 (2048 on each of 8 GPUs, as
  the MLCommons torchrec_dlrm reference runs it)."""
  m = _models()['criteo_1tb_unhashed_torchrec']
  return Workload(
    name='criteo_1tb',
    tables=_tables(m['table_rows'], m['embedding_dim']),
    num_dense=13,
    bottom_mlp=(512, 256, 128),
    top_mlp=(1024, 1024, 512, 256, 1),
    global_batch=16384,
    optimizer='sgd',
    source=_catalog_source('criteo_1tb_unhashed_torchrec'),
  )


def dlrm_benchmark() -> Workload:
  """dlrm's synthetic benchmark: 8 tables x 1M rows x 64, 100 lookups each."""
  m = _models()['dlrm_synthetic_benchmark']
  return Workload(
    name='dlrm_benchmark',
    tables=_tables(m['table_rows'], m['embedding_dim'], m['lookups_per_table']),
    num_dense=512,
    bottom_mlp=(512, 64),
    top_mlp=(1024, 1024, 1024, 1),
    global_batch=2048,
    source=_catalog_source('dlrm_synthetic_benchmark'),
  )


def _deeprecsys(key, name, num_dense, bottom, top) -> Workload:
  m = _models()[key]
  return Workload(
    name=name,
    tables=_tables(m['table_rows'], m['embedding_dim'], m['lookups_per_table']),
    num_dense=num_dense,
    bottom_mlp=bottom,
    top_mlp=top,
    interaction='cat',
    global_batch=2048,
    source=_catalog_source(key)
    + ' (inference configs; batch 2048 chosen for training, as dlrm bench)',
  )


def rm1() -> Workload:
  """DeepRecSys RM1: 8 tables x 4M x 32, 80 lookups, cat interaction."""
  return _deeprecsys('deeprecsys_rm1', 'rm1', 128, (64, 32), (256, 64, 1))


def rm2() -> Workload:
  """DeepRecSys RM2: 32 tables x 500k x 64, 120 lookups, cat interaction."""
  return _deeprecsys('deeprecsys_rm2', 'rm2', 256, (128, 64), (128, 64, 1))


def rm3() -> Workload:
  """DeepRecSys RM3: 10 tables x 2M x 32, 20 lookups, wide bottom MLP."""
  return _deeprecsys(
    'deeprecsys_rm3', 'rm3', 2560, (1024, 256, 32), (512, 256, 1)
  )


def _nv_dlrm(variant: str) -> Workload:
  """NVIDIA DeepLearningExamples DLRM on Criteo 1TB.

  The public record gives the total embedding size (15 GB small, 82 GB
  large, fp32) but not the per-table rows. Derived: the per-table rows of
  the unhashed Criteo 1TB vocabulary (catalog, torchrec example) scaled by
  one common factor so that the total matches, each at least 1 row.
  """
  cases = json.loads((DATA_DIR / 'calibration_cases.json').read_text())
  spec = cases['model_nv_dlrm']
  target_bytes = spec['variants'][variant]['embedding_fp32_gb'] * 1e9
  dim = spec['embedding_dim']
  base = _models()['criteo_1tb_unhashed_torchrec']['table_rows']
  scale = target_bytes / (4 * dim * sum(base))
  rows = [max(1, math.floor(r * scale)) for r in base]
  return Workload(
    name=f'nv_dlrm_{variant}',
    tables=_tables(rows, dim),
    num_dense=spec['num_dense_features'],
    bottom_mlp=tuple(spec['bottom_mlp']),
    top_mlp=tuple(spec['top_mlp']),
    global_batch=65536,
    dense_precision='fp16',
    source='calibration_cases.json model_nv_dlrm (NVIDIA DeepLearningExamples '
    'PyTorch DLRM README); rows derived from catalog criteo_1tb_unhashed',
  )


def nv_dlrm_small() -> Workload:
  """NVIDIA DLRM, frequency threshold 15 (15 GB of fp32 tables)."""
  return _nv_dlrm('small')


def nv_dlrm_large() -> Workload:
  """NVIDIA DLRM, frequency threshold 3 (82 GB of fp32 tables)."""
  return _nv_dlrm('large')


# The table layout of the zion_scale family: 64 tables, rows log-spaced
# from 2.5M to 150M, pooling log-spaced from 1 to 64 (interleaved).
_ZION_TABLES = 64
_ZION_DIM = 128


def _zion_layout() -> tuple[list[int], list[float]]:
  """(rows, pooling) of the zion_scale family's 64 tables (see zion_scale)."""
  n = _ZION_TABLES
  rows = [round(2.5e6 * (150e6 / 2.5e6) ** (i / (n - 1))) for i in range(n)]
  pool = [round(64.0 ** (i / (n - 1)), 2) for i in range(n)]
  # Interleave sizes and pooling so big tables are not also the hottest.
  return rows, pool[::2] + pool[1::2]


def _zion_family(name, rows, precision, dense_precision, source) -> Workload:
  """A zion_scale-family workload: its layout with these rows and
  precisions, its dense part, batch, optimizer and skew."""
  _, pool = _zion_layout()
  return Workload(
    name=name,
    tables=_tables(rows, _ZION_DIM, pool, precision),
    num_dense=512,
    bottom_mlp=(1024, 512, 128),
    top_mlp=(2048, 1024, 512, 256, 1),
    global_batch=65536,
    optimizer='rowwise_adagrad',
    dense_precision=dense_precision,
    popularity_skew=8.0,
    source=source,
  )


def _scaled_rows(target_params: float) -> list[int]:
  """The family's rows scaled by one factor so that rows x dim totals
  `target_params` embedding parameters (each table at least 1 row)."""
  rows, _ = _zion_layout()
  scale = target_params / (_ZION_DIM * sum(rows))
  return [max(1, round(r * scale)) for r in rows]


def zion_scale() -> Workload:
  """SYNTHETIC production-scale DLRM, about 1.2 TB of fp32 tables.

  No production model's tables are public (catalog: Neo/ZionEX gives only
  '12T parameters'), so this one is derived, not measured:
  - 64 tables of dim 128 (the MLPerf dim); rows log-spaced from 2.5M to 150M
    (the largest Criteo tables are 40-50M; production hashes are larger),
    which totals 2.3e9 rows = 1.18 TB in fp32;
  - multi-hot pooling log-spaced from 1 to 64 lookups (the DCNv2 multi-hot
    set spans 1-100), about 18 per table;
  - 512 dense features, bottom MLP 1024-512-128, dot interaction, top MLP
    2048-1024-512-256-1, global batch 65536, rowwise Adagrad, bf16 dense;
  - popularity_skew 8: power-law traffic, the hottest 20% of rows get 83%
    of the lookups (a modelling assumption).
  Sized so that it exceeds 8 x 32 GB (Big Basin) and 8 x 80 GB (DGX A100)
  of HBM but fits the host DDR of a Zion-like node.
  """
  rows, _ = _zion_layout()
  return _zion_family(
    'zion_scale',
    rows,
    'fp32',
    'bf16',
    'synthetic (see codesign.workload_presets.zion_scale docstring)',
  )


def zion_2019() -> Workload:
  """The zion_scale family at the size of the Zion era: 1 TB of fp32 tables.

  Size: the Zion paper's platform was built for embedding tables "tens of
  GB to TB" in size (zion_context.md, [paper]: Naumov et al., arXiv
  2003.09518); this preset takes the top of that range, 1e12 B of fp32
  rows (the family's rows x 0.83, 1.95e9 rows of dim 128). That is 3.9x
  the 8 x 32 GB of HBM of an 8-V100 node (Big Basin, Zion's 8 OAMs;
  zion_context.md [spec]) and 2x the 16 x 32 GB of a DGX-2. fp32 tables:
  the 2019 reference DLRM trains fp32 nn.EmbeddingBag tables (catalog
  models.criteo_*: facebookresearch/dlrm). Dense in fp16 mixed precision:
  V100 tensor cores have fp16, not bf16 (catalog V100 entries).
  Skew: no public number gives the access skew of Facebook's tables; the
  family's assumption (popularity_skew 8: the hottest 20% of rows get 83%
  of the lookups) is kept, the same in both eras of
  `experiments.zion_decision`. Layout, dense part, batch and optimizer:
  as zion_scale (synthetic).
  """
  return _zion_family(
    'zion_2019',
    _scaled_rows(1e12 / 4),
    'fp32',
    'fp16',
    'zion_scale family at 1 TB of fp32 tables: Zion-era tables "tens of '
    'GB to TB" (Naumov et al. arXiv 2003.09518, via zion_context.md); skew '
    'and layout assumed (see codesign.workload_presets.zion_2019)',
  )


def neo_12t() -> Workload:
  """The zion_scale family at the size of Neo's production model: 12e12
  embedding parameters, fp16 rows, 24 TB.

  Size: catalog models.meta_neo_12T: a 12-trillion-parameter production
  DLRM trained on 16 ZionEX nodes (Mudigere et al., ISCA'22 abstract); its
  table layout is not public (catalog notes). The dense part is a few
  million parameters, so the tables are taken to hold all 12e12, spread
  over the family's 64 tables of dim 128 (rows x 40, 9.4e10 rows).
  Precision [derived]: fp16 rows, 24 TB; in fp32 (48 TB) they would not
  fit the 16 nodes' HBM and DDR (128 x 40 GB + 16 x 1.5 TB = 29 TB;
  zion_context.md), in fp16 they do (Neo's abstract names quality-
  preserving compression and an HBM+DDR+SSD hierarchy). Dense in bf16
  (A100 and later). Skew, layout, dense part, batch and optimizer: as
  zion_scale (assumed).
  """
  return _zion_family(
    'neo_12t',
    _scaled_rows(12e12),
    'fp16',
    'bf16',
    _catalog_source('meta_neo_12T')
    + '; zion_scale layout at 12e12 fp16 parameters (see '
    'codesign.workload_presets.neo_12t)',
  )


WORKLOADS = {
  f.__name__: f
  for f in (
    criteo_kaggle,
    criteo_terabyte,
    mlperf_dlrm_v1,
    mlperf_dlrm_dcnv2,
    criteo_1tb,
    dlrm_benchmark,
    rm1,
    rm2,
    rm3,
    nv_dlrm_small,
    nv_dlrm_large,
    zion_scale,
    zion_2019,
    neo_12t,
  )
}


def get(name: str) -> Workload:
  """The workload preset called `name`."""
  if name not in WORKLOADS:
    raise InputError(
      f'unknown workload preset {name!r}; valid choices: '
      + ', '.join(WORKLOADS)
    )
  return WORKLOADS[name]()
