"""The strategy record: what distexp knows about one strategy (see distexp.strategies).

A record answers every layout question itself (which processes a job has, which of them train,
serve or log, how many Slurm tasks it needs, whether an external cluster fits it); the cluster,
job, sweep and train code ask it and never compare a strategy's name or layout as a string.
Its keys are its `schema`: the dataclass Hydra composes its node onto (`StrategyConfig`, the keys
every strategy has; a strategy's own keys in a subclass beside its record), stored as
``strategy/base_<name>`` and named first in its yaml.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from omegaconf import MISSING, DictConfig

from distexp.errors import UserError
from distexp.fields import key
from distexp.registry import Registry


@dataclass
class StrategyConfig:
    name: str = key(MISSING, "the chosen option (strategy=...)")
    record: Optional[str] = key(None, "a strategy of one's own: the module that registers its "
                                "record (distexp.strategies.register); null for the built-ins")


def needs_gpus(key: str, value: str, gpus: int, instead: str) -> None:
    """The one "NCCL needs GPUs" rule (mirrored's cross_device_ops, multiworker's communication)."""
    if gpus == 0:
        raise UserError(f"{key}: received {value!r}; NCCL needs GPUs and this job trains on CPU: "
                        f"use {instead}")


def one_rank_per_gpu(key: str, cfg: DictConfig, instead: str) -> None:
    """NCCL refuses two ranks on one GPU: no NCCL across the logical GPUs of `gpu_replicas`."""
    n = int(cfg.get("gpu_replicas", 1))
    if n > 1:
        raise UserError(f"{key}: received 'nccl' with gpu_replicas={n}; NCCL refuses two ranks "
                        f"on one GPU: use {instead}")


def task_name(job: str, index: int) -> str:
    """A task's process name: `chief`, `worker-1`, `ps-0` (TF_CONFIG's job and index)."""
    return "chief" if job == "chief" else f"{job}-{index}"


class Record:
    name: str = ""
    # The TensorFlow cluster a job of this strategy starts, in TF_CONFIG's order: (job name, the
    # config key giving its task count, or None for one task). Empty: one training process, no
    # cluster. multiworker: (("worker", "workers"),); ps: chief + workers + ps.
    cluster_jobs: Tuple[Tuple[str, Optional[str]], ...] = ()
    # Jobs whose tasks hold replicas (train); the others coordinate or serve.
    replica_jobs: Tuple[str, ...] = ("worker",)
    # Jobs an external cluster may have besides `cluster_jobs` (multiworker: a chief that trains
    # as worker 0 does).
    optional_jobs: Tuple[str, ...] = ()
    # Task roles that only serve (run tf.distribute.Server until stopped), not train.
    server_roles: Tuple[str, ...] = ()
    synchronous: bool = True
    # Every worker runs the loop itself and joins collectives: all must make the same calls.
    lockstep: bool = False
    # Steps are scheduled onto remote workers by a ClusterCoordinator (each worker reads its own
    # shard of the data); otherwise strategy.run on a distributed iterator (distexp.train.step).
    coordinated: bool = False
    # Its replicas take their input from a distributed dataset only (a TPU), even one replica
    # (distexp.train.loops.evaluate: one replica otherwise takes each batch whole).
    distributed_input_only: bool = False
    # Whether `cpu_replicas` splits the CPU into that many logical devices (replicas).
    cpu_replicas: bool = False
    # Whether `gpu_replicas` splits each GPU into that many logical GPUs (replicas).
    gpu_replicas: bool = False
    # loop -> None (supported) or why not (one line, before TensorFlow starts).
    loops: Mapping[str, Optional[str]] = {"custom": None, "fit": None}
    # knob -> why it is refused with this strategy (checked when the knob is on).
    refuses: Mapping[str, str] = {}
    # jit_compile=auto: why XLA stays off on its GPU replicas (None: on there; distexp.config.xla).
    xla_off: Optional[str] = None
    # xla_step=whole on CPU replicas: its update has no merge_call there, XLA compiles it whole.
    xla_whole_on_cpu: bool = False
    # The dataclass of its node (the `strategy.*` keys that apply; a key of another strategy must
    # stay at its default). None: every key its yaml sets is its own (a strategy of one's own).
    schema: Any = None
    # option -> its valid values, for options that take one of a few names (checked when set).
    option_values: Mapping[str, Tuple[str, ...]] = {}
    # The one-replica reference runs the report and distexp.parity compare with.
    baseline: bool = False

    # -- the process layout (the job process, before TensorFlow) --------------------------------
    def jobs(self, cfg: DictConfig) -> Dict[str, int]:
        """{TF job name: task count} of this strategy's cluster ({} for one process)."""
        return {job: 1 if key is None else int(cfg[key]) for job, key in self.cluster_jobs}

    def tasks(self, cfg: DictConfig) -> int:
        """Training processes a job starts (the Slurm tasks a cluster=slurm job needs)."""
        return sum(self.jobs(cfg).values()) or 1

    def task_names(self, cfg: DictConfig) -> List[str]:
        """The processes of a local cluster, the chief first (the one that logs and prints)."""
        jobs = self.jobs(cfg)
        return [task_name(j, i) for j, n in jobs.items() for i in range(n)] or ["chief"]

    def servers(self, cfg: DictConfig) -> List[str]:
        """The processes that only serve (never exit by themselves: stopped at the end)."""
        return [task_name(j, i) for j, n in self.jobs(cfg).items() if j in self.server_roles
                for i in range(n)]

    def count_keys(self) -> Tuple[str, ...]:
        """The config keys that set how many processes a job starts (for messages)."""
        return tuple(key for _, key in self.cluster_jobs if key)

    def chief_task(self, counts: Mapping[str, int]) -> str:
        """The task that logs and prints (distexp's one rule for "who is the chief"): the chief,
        or task 0 of the first job that holds replicas in a cluster without one (worker-0)."""
        if "chief" in counts:
            return "chief"
        return task_name(next((j for j in self.replica_jobs if j in counts), "worker"), 0)

    def is_chief_task(self, job: str, index: int, counts: Mapping[str, int]) -> bool:
        return task_name(job, index) == self.chief_task(counts)

    def workers_in(self, counts: Mapping[str, int]) -> int:
        """Processes holding replicas in a cluster of `counts` tasks per job."""
        if not self.cluster_jobs:
            return 1
        return sum(n for job, n in counts.items() if job in self.replica_jobs)

    def num_workers(self, cfg: DictConfig) -> int:
        """Processes that hold replicas."""
        return self.workers_in(self.jobs(cfg))

    def sync_of(self, workers: int) -> int:
        """Workers whose replicas share one global batch: all of them when synchronous; one
        otherwise (each ps step runs on one worker: TensorFlow's num_replicas_in_sync)."""
        return workers if self.synchronous else 1

    def sync_workers(self, cfg: DictConfig) -> int:
        return self.sync_of(self.num_workers(cfg))

    def check_cluster(self, counts: Mapping[str, int]) -> None:
        """An external cluster (TF_CONFIG, Slurm) must have this strategy's jobs and no others."""
        need = [job for job, _ in self.cluster_jobs]
        allowed = set(need) | set(self.optional_jobs)
        have = ", ".join(f"{j} x{n}" for j, n in counts.items())
        if not set(need) <= set(counts):
            raise UserError(f"strategy={self.name}: the cluster has {have}; it needs "
                            f"{', '.join(need)} jobs")
        extra = sorted(set(counts) - allowed)
        if extra:
            raise UserError(f"strategy={self.name}: the cluster has {', '.join(extra)} job(s), "
                            f"which it does not use; valid jobs: {', '.join(sorted(allowed))}")

    # -- before TensorFlow (the job process) ----------------------------------------------------
    def replicas_per_worker(self, cfg: DictConfig, gpus: int) -> int:
        if gpus > 0:
            return gpus * (int(cfg.get("gpu_replicas", 1)) if self.gpu_replicas else 1)
        return int(cfg.cpu_replicas) if self.cpu_replicas else 1

    def on_cpu(self, replicas: int) -> str:
        """The overrides that run this strategy on CPU with about `replicas` replicas, for a
        refusal's hint: `cpu_replicas` where it splits the CPU; one CPU replica per worker where
        the job has workers; else one CPU device."""
        if self.cpu_replicas:
            return f"gpus=0 cpu_replicas={max(replicas, 2)}"
        if self.cluster_jobs:
            return (f"gpus=0 (one CPU replica per worker; workers={max(replicas, 2)} for "
                    f"{max(replicas, 2)} replicas)")
        return "gpus=0"

    def check(self, cfg: DictConfig) -> None:
        """Checks of this strategy's own settings (UserError)."""

    def check_devices(self, cfg: DictConfig, gpus: int) -> None:
        """Checks that need the GPUs each worker gets (UserError; still before TensorFlow)."""

    def all_reduce(self, cfg: DictConfig) -> str:
        """How its replicas' gradients are summed, in a few words (gpu_replicas' line)."""
        return "TensorFlow's default"

    # -- in the training process ----------------------------------------------------------------
    def device_count(self, cfg: DictConfig, gpus: int) -> int:
        """How many local devices this process trains on (logical CPU devices when no GPU)."""
        return self.replicas_per_worker(cfg, gpus)

    def resolver(self, cfg: DictConfig, gpus: int, cluster):
        """The cluster resolver (None: no cluster); `cluster`: the job's cluster kind
        (distexp.cluster.kinds.Kind), which builds the resolver of a strategy with a cluster."""
        return None

    def build(self, cfg: DictConfig, devices: List[str], resolver=None):
        raise NotImplementedError

    def replica_devices(self, strategy, devices: List[str]) -> List[str]:
        """The devices the built strategy trains on (as configured, unless it found its own)."""
        return devices


REGISTRY = Registry("strategy", sort=True, base="Record (distexp.strategies.register)")
register = REGISTRY.add
