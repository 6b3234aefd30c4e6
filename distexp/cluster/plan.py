"""Which training processes a job needs, and what each one is told (no TensorFlow here).

- the layout comes from the strategy's record (distexp.strategies: its cluster's jobs, which of
  them train, serve or log); a strategy without a cluster (one_device, mirrored, central, tpu):
  one trainer process, the chief.
- multiworker, cluster=local: `workers` processes worker-0..N-1 on 127.0.0.1, each with its
  TF_CONFIG; worker-0 is the chief (MultiWorkerMirroredStrategy's convention without a chief task).
- ps, cluster=local: chief (the ClusterCoordinator: trains, logs, prints), worker-0..N-1 and
  ps-0..P-1 servers (`server=True`: they never exit by themselves and are stopped at the end).
- cluster=tf_config / slurm: this job process is ONE task of a cluster someone else started
  (Kubeflow TFJob, Vertex AI, srun): one trainer process; TF_CONFIG or the SLURM_* variables reach
  it through the environment. Only the chief's job process opens an MLflow run. Slurm roles,
  addresses and ports are computed here exactly as SlurmClusterResolver computes them. For ps,
  nobody else stops the servers: each server task watches the coordinator and stops once it is
  gone, the coordinator watches the servers and fails the job if one dies (ChiefWatch,
  ServerWatch).

Every process runs the same command (`python -m distexp.train.trainer`); its role comes from the cluster
resolver, as on a real cluster. On a GPU machine the visible GPUs are split between local workers
(CUDA_VISIBLE_DEVICES); `gpus` is per worker.
"""
from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from omegaconf import DictConfig

from distexp.job import launch
from distexp.cluster.liveness import ChiefWatch, ServerWatch
from distexp.cluster.slurm_env import check_placement, slurm_addresses, slurm_jobs, slurm_step
from distexp.errors import UserError
from distexp.strategies.record import task_name

PORT_ATTEMPTS = 3


@dataclass
class Plan:
    """The processes of one job, before they start."""

    names: List[str]                      # first = the chief (logs, prints)
    replica_workers: int = 1              # processes that hold replicas (num_workers)
    sync_workers: int = 1                 # workers whose replicas share one global batch
    gpus_per_worker: int = 0
    task_gpus: Dict[str, int] = field(default_factory=dict)  # local processes without replicas: 0
    logs_to_mlflow: bool = True           # false for a non-chief task of an external cluster
    extra_env: Dict[str, Dict[str, str]] = field(default_factory=dict)
    servers: List[str] = field(default_factory=list)
    job_dir: Optional[Path] = None
    task: str = "chief"                   # tf_config / slurm: this process's task, for messages
    # local clusters: job name -> addresses; rebuilt by `new_ports` after a port clash
    cluster: Dict[str, List[str]] = field(default_factory=dict)
    retry_ports: bool = False
    # ps on an external cluster (launch.run polls it): a server task's ChiefWatch, true once the
    # coordinator is gone (stop the server, exit 0); the coordinator's ServerWatch, raises when a
    # server it saw is gone (the job fails)
    until: Optional[Callable[[], bool]] = None
    # task name -> the host it runs on (external clusters: as the resolver computes it; the chief's
    # run records it as the tag distexp.task_hosts)
    hosts: Dict[str, str] = field(default_factory=dict)
    # Slurm: the step's id, tagged on the chief's run (distexp.tracking.node_metrics finds it)
    cluster_id: Optional[str] = None
    # the first task on a node without the chief: samples that node's system metrics into the run
    samples_node: bool = False

    def several_hosts(self) -> bool:
        return len(set(self.hosts.values())) > 1

    def processes(self, config_path: Path, env: Dict[str, str]) -> List[launch.Proc]:
        procs = []
        for i, name in enumerate(self.names):
            e = dict(env)
            e.update(self.extra_env.get(name, {}))
            if self.cluster:
                e["TF_CONFIG"] = tf_config(self.cluster, name)
            e["DISTEXP_TASK"] = name
            procs.append(launch.Proc(name=name, cmd=launch.trainer_cmd(config_path), env=e,
                                     log=self.job_dir / f"{name}.log", console=(i == 0),
                                     server=name in self.servers))
        return procs

    def new_ports(self) -> None:
        """After a port clash: the same cluster on fresh ports picked by the OS."""
        ports = iter(free_ports(sum(len(v) for v in self.cluster.values())))
        self.cluster = {job: [f"{a.rsplit(':', 1)[0]}:{next(ports)}" for a in addrs]
                        for job, addrs in self.cluster.items()}


