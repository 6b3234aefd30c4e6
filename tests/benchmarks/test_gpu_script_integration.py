"""benchmarks/gpu.sh where no GPU is visible: one line, exit 0, nothing started or written. The
benchmark's sweeps and table: tests/benchmarks/test_gpu_script.py. Tier: integration (a process)."""
from __future__ import annotations

import subprocess

import pytest

from helpers import ROOT, child_env

pytestmark = pytest.mark.integration
SCRIPT = ROOT / "benchmarks" / "gpu.sh"


def test_no_gpu_is_one_line_and_exit_0(tmp_path):
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this holds on a GPU machine too
    env = child_env(tests=False, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r
    assert r.stderr == ""
    assert r.stdout.splitlines() == [
        "gpu.sh: no NVIDIA GPU visible (no GPU under /proc/driver/nvidia/gpus, or "
        "CUDA_VISIBLE_DEVICES hides them): nothing to run"]
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written
