"""Multi-process training end to end, through the CLI: multiworker and ps on local clusters,
parity with one device, a SIGKILLed worker and the resume after it, and clusters started by hand
the way TFJob (TF_CONFIG), srun (SLURM_*) or two hosts (network namespaces) start them."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from distexp.parity import losses as _losses
from helpers import (
    Result,
    descendants,
    mlflow_runs,
    processes_mentioning,
    processes_with,
    run_cli,
    run_together,
    wait_until,
)
from helpers import cli_env as _env
from helpers.processes import free_port

pytestmark = pytest.mark.slow
# CI's xdist: the tests sharing `base` share a worker, so it runs once
BASE = pytest.mark.xdist_group("multiprocess-base")

# digits at a global batch of 64: 22 steps per epoch. 10 epochs (2-3 s of training; start-up
# dominates): ps, asynchronous, lands within 4 points of one device only near the plateau; no
# probe phase (no step-time split is asserted here)
COMMON = ["global_batch_size=64", "epochs=10", "warmup_steps=2", "measure_step_split=false"]
TINY = ["epochs=1", "steps_per_epoch=4", "warmup_steps=1", "measure_step_split=false"]


def _result(job: Path) -> dict:
    return json.loads((job / "result.json").read_text())


# Inside a network namespace (`nsenter`): listen on every interface on PORT until stdin closes
BLOCKER = ("import socket, sys; s = socket.socket(); s.bind(('', int(sys.argv[1]))); s.listen(); "
           "print('held', flush=True); sys.stdin.read()")


def _holder(job_pid: int) -> int:
    """The process holding the job's network namespace (distexp.cluster.netns: `python -I -S -c`)."""
    for q in descendants(job_pid):
        try:
            argv = Path(f"/proc/{q}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[1:4] == [b"-I", b"-S", b"-c"]:
            return q
    return 0


def _block_in_namespace(holder: int, port: int) -> subprocess.Popen:
    """A process in the job's network namespace listening on `port` (its user namespace too, where
    the holder has one of its own: not as root)."""
    ns = [f"--net=/proc/{holder}/ns/net"]
    if os.readlink(f"/proc/{holder}/ns/user") != os.readlink("/proc/self/ns/user"):
        ns += [f"--user=/proc/{holder}/ns/user", "--preserve-credentials"]
    b = subprocess.Popen(["nsenter", *ns, sys.executable, "-I", "-S", "-c", BLOCKER, str(port)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert b.stdout.readline() == "held\n", b.communicate(timeout=10)
    return b


def _multiworker_with_a_port_clash(cwd: Path) -> Result:
    """multiworker (2 workers) on ports P, P+1 with P+1 taken where the workers listen: in the
    job's own network namespace (distexp.cluster.netns; a port held on the machine is free in
    there). The job holds after starting worker-0 (distexp.stops, phase "fork"), a process
    joins its namespace and listens on P+1, and worker-1 then starts: it cannot listen, and the
    job must start the cluster again on other ports, not fail."""
    port, marker = free_port(), cwd / "held-at-fork"
    p = subprocess.Popen([sys.executable, "-m", "distexp", "strategy=multiworker", "workers=2",
                          *COMMON, f"cluster.port={port}", f"hydra.run.dir={cwd / 'mw'}",
                          f"checkpoint.dir={cwd / 'ck-mw'}"], cwd=cwd,
                         env=_env(DISTEXP_TEST_HOLD=f"fork:{marker}"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    blocker = None
    try:
        wait_until(lambda: marker.exists() or p.poll() is not None, 300, "worker-0 to start")
        assert p.poll() is None, p.communicate()
        holder = _holder(p.pid)
        assert holder, "the job has no network namespace (distexp.cluster.netns)"
        blocker = _block_in_namespace(holder, port + 1)
        marker.unlink()  # worker-1 starts now
        out, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        if blocker is not None:
            blocker.stdin.close()
            blocker.wait(timeout=10)
    return Result(p.returncode, out, err, cwd)



@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """one_device and multiworker (2 workers) on the same data, global batch and seed. The
    multiworker job meets a port clash in its network namespace: it must retry, not fail."""
    cwd = tmp_path_factory.mktemp("base")
    one = run_cli(["strategy=one_device", *COMMON, f"hydra.run.dir={cwd / 'one'}",
                   "tracking.enabled=false"], cwd)
    assert one.returncode == 0, one
    mw = _multiworker_with_a_port_clash(cwd)
    assert mw.returncode == 0, mw
    return cwd, mw


def _assert_logs_kept(job_dir, logs) -> None:
    """Every worker's log is an artifact, except an empty one (tracking skips empty files):
    worker-1 prints nothing on this machine unless something goes wrong (seen 0 bytes with
    steps_per_execution=1 and with auto's k = 8)."""
    kept = {f"logs/{p.name}" for p in job_dir.glob("worker-*.log") if p.stat().st_size}
    assert "logs/worker-0.log" in kept and kept <= logs, (kept, logs)


@BASE
def test_multiworker_reproduces_one_device_and_logs_one_run(base):
    cwd, mw = base
    assert ("distexp: worker-1 could not listen on its port (taken by another process); starting the "
            "cluster again on other ports") in mw.stdout, "the port clash was not retried"
    a, b = _losses(cwd / "one"), _losses(cwd / "mw")
    assert len(a) == len(b) == 10 * 22
    diff = max(abs(x - y) for x, y in zip(a, b))
    print(f"multiworker vs one_device: max per-step loss difference {diff:.3g}")
    assert diff < 1e-5
    assert _result(cwd / "mw")["eval/accuracy"] >= 0.90
    client, runs = mlflow_runs(f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")
    assert len(runs) == 1  # worker-1 never creates a run
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == "multiworker-cnn-digits-r2"
    p = run.data.params
    assert (p["num_workers"], p["num_replicas"], p["global_batch_size"]) == ("2", "2", "64")
    assert run.data.metrics["eval/accuracy"] >= 0.90
    logs = {a.path for a in client.list_artifacts(run.info.run_id, "logs")}
    _assert_logs_kept(cwd / "mw", logs)


@BASE
@pytest.mark.extended
def test_ps_learns_like_one_device(base):
    """ps is asynchronous: its figures vary from run to run. This ps job run 10 times (2026-11-23,
    load 9-17): eval accuracy 0.950-0.967 against one device's 0.958, last epoch's summed loss /
    first epoch's 0.036-0.048 (bound 0.3); all 220 steps counted once every time (exact). An 11th
    run (landing CI, beside another xdist worker) gave 0.936: 0.022 below, past the 0.02 bound
    then used. The bound is 0.04 (14 of the 360 eval images); a ps that drops or double-applies
    updates shows in the exact step count and the loss ratio, not in the second decimal."""
    cwd, _ = base
    r = run_cli(["strategy=ps", "workers=2", "ps=1", *COMMON, f"hydra.run.dir={cwd / 'ps'}",
                 f"checkpoint.dir={cwd / 'ck-ps'}",
                 f"tracking.uri=sqlite:///{cwd / 'ps.db'}"], cwd)
    assert r.returncode == 0, r
    ps, one = _result(cwd / "ps"), _result(cwd / "one")
    print(f"ps eval accuracy {ps['eval/accuracy']:.4f}, one_device {one['eval/accuracy']:.4f}")
    assert ps["eval/accuracy"] >= 0.90
    assert abs(ps["eval/accuracy"] - one["eval/accuracy"]) <= 0.04
    losses = _losses(cwd / "ps")
    assert len(losses) == 10 * 22  # every scheduled step completed and was counted once
    assert sum(losses[-22:]) < 0.3 * sum(losses[:22]), "the loss must decrease"
    client, runs = mlflow_runs(f"sqlite:///{cwd / 'ps.db'}")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    p = runs[0].data.params
    assert (p["num_workers"], p["num_replicas"], p["global_batch_size"]) == ("2", "2", "64")
    logs = {a.path for a in client.list_artifacts(runs[0].info.run_id, "logs")}
    assert {"logs/chief.log", "logs/worker-0.log", "logs/worker-1.log", "logs/ps-0.log"} <= logs
    assert processes_mentioning(str(cwd / "ps")) == []  # the servers were stopped


def _trainer_pids(job: Path, task=None):
    env = f"DISTEXP_TASK={task}\0".encode() if task is not None else b""
    return processes_with(str(job), b"distexp.train.trainer", env)


@BASE
@pytest.mark.extended
def test_killed_worker_fails_the_job_and_resume_finishes_it(base):
    cwd, _ = base
    job, ck, uri = cwd / "killed", cwd / "ck-killed", f"sqlite:///{cwd / 'killed.db'}"
    args = ["strategy=multiworker", "workers=2", *COMMON, f"checkpoint.dir={ck}",
            "checkpoint.every_steps=10", f"tracking.uri={uri}"]
    p = subprocess.Popen([sys.executable, "-m", "distexp", *args, f"hydra.run.dir={job}"],
                         cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 240
    while not (ck / "checkpoint").exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    victims = _trainer_pids(job, "worker-1")
    assert victims and p.poll() is None, "the job ended before its first checkpoint"
    os.kill(victims[0], signal.SIGKILL)  # mid-epoch: checkpoints come every 10 of 22 steps
    killed = time.monotonic()
    out, err = p.communicate(timeout=30)
    exit_s = time.monotonic() - killed
    print(f"SIGKILL to CLI exit: {exit_s:.1f} s")
    assert p.returncode == 1, out + err
    assert exit_s < 30
    assert "distexp: error: worker-1 was killed by SIGKILL" in err
    assert processes_mentioning(str(job)) == []
    client, runs = mlflow_runs(uri)
    assert len(runs) == 1 and runs[0].info.status == "FAILED"
    logs = {a.path for a in client.list_artifacts(runs[0].info.run_id, "logs")}
    _assert_logs_kept(job, logs)

    r = run_cli([*args, "resume=true", f"hydra.run.dir={cwd / 'resumed'}"], cwd)
    assert r.returncode == 0, r
    assert "resume: restored" in r.stdout
    done, uninterrupted = _result(cwd / "resumed"), _result(cwd / "mw")
    print(f"resumed vs uninterrupted: eval loss {done['eval/loss']!r} vs "
          f"{uninterrupted['eval/loss']!r}")
    assert abs(done["eval/loss"] - uninterrupted["eval/loss"]) < 1e-5
    assert abs(_losses(cwd / "resumed")[-1] - _losses(cwd / "mw")[-1]) < 1e-5
    _, runs = mlflow_runs(uri)
    resumed = [x for x in runs if x.info.status == "FINISHED"]
    assert len(resumed) == 1
    tags = resumed[0].data.tags
    assert tags["distexp.resume"] == "restored" and int(tags["distexp.resumed_from_step"]) >= 10


def _start_by_hand(cwd: Path, tasks, common, netns=None):
    """One `python -m distexp` per task, each with the env the engine would set."""
    cmds = []
    for i in range(len(tasks)):
        cmd = [sys.executable, "-m", "distexp", *common, f"hydra.run.dir={cwd / f'task{i}'}"]
        cmds.append(["ip", "netns", "exec", netns[i], *cmd] if netns else cmd)
    procs, outs = run_together(cmds, cwd, [{**_env(), **env} for env in tasks])
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def _one_finished_run(cwd: Path, workers: int):
    _, runs = mlflow_runs(f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    assert runs[0].data.params["num_workers"] == str(workers)
    assert runs[0].data.metrics["perf/timed_steps"] > 0


def _cluster_env(addrs):
    return [{"TF_CONFIG": json.dumps({"cluster": {"worker": addrs},
                                      "task": {"type": "worker", "index": i}})}
            for i in range(len(addrs))]


@pytest.mark.extended
def test_slurm_cluster_started_by_hand(tmp_path):
    from distexp.cluster.processes import free_ports

    port = next(p for p in free_ports(20) if _free(p + 1))
    srun = {"SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2", "SLURM_STEP_NODELIST": "localhost",
            "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_JOB_ID": "4242", "SLURM_NODEID": "0"}
    tasks = [{**srun, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)} for i in range(2)]
    _start_by_hand(tmp_path, tasks, ["strategy=multiworker", "cluster=slurm",
                                     f"cluster.port={port}", *TINY])
    _one_finished_run(tmp_path, 2)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def _netns_available() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    name = f"dxprobe{os.getpid()}"
    ok = subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode == 0
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return ok


@pytest.mark.extended
def test_tf_config_cluster_started_by_hand_on_one_host(tmp_path):
    """Each task started by hand with its own TF_CONFIG, as the TFJob operator does, both on
    127.0.0.1."""
    from distexp.cluster.processes import free_ports

    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    outs = _start_by_hand(tmp_path, _cluster_env(addrs),
                          ["strategy=multiworker", "cluster=tf_config", *TINY])
    assert "training without MLflow" in outs[1]
    _one_finished_run(tmp_path, 2)


@pytest.mark.extended
def test_tf_config_cluster_started_by_hand(tmp_path):
    """Each task started by hand with its own TF_CONFIG, as the TFJob operator does: the two
    workers live in two network namespaces joined by a veth pair, i.e. two hosts with no
    localhost shortcut. Skipped where the machine cannot make them (root and iproute2), never
    replaced by the one-host variant under this name."""
    if not _netns_available():
        pytest.skip("network namespaces need root and iproute2 (ip netns add)")
    tag = uuid.uuid4().hex[:6]
    ns = [f"dxa{tag}", f"dxb{tag}"]
    veth = [f"dxa{tag}v", f"dxb{tag}v"]
    ips = ["10.213.7.1", "10.213.7.2"]

    def ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    try:
        for n in ns:
            ip("netns", "add", n)
        ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for n, v, addr in zip(ns, veth, ips):
            ip("link", "set", v, "netns", n)
            ip("-n", n, "addr", "add", f"{addr}/24", "dev", v)
            ip("-n", n, "link", "set", v, "up")
            ip("-n", n, "link", "set", "lo", "up")
        outs = _start_by_hand(tmp_path, _cluster_env([f"{a}:23456" for a in ips]),
                              ["strategy=multiworker", "cluster=tf_config", *TINY], netns=ns)
        assert "training without MLflow" in outs[1]
        _one_finished_run(tmp_path, 2)
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


@pytest.mark.extended
def test_a_task_that_stops_before_tensorflow_fails_its_peers_naming_it(tmp_path):
    """worker-1 of a cluster started by hand stops on bad input before TensorFlow; worker-0 (the
    chief) ends FAILED cluster.peer_start_timeout (here 10 s; 60 by default) after its own server
    listens, naming worker-1, instead of TensorFlow's 180 s registration wait (600 s for ps)."""
    from distexp.cluster.processes import free_ports

    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    envs = _cluster_env(addrs)
    cmds = [[sys.executable, "-m", "distexp", "strategy=multiworker", "cluster=tf_config", *TINY,
             "cluster.peer_start_timeout=10", *extra, f"hydra.run.dir={tmp_path / f'task{i}'}"]
            for i, extra in enumerate([[], ["epochs=-1"]])]  # worker-1: a bad value, exit 2
    t0 = time.monotonic()
    procs, outs = run_together(cmds, tmp_path, [{**_env(), **env} for env in envs])
    took = time.monotonic() - t0
    assert procs[1].returncode == 2 and "epochs: received -1" in outs[1], outs[1]
    assert procs[0].returncode == 1, outs[0][-3000:]
    errs = [ln for ln in outs[0].splitlines() if ln.startswith("distexp: error:")]
    assert len(errs) == 1 and errs[0].startswith(
        f"distexp: error: worker-1 never listened on {addrs[1]}, 10 s after this task's own "
        f"server ({addrs[0]}) did: its task stopped before TensorFlow started"), outs[0][-3000:]
    assert took < 170, took  # TensorFlow's own registration bound is 180 s
    _, runs = mlflow_runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    assert [r.info.status for r in runs] == ["FAILED"]
    assert processes_mentioning(str(tmp_path / "task0")) == []
