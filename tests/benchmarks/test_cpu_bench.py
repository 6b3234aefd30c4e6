"""benchmarks/cpu.py (the CPU default job against the hand-written loop, issue 49): its table's
ratios, medians and verdicts from given rounds; the hand-written loop's steady rate. Unit tier (no
process, no TensorFlow). The smoke run itself: tests/benchmarks/test_cpu_bench_slow.py."""
from __future__ import annotations

import importlib.util

import pytest

from helpers import ROOT

pytestmark = pytest.mark.unit


def _cpu_module():
    spec = importlib.util.spec_from_file_location("cpu_bench", ROOT / "benchmarks" / "cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cpu_round(distexp, hand, d_first, h_first, load=1.5):
    return {"distexp": distexp, "hand": hand, "d_first": d_first, "h_first": h_first,
            "load": load, "k": 4}


def test_hand_rate_is_the_steps_alone_after_the_first_epoch():
    cpu = _cpu_module()
    data = {"examples_per_epoch": 1000, "jobs": [{"train_s": [9.0, 0.02, 0.01, 0.04],
                                                  "epoch_s": [9.5, 0.5, 0.5, 0.5]}]}
    assert cpu.hand_rate(data) == pytest.approx(1000 / 0.02)  # the median of 0.02, 0.01, 0.04


def test_table_rows_medians_and_verdicts():
    cpu = _cpu_module()
    rows = [_cpu_round(90_000, 60_000, 3.0, 3.2), _cpu_round(70_000, 60_000, 3.5, 3.1, load=2.25),
            _cpu_round(84_000, 60_000, 2.9, 3.0)]
    lines = cpu.table(2, rows)
    assert lines[0] == "## cpu_replicas=2"
    assert lines[4] == "| 1 | 1.50 | 90,000 | 60,000 | 1.50x | 4 | 3.00 | 3.20 | -0.20 |"
    assert lines[5] == "| 2 | 2.25 | 70,000 | 60,000 | 1.17x | 4 | 3.50 | 3.10 | +0.40 |"
    assert lines[-2] == ("median ratio 1.40x (goal >= 1.4x: met); median first-step difference "
                         "-0.10 s (goal <= 0: met); distexp 84,000 ex/s, hand-written 60,000")


def test_table_says_not_met():
    cpu = _cpu_module()
    lines = cpu.table(1, [_cpu_round(80_000, 60_000, 3.5, 3.0)])
    assert "median ratio 1.33x (goal >= 1.4x: NOT met)" in lines[-2]
    assert "median first-step difference +0.50 s (goal <= 0: NOT met)" in lines[-2]
