"""distexp on a Ray cluster of 2 nodes (1 CPU each) on this machine, every node and driver bound
to 127.0.0.1 (tests/helpers/ray_cluster.py, started and stopped by the module's fixture):
multiworker with one worker per node reproducing cluster=local's loss, ps, a node lost mid-training,
Ctrl-C, a job bigger than the cluster, an address where nothing answers, and sweeps on
hydra/launcher=ray. After each job: no actor, no placement group of it left in the cluster.

One cluster for the file: under CI's xdist one worker runs all of it (xdist_group "ray"), in file
order (the node-loss test, which removes a node and adds it back, is last)."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import FAST, cli_env, db_uri, distexp_cmd, mlflow_runs, run_cli, wait_until
from helpers.ray_cluster import Held

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

LONG = ["epochs=5000", "warmup_steps=2", "checkpoint.every_steps=0"]
NOTHING = {"actors": [], "groups": [], "nodes": 2}


@pytest.fixture(scope="module")
def ray_cluster():
    held = Held()
    yield held
    held.close()


def _args(tmp: Path, *extra):
    return ["strategy=multiworker", "workers=2", f"tracking.uri={db_uri(tmp)}", *FAST, *extra]


def _figures(tmp: Path) -> dict:
    [path] = list((tmp / "outputs").rglob("result.json"))
    return json.loads(path.read_text())


def _runs(tmp: Path):
    return [r for r in mlflow_runs(db_uri(tmp))[1] if r.data.tags.get("distexp.run_kind") != "sweep"]


def _start(tmp: Path, *args) -> subprocess.Popen:
    log = open(tmp / "job.out", "w")
    return subprocess.Popen(distexp_cmd(*args), cwd=tmp, env=cli_env(), stdout=log,
                            stderr=subprocess.STDOUT, text=True)


def _training(tmp: Path) -> bool:
    out = tmp / "job.out"
    return out.exists() and "epoch 2/" in out.read_text()


def test_multiworker_on_two_nodes_trains_as_a_local_cluster(ray_cluster, tmp_path):
    local, ray = tmp_path / "local", tmp_path / "ray"
    local.mkdir(), ray.mkdir()
    r = run_cli(_args(local), local)
    assert r.returncode == 0, r
    r = run_cli(_args(ray, "cluster=ray", f"cluster.address={ray_cluster.address}"), ray)
    assert r.returncode == 0, r
    assert abs(_figures(ray)["train/loss"] - _figures(local)["train/loss"]) < 1e-5
    [run] = _runs(ray)
    assert run.info.status == "FINISHED"
    hosts = dict(h.split("=") for h in run.data.tags["distexp.task_hosts"].split(", "))
    assert sorted(hosts) == ["worker-0", "worker-1"]
    assert len({h.split(" node ")[1] for h in hosts.values()}) == 2, hosts  # two Ray nodes
    assert all(h.startswith("127.0.0.1 node ") for h in hosts.values()), hosts
    job_dir = Path(run.data.tags["distexp.job_dir"])
    assert "epoch 2/2" in (job_dir / "worker-0.log").read_text()  # each task's log, here
    assert "group_size = 2" in (job_dir / "worker-1.log").read_text()  # its collectives
    assert ray_cluster.left() == NOTHING


@pytest.mark.extended
def test_ps_on_two_nodes_finishes(ray_cluster, tmp_path):
    r = run_cli(["strategy=ps", "workers=2", "ps=1", "cluster=ray", "cluster.cpus=0.5",
                 f"cluster.address={ray_cluster.address}", f"tracking.uri={db_uri(tmp_path)}",
                 *FAST], tmp_path)
    assert r.returncode == 0, r
    [run] = _runs(tmp_path)
    assert run.info.status == "FINISHED"
    assert "chief=" in run.data.tags["distexp.task_hosts"]
    assert ray_cluster.left() == NOTHING


@pytest.mark.extended
def test_a_one_process_strategy_is_one_actor_on_one_node(ray_cluster, tmp_path):
    r = run_cli(["strategy=mirrored", "cpu_replicas=2", "cluster=ray",
                 f"cluster.address={ray_cluster.address}", f"tracking.uri={db_uri(tmp_path)}",
                 *FAST], tmp_path)
    assert r.returncode == 0, r
    [run] = _runs(tmp_path)
    assert run.info.status == "FINISHED"
    assert re.fullmatch(r"chief=127\.0\.0\.1 node [0-9a-f]{8}", run.data.tags["distexp.task_hosts"])
    assert "Number of devices: 2" in r.stdout, r
    assert ray_cluster.left() == NOTHING


def test_gpus_beyond_the_cluster_is_one_line_before_tensorflow(ray_cluster, tmp_path):
    r = run_cli(_args(tmp_path, "gpus=1", "cluster=ray", f"cluster.address={ray_cluster.address}"),
                tmp_path)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines()[-1] == (
        f"distexp: error: gpus: received 1 per worker (workers=2, gpus=1: 2 worker), which needs 2 "
        f"GPU(s); the Ray cluster at {ray_cluster.address} offers 2 CPU, 0 GPU over 2 node(s) "
        "(ray.cluster_resources()). Set gpus=0 (CPU) or fewer workers"), r
    assert "Number of devices" not in r.out  # no trainer started
    assert ray_cluster.left() == NOTHING


def test_nothing_answering_at_the_address_is_one_line(tmp_path):
    r = run_cli(_args(tmp_path, "cluster=ray", "cluster.address=127.0.0.1:9"), tmp_path)
    assert r.returncode == 2, r
    assert re.fullmatch(r"distexp: error: cluster.address: received '127.0.0.1:9'; no Ray cluster "
                        r"answers there \(ConnectionRefusedError: .*\)\. Start one \(ray start "
                        r"--head\), or set cluster.address=auto to start a Ray on this machine "
                        r"for the job", r.stderr.strip().splitlines()[-1]), r


def test_ctrl_c_ends_the_run_killed_and_releases_every_actor(ray_cluster, tmp_path):
    p = _start(tmp_path, *_args(tmp_path, "cluster=ray", f"cluster.address={ray_cluster.address}",
                                *LONG))
    try:
        wait_until(lambda: _training(tmp_path), 180, "the job training")
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=60) == 130
    finally:
        p.kill()
    out = (tmp_path / "job.out").read_text()
    assert "distexp: interrupted by SIGINT: every training process was stopped" in out, out[-3000:]
    assert "error" not in out.splitlines()[-1]  # a stop the user asked for is no error
    [run] = _runs(tmp_path)
    assert run.info.status == "KILLED"
    assert ray_cluster.left() == NOTHING


@pytest.mark.extended  # 55 s; the gate keeps the sweep's resources (tests/cluster/test_ray_unit.py)
def test_a_sweep_on_hydra_launcher_ray(ray_cluster, tmp_path):
    env = {"RAY_ADDRESS": ray_cluster.address}
    r = run_cli(["-m", "strategy=one_device,mirrored", "cpu_replicas=2", "seed=1,2",
                 "hydra/launcher=ray", f"tracking.uri={db_uri(tmp_path)}", "epochs=1",
                 "warmup_steps=2"], tmp_path, env=env)
    assert r.returncode == 0, r
    assert re.search(r"^Sweep \S+: 4 jobs finished\.", r.stdout, re.M), r
    runs = mlflow_runs(db_uri(tmp_path))[1]
    parents = [x for x in runs if x.data.tags.get("distexp.run_kind") == "sweep"]
    children = [x for x in runs if x.data.tags.get("mlflow.parentRunId")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(children) == 4 and {c.info.status for c in children} == {"FINISHED"}
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert ray_cluster.left() == NOTHING


@pytest.mark.extended
def test_a_repeats_auto_sweep_on_hydra_launcher_ray_ends_and_resumes(ray_cluster, tmp_path):
    tiny = ["model=mlp", "epochs=1", "steps_per_epoch=5", "warmup_steps=1",
            "measure_peak_flops=false", "measure_step_split=false"]
    args = ["-m", "strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
            "repeats=auto", "sweep.max_repeats=2", "hydra/launcher=ray",
            f"tracking.uri={db_uri(tmp_path)}", *tiny]
    env = {"RAY_ADDRESS": ray_cluster.address}
    r = run_cli([*args, "hydra.sweep.dir=sweep"], tmp_path, env=env, timeout=1200)
    assert r.returncode == 0, r
    rounds = [ln for ln in r.stdout.splitlines() if ln.startswith("round ")]
    assert 1 <= len(rounds) <= 2 and rounds[0].startswith("round 1: mirrored x2"), r
    saved = json.loads((tmp_path / "sweep" / "auto.json").read_text())  # the decision record
    assert (saved["repeats"], saved["rounds"]) == ("auto", len(rounds))
    assert saved["comparisons"] and saved["comparisons"][0]["rounds"] == len(rounds)
    runs = mlflow_runs(db_uri(tmp_path))[1]
    parent = next(p for p in runs if p.data.tags.get("distexp.run_kind") == "sweep")
    assert json.loads(parent.data.tags["distexp.outcomes"]) == saved  # one record, both places
    jobs = [c for c in runs if c.data.tags.get("distexp.run_kind") == "job"]
    assert jobs and {c.info.status for c in jobs} == {"FINISHED"}
    again = run_cli([*args, f"sweep.resume={parent.data.tags['distexp.sweep_id']}",
                     "hydra.sweep.dir=again"], tmp_path, env=env, timeout=900)
    assert again.returncode == 0, again
    assert json.loads((tmp_path / "again" / "auto.json").read_text()) == saved
    after = mlflow_runs(db_uri(tmp_path))[1]
    assert len([c for c in after if c.data.tags.get("distexp.run_kind") == "job"]) == len(jobs)
    assert ray_cluster.left() == NOTHING


def test_a_node_lost_mid_training_fails_the_job_naming_the_task(ray_cluster, tmp_path):
    p = _start(tmp_path, *_args(tmp_path, "cluster=ray", f"cluster.address={ray_cluster.address}",
                                *LONG))
    try:
        wait_until(lambda: _training(tmp_path), 180, "the job training")
        removed = ray_cluster.command("remove")
        assert removed.startswith("REMOVED "), removed
        t0 = time.monotonic()
        assert p.wait(timeout=90) == 1
        took = time.monotonic() - t0
    finally:
        p.kill()
        ray_cluster.command("add")
    out = (tmp_path / "job.out").read_text()
    [line] = [x for x in out.splitlines() if x.startswith("distexp: error:")]
    [run] = _runs(tmp_path)
    hosts = dict(h.split("=") for h in run.data.tags["distexp.task_hosts"].split(", "))
    [lost] = [t for t, h in hosts.items() if removed.split()[1].startswith(h.split(" node ")[1])]
    assert re.match(rf"distexp: error: {lost} exited with code 1: cluster=ray: task {lost} on Ray "
                    rf"node {re.escape(hosts[lost])} was lost \(its actor: it (died|stopped "
                    r"answering)\): its node died or its actor was killed \(logs: ", line), line
    assert took < 60, took
    assert run.info.status == "FAILED"
    assert ray_cluster.left() == NOTHING
