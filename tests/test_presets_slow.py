"""The presets and data options train under TFDS mock data (the trainer honours
DISTEXP_TFDS_MOCK=N: tfds.testing.mock_data(num_examples=N)); a custom dataset from arrays and from
tf.data. Composition and refusals: tests/test_presets.py. Tier: slow (trains through the CLI)."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


TINY = ["epochs=1", "steps_per_epoch=3", "warmup_steps=1", "tracking.enabled=false", "gpus=0",
        "measure_step_split=false"]


@pytest.mark.parametrize("preset", ["keras_mnist", "custom_fashion_mnist"])
def test_preset_trains_under_tfds_mock_data(cli, preset):
    job = cli.cwd / "job"
    r = cli(f"experiment={preset}", f"hydra.run.dir={job}", "cpu_replicas=2",
            "dataset.data_dir=/nonexistent", *TINY, env={"DISTEXP_TFDS_MOCK": "96"}, timeout=300)
    assert r.returncode == 0, r
    assert "Number of devices: 2" in r.stdout
    assert "input [28, 28, 1], 10 classes" in r.stdout
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
    assert "input [32, 32, 3], 2 classes" in r.stdout


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
    assert r.stdout.count("input [8], 3 classes") == 2, r
