"""The step-time split's sync probe all-reduces as the optimizer does, checked on the traced
graphs (distexp.train.split_probes): under MirroredStrategy over 2 logical CPUs the sync probe
and the training step (its one-step and its k-step function) hold the same collective ops, on the
same devices, reducing the same tensors (dtype, packed shape: every trainable variable's
elements), with the same implementation; the compute probe holds none. With one replica
(mirrored, one_device) the training step holds no collective at all, so sync is 0 by
construction, and the compute probe is the training's own one-step function.

Each case runs tests/helpers/probes/split_probe.py in a fresh process (logical devices are fixed once per
process); a tiny model, traced only: seconds."""
from __future__ import annotations

import pytest

from helpers import run_probe

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("split-probes")]


def _graphs(replicas: int, optimizer: str, precision: str) -> dict:
    return run_probe("split_probe.py", "graphs", replicas, optimizer, precision)


@pytest.mark.parametrize("optimizer, precision", [("adam", "float32"),
                                                  ("sgd", "mixed_float16")])
def test_the_sync_probe_places_the_optimizers_collectives_on_the_same_devices(optimizer,
                                                                              precision):
    g = _graphs(2, optimizer, precision)["mirrored"]
    devices = {"/job:localhost/replica:0/task:0/device:CPU:0",
               "/job:localhost/replica:0/task:0/device:CPU:1"}
    # the training step's own gradient all-reduce: one packed collective per replica's device
    assert g["one_step"] and {c[1] for c in g["one_step"]} == devices, g
    assert all(c[2] == "float32" and c[3] == [g["elements"]] for c in g["one_step"]), g
    # the k-step function's (in its while loop) and the sync probe's are the same ops
    assert g["k_steps"] == g["one_step"], g
    assert g["sync"] == g["one_step"], g
    assert g["compute"] == [], g  # the compute probe leaves the all-reduce out
    assert g["probe_one_step"] is False  # several replicas: the compute probe, not the step


def test_one_replica_has_nothing_to_all_reduce():
    g = _graphs(1, "adam", "float32")
    assert sorted(g) == ["mirrored", "one_device"]
    for strategy, graphs in g.items():
        # no collective in the training step: the optimizer's sum over one replica is the
        # gradient itself, so sync is 0 without a probe; the probe's compute is the step itself
        assert graphs["one_step"] == graphs["k_steps"] == [], (strategy, graphs)
        assert graphs["probe_one_step"] is True, strategy


# What the step's weight all-reduce adds to its loss part (seq2seq: the tokens counted over all
# replicas; one device: an IdentityN), which the compute probe leaves out (no collective in it).
WEIGHT_ALL_REDUCE = {"IdentityN": 1, "Identity": 1, "Maximum": 1}


@pytest.mark.parametrize("overrides, weight_ops", [
    ((), {}),  # the default job's model, task and optimizer (cnn, classification: unit weight)
    (("model=gru_seq2seq", "dataset=synthetic_pairs"), WEIGHT_ALL_REDUCE),
])
def test_the_compute_probe_runs_the_steps_forward_and_backward(overrides, weight_ops):
    """The compute probe times what training runs: the traced forward and backward pass of the
    probe and of the training step (distexp.train.step.forward_backward, XLA-compiled: a function
    of its own) hold the same ops, type by type and count by count: the loss part, and the
    gradient part (the tape's) exactly; seq2seq's loss part differs only by the step's all-reduce
    of the weight."""
    from collections import Counter

    g = run_probe("split_probe.py", "ops", *overrides)
    step, probe = g["step"], g["probe"]
    assert step["gradient"] == probe["gradient"] and sum(step["gradient"].values()) > 20, g
    assert Counter(step["loss"]) - Counter(probe["loss"]) == Counter(weight_ops), g
    assert Counter(probe["loss"]) - Counter(step["loss"]) == Counter(), g
