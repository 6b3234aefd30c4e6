"""Which training processes a job needs, and what each one is told (no TensorFlow here).

- the layout comes from the strategy's record (distexp.strategies): "single" (one_device, mirrored,
  central, tpu): one trainer process, the chief.
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
from distexp import tracking
from distexp.cluster.liveness import ChiefWatch, ServerWatch
from distexp.cluster.slurm_env import check_placement, slurm_addresses, slurm_jobs, slurm_step
from distexp.errors import UserError

PORT_ATTEMPTS = 3


@dataclass
class Plan:
    """The processes of one job, before they start."""

    names: List[str]                      # first = the chief (logs, prints)
    replica_workers: int = 1              # processes that hold replicas (num_workers)
    sync_workers: int = 1                 # workers whose replicas share one global batch
    gpus_per_worker: int = 0
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

    def processes(self, config_path: Path, env: Dict[str, str], run_id: Optional[str],
                  uri: str) -> List[launch.Proc]:
        procs = []
        for i, name in enumerate(self.names):
            e = dict(env)
            e.update(self.extra_env.get(name, {}))
            if self.cluster:
                e["TF_CONFIG"] = tf_config(self.cluster, name)
            e["DISTEXP_TASK"] = name
            if i == 0 and run_id:
                e[tracking.RUN_ID_ENV] = run_id
                e[tracking.URI_ENV] = uri
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
    layout = _layout(cfg)
    if layout == "single":
        return Plan(names=["chief"], job_dir=job_dir, gpus_per_worker=gpus)
    if cfg.strategy.communication == "nccl" and layout == "multiworker" and gpus == 0:
        raise UserError("strategy.communication: received 'nccl'; NCCL needs GPUs and this job "
                        "trains on CPU: use auto or ring")
    cl = cfg.cluster.name
    if cl == "local":
        return _local(cfg, job_dir, gpus)
    if cl == "tf_config":
        raw = os.environ.get("TF_CONFIG")
        p = _external(cfg, job_dir, gpus, *_tf_config_task(cfg, raw))
        return _watch(cfg, p, {("chief" if job == "chief" else f"{job}-{i}"): a
                               for job, addrs in json.loads(raw)["cluster"].items()
                               for i, a in enumerate(addrs)})
    if cl == "slurm":
        p = _external(cfg, job_dir, gpus, *_slurm_task(cfg, os.environ))
        p = _watch(cfg, p, slurm_addresses(cfg, os.environ, _layout(cfg)))
        env = os.environ
        if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
            p.cluster_id = f"slurm:{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
        chief = "chief" if "chief" in p.hosts else "worker-0"
        p.samples_node = (not p.logs_to_mlflow and env.get("SLURM_LOCALID") == "0"
                          and p.hosts.get(p.names[0]) != p.hosts.get(chief))
        return p
    raise UserError(f"cluster: received {cl!r}; valid: local, tf_config, slurm")


# -- local ---------------------------------------------------------------------------------------

def _local(cfg: DictConfig, job_dir: Path, visible: int) -> Plan:
    n, host = int(cfg.workers), str(cfg.cluster.host)
    if host not in ("127.0.0.1", "localhost"):
        raise UserError(f"cluster.host: received {host!r}; a local cluster binds to 127.0.0.1 only "
                        "(for several hosts use cluster=tf_config or cluster=slurm)")
    workers = [f"worker-{i}" for i in range(n)]
    ps = [f"ps-{i}" for i in range(int(cfg.ps))] if _layout(cfg) == "ps" else []
    coordinator = ["chief"] if _layout(cfg) == "ps" else []
    per_worker, visible_ids = split_gpus(cfg.gpus, visible, n)
    count = len(coordinator) + n + len(ps)
    ports = list(range(cfg.cluster.port, cfg.cluster.port + count)) if cfg.cluster.port \
        else free_ports(count)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    cluster = {}
    if coordinator:
        cluster["chief"] = addrs[:1]
    cluster["worker"] = addrs[len(coordinator):len(coordinator) + n]
    if ps:
        cluster["ps"] = addrs[len(coordinator) + n:]
    extra = {}
    for name in coordinator + workers + ps:
        env = {"DISTEXP_GPUS": "0", "CUDA_VISIBLE_DEVICES": ""}
        if name.startswith("worker-") and per_worker:
            i = int(name.split("-")[1])
            env = {"DISTEXP_GPUS": str(per_worker),
                   "CUDA_VISIBLE_DEVICES": ",".join(visible_ids[i * per_worker:(i + 1) * per_worker])}
        if visible == 0 and "CUDA_VISIBLE_DEVICES" not in os.environ:
            env.pop("CUDA_VISIBLE_DEVICES")  # CPU machine: leave the environment alone
        extra[name] = env
    is_ps = _layout(cfg) == "ps"
    return Plan(names=coordinator + workers + ps, replica_workers=n,
                sync_workers=1 if is_ps else n, gpus_per_worker=per_worker,
                extra_env=extra, servers=(workers + ps) if is_ps else [], job_dir=job_dir,
                cluster=cluster, retry_ports=True)


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


def _slurm_task(cfg: DictConfig, env):
    """(task type, index, {job: count}) as SlurmClusterResolver assigns them: ranks in the
    alphabetical order of the job names (chief, ps, worker), whatever order `jobs` lists them."""
    rank, ntasks = slurm_step(env)
    counts = slurm_jobs(cfg, ntasks, _layout(cfg))
    check_placement(env, rank)
    start = 0
    for kind in sorted(counts):
        if rank < start + counts[kind]:
            return kind, rank - start, counts
        start += counts[kind]
    raise UserError(f"SLURM_PROCID: received {rank}; the step has {ntasks} tasks")


def is_chief_task(layout: str, kind: str, index: int, counts: Dict[str, int]) -> bool:
    """The task that logs: the chief, or worker 0 of a multiworker cluster without one."""
    if kind == "chief":
        return True
    return layout == "multiworker" and kind == "worker" and index == 0 and "chief" not in counts


def _layout(cfg: DictConfig) -> str:
    """single / multiworker / ps: the strategy record's process layout (distexp.strategies)."""
    from distexp.config.resolved import strategy_record

    return strategy_record(cfg).layout