def plan(cfg: DictConfig, job_dir: Path, gpus: int) -> Plan:
    """`gpus`: what `gpus` resolved to on this machine (check_gpus)."""
    rec = _record(cfg)
    if not rec.cluster_jobs:  # one training process
        return Plan(names=["chief"], job_dir=job_dir, gpus_per_worker=gpus)
    cl = cfg.cluster.name
    if cl == "local":
        return _local(cfg, rec, job_dir, gpus)
    if cl == "tf_config":
        raw = os.environ.get("TF_CONFIG")
        p = _external(cfg, rec, job_dir, gpus, *_tf_config_task(cfg, raw))
        return _watch(rec, p, {task_name(job, i): a
                               for job, addrs in json.loads(raw)["cluster"].items()
                               for i, a in enumerate(addrs)})
    if cl == "slurm":
        p = _external(cfg, rec, job_dir, gpus, *_slurm_task(cfg, rec, os.environ))
        p = _watch(rec, p, slurm_addresses(cfg, os.environ, rec))
        env = os.environ
        if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
            p.cluster_id = f"slurm:{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
        chief = "chief" if "chief" in p.hosts else "worker-0"
        p.samples_node = (not p.logs_to_mlflow and env.get("SLURM_LOCALID") == "0"
                          and p.hosts.get(p.names[0]) != p.hosts.get(chief))
        return p
    raise UserError(f"cluster: received {cl!r}; valid: local, tf_config, slurm")


# -- local ---------------------------------------------------------------------------------------

def _local(cfg: DictConfig, rec, job_dir: Path, visible: int) -> Plan:
    n, host = rec.num_workers(cfg), str(cfg.cluster.host)
    if host not in ("127.0.0.1", "localhost"):
        raise UserError(f"cluster.host: received {host!r}; a local cluster binds to 127.0.0.1 only "
                        "(for several hosts use cluster=tf_config or cluster=slurm)")
    names, jobs = rec.task_names(cfg), rec.jobs(cfg)
    per_worker, visible_ids = split_gpus(cfg.gpus, visible, n)
    ports = list(range(cfg.cluster.port, cfg.cluster.port + len(names))) if cfg.cluster.port \
        else free_ports(len(names))
    addrs = iter(f"127.0.0.1:{p}" for p in ports)
    cluster = {job: [next(addrs) for _ in range(count)] for job, count in jobs.items()}
    extra, gpus, i = {}, {}, 0
    for name in names:
        env, gpus[name] = {"CUDA_VISIBLE_DEVICES": ""}, 0
        if name.rpartition("-")[0] in rec.replica_jobs and per_worker:  # the i-th replica worker
            env = {"CUDA_VISIBLE_DEVICES": ",".join(visible_ids[i * per_worker:(i + 1) * per_worker])}
            gpus[name] = per_worker
            i += 1
        if visible == 0 and "CUDA_VISIBLE_DEVICES" not in os.environ:
            env.pop("CUDA_VISIBLE_DEVICES")  # CPU machine: leave the environment alone
        extra[name] = env
    return Plan(names=names, replica_workers=n, sync_workers=rec.sync_of(n),
                gpus_per_worker=per_worker, task_gpus=gpus, extra_env=extra, servers=rec.servers(cfg),
                job_dir=job_dir, cluster=cluster, retry_ports=True)


