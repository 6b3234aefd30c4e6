"""cluster=ray, the side that talks to Ray (imported once a job runs; no TensorFlow): connect,
place the job (one placement group, one actor per task, each reporting its node and a free port
there), start each task's trainer through its actor, and release everything at the end.

To distexp.job.launch an actor's trainer is a process like a local one (`RemoteProc` answers as
subprocess.Popen does: its output, its exit status, a signal to its process group), so the job
process's own loop streams each task's output to `<task>.log`, fails the job naming the first task
that failed, and stops every task on Ctrl-C / SIGTERM / SIGHUP. A task whose actor dies (its node
lost, its worker killed) ends with one line naming the task and its node. Every actor and the
placement group belong to this process's Ray job: released by `RayPlan.release` at the job's end,
and by Ray itself if this process dies first.
"""
from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig

from distexp import env
from distexp.cluster import ray_compat
from distexp.cluster import ray_plan as plan_of
from distexp.cluster.processes import Plan
from distexp.console_lines import ERROR
from distexp.env import TASK
from distexp.errors import BAD_INPUT, FAILED, UserError

LOOPBACK = ("127.0.0.1", "localhost")
PROBE_S = 5.0
READ_S = 0.5
# A task failing as its peer's node goes (TensorFlow sees the socket close at once, Ray declares
# the actor dead seconds later): the failure waits this long at most for Ray's verdict on peers
# that stop answering, so the job names the lost task, not the one that saw it go.
LOSS_WAIT_S = 30.0
PING_S = 2.0
# The job process's environment a task is told (the rest is its node's own): what distexp and the
# job set for the trainers (their differences from this process's environment are sent too).
SENT_PREFIXES = (env.PREFIX, "MLFLOW_", "TF_")
NOT_SENT = ("CUDA_VISIBLE_DEVICES", "PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOME", "PWD")


def _gone() -> tuple:
    """What Ray raises when an actor, its node or the cluster is gone."""
    from ray.exceptions import RayError

    return RayError, ConnectionError, ValueError, TimeoutError


def _probe(address: str) -> None:
    """One line, in seconds, when nothing answers at `address` (Ray's own connect retries for a
    minute and more)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S):
            return
    except (OSError, ValueError) as ex:
        raise UserError(f"cluster.address: received {address!r}; no Ray cluster answers there "
                        f"({type(ex).__name__}: {ex}). Start one (ray start --head), or set "
                        "cluster.address=auto to start a Ray on this machine for the job") from None


def quiet() -> None:
    """A Ray distexp starts (for a job or a sweep) sends no usage statistics (Ray's default does,
    for a cluster `ray start` starts); set before Ray reads it, the user's own value kept. Ray's
    notice that token authentication is on (a warning on every start) stays off the console."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    logging.getLogger(ray_compat.AUTH_LOGGER).setLevel(logging.ERROR)


def token_auth() -> bool:
    """Token authentication as the `ray` CLI decides it for `ray start` (Ray 2.60): RAY_AUTH_MODE
    as the user set it; unset, token mode when a token is where Ray looks (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token). Asked only once a cluster refused a driver without
    one: a driver in token mode on a cluster without authentication gets no actor started. Whether
    token mode is on."""
    quiet()  # its "Token authentication is enabled ..." notice: not on the console
    return ray_compat.enable_token_auth()


