"""one_device: tf.distribute.OneDeviceStrategy, one replica (the reference every other strategy is
compared with: the report's baseline, distexp.parity's reference). `cpu_replicas` does not apply."""
from __future__ import annotations

from distexp.strategies.record import Record, StrategyConfig, register


@register
class OneDevice(Record):
    name = "one_device"
    schema = StrategyConfig
    baseline = True
    xla_whole_on_cpu = True  # no merge_call in its update: xla_step=whole compiles on a CPU

    def replicas_per_worker(self, cfg, gpus):
        return 1

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        return tf.distribute.OneDeviceStrategy(devices[0])
