"""multiworker: tf.distribute.MultiWorkerMirroredStrategy across `workers` processes (one replica
each on CPU, one per GPU), synchronous collectives (`strategy.communication`: auto, ring, nccl).
The cluster comes from TF_CONFIG (cluster=local writes it; cluster=tf_config) or Slurm
(cluster=slurm). Keras 3 fit fails across worker processes (keras-team/keras#20585): refused."""
from __future__ import annotations

import os

from distexp.strategies.record import Record, needs_gpus, register


def tf_cluster_resolver(record, cfg, gpus: int):
    """TF_CONFIG's resolver, or SlurmClusterResolver inside `srun` (cluster=slurm)."""
    import tensorflow as tf

    if cfg.cluster.name == "slurm":
        from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm

        from distexp.cluster.slurm_env import slurm_jobs, slurm_port_base, slurm_step

        _, ntasks = slurm_step(os.environ)
        kw = dict(jobs=slurm_jobs(cfg, ntasks, record), port_base=slurm_port_base(cfg, os.environ))
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


@register
class MultiWorker(Record):
    name = "multiworker"
    cluster_jobs = (("worker", "workers"),)
    replica_jobs = ("chief", "worker")  # on an external cluster a chief trains as worker 0 does
    optional_jobs = ("chief",)
    lockstep = True
    options = ("communication",)
    loops = {"custom": None,
             "fit": "Keras 3 fit cannot train it across worker processes (keras-team/keras#20585)"}

    def check_devices(self, cfg, gpus):
        if cfg.strategy.communication == "nccl":
            needs_gpus("strategy.communication", "nccl", gpus, "auto or ring")

    def resolver(self, cfg, gpus):
        return tf_cluster_resolver(self, cfg, gpus)

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        impl = tf.distribute.experimental.CommunicationImplementation[
            cfg.strategy.communication.upper()]  # nccl: GPUs only (checked by check_devices)
        return tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=resolver,
            communication_options=tf.distribute.experimental.CommunicationOptions(
                implementation=impl))