def _external(cfg: DictConfig, job_dir: Path, gpus: int, kind: str, index: int,
              counts: Dict[str, int]) -> Plan:
    strategy, layout = cfg.strategy.name, _layout(cfg)
    if layout == "ps" and not {"chief", "worker", "ps"} <= set(counts):
        raise UserError(f"strategy={strategy}: the cluster has {', '.join(counts)}; it needs chief "
                        "(the coordinator), worker and ps jobs")
    if layout == "multiworker" and "ps" in counts:
        raise UserError(f"strategy={strategy}: the cluster has a ps job; use strategy=ps")
    chief = is_chief_task(layout, kind, index, counts)
    workers = counts.get("worker", 0) + (counts.get("chief", 0) if layout == "multiworker" else 0)
    return Plan(names=["chief" if kind == "chief" else f"{kind}-{index}"], replica_workers=workers,
                sync_workers=1 if layout == "ps" else workers, gpus_per_worker=gpus,
                logs_to_mlflow=chief, job_dir=job_dir, task=f"{kind}:{index}")


def _watch(cfg: DictConfig, p: Plan, addrs: Dict[str, str]) -> Plan:
    """The tasks' hosts; ps on an external cluster: server tasks stop when the coordinator is gone
    (ChiefWatch); the coordinator fails when a server it saw is gone (ServerWatch)."""
    p.hosts = {name: a.rpartition(":")[0] for name, a in addrs.items()}
    if _layout(cfg) != "ps":
        return p
    if p.names[0] == "chief":
        p.until = ServerWatch({n: a for n, a in addrs.items() if n != "chief"})
    else:
        p.until = ChiefWatch(addrs["chief"])
    return p


