"""The presets and data options train under TFDS mock data (the trainer honours
DISTEXP_TFDS_MOCK=N: tfds.testing.mock_data(num_examples=N)); a custom dataset from arrays and from
tf.data. Composition and refusals: tests/config/test_presets.py. Tier: slow (trains through the CLI)."""
from __future__ import annotations

import json

import pytest

from helpers import finished_sweep

pytestmark = [pytest.mark.slow, pytest.mark.extended]


TINY = ["epochs=1", "steps_per_epoch=3", "warmup_steps=1", "tracking.enabled=false", "gpus=0",
        "measure_step_split=false"]


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """{preset: job dir}: both tutorial presets, 3 steps each under TFDS mock data, as one sweep
    (one process: TensorFlow imported once)."""
    jobs, _ = finished_sweep(tmp_path_factory.mktemp("presets"), "sweep",
                             "experiment=keras_mnist,custom_fashion_mnist", "cpu_replicas=2",
                             "dataset.data_dir=/nonexistent",
                             *(a for a in TINY if a != "tracking.enabled=false"),
                             env={"DISTEXP_TFDS_MOCK": "96"}, timeout=300)
    return {preset: job for (preset,), job in jobs.items()}


@pytest.mark.xdist_group("presets-trained")  # CI's xdist: one worker runs `presets` once
@pytest.mark.parametrize("preset", ["keras_mnist", "custom_fashion_mnist"])
def test_preset_trains_under_tfds_mock_data(presets, preset):
    job = presets[preset]
    log = (job / "chief.log").read_text()  # the trainer's lines, as the console shows them
    assert "Number of devices: 2" in log
    assert "input [28, 28, 1], 10 classes" in log
    dataset = {"keras_mnist": "mnist", "custom_fashion_mnist": "fashion_mnist"}[preset]
    assert f"dataset: {dataset} (" in log
    result = json.loads((job / "result.json").read_text())
    assert 0 <= result["eval/accuracy"] <= 1 and result["train/loss"] > 0
    assert result["perf/examples_per_sec"] > 0
    steps = (job / "steps.csv").read_text().splitlines()
    assert len(steps) == 1 + 3


def test_variable_size_images_are_resized_under_mock_data(cli):
    job = cli.cwd / "job"
    r = cli("dataset=cats_vs_dogs", "dataset.image_size=[32,32]", "model=mlp", "strategy=one_device",
            f"hydra.run.dir={job}", *TINY, env={"DISTEXP_TFDS_MOCK": "40"}, timeout=300)
    assert r.returncode == 0, r
    assert "input [32, 32, 3], 2 classes" in (job / "chief.log").read_text()  # the detail lines' home


def test_custom_dataset_arrays_and_tf_data(cli):
    """dataset=custom: a user's function returning NumPy arrays, then tf.data (a 2-job sweep)."""
    r = cli("-m", "dataset=custom", "dataset.factory=factories:blobs,factories:blobs_tfdata",
            "model=mlp", "strategy=one_device", "epochs=3", "batch_size_per_replica=32",
            "warmup_steps=1", "tracking.enabled=false", "hydra.sweep.dir=sweep", timeout=300)
    assert r.returncode == 0, r
    for n in (0, 1):
        job = cli.cwd / "sweep" / str(n)
        result = json.loads((job / "result.json").read_text())
        assert result["eval/accuracy"] > 0.9, (n, result)
    logs = [(cli.cwd / "sweep" / str(n) / "chief.log").read_text() for n in (0, 1)]
    assert all("input [8], 3 classes" in log for log in logs), logs
