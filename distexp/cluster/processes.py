"""The processes of one job before they start (`Plan`, each a `Proc`), and what each is told: its TF_CONFIG, its
ports, its GPUs (no TensorFlow here). The cluster kinds (distexp.cluster.kinds) build a Plan.

A Plan is pure: building it starts nothing. What a job holds outside its processes (cluster=ray:
a connection, a placement group, actors; cluster=local: a network namespace) is taken by
`Plan.acquire` and given back by `Plan.release`, both called by distexp.job.lifecycle.execute.
A started trainer, wherever it runs, is a `TrainerProcess` (this machine's: `LocalProcess`, a
subprocess.Popen; a warm fork: distexp.job.warm_client.Child; a Ray task's: distexp.cluster.ray_tasks.RemoteProc)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence

from distexp.env import TASK
from distexp.errors import UserError

PORT_ATTEMPTS = 3


TRAINER = "distexp.train.trainer"


class TrainerProcess(Protocol):
    """A started training process as distexp.job.launch sees it, wherever it runs: its output
    (`stdout`, bytes until it exits), its exit status (`poll`, `wait`, as subprocess.Popen's), and
    a signal to its whole process group (its own children too)."""

    pid: int
    stdout: IO[bytes]

    def poll(self) -> Optional[int]: ...

    def wait(self, timeout: Optional[float] = None) -> int: ...

    def signal_group(self, sig: int) -> None: ...


def signal_group(pid: int, sig: int) -> None:
    """`sig` to the process group `pid` leads (a process started in its own session); nothing
    when it is gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalProcess:
    """A subprocess.Popen started in its own session, as a TrainerProcess."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.pid, self.stdout = popen.pid, popen.stdout

    @property
    def returncode(self) -> Optional[int]:
        return self.popen.returncode

    def poll(self) -> Optional[int]:
        return self.popen.poll()

    def wait(self, timeout: Optional[float] = None) -> int:
        return self.popen.wait(timeout)

    def signal_group(self, sig: int) -> None:
        signal_group(self.popen.pid, sig)


@dataclass
class Proc:
    """One process to start: its name (chief, worker-1, ps-0 ...), what it runs (`python -m
    module *argv`; a trainer's `config_path` is in its argv too, carried for a spawner that
    checks it), extra env, log file; once started, its `process`."""

    name: str
    module: str
    argv: Sequence[str]
    env: Mapping[str, str]
    log: Path
    config_path: Optional[Path] = None
    console: bool = False  # stream to our stdout too (the chief only)
    # A server that never exits by itself (a PS or worker server): stopped when the others end.
    server: bool = False
    process: Optional[TrainerProcess] = field(default=None, repr=False)
    returncode: Optional[int] = None

    @property
    def cmd(self) -> List[str]:
        """Its command line on this machine."""
        return [sys.executable, "-u", "-m", self.module, *self.argv]


def trainer_argv(config_path: Path, *extra: str) -> List[str]:
    """The trainer's arguments (`python -m distexp.train.trainer ...`)."""
    return ["--config", str(config_path), *extra]


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
    # ps on an external cluster (distexp.job.launch.run polls it): a server task's ChiefWatch, true once the
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
    # cluster=local with TensorFlow servers: the processes share a network namespace of their own
    # (distexp.cluster.netns), opened by the first `isolation`, closed by `release`; a string says
    # why the machine's network is used instead (a refusal, or dataset.download=true)
    isolate: bool = False
    netns: Any = field(default=None, repr=False)

    def spawner(self) -> Optional[Callable]:
        """What starts each process elsewhere (cluster=ray: through its task's actor), as
        distexp.job.launch.Spawn does; None: this machine starts them."""
        return None

    def acquire(self) -> None:
        """Take what the job holds outside its processes before they start (cluster=ray: connect,
        place the tasks, build the cluster from where they landed); a UserError line when it
        cannot, with nothing left held. Nothing by default: cluster=local's network namespace is
        opened by the first `isolation`."""

    def release(self) -> None:
        """Free what the job holds outside its processes (cluster=ray: actors, placement group;
        cluster=local: the network namespace's holder)."""
        if self.netns is not None and not isinstance(self.netns, str):
            self.netns.close()
            self.netns = None

    def isolation(self) -> Dict[str, str]:
        """What each process's environment gets to join the job's network namespace, opened now if
        it is not yet; {} where there is none (the line naming the open ports printed, each
        attempt: a retry moves them)."""
        from distexp.cluster import netns

        if self.isolate and self.netns is None:
            self.netns = netns.open_namespace()
        if isinstance(self.netns, str):
            print(netns.refused(self.ports(), self.netns, self.isolate), flush=True)
            return {}
        # a holder gone since: each process fails to join (never the machine's network instead)
        return {} if self.netns is None else self.netns.env()

    def ports(self) -> List[int]:
        return [int(a.rsplit(":", 1)[1]) for addrs in self.cluster.values() for a in addrs]

    def several_hosts(self) -> bool:
        return len(set(self.hosts.values())) > 1

    def gpu_ids(self) -> List[str]:
        """The GPUs (this machine's ids) the job's processes here train on: those each local
        process is pinned to, else the first `gpus_per_worker` visible ones (one process, or this
        task of an external cluster)."""
        pinned = [e["CUDA_VISIBLE_DEVICES"] for e in self.extra_env.values()
                  if "CUDA_VISIBLE_DEVICES" in e]
        if pinned:
            return [g for env in pinned for g in env.split(",") if g]
        return visible_ids(self.gpus_per_worker)

    def processes(self, config_path: Path, env: Dict[str, str]) -> List[Proc]:
        procs = []
        for i, name in enumerate(self.names):
            e = dict(env)
            e.update(self.extra_env.get(name, {}))
            if self.cluster:
                e["TF_CONFIG"] = tf_config(self.cluster, name)
            e[TASK] = name
            procs.append(Proc(name=name, module=TRAINER, argv=trainer_argv(config_path), env=e,
                              log=self.job_dir / f"{name}.log", config_path=config_path,
                              console=(i == 0), server=name in self.servers))
        return procs

    def new_ports(self) -> None:
        """After a port clash: the same cluster on fresh ports picked by the OS."""
        ports = iter(free_ports(sum(len(v) for v in self.cluster.values())))
        self.cluster = {job: [f"{a.rsplit(':', 1)[0]}:{next(ports)}" for a in addrs]
                        for job, addrs in self.cluster.items()}


def visible_ids(visible: int) -> List[str]:
    """The ids of this process's first `visible` GPUs: CUDA_VISIBLE_DEVICES's entries, else the
    driver's 0..visible-1."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"] if env else \
        [str(i) for i in range(visible)]
    return ids[:visible]


def split_gpus(requested: Optional[int], visible: int, workers: int):
    """(GPUs per worker, the visible GPU ids) for `workers` local workers sharing this machine.

    null = the visible GPUs split evenly; N = N per worker, which needs N x workers visible."""
    ids = visible_ids(visible)
    if requested is None:
        return visible // workers, ids
    if requested * workers > visible:
        fits = [f"gpus={visible // workers}"] if visible >= workers else []
        fits += [f"workers={visible // requested}"] if visible >= requested else []
        raise UserError(f"gpus: received {requested} per worker; {workers} local workers need "
                        f"{requested * workers} GPU(s) and {visible} are visible. Use "
                        f"{', '.join(fits)}{' or ' if fits else ''}gpus=0 (CPU)")
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
