"""The cluster kinds: where a job's processes run and how they find each other, one record per
kind, and the job's plan (no TensorFlow at module level: the job process plans with it; `resolver`
imports it). Lightning's `ClusterEnvironment` is the model: one class per kind answers every
question the job, the checks, the sweeps and the trainer would otherwise ask by comparing
`cluster.name` as a string.

- `local`: this job process starts every process of the job on this machine (distexp.cluster.local)
- `tf_config`: this job process is one task of a cluster an engine started (TFJob, Vertex AI)
- `slurm`: this job process is one Slurm task of a step (srun, hydra/launcher=slurm)
- `ray`: this job process places one Ray actor per task on a Ray cluster (distexp.cluster.ray)

A record is asked, never compared: a new kind (LSF, PBS, a Kubernetes operator) is a `Kind`
subclass registered with `register` and a `conf/cluster/<name>.yaml`; a kind defined outside
distexp names its module there (`record: my_pkg.my_cluster`, imported before the name is looked
up). Its keys are its `schema`: the dataclass Hydra composes its node onto (`ClusterConfig`, the
keys every kind has; a kind's own keys in a subclass beside it), stored as
``cluster/base_<name>`` and named first in its yaml. The built-ins register when the package is
imported (distexp/cluster/__init__.py), in the contract's order (local, tf_config, slurm, ray).

`of(cfg)` is the record of `cfg.cluster`. `plan(cfg, ...)` is the job's `Plan`
(distexp.cluster.processes). The strategy's record (distexp.strategies) gives the layout: its
cluster's jobs, which of them train, serve or log; a strategy without a cluster (one_device,
mirrored, central, tpu) is one trainer process, the chief. The cluster kind's record plans the
processes of a strategy with a cluster: all of them on this machine (local), or this job
process's one task of a cluster someone else started (tf_config, slurm). Every process runs the
same command (`python -m distexp.train.trainer`); its role comes from the cluster resolver, as on
a real cluster.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from omegaconf import DictConfig

from distexp import strategies
from distexp.cluster.liveness import STARTUP_S, ChiefWatch, ServerWatch, Startup
from distexp.cluster.processes import Plan
from distexp.fields import key
from distexp.registry import Registry
from distexp.strategies.record import task_name


@dataclass
class ClusterConfig:
    name: str = key("local", "the chosen option (cluster=...)")
    record: Optional[str] = key(None, "a cluster kind of one's own: the module that registers "
                                "its record (distexp.cluster.kinds.register)")


def port() -> Any:
    """`cluster.port` (local, slurm)."""
    return key(None, "first port of the tasks (task i gets port + i; slurm: per node); null = "
               "free ports (local), 8888 (slurm)")


def peer_start_timeout() -> Any:
    """`cluster.peer_start_timeout` (the kinds whose tasks wait for peers they did not start)."""
    return key(STARTUP_S, "seconds a task waits for a peer's server to listen before the job "
               "fails naming it")


class Kind:
    name: str = ""
    # This job process starts every process of the job, on this machine (cluster=local); otherwise
    # it is one task of a cluster someone else started, and runs one training process.
    starts_processes: bool = False
    # The dataclass of its node (the `cluster.*` keys that apply). None: every key its yaml sets
    # is its own (a kind of one's own).
    schema: Any = None
    # The job's training processes run on other machines' nodes (cluster=ray): this machine's GPUs
    # are not theirs (a sweep's GPU pool holds none for it).
    remote: bool = False

    # -- the job process (before TensorFlow) -----------------------------------------------------
    def plan(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        """The processes this job process starts, for a strategy `rec` with a cluster (a strategy of
        one process never asks). `gpus`: what `gpus` resolved to on this machine; a kind that
        starts every process (starts_processes) is told the GPUs this machine shows instead, and
        splits them between its workers (`cfg.gpus` each, or evenly for null)."""
        raise NotImplementedError

    def check(self, node: DictConfig) -> None:
        """The kind's keys (`cluster.*` of its schema), range-checked before anything is built:
        one UserError line naming the key. Here those several kinds share where its node has
        them (`peer_start_timeout`); a kind's own in its subclass, which calls this first
        (super().check(node))."""
        from distexp.errors import UserError

        timeout = node.get("peer_start_timeout")
        if timeout is not None and not math.isfinite(timeout):
            raise UserError(f"cluster.peer_start_timeout: received {timeout}; expected a finite "
                            "number")
        if timeout is not None and timeout <= 0:
            raise UserError(f"cluster.peer_start_timeout: received {timeout}; expected seconds > 0 "
                            f"(default {STARTUP_S:g})")

    def one_process(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        """The one training process of a strategy without a cluster: the chief, here."""
        return Plan(names=["chief"], job_dir=job_dir, gpus_per_worker=gpus)

    def visible_gpus(self, cfg: DictConfig, local: int) -> int:
        """The GPUs `gpus` is checked against: `local`, this machine's (a remote kind: its own)."""
        return local

    def local_processes(self, cfg: DictConfig, rec) -> int:
        """Training processes this job process starts on this machine."""
        return rec.tasks(cfg) if self.starts_processes else 1

    def chief_here(self, rec) -> bool:
        """Whether the chief's training process runs beside this job process (its checkpoint.dir
        is this machine's): always for a strategy of one process."""
        return self.starts_processes or not rec.cluster_jobs

    def spans_machines(self, cfg: DictConfig, rec) -> bool:
        """Whether the job's training processes may run on several machines."""
        return not self.starts_processes and rec.num_workers(cfg) > 1

    def srun_tasks(self, cfg: DictConfig, rec) -> Optional[int]:
        """Slurm tasks hydra/launcher=slurm starts for one job: one per process of the strategy's
        cluster when this kind makes each process a Slurm task; None: one task, which starts (or
        is) the job's processes."""
        return None

    def first_task(self, env: Mapping[str, str]) -> bool:
        """Whether this process is the one task of a job that writes the sweep's record of it."""
        return True

    # -- the training process ------------------------------------------------------------------
    def resolver(self, cfg: DictConfig, rec, gpus: int):
        """TensorFlow's cluster resolver for a strategy `rec` with a cluster: TF_CONFIG's (the
        job process wrote it, or the engine set it)."""
        import tensorflow as tf

        return tf.distribute.cluster_resolver.TFConfigClusterResolver()


