#!/usr/bin/env bash
# The one device run (~8 min on one H200 at most, the GPU test tier included): distexp's default
# (jit_compile=auto) against a hand-written Keras fit at its default, both at jit_compile=false,
# float32 / mixed_float16 / mixed_bfloat16, batch 64 and 256 per replica, the whole XLA step
# against the split, 2 logical GPUs on one; one table: examples/s +/- interval, efficiency, MFU,
# the step-time split, the ratios, TensorFlow's build. Results go to ./outputs.
#   bash benchmarks/gpu.sh [--batches 64,256] [--steps 40] [--warmup 10] [--budget 360] [--skip-tests]
#   bash benchmarks/gpu.sh --smoke     # tiny sizes on the CPU: checks the script itself
# Without an NVIDIA GPU (and without --smoke): one line, exit 0. The logic is in benchmarks/gpu.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python}" "$here/gpu.py" "$@"
