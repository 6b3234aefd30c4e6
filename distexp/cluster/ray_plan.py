"""cluster=ray's plan, without Ray (unit-tested): the tasks a job places and their bundles, the
refusal lines of a job bigger than the cluster, TF_CONFIG's cluster from the actors' reports
(distexp.cluster.ray is the kind's record, distexp.cluster.ray_run the side that talks to Ray)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence, Tuple

from omegaconf import DictConfig

from distexp.errors import UserError

PLACEMENTS = ("spread", "pack")


@dataclass
class Task:
    """One TensorFlow task to place: its name (chief, worker-1, ps-0) and what its bundle holds."""

    name: str
    cpus: float
    gpus: int


def tasks(cfg: DictConfig, rec) -> List[Task]:
    """The job's tasks, the chief first: every task of the strategy's cluster (GPUs for those that
    hold replicas: `gpus` each, null = 0), or one task for a strategy of one process."""
    gpus, cpus = int(cfg.gpus or 0), float(cfg.cluster.cpus)
    if not rec.cluster_jobs:
        return [Task("chief", cpus, gpus)]
    return [Task(n, cpus, gpus if n.rpartition("-")[0] in rec.replica_jobs else 0)
            for n in rec.task_names(cfg)]


def bundles(ts: Sequence[Task]) -> List[Dict[str, float]]:
    """The placement group's bundles, one per task in order (a zero amount is left out: Ray
    refuses a bundle of zero)."""
    return [{k: v for k, v in (("CPU", t.cpus), ("GPU", float(t.gpus))) if v} for t in ts]


def strategy(placement: str, ts: Sequence[Task], nodes: int) -> str:
    """Ray's placement strategy: SPREAD (best effort: one task per node while nodes are left)
    for `spread`, PACK for `pack`."""
    return "PACK" if placement == "pack" or len(ts) == 1 else "SPREAD"


def host_port(address: str) -> Tuple[str, str]:
    """(host, port) of a Ray address: host:port (its GCS) or ray://host:port (Ray Client)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return host, port


def check_placement(placement: str) -> None:
    if placement not in PLACEMENTS:
        raise UserError(f"cluster.placement: received {placement!r}; valid: {', '.join(PLACEMENTS)}")


def offered(resources: Mapping[str, float]) -> str:
    """What a cluster offers, for messages: `2 CPU, 0 GPU over 2 node(s)`."""
    return f"{resources.get('CPU', 0):g} CPU, {resources.get('GPU', 0):g} GPU"


def check_fits(cfg: DictConfig, rec, ts: Sequence[Task], total: Mapping[str, float],
               nodes: Sequence[Mapping[str, float]], where: str) -> None:
    """One line (before TensorFlow) when the job asks for more than the cluster has: in total
    (ray.cluster_resources()) or for one task on any one node."""
    need_cpu, need_gpu = sum(t.cpus for t in ts), sum(t.gpus for t in ts)
    what = ", ".join(f"{k}={cfg[k]}" for k in (*rec.count_keys(), "gpus"))
    layout = " + ".join(f"{n} {j}" for j, n in rec.jobs(cfg).items()) or "1 process"
    has = f"the Ray cluster at {where} offers {offered(total)} over {len(nodes)} node(s) " \
          "(ray.cluster_resources())"
    if need_gpu > total.get("GPU", 0):
        raise UserError(f"gpus: received {cfg.gpus} per worker ({what}: {layout}), which needs "
                        f"{need_gpu:g} GPU(s); {has}. Set gpus=0 (CPU) or fewer workers")
    if need_cpu > total.get("CPU", 0):
        raise UserError(f"workers: received {what} ({layout}), which needs {need_cpu:g} CPU(s) "
                        f"(cluster.cpus={cfg.cluster.cpus:g} per task); {has}. Set fewer tasks "
                        "or a smaller cluster.cpus")
    most_gpu = max((n.get("GPU", 0) for n in nodes), default=0)
    most_cpu = max((n.get("CPU", 0) for n in nodes), default=0)
    t = max(ts, key=lambda t: (t.gpus, t.cpus))
    if t.gpus > most_gpu or t.cpus > most_cpu:
        raise UserError(f"gpus: received {cfg.gpus} per worker (cluster.cpus={cfg.cluster.cpus:g}):"
                        f" task {t.name} needs {t.gpus} GPU(s) and {t.cpus:g} CPU(s) on one node; "
                        f"the largest node of the Ray cluster at {where} has {most_gpu:g} GPU(s) "
                        f"and {most_cpu:g} CPU(s)")


def cluster_of(rec, cfg: DictConfig, reports: Mapping[str, Tuple[str, int]]) -> Dict[str, List[str]]:
    """TF_CONFIG's cluster from the actors' reports (task name -> (node address, port)), in the
    strategy's job order, as a local cluster's."""
    return {job: [f"{reports[_name(job, i)][0]}:{reports[_name(job, i)][1]}" for i in range(n)]
            for job, n in rec.jobs(cfg).items()}


def _name(job: str, index: int) -> str:
    from distexp.strategies.record import task_name

    return task_name(job, index)


def hosts_of(reports: Mapping[str, Tuple[str, int]], node_ids: Mapping[str, str]) -> Dict[str, str]:
    """Task name -> `address node <id's first 8>` (the run's tag distexp.task_hosts): two Ray nodes
    of one machine share an address, never a node id."""
    return {n: f"{a} node {node_ids[n][:8]}" for n, (a, _) in reports.items()}
