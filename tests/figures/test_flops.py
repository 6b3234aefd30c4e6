"""FLOP counts behind perf/mfu, checked against a hand count (cnn) and the published ResNet-50
figure; the peak FLOP/s micro-benchmark returns a sane number. Runs TensorFlow in a subprocess
(one fresh runtime; no timing asserted)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import child_env

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("flops")]  # one `counted` per worker

SCRIPT = r"""
import json
from omegaconf import OmegaConf
from distexp import models
from distexp.figures import flops
m = OmegaConf.create({"name": "x", "min_size": 0, "resize": True, "factory": None})
out = {}
cnn = models.cnn(m, (28, 28, 1), 10)
out["cnn"] = flops.forward_flops(cnn, (28, 28, 1))
out["cnn_train"] = flops.train_flops_per_example(cnn, (28, 28, 1))
rn = models.resnet50(m, (224, 224, 3), 1000)
out["resnet50"] = flops.forward_flops(rn, (224, 224, 3))
out["peak"] = flops.peak_flops(["/cpu:0"], n=256, seconds=0.3)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def counted():
    env = child_env(tests=False, TF_CPP_MIN_LOG_LEVEL="2")
    p = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_cnn_forward_flops_match_a_hand_count(counted):
    # 28x28x1 -> Conv2D(32, 3): 26*26*32 outputs x 9 MACs; MaxPool -> 13*13*32 = 5408;
    # Dense(64): 5408*64 MACs; Dense(10): 64*10 MACs. 2 FLOPs per MAC, plus one add per bias.
    macs = 26 * 26 * 32 * 9 + 5408 * 64 + 64 * 10
    biases = 26 * 26 * 32 + 64 + 10
    hand = 2 * macs + biases
    assert counted["cnn"] == pytest.approx(hand, rel=0.03)
    assert counted["cnn_train"] == pytest.approx(3 * counted["cnn"])


def test_resnet50_flops_match_the_published_figure(counted):
    # He et al. 2015, Table 1: 3.8e9 multiply-adds at 224x224 (often quoted as ~4.1 GMACs with
    # the element-wise ops); the profiler counts 2 FLOPs per multiply-add.
    gmacs = counted["resnet50"] / 2 / 1e9
    assert 3.7 <= gmacs <= 4.2, gmacs


def test_peak_flops_is_within_the_cpus_theoretical_peak(counted):
    """The matmul micro-benchmark cannot beat the processor's theoretical peak (cores x FLOPs a
    cycle x clock, distexp.figures.cpu_peak): it measured 0.54 of it here (180 of 332 GFLOP/s,
    2026-11-28, load 9), so a multiply-add counted twice fails here on a machine that is not
    crowded. Below, a 50th of it: a machine shared with other work (no timing asserted beyond)."""
    from distexp.figures.cpu_peak import machine_cpu_peak

    theoretical = machine_cpu_peak()
    if theoretical is None:  # not an x86 core distexp knows: no peak to hold it to
        assert 1e8 < counted["peak"] < 1e14
        return
    assert theoretical[0] / 50 < counted["peak"] <= theoretical[0], (counted, theoretical)
