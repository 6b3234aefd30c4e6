"""Strategy registry: name -> builder(cfg, devices, resolver) -> tf.distribute.Strategy.

The order that matters stays visible in distexp.trainer: the cluster resolver (it may set
CUDA_VISIBLE_DEVICES), devices, then the strategy, then the model and optimizer inside
``strategy.scope()``. Multi-process strategies take their cluster from a TensorFlow cluster
resolver: TF_CONFIG (cluster=local, whose TF_CONFIG distexp.cluster writes, and cluster=tf_config)
or Slurm's environment (cluster=slurm).
"""
from __future__ import annotations

import os
from typing import Callable, Dict, List

from omegaconf import DictConfig

from distexp.config import UserError

Builder = Callable[..., object]
REGISTRY: Dict[str, Builder] = {}


def register(name: str):
    def deco(fn: Builder) -> Builder:
        REGISTRY[name] = fn
        return fn
    return deco


class PortInUse(Exception):
    """This task's gRPC server could not listen on its port (another process holds it)."""


def build(cfg: DictConfig, devices: List[str], resolver=None):
    try:
        builder = REGISTRY[cfg.strategy.name]
    except KeyError:
        raise UserError(f"strategy: received {cfg.strategy.name!r}; valid: "
                        f"{', '.join(sorted(REGISTRY))}") from None
    with grpc_errors(resolver):
        return builder(cfg, devices, resolver=resolver)


class grpc_errors:
    """Turn TensorFlow's "Could not start gRPC server" into PortInUse naming the address."""

    def __init__(self, resolver):
        self.resolver = resolver

    def __enter__(self):
        return self

    def __exit__(self, kind, ex, tb):
        if ex is not None and "Could not start gRPC server" in str(ex) and self.resolver is not None:
            r = self.resolver
            addr = r.cluster_spec().task_address(r.task_type, r.task_id)
            raise PortInUse(f"{r.task_type}:{r.task_id} could not listen on {addr} (port in use?)") \
                from ex
        return False


def cluster_resolver(cfg: DictConfig, gpus: int):
    """The cluster resolver of a multi-process strategy (None for the others)."""
    if cfg.strategy.name not in ("multiworker", "ps"):
        return None
    import tensorflow as tf

    if cfg.cluster.name == "slurm":
        from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm

        from distexp.cluster import slurm_jobs, slurm_port_base, slurm_step

        _, ntasks = slurm_step(os.environ)
        kw = dict(jobs=slurm_jobs(cfg, ntasks), port_base=slurm_port_base(cfg, os.environ))
        if gpus == 0:
            # The resolver hands out one GPU range per task and finds none on a CPU node (nor
            # nvidia-smi): give it one pretend GPU per task and tell it not to set
            # CUDA_VISIBLE_DEVICES, so it only computes the cluster.
            per_node = max(slurm.expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"]))
            kw.update(gpus_per_node=per_node, gpus_per_task=1, auto_set_gpu=False)
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(**kw)
        resolver.cluster_spec()  # task_type / task_id stay None until the spec is computed
        return resolver
    return tf.distribute.cluster_resolver.TFConfigClusterResolver()


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
def one_device(cfg: DictConfig, devices: List[str], resolver=None):
    import tensorflow as tf

    return tf.distribute.OneDeviceStrategy(devices[0])


@register("mirrored")
def mirrored(cfg: DictConfig, devices: List[str], resolver=None):
    import tensorflow as tf

    return tf.distribute.MirroredStrategy(devices, cross_device_ops=_cross_device_ops(cfg, devices))


@register("central")
def central(cfg: DictConfig, devices: List[str], resolver=None):
    import tensorflow as tf

    # Variables live on one device (the CPU when there are several compute devices).
    return tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices)


@register("multiworker")
def multiworker(cfg: DictConfig, devices: List[str], resolver=None):
    import tensorflow as tf

    impl = tf.distribute.experimental.CommunicationImplementation[cfg.strategy.communication.upper()]
    if impl == tf.distribute.experimental.CommunicationImplementation.NCCL and \
            not all(d.startswith("/gpu") for d in devices):
        raise UserError("strategy.communication: received 'nccl'; NCCL needs GPUs and this worker "
                        "trains on CPU: use auto or ring")
    return tf.distribute.MultiWorkerMirroredStrategy(
        cluster_resolver=resolver,
        communication_options=tf.distribute.experimental.CommunicationOptions(implementation=impl))


@register("ps")
def parameter_server(cfg: DictConfig, devices: List[str], resolver=None):
    import tensorflow as tf

    # Called on the coordinator (the chief) only; worker and ps tasks run distexp.loops.ps.serve.
    return tf.distribute.experimental.ParameterServerStrategy(resolver)


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
