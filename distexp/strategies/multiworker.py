"""multiworker: tf.distribute.MultiWorkerMirroredStrategy across `workers` processes (one replica
each on CPU, one per GPU), synchronous collectives (`strategy.communication`: auto, ring, nccl).
The cluster and its resolver come from the cluster kind (distexp.cluster.kinds: TF_CONFIG for
cluster=local and tf_config, SlurmClusterResolver for cluster=slurm). Keras 3 fit fails across
worker processes (keras-team/keras#20585): refused."""
from __future__ import annotations

from dataclasses import dataclass

from distexp.fields import key
from distexp.strategies.record import Record, StrategyConfig, needs_gpus, one_rank_per_gpu, register


@dataclass
class MultiWorkerConfig(StrategyConfig):
    communication: str = key("auto", "collective implementation; auto, ring, nccl")


# TensorFlow's coordination service (which MultiWorkerMirroredStrategy starts with no timeouts set)
# with bounds of our own: a peer that stops sending heartbeats (killed, or its link cut) fails every
# task's next collective after HEARTBEAT_S; a peer that never registers (its job process stopped
# before TensorFlow, e.g. on bad input) fails the others after REGISTER_S instead of a wait with no
# end (seen on two Slurm nodes: worker-1 waited for good for a chief that had exited with code 2).
HEARTBEAT_S = 10
REGISTER_S = 180


def coordination_service(resolver) -> None:
    """Configure the coordination service as MultiWorkerMirroredStrategy would (it keeps one that
    is already configured), with HEARTBEAT_S and REGISTER_S set."""
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    spec = resolver.cluster_spec() if resolver is not None else None
    if not spec or not spec.jobs or resolver.task_type not in ("chief", "worker") or \
            context.context().coordination_service is not None:
        return
    jobs = [coordination_config_pb2.CoordinatedJob(name=j, num_tasks=spec.num_tasks(j))
            for j in ("chief", "worker") if j in spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone", service_leader=multi_worker_util.coordination_leader(spec),
        coordinated_jobs=jobs, heartbeat_timeout_in_ms=HEARTBEAT_S * 1000,
        cluster_register_timeout_in_ms=REGISTER_S * 1000)


@register
class MultiWorker(Record):
    name = "multiworker"
    cluster_jobs = (("worker", "workers"),)
    replica_jobs = ("chief", "worker")  # on an external cluster a chief trains as worker 0 does
    optional_jobs = ("chief",)
    lockstep = True
    gpu_replicas = True  # each worker's own GPU(s) split into logical GPUs
    schema = MultiWorkerConfig
    option_values = {"communication": ("auto", "ring", "nccl")}
    loops = {"custom": None,
             "fit": "Keras 3 fit cannot train it across worker processes (keras-team/keras#20585)"}

    def check_devices(self, cfg, gpus):
        if cfg.strategy.communication == "nccl":
            needs_gpus("strategy.communication", "nccl", gpus, "auto or ring")
            one_rank_per_gpu("strategy.communication", cfg, "auto (ring with gpu_replicas) or ring")

    def all_reduce(self, cfg):
        return self._communication(cfg) if cfg.strategy.communication != "auto" or int(cfg.get(
            "gpu_replicas", 1)) > 1 else "TensorFlow's choice (auto: nccl on GPUs)"

    @staticmethod
    def _communication(cfg) -> str:
        """auto with gpu_replicas > 1: ring (NCCL refuses two ranks on one GPU)."""
        if cfg.strategy.communication == "auto" and int(cfg.get("gpu_replicas", 1)) > 1:
            return "ring"
        return str(cfg.strategy.communication)

    def resolver(self, cfg, gpus, cluster):
        return cluster.resolver(cfg, self, gpus)

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        impl = tf.distribute.experimental.CommunicationImplementation[
            self._communication(cfg).upper()]  # nccl: GPUs only (checked by check_devices)
        coordination_service(resolver)
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver,
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=impl))
