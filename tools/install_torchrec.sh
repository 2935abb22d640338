#!/usr/bin/env bash
# Installs TorchRec's CPU build into the active Python environment, for
# `codesign export --compare`, `codesign import_torchrec` from Python
# objects and the tests that plan exported runs in TorchRec's planner.
#
#   tools/install_torchrec.sh            # torchrec 1.8.0 on torch 2.13.0
#   TORCHREC_VERSION=1.9.2 tools/install_torchrec.sh   # on torch 2.14.1
#
# Two steps, as TorchRec's own requirements would pull the CUDA build of
# fbgemm-gpu (about 500 MB) over the CPU one, whose import then fails on
# libtorch_cuda.so:
#   1. torch (CPU build), fbgemm-gpu-cpu and TorchRec's other dependencies;
#   2. torchrec itself with --no-deps.
# The pairs that import together (fbgemm-gpu-cpu 1.9.0 on torch 2.13 fails
# on an undefined symbol): torchrec 1.8.0 with torch 2.13.0 and
# fbgemm-gpu-cpu 1.8.0; torchrec 1.9.2 with torch 2.14.1 and
# fbgemm-gpu-cpu 1.9.0. torch comes from pip's configured indexes and wheel
# folders; where they hold only CUDA builds, set TORCH_INDEX (for example
# https://download.pytorch.org/whl/cpu) to add an index of CPU builds.
# A CUDA torch or the CUDA fbgemm-gpu is refused (torch 2.14.1 for
# TorchRec 1.9.2 needs TORCH_INDEX where pip's own holds its CUDA build).
# About 80 s and 1.0 GB in a fresh virtual environment on 2 cores.
set -euo pipefail

version="${TORCHREC_VERSION:-1.8.0}"
case "$version" in
  1.8.0) torch=2.13.0 fbgemm=1.8.0 ;;
  1.9.2) torch=2.14.1 fbgemm=1.9.0 ;;
  *)
    echo "install_torchrec.sh: TORCHREC_VERSION=$version is not one of" \
      "1.8.0 and 1.9.2 (the releases this script pairs with torch)" >&2
    exit 2
    ;;
esac
py="${PYTHON:-python3}"
extra=()
if [[ -n "${TORCH_INDEX:-}" ]]; then
  extra=(--extra-index-url "$TORCH_INDEX")
fi

# Step 1: the CPU builds and TorchRec's other dependencies (the versions
# the pairing above was checked with).
"$py" -m pip install -q "${extra[@]}" "torch==$torch" \
  "fbgemm-gpu-cpu==$fbgemm" "torchmetrics==1.0.3" "tensordict==0.15.3" \
  pyre-extensions iopath tqdm
# Step 2: TorchRec without its requirements (they name the CUDA fbgemm-gpu).
"$py" -m pip install -q --no-deps "torchrec==$version"

# Refuse what would not run on the CPU.
if "$py" -m pip show -q fbgemm-gpu >/dev/null 2>&1; then
  echo "install_torchrec.sh: the CUDA fbgemm-gpu is installed; remove it" \
    "(pip uninstall fbgemm-gpu) and run this script again" >&2
  exit 1
fi
"$py" - <<'EOF'
import sys

import torch

if torch.version.cuda is not None:
  sys.exit(
    f'install_torchrec.sh: torch {torch.__version__} is a CUDA build; '
    'uninstall it and run this script with TORCH_INDEX set to an index of '
    'CPU builds'
  )
import fbgemm_gpu  # noqa: F401
import torchrec
from torchrec.distributed.planner import EmbeddingShardingPlanner  # noqa: F401

print(f'torchrec {torchrec.__version__} on torch {torch.__version__} (CPU)')
EOF
