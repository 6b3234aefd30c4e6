"""Cluster plans without TensorFlow: local TF_CONFIGs, tf_config and Slurm task roles,
and the one-line errors for a bad cluster setting."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from distexp import errors, strategies
from distexp.cluster import kinds, liveness, slurm_env
from distexp.config import checks


def _plan(compose, *overrides, tmp=Path("/tmp")):
    cfg = compose(*overrides)
    checks.validate(cfg)
    return kinds.plan(cfg, tmp, 0)


def _tf_configs(plan):
    procs = plan.processes(Path("/tmp/config.yaml"), {})
    return procs, {p.name: json.loads(p.env["TF_CONFIG"]) for p in procs}


def test_local_multiworker_plan(compose):
    plan = _plan(compose, "strategy=multiworker", "workers=3")
    procs, tfc = _tf_configs(plan)
    assert [p.name for p in procs] == ["worker-0", "worker-1", "worker-2"]
    assert (plan.replica_workers, plan.sync_workers, plan.servers) == (3, 3, [])
    addrs = tfc["worker-0"]["cluster"]["worker"]
    assert len(set(addrs)) == 3 and all(a.startswith("127.0.0.1:") for a in addrs)
    assert [tfc[f"worker-{i}"]["task"] for i in range(3)] == [
        {"type": "worker", "index": i} for i in range(3)]
    # only the chief (worker-0) gets the MLflow run and the console
    assert [(p.env["DISTEXP_TASK"], p.console) for p in procs] == [
        ("worker-0", True), ("worker-1", False), ("worker-2", False)]


def test_local_ps_plan(compose):
    plan = _plan(compose, "strategy=ps", "workers=2", "ps=1")
    procs, tfc = _tf_configs(plan)
    assert [p.name for p in procs] == ["chief", "worker-0", "worker-1", "ps-0"]
    assert [p.server for p in procs] == [False, True, True, True]
    assert set(tfc["chief"]["cluster"]) == {"chief", "worker", "ps"}
    assert tfc["ps-0"]["task"] == {"type": "ps", "index": 0}
    assert (plan.replica_workers, plan.sync_workers) == (2, 1)


def test_new_ports_after_a_clash(compose):
    plan = _plan(compose, "strategy=multiworker", "cluster.port=20000")
    assert plan.cluster["worker"] == ["127.0.0.1:20000", "127.0.0.1:20001"]
    plan.new_ports()
    assert plan.cluster["worker"] != ["127.0.0.1:20000", "127.0.0.1:20001"]
    assert all(a.startswith("127.0.0.1:") for a in plan.cluster["worker"])


def test_nccl_needs_gpus(compose):
    with pytest.raises(errors.UserError, match="strategy.communication: received 'nccl'"):
        _plan(compose, "strategy=multiworker", "strategy.communication=nccl")


@pytest.mark.parametrize("raw,needle", [
    (None, "TF_CONFIG is not set"),
    ("{not json", "TF_CONFIG: received '{not json'; expected JSON"),
    ('{"cluster": 3}', "TF_CONFIG: received"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}',
     "TF_CONFIG: received task worker:1; the cluster has worker x1"),
    ('{"cluster": {"worker": ["a:"]}, "task": {"type": "worker"}}', "host:port"),
])
def test_malformed_tf_config_is_one_line(compose, monkeypatch, raw, needle):
    if raw is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", raw)
    with pytest.raises(errors.UserError) as err:
        _plan(compose, "strategy=multiworker", "cluster=tf_config")
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("strategy,task,chief,workers", [
    ("multiworker", {"type": "worker", "index": 0}, True, 2),
    ("multiworker", {"type": "worker", "index": 1}, False, 2),
    ("ps", {"type": "chief", "index": 0}, True, 2),
    ("ps", {"type": "worker", "index": 0}, False, 2),
])
def test_tf_config_roles(compose, monkeypatch, strategy, task, chief, workers):
    cl = {"worker": ["h1:1", "h2:1"]}
    if strategy == "ps":
        cl.update(chief=["h0:1"], ps=["h3:1"])
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cl, "task": task}))
    plan = _plan(compose, f"strategy={strategy}", "cluster=tf_config")
    assert plan.logs_to_mlflow is chief
    name = "chief" if task["type"] == "chief" else f"{task['type']}-{task['index']}"
    assert plan.replica_workers == workers and plan.names == [name]  # as cluster=local names them


@pytest.mark.parametrize("strategy,rank,ntasks,task", [
    ("multiworker", 0, 2, ("worker-0", True)),
    ("multiworker", 1, 2, ("worker-1", False)),
    # SlurmClusterResolver ranks the job names alphabetically: chief, ps, worker
    ("ps", 0, 4, ("chief", True)),
    ("ps", 1, 4, ("ps-0", False)),
    ("ps", 2, 4, ("worker-0", False)),
    ("ps", 3, 4, ("worker-1", False)),
])
def test_slurm_roles(compose, monkeypatch, strategy, rank, ntasks, task):
    for k, v in _step(rank, ntasks).items():
        monkeypatch.setenv(k, v)
    plan = _plan(compose, f"strategy={strategy}", "cluster=slurm", "workers=2", "ps=1")
    assert (plan.names[0], plan.logs_to_mlflow) == task
    # ps: the servers watch the coordinator (they stop when it is gone), it watches them;
    # multiworker: every task watches its peers start (never lost: TensorFlow's heartbeats are)
    watch = type(plan.until).__name__ if plan.until else None
    assert watch == ("ChiefWatch" if strategy == "ps" and rank else "ServerWatch")
    if strategy == "multiworker":
        assert plan.until.lost is False and list(plan.until.watches) == [f"worker-{1 - rank}"]


def _step(rank, ntasks, job="4242"):
    return {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_NTASKS":
            str(ntasks), "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": str(ntasks),
            "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0"}


def test_slurm_outside_slurm_is_one_line(compose, monkeypatch):
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    monkeypatch.delenv("SLURM_NTASKS", raising=False)
    with pytest.raises(errors.UserError, match="SLURM_PROCID"):
        _plan(compose, "strategy=multiworker", "cluster=slurm")


def test_slurm_batch_script_without_srun_is_one_line(compose, monkeypatch):
    for k in ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    with pytest.raises(errors.UserError, match=r"outside a job step .*srun python -m distexp"):
        _plan(compose, "strategy=multiworker", "cluster=slurm")


@pytest.mark.parametrize("strategy,ntasks,needle", [
    ("multiworker", 3, "workers: received workers=2, which needs 2 Slurm tasks; this step has 3 "
                       "(SLURM_STEP_NUM_TASKS). Set workers=3"),
    ("ps", 3, "needs 4 Slurm tasks; this step has 3 (SLURM_STEP_NUM_TASKS). Set workers=1"),
])
def test_slurm_task_count_mismatch_is_one_line(compose, monkeypatch, strategy, ntasks, needle):
    for k, v in _step(0, ntasks).items():
        monkeypatch.setenv(k, v)
    with pytest.raises(errors.UserError) as err:
        _plan(compose, f"strategy={strategy}", "cluster=slurm", "workers=2", "ps=1")
    assert needle in str(err.value)


def test_slurm_ports_differ_between_jobs(compose):
    cfg = compose("strategy=multiworker", "cluster=slurm")
    bases = {slurm_env.slurm_port_base(cfg, {"SLURM_JOB_ID": str(j), "SLURM_STEP_ID": "0"})
             for j in range(100, 110)}
    assert len(bases) == 10 and all(10000 <= b < 32768 - slurm_env.SLURM_PORT_BLOCK for b in bases)
    assert min(abs(a - b) for a in bases for b in bases if a != b) >= slurm_env.SLURM_PORT_BLOCK
    assert slurm_env.slurm_port_base(compose("strategy=multiworker", "cluster=slurm",
                                           "cluster.port=23456"), {"SLURM_JOB_ID": "1"}) == 23456


@pytest.mark.parametrize("overrides,needle", [
    (["resume=true", "loop=fit"], "resume: received true with loop=fit"),
    (["checkpoint.every_steps=-1"], "checkpoint.every_steps: received -1"),
    (["strategy=ps", "loop=fit"], "keras-team/keras#18624"),
])
def test_validate_rejects(compose, overrides, needle):
    with pytest.raises(errors.UserError) as err:
        checks.validate(compose(*overrides))
    assert needle in str(err.value)


def test_free_ports_are_distinct():
    from distexp.cluster.processes import free_ports

    ports = free_ports(8)
    assert len(set(ports)) == 8 and all(1024 <= p < 65536 for p in ports)


def test_checkpoint_dir_is_stable(compose):
    cfg = compose("strategy=multiworker")
    assert cfg.checkpoint.dir == f"{Path.cwd()}/outputs/checkpoints/multiworker-cnn-digits"


def test_chief_watch_stops_a_server_task_once_the_chief_is_gone(monkeypatch):
    import socket

    monkeypatch.setattr(liveness.ChiefWatch, "EVERY_S", 0.0)
    chief = socket.socket()
    chief.bind(("127.0.0.1", 0))
    chief.listen()
    watch = liveness.ChiefWatch(f"127.0.0.1:{chief.getsockname()[1]}")
    assert watch() is False and watch.seen  # listening: the job goes on
    chief.close()
    assert watch() is False  # one refusal is not enough
    assert watch() is True   # two in a row: the chief exited, stop the server
    never = liveness.ChiefWatch("127.0.0.1:1", startup=liveness.Startup(None, own_s=0))
    with pytest.raises(TimeoutError, match="never listened"):  # nothing listens on port 1
        never()


def test_a_peer_that_never_started_fails_the_job_naming_it(monkeypatch):
    """A task whose job process stopped before TensorFlow (bad input on its node) never listens:
    its peers end STARTUP_S after their own server listens, naming it (before: 180 s of TF's
    registration for multiworker, 600 s for ps), while a peer still importing TensorFlow on a
    loaded node, before this task's own server is up, is not taken for dead."""
    import socket
    import time

    monkeypatch.setattr(liveness.ChiefWatch, "EVERY_S", 0.0)
    own = socket.socket()
    own.bind(("127.0.0.1", 0))
    own_addr = f"127.0.0.1:{own.getsockname()[1]}"
    startup = liveness.Startup(own_addr, startup_s=0.3, own_s=60)
    watch = liveness.ServerWatch({"worker-1": "127.0.0.1:1"}, lost=False, startup=startup)
    time.sleep(0.5)
    assert watch() is False  # this task's own TensorFlow is not up yet: no verdict
    own.listen()
    assert watch() is False  # the clock starts now
    time.sleep(0.5)
    with pytest.raises(TimeoutError) as ex:
        watch()
    own.close()
    assert str(ex.value) == ("worker-1 never listened on 127.0.0.1:1, 0.3 s after this task's own "
                             f"server ({own_addr}) did: its task stopped before TensorFlow started "
                             "(see that task's output)")
    assert liveness.STARTUP_S == 60  # the bound the issue asks for


