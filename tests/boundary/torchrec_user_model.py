"""A DLRM as a TorchRec user writes it, for torchrec_bridge_test.py: eight
tables of 64 columns, their lookups per sample, RowWiseAdagrad applied
in the backward pass, and a Topology of two hosts of eight GPUs with 80
GiB of HBM; TorchRec's defaults for everything else."""

import torch
from torchrec.distributed.planner import Topology
from torchrec.distributed.planner.types import ParameterConstraints
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.optim import RowWiseAdagrad
from torchrec.optim.apply_optimizer_in_backward import (
  apply_optimizer_in_backward,
)

ROWS = [40_000_000, 10_000_000, 5_000_000, 1_000_000, 500_000, 100_000]
ROWS += [10_000, 1_000]
POOLING = [1.0, 2.0, 5.0, 1.0, 20.0, 1.0, 3.0, 1.0]

tables = [
  EmbeddingBagConfig(
    name=f'table_{i}',
    embedding_dim=64,
    num_embeddings=rows,
    feature_names=[f'feature_{i}'],
  )
  for i, rows in enumerate(ROWS)
]
model = DLRM(
  embedding_bag_collection=EmbeddingBagCollection(
    tables=tables, device=torch.device('meta')
  ),
  dense_in_features=13,
  dense_arch_layer_sizes=[512, 256, 64],
  over_arch_layer_sizes=[512, 512, 256, 1],
)
apply_optimizer_in_backward(
  RowWiseAdagrad, model.sparse_arch.parameters(), {'lr': 0.01}
)
constraints = {
  f'table_{i}': ParameterConstraints(pooling_factors=[p])
  for i, p in enumerate(POOLING)
}
topology = Topology(
  world_size=16,
  local_world_size=8,
  compute_device='cuda',
  hbm_cap=80 * 1024**3,
  ddr_cap=256 * 1024**3,
)
batch_size = 1024
