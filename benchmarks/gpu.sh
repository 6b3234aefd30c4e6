#!/usr/bin/env bash
# GPU readiness in one command: the GPU test tier, then a mirrored ResNet-50 scaling benchmark
# (gpus=1..N; batch per replica fixed, then global batch fixed; float32 and mixed_float16) with
# examples/s, scaling efficiency and MFU read back from MLflow. Results go to ./outputs.
#   bash benchmarks/gpu.sh [--batch 64] [--global-batch G] [--steps 60] [--warmup 10] [--skip-tests]
# Without an NVIDIA GPU: one line, exit 0. The logic is in benchmarks/gpu.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python}" "$here/gpu.py" "$@"
