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

Every process runs the same command (`python -m distexp.trainer`); its role comes from the cluster
resolver, as on a real cluster. On a GPU machine the visible GPUs are split between local workers
(CUDA_VISIBLE_DEVICES); `gpus` is per worker.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from omegaconf import DictConfig

from distexp import launch, tracking
from distexp.config import UserError

# A trainer exits with this code when it cannot listen on its port (EX_TEMPFAIL): the job process
# then picks other ports and starts the cluster again (local clusters only).
PORT_IN_USE_EXIT = 75
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
        return _watch(cfg, p, lambda: {("chief" if job == "chief" else f"{job}-{i}"): a
                                       for job, addrs in json.loads(raw)["cluster"].items()
                                       for i, a in enumerate(addrs)})
    if cl == "slurm":
        p = _external(cfg, job_dir, gpus, *_slurm_task(cfg, os.environ))
        return _watch(cfg, p, lambda: slurm_addresses(cfg, os.environ))
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


# Slurm's per-step variables: set inside `srun` (and submitit's tasks), absent in a batch script.
SLURM_STEP_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                   "SLURM_STEP_TASKS_PER_NODE")
# Ports of a Slurm job when cluster.port is null: a block per job and step, below Linux's ephemeral
# range (32768-60999), so two jobs on one node never share one (the resolver's fixed default, 8888,
# made concurrent jobs collide). Task k on a node listens on block start + k.
SLURM_PORT_FIRST, SLURM_PORT_BLOCK, SLURM_PORT_BLOCKS = 10000, 32, 700


def slurm_port_base(cfg: DictConfig, env) -> int:
    """The resolver's port_base: cluster.port, else a block derived from the job and step ids
    (every task of a step computes the same one; consecutive jobs get consecutive blocks)."""
    if cfg.cluster.port:
        return int(cfg.cluster.port)
    job, step = str(env.get("SLURM_JOB_ID") or "0"), str(env.get("SLURM_STEP_ID") or "0")
    job, step = int(job) if job.isdigit() else 0, int(step) if step.isdigit() else 0
    return SLURM_PORT_FIRST + SLURM_PORT_BLOCK * ((job * 4 + step % 4) % SLURM_PORT_BLOCKS)


def slurm_step(env):
    """(this task's rank, the step's task count) from Slurm's step variables, or one line saying
    why this process is not a task of a Slurm step."""
    missing = [v for v in SLURM_STEP_VARS if not env.get(v)]
    if missing and env.get("SLURM_NTASKS"):
        raise UserError(f"cluster: received 'slurm' in a Slurm job (SLURM_JOB_ID="
                        f"{env.get('SLURM_JOB_ID', '?')}, SLURM_NTASKS={env['SLURM_NTASKS']}) but "
                        f"outside a job step ({', '.join(missing)} not set): a batch script must "
                        "start the tasks with srun: `srun python -m distexp ... cluster=slurm`")
    if missing:
        raise UserError(f"cluster: received 'slurm' but {', '.join(missing)} are not set: this is "
                        "not a Slurm task; run it under srun (`srun -n2 python -m distexp ...`) or "
                        "with hydra/launcher=slurm")
    try:
        return int(env["SLURM_PROCID"]), int(env["SLURM_STEP_NUM_TASKS"])
    except ValueError:
        raise UserError(f"SLURM_PROCID / SLURM_STEP_NUM_TASKS: received {env['SLURM_PROCID']!r} / "
                        f"{env['SLURM_STEP_NUM_TASKS']!r}; expected integers") from None


def _slurm_task(cfg: DictConfig, env):
    """(task type, index, {job: count}) as SlurmClusterResolver assigns them: ranks in the
    alphabetical order of the job names (chief, ps, worker), whatever order `jobs` lists them."""
    rank, ntasks = slurm_step(env)
    counts = slurm_jobs(cfg, ntasks)
    start = 0
    for kind in sorted(counts):
        if rank < start + counts[kind]:
            return kind, rank - start, counts
        start += counts[kind]
    raise UserError(f"SLURM_PROCID: received {rank}; the step has {ntasks} tasks")


def slurm_tasks(cfg) -> int:
    """Slurm tasks a cluster=slurm job needs: one per worker (+ ps + 1 coordinator for ps)."""
    if _layout(cfg) == "ps":
        return 1 + int(cfg.workers) + int(cfg.ps)
    return int(cfg.workers)


def slurm_jobs(cfg: DictConfig, ntasks: int) -> Dict[str, int]:
    """The `jobs` argument of SlurmClusterResolver for this strategy; `workers` (and `ps`) must
    match the tasks Slurm started, never silently train another cluster than asked."""
    need = slurm_tasks(cfg)
    if ntasks != need:
        what = (f"workers={cfg.workers} ps={cfg.ps} (1 coordinator + {cfg.workers} workers + "
                f"{cfg.ps} ps)" if _layout(cfg) == "ps" else f"workers={cfg.workers}")
        if _layout(cfg) != "ps":
            fix = f"workers={ntasks}"
        elif ntasks - 1 - int(cfg.ps) >= 1:
            fix = f"workers={ntasks - 1 - int(cfg.ps)}"
        else:
            fix = "ps=1 with at least 3 tasks"
        raise UserError(f"workers: received {what}, which needs {need} Slurm tasks; this step has "
                        f"{ntasks} (SLURM_STEP_NUM_TASKS). Set {fix}, or start {need} tasks "
                        f"(srun -n{need}; hydra/launcher=slurm follows workers by itself)")
    if _layout(cfg) != "ps":
        return {"worker": ntasks}
    return {"chief": 1, "worker": int(cfg.workers), "ps": int(cfg.ps)}


