"""Devices inside a training process: which GPUs, or how many logical CPU devices.

Must run before TensorFlow creates its runtime (logical devices cannot change afterwards).
"""
from __future__ import annotations

from typing import List

from omegaconf import DictConfig

from distexp.config import UserError


def configure(cfg: DictConfig, gpus: int) -> List[str]:
    """Make `gpus` GPUs (or `cpu_replicas` logical CPUs) visible; return the replica devices."""
    import tensorflow as tf

    physical = tf.config.list_physical_devices("GPU")
    if gpus > len(physical):
        raise UserError(f"gpus: received {gpus}; TensorFlow sees {len(physical)} GPU(s). "
                        f"To run on CPU use gpus=0 cpu_replicas={max(gpus, 2)}")
    # MultiWorkerMirroredStrategy and ps workers train one CPU device per worker.
    one = cfg.strategy.name in ("one_device", "ps", "multiworker")
    if gpus > 0:
        tf.config.set_visible_devices(physical[:gpus], "GPU")
        for d in physical[:gpus]:
            tf.config.experimental.set_memory_growth(d, True)
        n = 1 if cfg.strategy.name == "one_device" else gpus
        return [f"/gpu:{i}" for i in range(n)]
    if physical:
        tf.config.set_visible_devices([], "GPU")
    n = 1 if one else int(cfg.cpu_replicas)
    cpu = tf.config.list_physical_devices("CPU")[0]
    if n > 1:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    return [f"/cpu:{i}" for i in range(n)]