@pytest.mark.parametrize("strategy,task", [("multiworker", {"type": "worker", "index": 1}),
                                           ("ps", {"type": "chief", "index": 0}),
                                           ("ps", {"type": "worker", "index": 0})])
def test_a_task_waits_for_its_peers_as_long_as_cluster_peer_start_timeout(compose, monkeypatch,
                                                                         strategy, task):
    """Every watch of a tf_config task counts its peers' start from the key (default 60 s)."""
    cl = {"worker": ["h1:1", "h2:1"], **({"chief": ["h0:1"], "ps": ["h3:1"]}
                                           if strategy == "ps" else {})}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cl, "task": task}))
    for extra, bound in (([], 60.0), (["cluster.peer_start_timeout=7.5"], 7.5)):
        watch = _plan(compose, f"strategy={strategy}", "cluster=tf_config", *extra).until
        startups = ([w.startup for w in watch.watches.values()]
                    if isinstance(watch, liveness.ServerWatch) else [watch.startup])
        assert startups and {s.startup_s for s in startups} == {bound}


def test_slurm_addresses_follow_the_resolver(compose):
    cfg = compose("strategy=ps", "cluster=slurm", "workers=2", "ps=1", "cluster.port=20000")
    env = {"SLURM_STEP_NODELIST": "b,a", "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}
    # hosts sorted (a, b), ports base + k per host, ranks chief, ps, worker
    ps = strategies.REGISTRY.find("ps")
    assert slurm_env.slurm_addresses(cfg, env, ps) == {"chief": "a:20000", "ps-0": "a:20001",
                                                       "worker-0": "b:20000", "worker-1": "b:20001"}


def test_a_task_placed_off_the_resolvers_block_order_is_one_line():
    """srun -N2 -n4 -m cyclic with 3,1 tasks per node (seen: ranks on a, b, a, a): the resolver
    (node by node: a, a, a, b) would give ranks 1 and 3 the wrong node's address. Every task says
    so, also rank 2 whose own node happens to match (else ranks 0 and 2 would wait on the others);
    cyclic with 1 task per node is block and passes."""
    env = {"SLURM_STEP_NODELIST": "a,b", "SLURM_STEP_TASKS_PER_NODE": "3,1",
           "SLURM_DISTRIBUTION": "cyclic"}
    for rank, node in enumerate("abaa"):
        with pytest.raises(errors.UserError, match=r"^SLURM_DISTRIBUTION: received 'cyclic', "
                           r"which places .*srun --distribution=block$"):
            slurm_env.check_placement({**env, "SLURMD_NODENAME": node}, rank)
    one_each = {**env, "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}
    slurm_env.check_placement({**one_each, "SLURMD_NODENAME": "b"}, 1)
    # a placement the variable does not explain (e.g. arbitrary): the task's own node decides
    with pytest.raises(errors.UserError, match=r"^SLURM_PROCID: received task 1 on node b; "
                       r"TensorFlow's SlurmClusterResolver places it on a "):
        slurm_env.check_placement({**env, "SLURM_DISTRIBUTION": "block", "SLURMD_NODENAME": "b"}, 1)


def test_server_watch_fails_the_coordinator_when_a_server_is_gone(monkeypatch):
    import socket

    monkeypatch.setattr(liveness.ChiefWatch, "EVERY_S", 0.0)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    watch = liveness.ServerWatch({"worker-0": f"127.0.0.1:{server.getsockname()[1]}",
                                 "ps-0": "127.0.0.1:1"})  # ps-0 not up yet: no verdict
    assert watch() is False
    server.close()
    watch()
    with pytest.raises(liveness.PeerLost, match="worker-0 stopped answering"):
        watch()


def test_sbatch_transient_errors_are_retried_refusals_are_one_line(monkeypatch):
    """The Slurm launcher submits again after a controller-connection error of sbatch, and turns a
    refusal (or a client that cannot talk to its controller) into one line with sbatch's reason."""
    import submitit

    from distexp.sweeps import slurm_launcher

    monkeypatch.setattr(slurm_launcher.time, "sleep", lambda s: None)

    class Executor:
        def __init__(self, errors_first):
            self.errors, self.calls = list(errors_first), 0

        def map_array(self, fn, *columns):
            self.calls += 1
            if self.errors:
                raise submitit.core.utils.FailedJobError(self.errors.pop(0))
            return ["job"] * len(columns[0])

    ex = Executor(["sbatch: error: Batch job submission failed: Socket timed out on send/recv"])
    assert slurm_launcher._submit(ex, None, [("a", 1), ("b", 2)]) == ["job", "job"] and ex.calls == 2
    ex = Executor(["sbatch: error: Batch job submission failed: Insane message length"])
    with pytest.raises(errors.UserError, match="^hydra.launcher: sbatch refused the job.s.: .*Insane"):
        slurm_launcher._submit(ex, None, [("a", 1)])
    assert ex.calls == 1
    ex = Executor(["sbatch: error: Batch job submission failed: Invalid partition name specified"])
    with pytest.raises(errors.UserError, match="^hydra.launcher: sbatch refused the job.s.: sbatch: "
                       "error: Batch job submission failed: Invalid partition name specified$"):
        slurm_launcher._submit(ex, None, [("a", 1)])
    assert ex.calls == 1
    ex = Executor(["Socket timed out on send/recv operation"] * 3)
    with pytest.raises(errors.UserError, match="Socket timed out"):
        slurm_launcher._submit(ex, None, [("a", 1)])
    assert ex.calls == slurm_launcher.ATTEMPTS


def test_one_rule_names_the_chief():
    """Record.chief_task: the job process (logs_to_mlflow), the Slurm node sampler and the trainer
    (strategies.is_chief) all ask it."""
    mw, ps = strategies.REGISTRY.find("multiworker"), strategies.REGISTRY.find("ps")
    assert mw.chief_task({"worker": 2}) == "worker-0"
    assert mw.chief_task({"chief": 1, "worker": 2}) == "chief"
    assert ps.chief_task({"chief": 1, "worker": 2, "ps": 1}) == "chief"
    assert [mw.is_chief_task("worker", i, {"worker": 2}) for i in (0, 1)] == [True, False]
    assert not mw.is_chief_task("worker", 0, {"chief": 1, "worker": 2})
    assert not ps.is_chief_task("ps", 0, {"worker": 1, "ps": 1})


@pytest.mark.parametrize("strategy, rank, samples", [
    ("multiworker", 0, False),  # worker-0 is the chief: its run samples this node itself
    ("multiworker", 1, True),   # worker-1, first task on the other node
    ("ps", 1, False),           # ps-0: the second task on n1, the chief's node
    ("ps", 2, True),            # worker-0, first task on n2
])
def test_slurm_first_task_of_another_node_samples_it(compose, monkeypatch, strategy, rank, samples):
    ntasks = 2 if strategy == "multiworker" else 4
    env = {**_step(rank, ntasks), "SLURM_STEP_NODELIST": "n1,n2",
           "SLURM_STEP_TASKS_PER_NODE": f"{ntasks // 2}(x2)",
           "SLURM_LOCALID": str(rank % (ntasks // 2))}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    plan = _plan(compose, f"strategy={strategy}", "cluster=slurm", "workers=2", "ps=1")
    assert plan.cluster_id == "slurm:4242.0"
    assert plan.samples_node is samples
