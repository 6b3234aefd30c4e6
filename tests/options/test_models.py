"""Models take their input shape and classes from the dataset; too-small inputs are resized or
refused in one line. Through the CLI (the four models: one sweep; each other case one short
training process)."""
from __future__ import annotations

import json
import re

import pytest

from helpers import finished_sweep

pytestmark = [pytest.mark.slow, pytest.mark.extended]

OFF = "tracking.enabled=false"
TINY = ["epochs=1", "steps_per_epoch=2", "warmup_steps=0", "batch_size_per_replica=8", OFF,
        "measure_peak_flops=false", "measure_step_split=false"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """{model: job dir}: the four built-in models, 2 steps each on digits, as one sweep (one
    process: TensorFlow imported once, not four times)."""
    jobs, _ = finished_sweep(tmp_path_factory.mktemp("models"), "sweep",
                             "model=mlp,cnn,mobilenet_v2,resnet50",
                             *(a for a in TINY if a != OFF))  # the sweep turns tracking off
    return {model: job for (model,), job in jobs.items()}


@pytest.mark.xdist_group("models-trained")  # CI's xdist: one worker runs `trained` once
@pytest.mark.parametrize("model,params", [
    ("mlp", 8_320 + 1_290),            # 64*128+128 + 128*10+10
    ("cnn", 19_466),                   # the tutorial CNN on 8x8x1 digits
    # published 3-channel/1000-class counts minus the first conv's 2 extra channels and the
    # 1000-class head, plus a 10-class head:
    ("mobilenet_v2", 3_538_984 - 2 * 3 * 3 * 32 - 1_281_000 + 12_810),
    ("resnet50", 25_636_712 - 2 * 7 * 7 * 64 - 2_049_000 + 20_490),
])
def test_model_trains_on_digits(trained, model, params):
    job = trained[model]
    log = (job / "chief.log").read_text()  # the trainer's lines, as the console shows them
    name, n = re.search(r"Model: (\S+) \(([\d,]+) parameters\)", log).groups()
    assert (name, int(n.replace(",", ""))) == (model, params)
    assert "input [8, 8, 1], 10 classes" in log
    result = json.loads((job / "result.json").read_text())
    assert result["train/loss"] > 0 and 0 <= result["eval/accuracy"] <= 1
    assert "perf/step_compute_ms" not in result  # measure_step_split=false: no probe phase


def test_synthetic_shape_and_classes_reach_the_model(cli):
    job = cli.cwd / "job"
    r = cli("model=mlp", "dataset=synthetic", "dataset.shape=[12]", "dataset.num_classes=3",
            "dataset.size=64", f"hydra.run.dir={job}", *TINY)
    assert r.returncode == 0, r
    log = (job / "chief.log").read_text()  # the detail lines' home
    assert "input [12], 3 classes" in log
    assert "(2,051 parameters)" in log  # 12*128+128 + 128*3+3


def test_too_small_input_is_refused_when_resize_is_off(cli):
    r = cli("model=resnet50", "model.resize=false", *TINY)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines()[-1] == (
        "distexp: error: model: resnet50 needs inputs of at least 32x32; received 8x8 with "
        "model.resize=false (set model.resize=true to resize)")


def test_conv_model_refuses_flat_input(cli):
    r = cli("model=cnn", "dataset=synthetic", "dataset.shape=[12]", *TINY)
    assert r.returncode == 2, r
    assert "distexp: error: model: received 'cnn' with input shape [12]" in r.stderr
