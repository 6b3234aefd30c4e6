"""mirrored: tf.distribute.MirroredStrategy over this process's GPUs, or `cpu_replicas` logical
CPU devices; synchronous all-reduce (`strategy.cross_device_ops`: TensorFlow's default, nccl on
GPUs, hierarchical_copy, reduction_to_one_device). Keras fit and the custom loop both work."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from distexp.fields import key
from distexp.strategies.record import Record, StrategyConfig, needs_gpus, one_rank_per_gpu, register


@dataclass
class MirroredConfig(StrategyConfig):
    cross_device_ops: Optional[str] = key(
        None, "how gradients are all-reduced: nccl, hierarchical_copy, reduction_to_one_device; "
        "null = TensorFlow's choice")


def reduce_name(cfg) -> Optional[str]:
    """`strategy.cross_device_ops`; null with gpu_replicas > 1: reduction_to_one_device (NCCL
    refuses two ranks on one GPU); else null (TensorFlow's choice)."""
    name = cfg.strategy.cross_device_ops
    if name is None and int(cfg.get("gpu_replicas", 1)) > 1:
        return "reduction_to_one_device"
    return name


def cross_device_ops(cfg, devices):
    import tensorflow as tf

    name = reduce_name(cfg)
    if name is None:
        return None
    if name == "nccl":  # GPUs only: checked in the job process (Mirrored.check_devices)
        return tf.distribute.NcclAllReduce()
    if name == "hierarchical_copy":
        return tf.distribute.HierarchicalCopyAllReduce()
    return tf.distribute.ReductionToOneDevice()


@register
class Mirrored(Record):
    name = "mirrored"
    cpu_replicas = True
    gpu_replicas = True
    schema = MirroredConfig
    option_values = {"cross_device_ops": ("nccl", "hierarchical_copy", "reduction_to_one_device")}

    def check_devices(self, cfg, gpus):
        if cfg.strategy.cross_device_ops == "nccl":
            needs_gpus("strategy.cross_device_ops", "nccl", gpus,
                       "hierarchical_copy or reduction_to_one_device")
            one_rank_per_gpu("strategy.cross_device_ops", cfg, "reduction_to_one_device (the "
                             "default with gpu_replicas) or hierarchical_copy")

    def all_reduce(self, cfg):
        return reduce_name(cfg) or "TensorFlow's default (nccl on GPUs)"

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        return tf.distribute.MirroredStrategy(devices,
                                              cross_device_ops=cross_device_ops(cfg, devices))
