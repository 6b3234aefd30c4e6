"""`bash benchmarks/gpu.sh --smoke`: the device run (distexp's default and jit_compile=false
sweeps, the hand-written Keras fit at auto and false, the one table with its ratios and the
TensorFlow build) at tiny sizes on the CPU, so that the script a GPU machine runs is known to work
before it gets one; the GPU-only parts say so. On a GPU machine the GPUs are hidden. Slow tier
(the script's arguments and table are checked in tests/benchmarks/test_gpu_script.py)."""
from __future__ import annotations

import re
import subprocess

import pytest

from helpers import ROOT, child_env

pytestmark = [pytest.mark.slow]


def test_the_smoke_run_answers_in_one_table(tmp_path):
    env = child_env(tests=False, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu.sh"), "--smoke"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout.splitlines()
    for part in ("distexp xla_step=whole", "distexp gpu_replicas=2"):
        assert f"== {part}: not run in --smoke (GPU replicas only)" in out
    head = [i for i, line in enumerate(out) if line.startswith("what ")]
    assert len(head) == 1, out[-20:]
    rows = [re.match(r"(distexp default|Keras fit auto|distexp jit=false|Keras fit false) +"
                     r"float32 +(yes|no) +1 +4 +([\d.]+) ", line)
            for line in out[head[0] + 1:head[0] + 5]]
    assert all(rows), out[head[0]:]
    assert [m.group(1) for m in rows] == ["distexp default", "Keras fit auto",
                                          "distexp jit=false", "Keras fit false"]
    assert rows[0].group(2) == "no" and rows[2].group(2) == "no"  # auto on a CPU: XLA off
    assert all(float(m.group(3)) > 0 for m in rows)  # examples/s
    assert re.fullmatch(r"distexp default / Keras fit default \(auto\): float32 b4 [\d.]+x",
                        out[head[0] + 5]), out[head[0] + 5]
    assert re.fullmatch(r"distexp / Keras fit, both jit_compile=false: float32 b4 [\d.]+x",
                        out[head[0] + 6]), out[head[0] + 6]
    assert out[head[0] + 7].startswith("peak: theoretical: ")
    assert out[head[0] + 8].startswith("build: TensorFlow 2.")