def is_chief_task(layout: str, kind: str, index: int, counts: Dict[str, int]) -> bool:
    """The task that logs: the chief, or worker 0 of a multiworker cluster without one."""
    if kind == "chief":
        return True
    return layout == "multiworker" and kind == "worker" and index == 0 and "chief" not in counts


def _layout(cfg: DictConfig) -> str:
    """single / multiworker / ps: the strategy record's process layout (distexp.strategies)."""
    from distexp.config import strategy_record

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


def _watch(cfg: DictConfig, p: Plan, addresses) -> Plan:
    """ps on an external cluster: server tasks stop when the coordinator is gone (ChiefWatch); the
    coordinator fails when a server it saw is gone (ServerWatch)."""
    if _layout(cfg) != "ps":
        return p
    addrs = addresses()
    if p.names[0] == "chief":
        p.until = ServerWatch({n: a for n, a in addrs.items() if n != "chief"})
    else:
        p.until = ChiefWatch(addrs["chief"])
    return p


def slurm_addresses(cfg: DictConfig, env) -> Dict[str, str]:
    """Task name -> address, as SlurmClusterResolver.cluster_spec() computes them: hosts sorted,
    task k on a host at port_base + k, ranks over the job names in alphabetical order."""
    hosts = slurm_hosts(env["SLURM_STEP_NODELIST"])
    per_host = []
    for part in env["SLURM_STEP_TASKS_PER_NODE"].split(","):
        n, _, times = part.partition("(x")
        per_host += [int(n)] * int(times.rstrip(")") or 1)
    base = slurm_port_base(cfg, env)
    addrs = [f"{h}:{base + k}" for h, n in sorted(zip(hosts, per_host)) for k in range(n)]
    jobs = slurm_jobs(cfg, len(addrs))
    names = [("chief" if kind == "chief" else f"{kind}-{i}") for kind in sorted(jobs)
             for i in range(jobs[kind])]
    return dict(zip(names, addrs))


def slurm_hosts(nodelist: str) -> List[str]:
    """A Slurm node list (`n[1-3],m5`) as host names, as the resolver expands it."""
    if "[" not in nodelist:
        return [h for h in nodelist.split(",") if h]
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                             text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as ex:
        raise UserError(f"SLURM_STEP_NODELIST: received {nodelist!r}, which `scontrol show "
                        f"hostnames` could not expand ({ex})") from None
    return out.split()


class ChiefWatch:
    """For a ps worker/ps server task that someone else started (srun, TFJob): true once the job is
    over. Such a server never exits by itself (Server.join()) and under Slurm nobody stops it, so
    the task's job process watches the chief (the coordinator) listen on its gRPC address: seen
    listening, then refused twice in a row = the coordinator exited (finished or failed) -> stop
    the server, exit 0 (the chief's task carries the job's outcome). Never seen within
    `startup_s` = the coordinator never started: a failure, not a hang."""

    STARTUP_S, EVERY_S = 600.0, 1.0

    def __init__(self, address: str, startup_s: float = STARTUP_S):
        host, _, port = address.rpartition(":")
        self.address, self.host, self.port = address, host, int(port)
        self.startup_s, self.t0 = startup_s, time.monotonic()
        self.seen, self.misses, self.next = False, 0, 0.0

    def listening(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=2):
                return True
        except OSError:
            return False

    def __call__(self) -> bool:
        now = time.monotonic()
        if now < self.next:
            return False
        self.next = now + self.EVERY_S
        if self.listening():
            self.seen, self.misses = True, 0
            return False
        if self.seen:
            self.misses += 1
            return self.misses >= 2
        if now - self.t0 > self.startup_s:
            raise TimeoutError(f"the coordinator (chief) never listened on {self.address} in "
                               f"{self.startup_s:g} s")
        return False


class PeerLost(RuntimeError):
    """A server task of the job went away while the coordinator trained."""


class ServerWatch:
    """For the coordinator of a ps cluster someone else started: a worker or ps server seen
    listening that then refuses connections twice in a row has died (its task was killed or
    failed). TensorFlow's coordinator would carry on with the other workers (its fault tolerance
    waits for a restart nobody does here) and the figures would mix cluster sizes: the job fails,
    naming the server, as it does on a local cluster."""

    def __init__(self, servers: Dict[str, str]):
        self.watches = {name: ChiefWatch(addr, startup_s=float("inf"))
                        for name, addr in servers.items()}

    def __call__(self) -> bool:
        for name, w in self.watches.items():
            if w():
                raise PeerLost(f"{name} stopped answering at {w.address}: its task ended while "
                               "the job was still running")
        return False
