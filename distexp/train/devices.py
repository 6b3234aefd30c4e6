"""Devices inside a training process: which GPUs, or how many logical CPU devices.

Must run before TensorFlow creates its runtime (logical devices cannot change afterwards).
"""
from __future__ import annotations

from typing import List, Optional

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
        split = n // gpus  # gpu_replicas: logical GPUs per physical GPU
        for i, d in enumerate(physical[:gpus]):
            if split > 1:  # a memory limit each (memory growth cannot be set on logical GPUs)
                mb = logical_gpu_mb(gpu_memory_mb(i), split)
                tf.config.set_logical_device_configuration(
                    d, [tf.config.LogicalDeviceConfiguration(memory_limit=mb)] * split)
            else:
                tf.config.experimental.set_memory_growth(d, True)
        return [f"/gpu:{i}" for i in range(n)]
    if physical:
        tf.config.set_visible_devices([], "GPU")
    cpu = tf.config.list_physical_devices("CPU")[0]
    if n > 1:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    return [f"/cpu:{i}" for i in range(n)]


HEADROOM = 0.9  # of a GPU's memory shared out between its logical GPUs (CUDA's own context etc.)


def logical_gpu_mb(total_mb: int, split: int) -> int:
    """Each logical GPU's memory limit: an equal share of HEADROOM of the physical GPU's."""
    return int(total_mb * HEADROOM) // split


def gpu_memory_mb(index: int) -> int:
    """The memory (MiB) of this process's `index`-th visible GPU, from nvidia-smi (before
    TensorFlow's runtime starts: it cannot tell without creating its devices)."""
    import os
    import subprocess

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else None
    gpu = ids[index] if ids else str(index)
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,"
                              "nounits", "-i", gpu], capture_output=True, text=True, timeout=30,
                             check=True).stdout
        return int(out.split()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as ex:
        raise UserError(f"gpu_replicas: could not read GPU {gpu}'s memory with nvidia-smi "
                        f"({type(ex).__name__}: {ex}); each logical GPU needs a memory limit: "
                        "use gpu_replicas=1") from None


def split_line(cfg: DictConfig, gpus: int) -> Optional[str]:
    """The job's line when `gpu_replicas` splits its GPUs: how, and which all-reduce sums the
    replicas' gradients there (NCCL refuses two ranks on one GPU)."""
    n = int(cfg.get("gpu_replicas", 1))
    rec = strategies.of(cfg)
    if n <= 1 or gpus <= 0 or not rec.gpu_replicas:
        return None
    return (f"gpu_replicas={n}: each of {gpus} GPU(s) is {n} logical GPUs ({HEADROOM:.0%} of its "
            f"memory shared out equally); all-reduce: {rec.all_reduce(cfg)} (NCCL refuses two "
            "ranks on one GPU)")
