"""central: tf.distribute.experimental.CentralStorageStrategy: variables on one device (the CPU
when there are several compute devices), computation mirrored over `cpu_replicas` logical CPU
devices or the GPUs. Keras 3 fit logs wrong loss/accuracy under it (docs/facts.md#central-fit): refused."""
from __future__ import annotations

from distexp.strategies.record import Record, StrategyConfig, register


@register
class Central(Record):
    name = "central"
    schema = StrategyConfig
    cpu_replicas = True
    gpu_replicas = True
    xla_off = ("with several GPUs CentralStorageStrategy keeps the variables on the CPU, which an "
               "XLA step on a GPU cannot reach; not measured with XLA on a GPU")
    loops = {"custom": None,
             "fit": "Keras 3 fit logs wrong loss/accuracy under CentralStorageStrategy (the "
                    "weights are right, the logged metrics are not), so distexp refuses it"}

    def all_reduce(self, cfg):
        return "the variables' one device (CentralStorageStrategy)"

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        return tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices)
