"""The intra-op threads of a CPU training process (distexp.train.devices.intra_op_threads): one
per op for a small model on small examples (the default job), TensorFlow's default elsewhere, and
never over the user's TF_NUM_INTRAOP_THREADS. Decided from the config, before TensorFlow starts."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from distexp.train import devices

pytestmark = pytest.mark.unit


def _threads_cfg(model="cnn", dataset="digits", shape=None):
    ds = {"name": dataset, **({"shape": shape} if shape is not None else {})}
    return OmegaConf.create({"model": {"name": model}, "dataset": ds})


@pytest.fixture(autouse=True)
def _no_user_setting(monkeypatch):
    monkeypatch.delenv("TF_NUM_INTRAOP_THREADS", raising=False)


def test_the_default_job_runs_one_thread_per_op():
    assert devices.intra_op_threads(_threads_cfg(), gpus=0) == 1
    assert devices.intra_op_threads(_threads_cfg("mlp"), gpus=0) == 1
    assert devices.threads_line(_threads_cfg(), 0) == (
        "CPU threads: 1 per op (cnn on digits's small examples: its ops are too small to share "
        "out; TF_NUM_INTRAOP_THREADS=N sets it)")


@pytest.mark.parametrize("cfg,gpus", [
    (_threads_cfg(), 1),                                          # GPU replicas: the host's threads stay
    (_threads_cfg("mobilenet_v2"), 0),                            # a large model (x0.45 at 1 thread)
    (_threads_cfg("custom"), 0),                                  # a user's model: size unknown
    (_threads_cfg(dataset="mnist"), 0),                           # 784 values: not measured
    (_threads_cfg(dataset="synthetic", shape=[32, 32, 3]), 0),    # 3,072 values
])
def test_tensorflows_default_elsewhere(cfg, gpus):
    assert devices.intra_op_threads(cfg, gpus) is None
    assert devices.threads_line(cfg, gpus) is None


def test_a_small_synthetic_shape_is_small():
    assert devices.intra_op_threads(_threads_cfg(dataset="synthetic", shape=[16, 16, 1]), 0) == 1
    assert devices.intra_op_threads(_threads_cfg(dataset="synthetic", shape=[257]), 0) is None


def test_the_users_setting_stands(monkeypatch):
    monkeypatch.setenv("TF_NUM_INTRAOP_THREADS", "2")
    assert devices.intra_op_threads(_threads_cfg(), gpus=0) is None
