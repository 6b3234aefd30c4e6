"""tpu: tf.distribute.TPUStrategy through TPUClusterResolver (`strategy.tpu`: a TPU name, a
`grpc://host:8470` address, or null = the TPU_NAME environment / this TPU VM's own TPU); one
replica per TPU core (`strategy.tpu_cores`, 8 for a v2-8/v3-8, checked against what the TPU
reports). The custom loop only: Keras 3 under TPUStrategy is an open issue (keras-team/keras#19448).
TPUs compute in bfloat16: mixed_float16 is refused (use mixed_bfloat16). On a machine without a
TPU, one line before training (checked in the job process, without TensorFlow)."""
from __future__ import annotations

import glob
import os
import socket
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from distexp.errors import UserError
from distexp.fields import key
from distexp.strategies.record import Record, StrategyConfig, register


@dataclass
class TPUConfig(StrategyConfig):
    tpu: Optional[str] = key(None, "the TPU's name or grpc://host:8470; null = $TPU_NAME or this "
                             "TPU VM's own")
    tpu_cores: int = key(8, "the TPU's cores (replicas; checked against the TPU's own count)")


def local_tpu() -> bool:
    """A TPU VM's own chips (/dev/accel* on v4+, /dev/vfio on v5e+)."""
    return bool(glob.glob("/dev/accel*")) or os.path.isdir("/dev/vfio") and \
        bool([p for p in os.listdir("/dev/vfio") if p != "vfio"])


@register
class TPU(Record):
    name = "tpu"
    schema = TPUConfig
    distributed_input_only = True
    xla_off = "TPUStrategy compiles every step with XLA itself"
    loops = {"custom": None,
             "fit": "Keras 3 fit under TPUStrategy is not supported yet (keras-team/keras#19448)"}
    refuses = {"precision=mixed_float16": "TPUs compute in bfloat16: use precision=mixed_bfloat16"}

    def replicas_per_worker(self, cfg, gpus):
        return int(cfg.strategy.tpu_cores)

    def device_count(self, cfg, gpus):
        return 1  # the host's CPU; the TPU cores come with the strategy

    def check(self, cfg):
        tpu = cfg.strategy.tpu or os.environ.get("TPU_NAME")
        if cfg.strategy.tpu_cores < 1:
            raise UserError(f"strategy.tpu_cores: received {cfg.strategy.tpu_cores}; expected >= 1")
        if not tpu and not local_tpu():
            raise UserError("strategy: received 'tpu', but no TPU is reachable from here: "
                            "strategy.tpu is null, TPU_NAME is not set and this machine has no TPU "
                            "(/dev/accel*, /dev/vfio); valid: strategy.tpu=<TPU name or "
                            "grpc://host:8470> where a TPU is reachable, or a CPU/GPU strategy "
                            "(one_device, mirrored)")
        parts = urlsplit(str(tpu or ""))
        if parts.scheme == "grpc" and parts.hostname:
            try:
                socket.create_connection((parts.hostname, parts.port or 8470), timeout=5).close()
            except OSError as ex:
                raise UserError(f"strategy.tpu: received {tpu!r}; no TPU answers there ({ex}); "
                                "valid: the address of a running TPU (grpc://host:8470)") from None

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=cfg.strategy.tpu or "")
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
        cores = int(strategy.num_replicas_in_sync)
        if cores != int(cfg.strategy.tpu_cores):
            raise UserError(f"strategy.tpu_cores: received {cfg.strategy.tpu_cores}; the TPU has "
                            f"{cores} cores: set strategy.tpu_cores={cores}")
        return strategy

    def replica_devices(self, strategy, devices):
        return [d.replace("/job:worker/replica:0/task:0/device:", "/") for d in
                strategy.extended.worker_devices]
