"""cluster=ray: this job process places every task of the job on a Ray cluster's nodes (Ray Core:
one placement group per job, one bundle per TensorFlow task, one actor per bundle) and builds
TF_CONFIG from what the actors report (their node's address, a port each picked there), as the
Slurm kind computes it from Slurm's variables. Each actor runs distexp's ordinary trainer
(`python -m distexp.train.trainer`, as local and Slurm tasks do); its output comes back to this
process, into `<task>.log` in the job dir. Only the chief logs to MLflow, through this process
(the job dir is the chief's: it must be on a path every node sees, docs/strategies-and-clusters.md).

The plan without Ray (the bundles, the refusal lines, the cluster from the reports) is
distexp.cluster.ray_plan; distexp.cluster.ray_run talks to Ray (imported only once a job runs,
after the extra's check: distexp.extras)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from distexp.cluster.kinds import ClusterConfig, Kind, register
from distexp.cluster.processes import Plan
from distexp.fields import key


@dataclass
class RayConfig(ClusterConfig):
    address: str = key("auto", "the Ray cluster: auto (RAY_ADDRESS, else a Ray this job starts on "
                       "this machine and stops at its end), host:port (its GCS), or "
                       "ray://host:10001 (Ray Client)")
    placement: str = key("spread", "spread (one task per node where the cluster allows, else "
                         "several on a node) or pack (as few nodes as possible)")
    cpus: float = key(1.0, "CPUs each task's actor reserves on its node")
    start_timeout: float = key(120.0, "seconds to wait for the cluster to place every task before "
                               "the job fails naming what it asked for")


@register
class Ray(Kind):
    name = "ray"
    schema = RayConfig
    # the job's processes run on the Ray cluster's nodes: this machine's GPUs are not theirs, and
    # the chief's files (checkpoints) are its node's
    remote = True

    def check(self, node: DictConfig) -> None:
        """address: auto, host:port or ray://host:port; placement: spread or pack; cpus and
        start_timeout: > 0 (before Ray is imported or reached)."""
        from distexp.cluster import ray_plan
        from distexp.errors import UserError

        super().check(node)
        address = str(node.address)
        host, port = ray_plan.host_port(address)
        if address != "auto" and not (host and port.isdigit() and 0 < int(port) < 65536):
            raise UserError(f"cluster.address: received {address!r}; valid: auto, host:port (the "
                            "cluster's GCS, e.g. 127.0.0.1:6379) or ray://host:10001")
        ray_plan.check_placement(str(node.placement))
        for name in ("cpus", "start_timeout"):
            if not node[name] > 0:
                raise UserError(f"cluster.{name}: received {node[name]}; expected a number > 0")

    def plan(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        """One task per process of the strategy, each a bundle; Ray is reached by the plan's
        `acquire` (distexp.cluster.ray_run.RayPlan)."""
        from distexp.cluster import ray_run

        return ray_run.job_plan(cfg, rec, job_dir)

    def one_process(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        """mirrored, one_device, central: one actor on one node, with its `gpus`."""
        return self.plan(cfg, rec, job_dir, gpus)

    def visible_gpus(self, cfg: DictConfig, local: int) -> int:
        """A task's GPUs are its node's: `gpus` each (null: 0), checked against the cluster when
        the job is placed."""
        return int(cfg.gpus or 0)

    def chief_here(self, rec) -> bool:
        return False

    def spans_machines(self, cfg: DictConfig, rec) -> bool:
        return True

