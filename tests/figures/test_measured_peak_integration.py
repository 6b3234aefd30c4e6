"""The measured peak's probe for real (TensorFlow, on the CPU, with a faked GPU name): an
unknown device name gets a positive peak from a real matmul at the job's precision, cached, and
tagged `measured:`."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def test_the_probe_measures_an_unknown_name_on_the_cpu(tmp_path, monkeypatch):
    from distexp.figures import measured_peak

    monkeypatch.setattr(measured_peak, "PROBE_N", 128)
    monkeypatch.setattr(measured_peak, "PROBE_S", 0.1)
    path = tmp_path / "gpu_peaks.json"
    flops, tag, line = measured_peak.job_peak(["NVIDIA Fake GPU 9000"], ["/cpu:0"],
                                              "mixed_bfloat16", path=path)
    assert 1e8 < flops < 1e14  # a CPU's bfloat16 matmul: positive, far below a GPU's
    assert tag.startswith("measured: 1 x NVIDIA Fake GPU 9000 ") and "bfloat16 matmul probe" in tag
    entry = json.loads(path.read_text())["NVIDIA Fake GPU 9000|bfloat16"]
    assert entry["flops"] == flops and entry["device"] == "/cpu:0"
    assert "measured peak" in line
