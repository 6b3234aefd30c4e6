"""distexp on a two-node Slurm cluster (scripts/slurm-cluster.sh up --nodes 2: each slurmd in a
network namespace of its own, dx-n1 10.213.9.11 and dx-n2 10.213.9.12, the controller dx-ctl in a
third). Slurm's clients and the submit side run in the controller's namespace (`slurm-cluster.sh
exec`), as on a login node. Jobs: multiworker one worker per node (sbatch --nodes=2 with srun
inside) and two per node (srun), both reproducing one device's losses; ps across the nodes; a
submitit sweep with nodes=2; a task killed on the second node, the second node's link cut, scancel;
bad input. After each: Slurm's queue empty, no process of the job on either node, every node idle.

The module fixture starts the two-node cluster (switching a one-node one off) and stops it after,
unless it was already up; it skips only where the cluster cannot start (not root, not Debian)."""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distexp.parity import losses as _losses
from helpers import cli_env as _env
from helpers import db_uri as _uri
from helpers import distexp_cmd as _cmd
from helpers import processes_with
from helpers import wait_until as _wait
from helpers.slurm import SCRIPT, cluster_up, nothing_left, queue, srun
from helpers.slurm import in_controller as _ctl
from helpers.slurm import runs as _runs
from helpers.slurm import task_pids as _task_pids
from helpers.slurm import training as _training

# one cluster: under CI's xdist, one worker runs every Slurm test, in file order
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm")]

NODES = {"dx-n1": "dxs-n1", "dx-n2": "dxs-n2"}  # node -> its network namespace
# parity: the same global batch, seed and steps as one device (the losses must agree to 1e-5)
PARITY = ["global_batch_size=64", "epochs=1", "steps_per_epoch=8", "warmup_steps=1",
          "tracking.system_metrics_interval=1", "measure_step_split=false"]
LONG = ["epochs=5000", "steps_per_epoch=20", "warmup_steps=1", "checkpoint.every_steps=0"]
_srun = functools.partial(srun, on=_ctl)  # srun from the controller's namespace, as on a login node
# the partition bound: TF's coordination-service heartbeat (distexp.strategies.multiworker,
# HEARTBEAT_S = 10 s) + the trainer's exit + the job process closing its run
PARTITION_BOUND_S = 45