def _token_said() -> str:
    """What the cluster refused: the token from where Ray found it, or no token at all."""
    mode = os.environ.get("RAY_AUTH_MODE", "")
    if mode and mode.lower() != "token":
        return f"requires a token, and RAY_AUTH_MODE={mode} here: set RAY_AUTH_MODE=token and"
    if mode.lower() != "token":
        return "requires a token and none was found (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)"
    where = next((f"${k}" for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH") if os.environ.get(k)),
                 "~/.ray/auth_token")
    return f"refused the token in {where}"


def _node_addresses(address: str) -> List[str]:
    """The addresses the cluster's live nodes registered with (its GCS, in a second), token mode
    set if the cluster asks for a token (token_auth); a refused token is one line naming what to
    set. Ray's C++ client warns on stderr first: kept off the console."""
    from ray.exceptions import AuthenticationError

    try:
        return _ask_gcs(address)
    except AuthenticationError:
        pass
    try:
        if token_auth():
            return _ask_gcs(address)
    except AuthenticationError:
        pass
    raise UserError(f"cluster.address: received {address!r}; the Ray cluster there "
                    f"{_token_said()}: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to its "
                    "token (`ray get-auth-token` on its head prints it)")


def _ask_gcs(address: str) -> List[str]:
    """The live nodes' addresses from the GCS at `address`; [] when it does not say (ray.init
    below says what is wrong, in its words); raises ray.exceptions.AuthenticationError."""
    from ray.exceptions import AuthenticationError

    err = os.dup(2)
    with open(os.devnull, "wb") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            info = ray_compat.gcs_client(address).get_all_node_info(timeout=PROBE_S)
        except AuthenticationError:
            raise
        except Exception:  # noqa: BLE001  (ray.init says it)
            return []
        finally:
            os.dup2(err, 2)
            os.close(err)
    return [n.node_manager_address for n in info.values() if n.state == 0]  # 0: ALIVE


def as_loopback(address: str) -> bool:
    """Whether a driver joins `address` as 127.0.0.1 (token mode set first if the cluster asks for
    a token): a Ray started here (no address), or a loopback address whose live nodes all
    registered on loopback (asked of its GCS: a refused token is one line here)."""
    if not address:
        return True
    nodes = [] if address.startswith("ray://") else _node_addresses(address)
    host = address.removeprefix("ray://").rpartition(":")[0]
    return host in LOOPBACK and all(n in LOOPBACK for n in nodes)


def connect(cfg: DictConfig, need_cpus: float) -> tuple:
    """(where, whether this call connected): join the cluster `cluster.address` names (auto:
    RAY_ADDRESS, else start a Ray on this machine, bound to 127.0.0.1). Inside a Ray task
    (hydra/launcher=ray) the job uses the connection it runs in. A cluster `ray start` started at
    a loopback address registers its node at the machine's interface address (Ray rewrites
    127.0.0.1): joined as any cluster; one whose nodes are on 127.0.0.1 (the tests'), as 127.0.0.1."""
    address = str(cfg.cluster.address)
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
    quiet()
    import ray

    if ray.is_initialized():
        return "the Ray cluster this job runs in", False
    kw: Dict[str, Any] = dict(logging_level=logging.WARNING, log_to_driver=False,
                              configure_logging=False)
    if address:
        _probe(address)
    if as_loopback(address):
        ray_compat.loopback_driver()
        if not address.startswith("ray://"):
            kw.update(ray_compat.LOOPBACK_NODE)
    if address:
        try:
            ray.init(address=address, **kw)
        except (ConnectionError, RuntimeError, ValueError) as ex:
            raise UserError(f"cluster.address: received {address!r}; Ray could not join the "
                            f"cluster there ({type(ex).__name__}: {str(ex)[:200]})") from None
        return address, True
    ray.init(num_cpus=max(os.cpu_count() or 1, int(need_cpus + 0.999)), include_dashboard=False,
             **kw)
    return "a Ray started on this machine for this job", True


class TaskActor:
    """One task of the job on its node (a Ray actor in the task's bundle): where it is and a free
    port there; then the trainer, its output kept until the job process reads it."""

    def __init__(self, name: str):
        self.name, self.proc = name, None
        self.buf, self.eof = bytearray(), False
        self.cond = threading.Condition()

    def where(self) -> tuple:
        import ray

        from distexp.cluster.processes import free_ports

        return ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id(), \
            free_ports(1)[0]

    def start(self, cmd: Sequence[str], env: Dict[str, str], cwd: str) -> Optional[str]:
        """Start the trainer (this node's Python); the line why not (the job dir not seen here)."""
        from distexp import stops

        config = cmd[list(cmd).index("--config") + 1] if "--config" in cmd else None
        if config and not os.path.exists(config):
            return (f"{ERROR}cluster=ray: task {self.name} on node {self.where()[0]} "
                    f"cannot see the job directory ({config} is not there): put it on a path every "
                    "node sees (hydra.run.dir / hydra.sweep.dir on a shared volume)")
        full = dict(os.environ)
        full.update(env)
        self.proc = subprocess.Popen(
            [sys.executable, *list(cmd)[1:]], env=full, cwd=cwd if os.path.isdir(cwd) else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=stops.die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        return None

    def _read(self) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            with self.cond:
                self.buf += chunk
                self.cond.notify_all()
        self.proc.wait()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def read(self, wait_s: float) -> tuple:
        """(output since the last read, the exit status once the output has ended)."""
        with self.cond:
            if not self.buf and not self.eof:
                self.cond.wait(wait_s)
            out = bytes(self.buf)
            self.buf.clear()
            return out, (self.proc.returncode if self.eof else None)

    def ping(self) -> bool:
        return True

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


class RemoteProc:
    """A task's trainer on its node, as distexp.job.launch sees a process: `stdout` (a pipe this
    process fills from the actor), `poll`, `wait`, and `signal_group` (launch.signal_group)."""

    def __init__(self, actor, name: str, node: str, cmd, env, cwd, peers: List["RemoteProc"]):
        import ray

        self.actor, self.name, self.node, self.peers = actor, name, node, peers
        self.returncode: Optional[int] = None
        self.lost = False
        peers.append(self)
        r, w = os.pipe()
        self.stdout, self._w = os.fdopen(r, "rb"), os.fdopen(w, "wb")
        refused = ray.get(actor.start.remote(list(cmd), env, cwd))
        if refused:
            self._w.write(refused.encode() + b"\n")
            self._end(BAD_INPUT)
            return
        threading.Thread(target=self._follow, daemon=True, name=f"distexp-ray-{name}").start()

    def _follow(self) -> None:
        import ray

        try:
            while True:
                out, rc = ray.get(self.actor.read.remote(READ_S))
                if out:
                    self._w.write(out)
                    self._w.flush()
                if rc is not None:
                    if rc != 0:
                        self._peers_settled()
                    return self._end(rc)
        except _gone() as ex:  # RayActorError and kin: the actor or its node is gone
            self.lost = True
            cause = "it stopped answering" if "Unavailable" in type(ex).__name__ else "it died"
            line = (f"{ERROR}cluster=ray: task {self.name} on Ray node {self.node} was "
                    f"lost (its actor: {cause}): its node died or its actor was killed\n")
            try:
                self._w.write(line.encode())
            except (OSError, ValueError):
                pass
            self._end(FAILED)

    def _peers_settled(self) -> None:
        """Before this task's failure is reported: until every other task's actor answers, or one
        is found lost (LOSS_WAIT_S at most)."""
        deadline = time.monotonic() + LOSS_WAIT_S
        while time.monotonic() < deadline:
            others = [p for p in self.peers if p is not self]
            if any(p.lost for p in others) or all(p.returncode is not None or p.answers()
                                                  for p in others):
                return
            time.sleep(0.2)

    def answers(self) -> bool:
        import ray

        try:
            return bool(ray.get(self.actor.ping.remote(), timeout=PING_S))
        except _gone():
            return False

    def _end(self, rc: int) -> None:
        self.returncode = rc
        try:
            self._w.close()
        except OSError:
            pass

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.name, timeout)
            time.sleep(0.05)
        return self.returncode

    def signal_group(self, sig: int) -> None:
        import ray

        try:
            ray.get(self.actor.signal.remote(int(sig)), timeout=5)
        except _gone():  # the actor is gone: so is its trainer (it dies with its parent)
            pass


@dataclass
class RayPlan(Plan):
    """A job placed on a Ray cluster: its actors (task name -> actor), their nodes, the placement
    group; `spawn` starts a task's trainer through its actor (distexp.job.launch.Spawn)."""

    actors: Dict[str, Any] = field(default_factory=dict)
    nodes: Dict[str, str] = field(default_factory=dict)
    group: Any = None
    owns_connection: bool = False
    tasks_of: List[Any] = field(default_factory=list)
    rec: Any = None
    cfg: Any = None
    procs: List[Any] = field(default_factory=list)  # this attempt's RemoteProcs

    def spawn(self, cmd, env, cwd) -> RemoteProc:
        name = env[TASK]
        sent = {k: v for k, v in env.items() if k not in NOT_SENT and
                (k.startswith(SENT_PREFIXES) or os.environ.get(k) != v)}
        if name == self.names[0]:  # a new attempt (after a port clash): new processes
            self.procs = []
        return RemoteProc(self.actors[name], name, self.nodes[name], cmd, sent, cwd, self.procs)

    def spawner(self):
        return self.spawn

    def gpu_ids(self) -> List[str]:
        return []  # the tasks' GPUs are their nodes', not this machine's

    def report(self) -> None:
        """Ask every actor where it is and for a free port there: the cluster (TF_CONFIG)."""
        import ray

        names = list(self.actors)
        got = ray.get([self.actors[n].where.remote() for n in names])
        reports = {n: (ip, port) for n, (ip, _, port) in zip(names, got)}
        ids = {n: node for n, (_, node, _) in zip(names, got)}
        self.hosts = plan_of.hosts_of(reports, ids)
        self.nodes = {n: self.hosts[n] for n in names}
        if self.rec.cluster_jobs:
            self.cluster = plan_of.cluster_of(self.rec, self.cfg, reports)

    def new_ports(self) -> None:
        self.report()

    def release(self) -> None:
        """Every actor killed, the placement group removed, the connection closed (a Ray this job
        started: stopped). Idempotent."""
        import ray

        if not ray.is_initialized():
            return
        from ray.util.placement_group import remove_placement_group

        for a in self.actors.values():
            try:
                ray.kill(a)
            except _gone():
                pass
        self.actors = {}
        if self.group is not None:
            try:
                remove_placement_group(self.group)
            except _gone():
                pass
            self.group = None
        if self.owns_connection:
            ray.shutdown()
            self.owns_connection = False


def place(cfg: DictConfig, rec, job_dir: Path) -> RayPlan:
    """Connect, check the job fits the cluster (one line naming what it offers), reserve one
    bundle per task and start one actor in each; the plan, its cluster built from their reports.
    Anything raised here releases what was placed."""
    plan_of.check_placement(str(cfg.cluster.placement))
    ts = plan_of.tasks(cfg, rec)
    where, owns = connect(cfg, sum(t.cpus for t in ts))
    plan = RayPlan(names=[t.name for t in ts], replica_workers=rec.num_workers(cfg),
                   sync_workers=rec.sync_workers(cfg), gpus_per_worker=int(cfg.gpus or 0),
                   servers=rec.servers(cfg), job_dir=job_dir, retry_ports=True,
                   owns_connection=owns, tasks_of=ts, rec=rec, cfg=cfg)
    try:
        _reserve(cfg, rec, plan, where)
        plan.report()
    except BaseException:
        plan.release()
        raise
    atexit.register(plan.release)  # the job process ends before execute (a later check failed)
    return plan


def _reserve(cfg: DictConfig, rec, plan: RayPlan, where: str) -> None:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ts = plan.tasks_of
    try:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        total = ray.cluster_resources()
    except _gone() as ex:
        raise UserError(f"cluster.address: the Ray cluster at {where} stopped answering "
                        f"({type(ex).__name__})") from None
    plan_of.check_fits(cfg, rec, ts, total, nodes, where)
    plan.group = placement_group(plan_of.bundles(ts),
                                 strategy=plan_of.strategy(str(cfg.cluster.placement), ts,
                                                           len(nodes)))
    ready, _ = ray.wait([plan.group.ready()], timeout=float(cfg.cluster.start_timeout))
    if not ready:
        raise UserError(f"cluster.start_timeout: the Ray cluster at {where} did not place the "
                        f"job's {len(ts)} task(s) ({plan_of.bundles(ts)}) in "
                        f"{cfg.cluster.start_timeout:g} s; it offers {plan_of.offered(total)} over "
                        f"{len(nodes)} node(s), held by other jobs now?")
    actor = ray.remote(max_concurrency=4)(TaskActor)
    for i, t in enumerate(ts):
        plan.actors[t.name] = actor.options(
            num_cpus=t.cpus, num_gpus=t.gpus, name=None,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                plan.group, placement_group_bundle_index=i)).remote(t.name)
