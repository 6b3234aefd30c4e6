"""cluster=ray, the side that talks to Ray (imported once a job runs; no TensorFlow). The job's
`RayPlan` is computed without Ray (its tasks and their bundles, distexp.cluster.ray_plan); its
`acquire` (distexp.job.lifecycle.execute) connects, places the job (one placement group, one actor
per task, each reporting its node and a free port there), and its `release` frees everything at
the end. Each task's trainer starts through its actor (distexp.cluster.ray_tasks). Every actor and
the placement group belong to this process's Ray job: released by `RayPlan.release` at the job's
end, and by Ray itself if this process dies first.
"""
from __future__ import annotations

import atexit
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List

from omegaconf import DictConfig

from distexp import env
from distexp.cluster import ray_compat
from distexp.cluster import ray_plan as plan_of
from distexp.cluster.processes import Plan
from distexp.cluster.ray_tasks import RemoteProc, TaskActor, gone
from distexp.errors import UserError

LOOPBACK = ("127.0.0.1", "localhost")
PROBE_S = 5.0
# The job process's environment a task is told (the rest is its node's own): what distexp and the
# job set for the trainers (their differences from this process's environment are sent too).
SENT_PREFIXES = (env.PREFIX, "MLFLOW_", "TF_")
NOT_SENT = ("CUDA_VISIBLE_DEVICES", "PATH", "PYTHONPATH", "VIRTUAL_ENV", "HOME", "PWD")


def _probe(address: str) -> None:
    """One line, in seconds, when nothing answers at `address` (Ray's own connect retries for a
    minute and more)."""
    host, port = plan_of.host_port(address)
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
    host = plan_of.host_port(address)[0]
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


@dataclass
class RayPlan(Plan):
    """A job for a Ray cluster: its tasks (`tasks_of`); once acquired, its actors (task name ->
    actor), their nodes, the placement group; `spawn` starts a task's trainer through its actor
    (distexp.job.launch.Spawn)."""

    actors: Dict[str, Any] = field(default_factory=dict)
    nodes: Dict[str, str] = field(default_factory=dict)
    group: Any = None
    owns_connection: bool = False
    tasks_of: List[Any] = field(default_factory=list)
    rec: Any = None
    cfg: Any = None
    procs: List[Any] = field(default_factory=list)  # this attempt's RemoteProcs

    def spawn(self, proc, env, cwd) -> RemoteProc:
        """`proc` (a distexp.cluster.processes.Proc) started by its task's actor, told `env`'s
        part that is the job's (SENT_PREFIXES, and what differs from this process's own)."""
        name = proc.name
        sent = {k: v for k, v in env.items() if k not in NOT_SENT and
                (k.startswith(SENT_PREFIXES) or os.environ.get(k) != v)}
        if name == self.names[0]:  # a new attempt (after a port clash): new processes
            self.procs = []
        return RemoteProc(self.actors[name], proc, self.nodes[name], sent, cwd, self.procs)

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

    def acquire(self) -> None:
        """Connect, check the job fits the cluster (one line naming what it offers), reserve one
        bundle per task and start one actor in each; the cluster built from their reports.
        Anything raised here releases what was placed."""
        where, self.owns_connection = connect(self.cfg, sum(t.cpus for t in self.tasks_of))
        try:
            _reserve(self.cfg, self.rec, self, where)
            self.report()
        except BaseException:
            self.release()
            raise
        atexit.register(self.release)  # the job process ends without execute's release

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
            except gone():
                pass
        self.actors = {}
        if self.group is not None:
            try:
                remove_placement_group(self.group)
            except gone():
                pass
            self.group = None
        if self.owns_connection:
            ray.shutdown()
            self.owns_connection = False


def job_plan(cfg: DictConfig, rec, job_dir: Path) -> RayPlan:
    """The job's plan on a Ray cluster: its tasks and what each reserves, nothing reached yet
    (`RayPlan.acquire` places it)."""
    plan_of.check_placement(str(cfg.cluster.placement))
    ts = plan_of.tasks(cfg, rec)
    return RayPlan(names=[t.name for t in ts], replica_workers=rec.num_workers(cfg),
                   sync_workers=rec.sync_workers(cfg), gpus_per_worker=int(cfg.gpus or 0),
                   servers=rec.servers(cfg), job_dir=job_dir, retry_ports=True,
                   tasks_of=ts, rec=rec, cfg=cfg)


def _reserve(cfg: DictConfig, rec, plan: RayPlan, where: str) -> None:
    import ray
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ts = plan.tasks_of
    try:
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        total = ray.cluster_resources()
    except gone() as ex:
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