@pytest.fixture(scope="module")
def nodes():
    up = cluster_up("--nodes", "2")
    yield
    if "already up" not in up:
        down = subprocess.run([str(SCRIPT), "down"], capture_output=True, text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
        assert not [ns for ns in _netns() if ns.startswith("dxs-")], "down left a namespace"


def _netns():
    return [line.split()[0] for line in
            subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
            .splitlines() if line.strip()]


def _node_processes(ns: str) -> list:
    """Processes in a node's namespace other than its slurmd (what a job left there)."""
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
    left = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if not cmd.startswith("/usr/sbin/slurmd"):
            left.append(f"{pid} {cmd[:120]}")
    return left


def _idle() -> bool:
    states = subprocess.run(_ctl("sinfo", "-h", "-N", "-o", "%N %T"), capture_output=True,
                            text=True).stdout.split("\n")[:-1]
    return sorted(states) == ["dx-n1 idle", "dx-n2 idle"]


def _nothing_on_either_node(marker: Path, settle: float = 30):
    """The queue empty, no process of the job (nor anything but slurmd) on either node, both
    nodes idle again. `settle`: after a partition, slurmstepd retries its step-completion message
    to slurmctld once a minute (seen), so it may outlive the link's return by that long."""
    nothing_left(marker, _ctl, queue_s=90, processes_s=30)
    for ns in NODES.values():
        _wait(lambda: not _node_processes(ns), settle, f"nothing but slurmd in {ns}")
    _wait(_idle, 60, "both nodes idle")


def _hosts(run) -> dict:
    tag = run.data.tags["distexp.task_hosts"]
    return dict(part.split("=") for part in tag.split(", "))


def test_multiworker_and_ps_across_nodes(nodes, tmp_path):
    """sbatch --nodes=2 with srun inside: multiworker, one worker per node; srun -N2
    --ntasks-per-node=2: multiworker with 2 workers per node, then ps (coordinator and ps on dx-n1,
    both workers on dx-n2). Both multiworker jobs reproduce one device's per-step losses."""
    one = subprocess.Popen(_cmd("strategy=one_device", *PARITY, "tracking.enabled=false",
                                f"hydra.run.dir={tmp_path / 'one'}"), cwd=tmp_path, env=_env(),
                           text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    common = " ".join(["strategy=multiworker", "cluster=slurm", "workers=2", *PARITY,
                       f"tracking.uri={_uri(tmp_path)}"])
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/bash
#SBATCH --nodes=2 --ntasks-per-node=1 --output={tmp_path}/slurm.out
srun {sys.executable} -m distexp {common} hydra.run.dir={tmp_path}/mw2
""")
    t0 = time.monotonic()
    r = subprocess.run(_ctl("sbatch", "--wait", script), cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=400)
    print(f"sbatch --nodes=2 multiworker: exit {r.returncode} after {time.monotonic() - t0:.1f} s")
    assert r.returncode == 0, r.stdout + r.stderr + (tmp_path / "slurm.out").read_text()[-3000:]
    assert one.wait(timeout=300) == 0, one.stdout.read()[-3000:]
    _nothing_on_either_node(tmp_path / "mw2")

    t0 = time.monotonic()
    p = _srun(tmp_path, ["-N2", "--ntasks-per-node=2"], "mw4", "strategy=multiworker",
              "cluster=slurm", "workers=4", *PARITY)
    out = p.communicate(timeout=400)[0]
    print(f"srun -N2 --ntasks-per-node=2 multiworker: exit {p.returncode} after "
          f"{time.monotonic() - t0:.1f} s")
    assert p.returncode == 0, out[-3000:]
    _nothing_on_either_node(tmp_path / "mw4")

    t0 = time.monotonic()
    p = _srun(tmp_path, ["-N2", "--ntasks-per-node=2"], "ps", "strategy=ps", "cluster=slurm",
              "workers=2", "ps=1", "epochs=1", "steps_per_epoch=4", "warmup_steps=1",
              "tracking.system_metrics_interval=1")
    out = p.communicate(timeout=400)[0]
    print(f"srun -N2 ps: exit {p.returncode} after {time.monotonic() - t0:.1f} s")
    assert p.returncode == 0, out[-3000:]
    _nothing_on_either_node(tmp_path / "ps")

    reference = _losses(tmp_path / "one")
    assert len(reference) == 8
    for job in ("mw2", "mw4"):
        losses = _losses(tmp_path / job)
        diff = max(abs(a - b) for a, b in zip(reference, losses))
        print(f"{job} across two nodes vs one device: max per-step loss difference {diff:.3g}")
        assert len(losses) == 8 and diff < 1e-5
    runs = {r.data.tags["distexp.job_dir"].rsplit("/", 1)[-1]: r for r in _runs(tmp_path)}
    assert set(runs) == {"mw2", "mw4", "ps"}  # one run per job: only the chief's task logs
    assert {r.info.status for r in runs.values()} == {"FINISHED"}
    assert _hosts(runs["mw2"]) == {"worker-0": "dx-n1", "worker-1": "dx-n2"}
    assert _hosts(runs["mw4"]) == {"worker-0": "dx-n1", "worker-1": "dx-n1",
                                   "worker-2": "dx-n2", "worker-3": "dx-n2"}
    assert _hosts(runs["ps"]) == {"chief": "dx-n1", "ps-0": "dx-n1", "worker-0": "dx-n2",
                                  "worker-1": "dx-n2"}
    for r in runs.values():
        assert r.data.tags["distexp.host"] == "dx-n1"  # the chief's task ran on the first node
        assert r.data.params["num_workers"] in ("2", "4")
    # system metrics per node, under MLflow's node id (the host): system/dx-n1/... from the
    # chief's job process, system/dx-n2/... from the first task on dx-n2
    for name, r in runs.items():
        system = [k for k in r.data.metrics if k.startswith("system/")]
        assert {k.split("/")[1] for k in system} == {"dx-n1", "dx-n2"}, (name, system)
        assert "system/dx-n2/cpu_utilization_percentage" in system, (name, system)


@pytest.mark.extended
def test_sweep_with_two_nodes(nodes, tmp_path):
    """hydra/launcher=slurm with nodes=2: the launcher splits workers=2 into 1 task per node."""
    p = subprocess.Popen(_ctl(*_cmd("-m", "hydra/launcher=slurm", "hydra.launcher.nodes=2",
                                    "strategy=multiworker", "cluster=slurm", "workers=2",
                                    "epochs=1", "steps_per_epoch=3", "warmup_steps=1",
                                    f"tracking.uri={_uri(tmp_path)}",
                                    f"hydra.sweep.dir={tmp_path / 'sweep'}")),
                         cwd=tmp_path, env=_env(), text=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=400)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert "(1 task(s) per node)" in out
    jobs = _runs(tmp_path, "job")
    assert [r.info.status for r in jobs] == ["FINISHED"]
    assert _hosts(jobs[0]) == {"worker-0": "dx-n1", "worker-1": "dx-n2"}
    assert [r.info.status for r in _runs(tmp_path, "sweep")] == ["FINISHED"]
    _nothing_on_either_node(tmp_path / "sweep")


@pytest.mark.extended
def test_faults_on_the_second_node(nodes, tmp_path):
    """A task killed on dx-n2 -> FAILED; dx-n2's link cut during training -> FAILED within
    PARTITION_BOUND_S, every process on both nodes gone (the link is restored and the node resumed
    after); scancel of a two-node job -> KILLED. Each: exit != 0, the queue empty, nothing left."""
    # 1. SIGKILL of worker-1's job process on dx-n2
    job = tmp_path / "kill"
    p = _srun(tmp_path, ["-N2", "-n2"], "kill", "strategy=multiworker", "cluster=slurm", *LONG)
    try:
        _wait(_training(job), 240, "the first epoch")
        victim = _task_pids(job, 1)
        assert victim and Path(f"/proc/{victim[0]}/environ").read_bytes().count(
            b"SLURMD_NODENAME=dx-n2\0") == 1, "worker-1's job process on dx-n2 not found"
        os.kill(victim[0], signal.SIGKILL)
        t = time.monotonic()
        out = p.communicate(timeout=180)[0]
    finally:
        p.kill()
    print(f"SIGKILL of the task on dx-n2 to srun's exit: {time.monotonic() - t:.1f} s")
    assert p.returncode != 0, out[-3000:]
    runs = _runs(tmp_path)
    assert [r.info.status for r in runs] == ["FAILED"], out[-3000:]
    _nothing_on_either_node(job)

    # 2. dx-n2's link cut: TF's coordination-service heartbeat fails both sides
    job = tmp_path / "cut"
    p = _srun(tmp_path, ["-N2", "-n2"], "cut", "strategy=multiworker", "cluster=slurm", *LONG)
    try:
        _wait(_training(job), 240, "the first epoch")
        subprocess.run(["ip", "-n", NODES["dx-n2"], "link", "set", "eth0", "down"], check=True)
        cut, t = time.time(), time.monotonic()
        run = _wait(lambda: [r for r in _runs(tmp_path)
                             if r.data.tags["distexp.job_dir"] == str(job)
                             and r.info.status != "RUNNING"], PARTITION_BOUND_S + 30,
                    "the cut job's run to end")[0]
        ended = run.info.end_time / 1000 - cut
        print(f"partition (dx-n2's link down) to the run FAILED: {ended:.1f} s "
              f"(bound {PARTITION_BOUND_S} s)")
        assert run.info.status == "FAILED" and ended < PARTITION_BOUND_S, (run.info, ended)
        out = p.communicate(timeout=120)[0]
        print(f"partition to srun's exit: {time.monotonic() - t:.1f} s")
        assert p.returncode != 0, out[-3000:]
        # the far side stops by itself: its trainer fails on the heartbeat and exits at once
        _wait(lambda: not processes_with(str(job), b"distexp"), 60,
              "no process of the cut job on either node (before the link is back)")
    finally:
        p.kill()
        subprocess.run(["ip", "-n", NODES["dx-n2"], "link", "set", "eth0", "up"])
        subprocess.run(_ctl("scontrol", "update", "nodename=dx-n2", "state=resume"),
                       capture_output=True)
    _nothing_on_either_node(job, settle=150)

    # 3. scancel of a two-node job
    job = tmp_path / "cancel"
    p = _srun(tmp_path, ["-N2", "-n2"], "cancel", "strategy=multiworker", "cluster=slurm", *LONG)
    try:
        _wait(_training(job), 240, "the first epoch")
        ids = [line.split()[0] for line in queue(_ctl)]
        assert len(ids) == 1, ids
        subprocess.run(_ctl("scancel", ids[0]), check=True)
        out = p.communicate(timeout=180)[0]
    finally:
        p.kill()
    assert p.returncode != 0, out[-3000:]
    run = [r for r in _runs(tmp_path) if r.data.tags["distexp.job_dir"] == str(job)]
    assert [r.info.status for r in run] == ["KILLED"], out[-3000:]
    _nothing_on_either_node(job)


@pytest.mark.extended
def test_bad_input_across_nodes_is_one_line(nodes, tmp_path):
    """-N2 -n3 with workers=2: every task says it in one line, nothing trains. A tracking URI the
    nodes cannot reach (a server on the submit host's loopback, which is not the nodes'): every
    task stops with the one line naming the URI before TensorFlow (each probes the store), so no
    task waits for a chief that never started."""
    p = _srun(tmp_path, ["-N2", "-n3"], "n3", "strategy=multiworker", "cluster=slurm",
              "workers=2", "epochs=1", "steps_per_epoch=3")
    out = p.communicate(timeout=120)[0]
    assert p.returncode != 0
    lines = [ln for ln in out.splitlines() if ln.startswith("distexp: error:")]
    assert len(lines) == 3 and "Traceback" not in out, out[-3000:]
    assert all(ln.startswith("distexp: error: workers: received workers=2, which needs 2 Slurm "
                             "tasks; this step has 3") for ln in lines), lines
    assert not (tmp_path / "n3" / "worker-0.log").exists()  # refused before any trainer started
    _nothing_on_either_node(tmp_path / "n3")

    t0 = time.monotonic()
    p = subprocess.Popen(_ctl("srun", "-N2", "-n2", *_cmd(
        "strategy=multiworker", "cluster=slurm", "epochs=1", "steps_per_epoch=3",
        "tracking.uri=http://127.0.0.1:5999", f"hydra.run.dir={tmp_path / 'unreachable'}")),
        cwd=tmp_path, env=_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.communicate(timeout=180)[0]
    print(f"unreachable tracking store: srun exit {p.returncode} after "
          f"{time.monotonic() - t0:.1f} s")
    assert p.returncode != 0
    lines = [ln for ln in out.splitlines() if ln.startswith("distexp: error:")]
    assert lines == 2 * ["distexp: error: tracking.uri: received 'http://127.0.0.1:5999'; MLflow "
                         "cannot be reached there ([Errno 111] Connection refused); valid: the URI "
                         "of a running tracking server or store (check the URI and the server), or "
                         "tracking.enabled=false"], out[-3000:]
    assert "Traceback" not in out and not list((tmp_path / "unreachable").glob("worker-*.log"))
    _nothing_on_either_node(tmp_path / "unreachable")