def split_gpus(requested: Optional[int], visible: int, workers: int):
    """(GPUs per worker, the visible GPU ids) for `workers` local workers sharing this machine.

    null = the visible GPUs split evenly; N = N per worker, which needs N x workers visible."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip()] if env else [str(i) for i in range(visible)]
    ids = ids[:visible]
    if requested is None:
        return visible // workers, ids
    if requested * workers > visible:
        raise UserError(f"gpus: received {requested} per worker; {workers} local workers need "
                        f"{requested * workers} GPU(s) and {visible} are visible. Use gpus="
                        f"{visible // workers} or gpus=0 (CPU)")
    return requested, ids


def free_ports(n: int) -> List[int]:
    """`n` distinct ports free right now on every interface (TensorFlow's gRPC server listens on
    all of them). Another process may take one before the trainer binds it: the job then retries."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def tf_config(cluster: Dict[str, List[str]], name: str) -> str:
    """TF_CONFIG for process `name` (chief, worker-1, ps-0) of `cluster`."""
    job, _, index = name.partition("-")
    return json.dumps({"cluster": cluster, "task": {"type": job, "index": int(index or 0)}})


# -- external clusters ---------------------------------------------------------------------------

def _tf_config_task(cfg: DictConfig, raw: Optional[str]):
    """(task type, index, {job: count}) from TF_CONFIG, checked without TensorFlow."""
    if not raw:
        raise UserError("cluster: received 'tf_config' but TF_CONFIG is not set; the engine (TFJob, "
                        "Vertex AI) sets it, or set it yourself: {\"cluster\": {...}, \"task\": "
                        "{\"type\": \"worker\", \"index\": 0}}")
    try:
        spec = json.loads(raw)
        cluster, task = spec["cluster"], spec["task"]
        kind, index = str(task["type"]), int(task.get("index", 0))
        counts = {str(j): len(a) for j, a in cluster.items()}
        if not all(isinstance(a, list) and all(_address(x) for x in a) for a in cluster.values()):
            raise ValueError("every job must list host:port strings")
    except (ValueError, KeyError, TypeError, AttributeError) as ex:
        detail = ex.args[0] if isinstance(ex, KeyError) else ex
        raise UserError(f"TF_CONFIG: received {raw[:120]!r}; expected JSON {{\"cluster\": {{job: "
                        f"[host:port, ...]}}, \"task\": {{\"type\": job, \"index\": i}}}} "
                        f"({type(ex).__name__}: {detail})") from None
    if kind not in counts or not 0 <= index < counts[kind]:
        raise UserError(f"TF_CONFIG: received task {kind}:{index}; the cluster has "
                        f"{', '.join(f'{j} x{c}' for j, c in counts.items())}")
    return kind, index, counts


def _address(x) -> bool:
    host, _, port = x.rpartition(":") if isinstance(x, str) else ("", "", "")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


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


def _record(cfg: DictConfig):
    """The strategy's record: it answers every layout question (distexp.strategies)."""
    from distexp.config.resolved import strategy_record

    return strategy_record(cfg)


def _external(cfg: DictConfig, rec, job_dir: Path, gpus: int, kind: str, index: int,
              counts: Dict[str, int]) -> Plan:
    rec.check_cluster(counts)
    workers = rec.workers_in(counts)
    return Plan(names=[task_name(kind, index)], replica_workers=workers,
                sync_workers=rec.sync_of(workers), gpus_per_worker=gpus,
                logs_to_mlflow=rec.is_chief_task(kind, index, counts), job_dir=job_dir,
                task=f"{kind}:{index}")


def _watch(rec, p: Plan, addrs: Dict[str, str]) -> Plan:
    """The tasks' hosts, and what this task's job process watches (distexp.cluster.liveness): a
    peer that never started fails the job, naming it; with server tasks (ps) they stop when the
    coordinator is gone (ChiefWatch) and the coordinator fails when a server it saw is gone
    (ServerWatch)."""
    p.hosts = {name: a.rpartition(":")[0] for name, a in addrs.items()}
    me = p.names[0]
    peers = {n: a for n, a in addrs.items() if n != me}
    if not rec.server_roles:  # every task trains: a peer that never started fails the job
        p.until = ServerWatch(peers, own=addrs.get(me), lost=False)
    elif me == "chief":
        p.until = ServerWatch(peers, own=addrs.get(me))
    else:
        p.until = ChiefWatch(addrs["chief"], own=addrs.get(me))
    return p
