#!/usr/bin/env bash
# GPU readiness in one command (~4.5 min on one GPU; --xla: more): the GPU test tier, then a mirrored
# ResNet-50 scaling benchmark (gpus=1..N; batch per replica fixed, then global batch fixed unless
# that repeats it; float32 and mixed_float16) and the same model in a hand-written Keras fit (the
# anchor), in one table: examples/s, scaling efficiency, MFU, the step-time split, distexp over
# Keras fit. Results go to ./outputs.
#   bash benchmarks/gpu.sh [--batch 64] [--global-batch G] [--steps 60] [--warmup 10] [--skip-tests]
#   bash benchmarks/gpu.sh --smoke     # tiny sizes on the CPU: checks the script itself
# Without an NVIDIA GPU (and without --smoke): one line, exit 0. The logic is in benchmarks/gpu.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python}" "$here/gpu.py" "$@"
