"""Nothing silent: keras-io's softmax convnet (tests/helpers/user_code/bad_factories.py) trains, said in one line,
to the accuracy of the same model ending in logits. Tier: slow."""
from __future__ import annotations

import json

import pytest

from helpers import finished_sweep

pytestmark = [pytest.mark.slow, pytest.mark.extended]
F = "bad_factories"


SOFTMAX_JOB = ["strategy=one_device", "gpus=0", "epochs=10", "seed=0", "warmup_steps=2",
               "measure_step_split=false", "measure_peak_flops=false"]


def test_a_softmax_head_trains_as_well_as_logits(cli):
    """keras-io's "Simple MNIST convnet" ends in Dense(10, activation="softmax"): trained as if it
    gave logits it ended 10 epochs at eval/accuracy 0.85 against 0.96. It is trained on
    its probabilities (from_logits=False), said in one line, to the logits model's accuracy."""
    jobs, _ = finished_sweep(cli.cwd, "sweep", *SOFTMAX_JOB, "model=custom",
                             f"model.factory={F}:mnist_convnet,{F}:mnist_convnet_logits",
                             env={"CUDA_VISIBLE_DEVICES": ""})  # one process: one TF import
    jobs = {"softmax": jobs[(f"{F}:mnist_convnet",)],
            "logits": jobs[(f"{F}:mnist_convnet_logits",)]}
    logs = {name: (job / "chief.log").read_text() for name, job in jobs.items()}  # the console's
    note = (f"model.factory: {F}:mnist_convnet ends in a softmax: its outputs are probabilities, "
            "so the loss takes them as such (from_logits=False)")
    assert sum(note in ln for ln in logs["softmax"].splitlines()) == 1, logs["softmax"]
    assert "ends in a softmax" not in logs["logits"], logs["logits"]
    acc = {name: json.loads((job / "result.json").read_text()) for name, job in jobs.items()}
    assert acc["logits"]["eval/accuracy"] > 0.9, acc
    # Keras' cross-entropy on a softmax's output takes the softmax's input (its logits): the same
    # training, to float precision (seen: equal to every printed digit)
    assert acc["softmax"]["eval/accuracy"] == pytest.approx(acc["logits"]["eval/accuracy"],
                                                            abs=0.01), acc
