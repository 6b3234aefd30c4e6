"""`bash benchmarks/gpu.sh --smoke`: the whole benchmark (the sweep, the hand-written Keras fit
anchor at both precisions, the one table) at tiny sizes on the CPU, so that the script a GPU
machine runs is known to work before it gets one. ~3 min on 2 idle cores (11 min at load 16,
2026-11-26); on a GPU machine the GPUs are hidden. Tier: slow, marked `bench`: CI leaves it out
(the script's arguments and table are checked in tests/benchmarks/test_gpu_script.py); run it with
`python -m pytest -m bench` before a GPU machine runs the script."""
from __future__ import annotations

import re
import subprocess

import pytest

from helpers import ROOT, child_env

pytestmark = [pytest.mark.slow, pytest.mark.bench]


def test_the_smoke_run_answers_in_one_table(tmp_path):
    env = child_env(tests=False, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu.sh"), "--smoke"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout.splitlines()
    assert "== strong scaling: skipped, its jobs are the weak sweep's (one GPU)" in out
    head = [i for i, line in enumerate(out) if line.startswith("what ")]
    assert len(head) == 1, out[-20:]
    rows = [re.match(r"(distexp weak|Keras fit \(hand-written\)) +(\S+) +no +1 +4 +([\d.]+) ",
                     line)
            for line in out[head[0] + 1:head[0] + 5]]
    assert all(rows), out[head[0]:]
    assert [m.group(1, 2) for m in rows] == [
        ("distexp weak", "float32"), ("distexp weak", "mixed_float16"),
        ("Keras fit (hand-written)", "float32"), ("Keras fit (hand-written)", "mixed_float16")]
    assert all(float(m.group(3)) > 0 for m in rows)  # examples/s
    ratio = out[head[0] + 5]
    assert ratio.startswith("distexp (1 GPU) / Keras fit (hand-written), same model, batch and "
                            "jit_compile: float32 ") and "mixed_float16 " in ratio
    assert out[head[0] + 6].startswith("peak: theoretical: ")
