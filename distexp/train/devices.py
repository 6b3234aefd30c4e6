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
    threads = intra_op_threads(cfg, gpus)
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    cpu = tf.config.list_physical_devices("CPU")[0]
    if n > 1:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)])
    return [f"/cpu:{i}" for i in range(n)]


# CPU replicas training a small model on small examples: one thread per op (TF's default is one
# per core). Its ops are too small to share out: at 2 threads an op spends more on handing out and
# joining its parts than it saves (the default job, 2-core machine, 2026-11-28: examples/s x1.36 at
# 1 replica, x1.20 at 2; mobilenet_v2 on 32x32x3 x0.45, so not for large models or examples).
SMALL_MODELS = ("cnn", "mlp")
SMALL_EXAMPLE = 256  # values per example (digits: 64; mnist's 784 and cifar10's 3,072: not measured)
INTRA_ENV = "TF_NUM_INTRAOP_THREADS"  # TensorFlow's own setting: when the user sets it, it stands


def intra_op_threads(cfg: DictConfig, gpus: int) -> Optional[int]:
    """1 for CPU replicas of a small model (`SMALL_MODELS`) on examples of at most `SMALL_EXAMPLE`
    values (known from the config: digits, a small synthetic shape); None: TensorFlow's default."""
    import math
    import os

    if gpus > 0 or os.environ.get(INTRA_ENV) or cfg.model.name not in SMALL_MODELS:
        return None
    shape = {"digits": (8, 8, 1)}.get(cfg.dataset.name) or (
        tuple(cfg.dataset.shape) if cfg.dataset.name == "synthetic" else None)
    return 1 if shape and math.prod(int(d) for d in shape) <= SMALL_EXAMPLE else None


def threads_line(cfg: DictConfig, gpus: int) -> Optional[str]:
    """The job's line when it sets the intra-op threads."""
    if not intra_op_threads(cfg, gpus):
        return None
    return (f"CPU threads: 1 per op ({cfg.model.name} on {cfg.dataset.name}'s small examples: its ops "
            f"are too small to share out; {INTRA_ENV}=N sets it)")


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
