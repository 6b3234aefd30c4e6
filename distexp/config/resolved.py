"""Facts derived from a composed config before TensorFlow starts: the strategy's record, workers,
replicas, the global batch, the job's objective. They ask the strategy's record and the task.

`resolve` is the one place they are computed together. The checks (distexp.config.checks) ask it
without a plan (the strategy's record answers for the cluster) and return what they found as a
`JobFacts`; the job process then refines it once with the cluster plan and writes the result into
the job's config.yaml as its `resolved:` node (typed by `ResolvedConfig`, here: the training
processes read it without the schema, which imports Hydra); every training process reads them
from there (`facts_of`), so no fact travels through an environment variable and `train(cfg)`
called in-process with a resolved config trains what the CLI would."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Optional, Sequence

from omegaconf import DictConfig

from distexp import strategies, tasks
from distexp.config import xla
from distexp.errors import UserError
from distexp.options import loops


@dataclass
class ResolvedConfig:
    """What the job process computed once (`resolve`) and wrote into the job's config.yaml; the
    training processes read it from there. Not a setting: leave it unset."""
    gpus: int = 0                  # GPUs per replica-holding worker
    # GPUs of each local process by task name where they differ from `gpus` (a ps coordinator
    # and the ps servers: 0); CUDA_VISIBLE_DEVICES says which.
    task_gpus: Dict[str, int] = field(default_factory=dict)
    replicas_per_worker: int = 1
    workers: int = 1               # processes that hold replicas (num_workers)
    sync_workers: int = 1          # workers whose replicas share one global batch
    replicas: int = 1              # replicas computing at once (num_replicas)
    sync_replicas: int = 1         # replicas sharing one global batch (TF's num_replicas_in_sync)
    global_batch: int = 0
    objective: Optional[str] = None
    job_dir: Optional[str] = None
    job_start: Optional[float] = None  # unix time the job process started (time to first step)
    jit_compile: bool = False      # the step XLA-compiled: `jit_compile` resolved (config.xla)
    jit_compile_why: str = ""      # why, in a few words (the job's XLA line, its tag)


# The run's param naming the job's objective, logged by the chief trainer from the facts: what a
# resumed sweep reads (distexp.sweeps.planning), as the trainer's result.json names it the job.
OBJECTIVE_PARAM = "objective_resolved"


def objective_name(cfg: DictConfig) -> Optional[str]:
    """The figure a job returns (the facts' `objective`): `objective`, else the task's.

    The one place it is derived. A built-in task's is known here, before TensorFlow; a user's
    task (`task.factory`) is imported only in the training process, so its facts hold None and
    the trainer completes them once it has built the task (`complete_objective`). Everything
    after reads the facts: the trainer's result.json (`objective`) and its param
    OBJECTIVE_PARAM, the job's exit value (distexp.job.lifecycle), a resumed sweep."""
    if cfg.objective is not None:
        return str(cfg.objective)
    task = tasks.builtin(cfg)
    return task.objective if task is not None else None


def complete_objective(facts, task) -> str:
    """`facts.objective`, set from `task.objective` where the job process could not know it (a
    user's task: None there); the trainer calls it once, after building the task."""
    if facts.objective is None:
        facts.objective = str(task.objective)
    return str(facts.objective)


NVIDIA_GPUS = "/proc/driver/nvidia/gpus"  # the NVIDIA driver's own list, one entry per GPU


def visible_gpus() -> int:
    """Number of GPUs this process may use, found without importing TensorFlow.

    Honours CUDA_VISIBLE_DEVICES; otherwise counts /proc/driver/nvidia/gpus (the NVIDIA driver's
    own list). The trainer re-checks with TensorFlow, which is authoritative.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    driver = NVIDIA_GPUS
    present = len(os.listdir(driver)) if os.path.isdir(driver) else 0
    if env is not None:
        ids = [d for d in env.split(",") if d.strip() and d.strip() != "-1"]
        return min(len(ids), present) if present else 0
    return present


def check_gpus(requested: Optional[int], visible: int, rec=None) -> int:
    """Resolve `gpus` against what is visible: null = all, N = first N, more = error (its hint:
    the strategy record `rec`'s way to run on CPU; without one, gpus=0)."""
    if requested is None:
        return visible
    if requested > visible:
        raise UserError(
            f"gpus: received {requested}; {visible} GPU(s) visible on this machine. "
            f"To run on CPU use {rec.on_cpu(requested) if rec is not None else 'gpus=0'}")
    return requested


def worker_gpus(cfg: DictConfig, gpus: int) -> int:
    """GPUs each replica-holding process trains on, of `gpus` (what `gpus` resolved to here): all
    of them, except where the job starts its workers on this machine (cluster=local) with
    gpus=null: they split the visible GPUs evenly (distexp.cluster.processes.split_gpus)."""
    from distexp.cluster import kinds

    rec = strategies.of(cfg)
    if cfg.gpus is not None or not rec.cluster_jobs or not kinds.of(cfg).starts_processes:
        return gpus
    return gpus // rec.num_workers(cfg)


def replicas_per_worker(cfg: DictConfig, gpus: Optional[int] = None) -> int:
    """Replicas each worker trains with (known before TensorFlow starts).

    The strategy's record decides: one_device 1; GPUs when there are; `cpu_replicas` for the
    strategies that split the CPU (mirrored, central); TPU cores for tpu; else 1.
    """
    if gpus is None:
        gpus = cfg.gpus if cfg.gpus is not None else visible_gpus()
    return strategies.of(cfg).replicas_per_worker(cfg, worker_gpus(cfg, gpus))


def learning_rate(cfg: DictConfig, global_batch: Optional[int] = None) -> float:
    """The rate the optimizer uses: `learning_rate` (else the model's), scaled by
    `learning_rate_scaling` with the global batch over the reference batch
    (`batch_size_per_replica`: the rate is taken to be right for one replica at that batch).
    Weak scaling over N replicas: x N (linear), x sqrt(N) (sqrt); a fixed `global_batch_size` gets
    the same rate at every replica count (equal work, equal rate)."""
    import math

    base = float(cfg.learning_rate if cfg.learning_rate is not None else cfg.model.learning_rate)
    rule = cfg.get("learning_rate_scaling", "none")
    if rule == "none" or global_batch is None:
        return base
    ratio = global_batch / int(cfg.batch_size_per_replica)
    return base * (ratio if rule == "linear" else math.sqrt(ratio))


def global_batch(cfg: DictConfig, replicas: int) -> int:
    if cfg.global_batch_size is not None:
        return int(cfg.global_batch_size)
    return int(cfg.batch_size_per_replica) * replicas


def resolve(cfg: DictConfig, gpus: Optional[int] = None, plan=None, *, job_dir=None,
            job_start: Optional[float] = None) -> dict:
    """The job's facts (the `resolved:` node), computed once.

    `gpus`: what `gpus` resolved to on this machine (check_gpus; default: `gpus`, else the visible
    GPUs). `plan` (distexp.cluster.processes.Plan): the processes the job starts; without it the
    strategy's record answers for a local cluster (the checks, parity)."""
    rec = strategies.of(cfg)
    if gpus is None:
        gpus = cfg.gpus if cfg.gpus is not None else visible_gpus()
    if plan is None:
        workers, sync, task_gpus = rec.num_workers(cfg), rec.sync_workers(cfg), {}
        per_gpus = worker_gpus(cfg, gpus)
    else:
        workers, sync = plan.replica_workers, plan.sync_workers
        per_gpus, task_gpus = plan.gpus_per_worker, dict(plan.task_gpus)
    per = rec.replicas_per_worker(cfg, per_gpus)
    loop = loops.of(cfg) if "loop" in cfg else None
    jit, why = xla.choose(cfg.get("jit_compile", "auto"), rec, per_gpus, loop)
    return {"gpus": per_gpus, "task_gpus": task_gpus, "replicas_per_worker": per,
            "workers": workers, "sync_workers": sync, "replicas": per * workers,
            "sync_replicas": per * sync, "global_batch": global_batch(cfg, per * sync),
            "objective": objective_name(cfg), "job_dir": None if job_dir is None else str(job_dir),
            "job_start": job_start, "jit_compile": jit, "jit_compile_why": why}


@dataclass(frozen=True)
class JobFacts:
    """One job's facts as its checks found them, once: distexp.config.checks.validate returns
    this, a sweep's GPU pool (distexp.sweeps.gpu_pool) sizes the job's lease from it and the job's
    preparation (distexp.job.lifecycle.prepare) plans from it, refined by the lease and then by
    the plan (`resolve` with it), instead of counting the GPUs again.

    - `rec`, `kind`: the strategy's record and the cluster kind (distexp.cluster.kinds)
    - `visible`: the GPUs the job may use: this machine's (`visible_gpus`), its lease from a
      sweep's pool once `leased`, or a remote kind's nodes' (cluster=ray)
    - `gpus`: what `gpus` resolved to against them (`check_gpus`: null = all of them)
    - `layout`: `resolve(cfg, gpus)`, the job's facts before the cluster plan"""
    rec: Any
    kind: Any
    visible: int
    gpus: int
    layout: dict

    def pool_gpus(self, cfg: DictConfig) -> int:
        """GPUs a sweep's pool holds for this job on this machine: a one-process job's `gpus`; a
        cluster=local job's per worker (its `layout`) times its workers; none for a kind that
        places its processes elsewhere (cluster=tf_config, slurm) or on its own nodes (ray)."""
        if self.kind.remote or (self.rec.cluster_jobs and not self.kind.starts_processes):
            return 0
        return int(self.layout["gpus"]) * (self.rec.num_workers(cfg) if self.rec.cluster_jobs
                                           else 1)

    def leased(self, cfg: DictConfig, ids: Sequence[str]) -> "JobFacts":
        """The facts once a sweep's pool leased the job `ids` (its CUDA_VISIBLE_DEVICES): those are
        the GPUs it may use. The layout is the same: the lease is what `pool_gpus` asked for."""
        return replace(self, visible=len(ids), gpus=check_gpus(cfg.gpus, len(ids), self.rec))


def attach(cfg: DictConfig, facts: dict) -> DictConfig:
    """Set `cfg.resolved` to `facts` (what `resolve` returned), typed; returns `cfg`."""
    cfg.resolved = ResolvedConfig(**facts)
    return cfg


def facts_of(cfg: DictConfig):
    """The `resolved:` node of a job's config, typed (`ResolvedConfig`)."""
    from omegaconf import OmegaConf

    node = cfg.get("resolved") if hasattr(cfg, "get") else None
    if node is None:
        raise ValueError("the config has no `resolved:` node: train a config the job process "
                         "wrote (python -m distexp), or add one: "
                         "resolved.attach(cfg, resolved.resolve(cfg, job_dir=...))")
    return OmegaConf.merge(OmegaConf.structured(ResolvedConfig), node)
