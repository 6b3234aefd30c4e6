"""The measurement window on a real run (distexp.train.window): what was trained is unchanged, bit
for bit (model, optimizer, losses, evaluation), while the run's figures rest on the window too."""
from __future__ import annotations

import csv

import pytest

from helpers import run_probe

pytestmark = pytest.mark.slow


def _losses(job):
    with open(job / "steps.csv") as f:
        return [r["loss"] for r in csv.DictReader(f)]


def test_window_leaves_what_was_trained_bit_identical(tmp_path):
    """A default-sized run (one_device, 2 epochs of 22 steps) measured on to 0.5 s against the same
    run with no window: the same steps.csv losses, the same final figures, the same variables
    (digest), and inside the window the variables did change (it trained) and were restored."""
    job = ["strategy=one_device", "epochs=2", "measure_step_split=false",
           "measure_peak_flops=false", "checkpoint.every_steps=0"]
    on = run_probe("window_probe.py", tmp_path / "on", *job, "measure_min_seconds=0.5",
                   TF_CPP_MIN_LOG_LEVEL="2")
    off = run_probe("window_probe.py", tmp_path / "off", *job, "measure_min_seconds=0",
                    "measure_min_steps=0", TF_CPP_MIN_LOG_LEVEL="2")
    assert on["window_steps"] > 0 and off["window_steps"] == 0
    assert on["changed"] and on["restored"]
    assert on["digest"] == off["digest"]
    assert _losses(tmp_path / "on") == _losses(tmp_path / "off")
    for key in ("train/loss", "train/accuracy", "eval/loss", "eval/accuracy"):
        assert on["final"][key] == off["final"][key], key
    # the run's figures rest on the window too; the epochs' and end to end do not count it
    assert on["final"]["perf/timed_steps"] == off["final"]["perf/timed_steps"] + on["window_steps"]
    assert on["final"]["timed_seconds"] >= 0.5