class External(Kind):
    """A kind whose job process is one task of a cluster someone else started."""

    def task_plan(self, rec, job_dir: Path, gpus: int, task: tuple,
                  addrs: Dict[str, str], peer_start_s: float = STARTUP_S) -> Plan:
        """The one process of task `task` = (job, index, {job: count}), the cluster's tasks at
        `addrs` (task name -> host:port), and what this task's job process watches
        (distexp.cluster.liveness): a peer not listening `peer_start_s` after this task's own
        server fails the job, naming it; with server tasks (ps) they stop when the coordinator is
        gone (ChiefWatch) and the coordinator fails when a server it saw is gone (ServerWatch)."""
        kind, index, counts = task
        rec.check_cluster(counts)
        workers = rec.workers_in(counts)
        p = Plan(names=[task_name(kind, index)], replica_workers=workers,
                 sync_workers=rec.sync_of(workers), gpus_per_worker=gpus,
                 logs_to_mlflow=rec.is_chief_task(kind, index, counts), job_dir=job_dir,
                 task=f"{kind}:{index}")
        p.hosts = {name: a.rpartition(":")[0] for name, a in addrs.items()}
        me = p.names[0]
        peers = {n: a for n, a in addrs.items() if n != me}
        startup = Startup(addrs.get(me), peer_start_s)
        if not rec.server_roles:  # every task trains: a peer that never started fails the job
            p.until = ServerWatch(peers, startup=startup, lost=False)
        elif me == "chief":
            p.until = ServerWatch(peers, startup=startup)
        else:
            p.until = ChiefWatch(addrs["chief"], startup=startup)
        return p


REGISTRY = Registry("cluster", base="Kind (distexp.cluster.kinds.register)")
register = REGISTRY.add


def of(cfg: DictConfig) -> Kind:
    """The kind of `cfg.cluster`; `cluster.record` (a module path) is imported first, so a kind
    defined outside distexp registers itself."""
    return REGISTRY.load(cfg.cluster.name, cfg.cluster.get("record"))


def plan(cfg: DictConfig, job_dir: Path, gpus: int, visible: Optional[int] = None) -> Plan:
    """`gpus`: what `gpus` resolved to on this machine (check_gpus: per worker); `visible`: the GPUs
    this machine shows (default `gpus`, what gpus=null resolves to). A kind that starts every
    process here (cluster=local) splits the visible GPUs between its workers, `gpus` each; any
    other kind's one process gets `gpus`."""
    rec = strategies.of(cfg)
    kind = of(cfg)
    if not rec.cluster_jobs:  # one training process
        return kind.one_process(cfg, rec, job_dir, gpus)
    return kind.plan(cfg, rec, job_dir, gpus if visible is None or not kind.starts_processes
                     else visible)
