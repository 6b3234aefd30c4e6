"""Strategy registry: name -> builder(cfg, devices) -> tf.distribute.Strategy.

The order that matters stays visible in distexp.trainer: devices, then the strategy, then the
model and optimizer inside ``strategy.scope()``.
"""
from __future__ import annotations

from typing import Callable, Dict, List

from omegaconf import DictConfig

from distexp.config import UserError

Builder = Callable[[DictConfig, List[str]], object]
REGISTRY: Dict[str, Builder] = {}


def register(name: str):
    def deco(fn: Builder) -> Builder:
        REGISTRY[name] = fn
        return fn
    return deco


def build(cfg: DictConfig, devices: List[str]):
    try:
        builder = REGISTRY[cfg.strategy.name]
    except KeyError:
        raise UserError(f"strategy: received {cfg.strategy.name!r}; valid: "
                        f"{', '.join(sorted(REGISTRY))}") from None
    return builder(cfg, devices)


def _cross_device_ops(cfg: DictConfig, devices: List[str]):
    import tensorflow as tf

    name = cfg.strategy.cross_device_ops
    if name is None:
        return None
    if name == "nccl":
        if not all(d.startswith("/gpu") for d in devices):
            raise UserError("strategy.cross_device_ops: received 'nccl'; NCCL needs GPUs and this "
                            "job trains on CPU: use hierarchical_copy or reduction_to_one_device")
        return tf.distribute.NcclAllReduce()
    if name == "hierarchical_copy":
        return tf.distribute.HierarchicalCopyAllReduce()
    return tf.distribute.ReductionToOneDevice()


@register("one_device")
def one_device(cfg: DictConfig, devices: List[str]):
    import tensorflow as tf

    return tf.distribute.OneDeviceStrategy(devices[0])


@register("mirrored")
def mirrored(cfg: DictConfig, devices: List[str]):
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(devices, cross_device_ops=_cross_device_ops(cfg, devices))


@register("central")
def central(cfg: DictConfig, devices: List[str]):
    import tensorflow as tf

    # Variables live on one device (the CPU when there are several compute devices).
    return tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices)


def is_chief(strategy) -> bool:
    """True on the process that logs and prints: the only one, the chief, or worker 0 without one."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    if resolver.task_type == "worker" and resolver.task_id == 0:
        return "chief" not in resolver.cluster_spec().as_dict()
    return False
