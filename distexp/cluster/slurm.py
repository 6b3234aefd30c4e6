"""cluster=slurm: this job process is one Slurm task of a step (srun, hydra/launcher=slurm, which
starts one task per process of the strategy's cluster): one training process, its role, address
and port computed from Slurm's step variables exactly as TensorFlow's SlurmClusterResolver
computes them (distexp.cluster.slurm_env). Only the chief's job process opens an MLflow run; the
first task of every other node samples that node's system metrics into it."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig

from distexp.cluster.kinds import ClusterConfig, External, peer_start_timeout, port, register
from distexp.cluster.processes import Plan
from distexp.cluster.slurm_env import check_placement, slurm_addresses, slurm_jobs, slurm_port_base, slurm_step
from distexp.errors import UserError


@dataclass
class SlurmConfig(ClusterConfig):
    port: Optional[int] = port()
    peer_start_timeout: float = peer_start_timeout()


@register
class Slurm(External):
    name = "slurm"
    schema = SlurmConfig

    def plan(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        env = os.environ
        task = _slurm_task(cfg, rec, env)
        p = self.task_plan(rec, job_dir, gpus, task, slurm_addresses(cfg, env, rec),
                           cfg.cluster.peer_start_timeout)
        if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
            p.cluster_id = f"slurm:{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
        chief = rec.chief_task(task[2])
        p.samples_node = (not p.logs_to_mlflow and env.get("SLURM_LOCALID") == "0"
                          and p.hosts.get(p.names[0]) != p.hosts.get(chief))
        return p

    def srun_tasks(self, cfg: DictConfig, rec):
        return rec.tasks(cfg) if rec.cluster_jobs else None

    def first_task(self, env) -> bool:
        return env.get("SLURM_PROCID", "0") == "0"  # task 0: the chief

    def resolver(self, cfg: DictConfig, rec, gpus: int):
        """SlurmClusterResolver inside `srun`, told this strategy's jobs and the job's port block."""
        import tensorflow as tf
        from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm

        _, ntasks = slurm_step(os.environ)
        kw = dict(jobs=slurm_jobs(cfg, ntasks, rec), port_base=slurm_port_base(cfg, os.environ))
        if gpus == 0:
            # The resolver hands out one GPU range per task and finds none on a CPU node (nor
            # nvidia-smi): give it one pretend GPU per task and tell it not to set
            # CUDA_VISIBLE_DEVICES, so it only computes the cluster.
            per_node = max(slurm.expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"]))
            kw.update(gpus_per_node=per_node, gpus_per_task=1, auto_set_gpu=False)
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(**kw)
        resolver.cluster_spec()  # task_type / task_id stay None until the spec is computed
        return resolver


def _slurm_task(cfg: DictConfig, rec, env):
    """(task type, index, {job: count}) as SlurmClusterResolver assigns them: ranks in the
    alphabetical order of the job names (chief, ps, worker), whatever order `jobs` lists them."""
    rank, ntasks = slurm_step(env)
    counts = slurm_jobs(cfg, ntasks, rec)
    check_placement(env, rank)
    start = 0
    for kind in sorted(counts):
        if rank < start + counts[kind]:
            return kind, rank - start, counts
        start += counts[kind]
    raise UserError(f"SLURM_PROCID: received {rank}; the step has {ntasks} tasks")
