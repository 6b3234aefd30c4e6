"""Devices inside a training process: which GPUs, or how many logical CPU devices.

Must run before TensorFlow creates its runtime (logical devices cannot change afterwards).
"""
from __future__ import annotations

from typing import List

from omegaconf import DictConfig

from distexp import strategies
from distexp.errors import UserError


def configure(cfg: DictConfig, gpus: int) -> List[str]:
    """Make `gpus` GPUs (or `cpu_replicas` logical CPUs) visible; return the replica devices."""
    import tensorflow as tf

    physical = tf.config.list_physical_devices("GPU")
    if gpus > len(physical):
        raise UserError(f"gpus: received {gpus}; TensorFlow sees {len(physical)} GPU(s). "
                        f"To run on CPU use {strategies.of(cfg).on_cpu(gpus)}")
    # The strategy's record says how many devices this process trains on (one_device: 1;
    # multiworker and ps workers: one CPU device each; mirrored/central: cpu_replicas on CPU).
    n = strategies.of(cfg).device_count(cfg, gpus)
    if gpus > 0:
        tf.config.set_visible_devices(physical[:gpus], "GPU")
        for d in physical[:gpus]:
            tf.config.experimental.set_memory_growth(d, True)
        return [f"/gpu:{i}" for i in range(n)]
    if physical:
        tf.config.set_visible_devices([], "GPU")
    cpu = tf.config.list_physical_devices("CPU")[0]
    if n > 1:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    return [f"/cpu:{i}" for i in range(n)]
