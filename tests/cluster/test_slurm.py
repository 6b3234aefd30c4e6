"""distexp on a real one-node Slurm (scripts/slurm-cluster.sh): srun, sbatch and the submitit
launcher; multiworker and ps end FINISHED with every task gone; a task killed with SIGKILL fails
the run, scancel and SIGTERM / Ctrl-C of a sweep waiting on Slurm kill it; two jobs of a sweep run
at once on the node; a bad request is one line. Each test also checks that Slurm's queue is empty
and no process of the job is left.

The session fixture starts the cluster (and stops it after, unless it was already up, as under
.ci/run); it skips only where the cluster cannot start at all (not root, not Debian)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cli_env as _env
from helpers import db_uri as _uri
from helpers import distexp_cmd as _cmd
from helpers import wait_until as _wait
from helpers.slurm import SCRIPT, cluster_up, srun
from helpers.slurm import nothing_left as _nothing_left
from helpers.slurm import queue as _queue
from helpers.slurm import runs as _runs
from helpers.slurm import task_pids as _task_pids
from helpers.slurm import training as _training

# one cluster: under CI's xdist, one worker runs every Slurm test, in file order
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm")]

TINY = ["epochs=1", "steps_per_epoch=3", "warmup_steps=1", "measure_step_split=false"]
# Jobs that are stopped mid-run (killed, cancelled, interrupted): long enough that a warm-started
# job cannot finish before the test stops it (at epochs=200 one did, once, under CI)
LONG = ["epochs=5000", "steps_per_epoch=20", "warmup_steps=1", "checkpoint.every_steps=0"]


@pytest.fixture(scope="session")
def slurm():
    up = cluster_up()
    yield
    if "already up" not in up:
        subprocess.run([str(SCRIPT), "down"], capture_output=True, timeout=120)


@pytest.mark.extended
def test_srun_multiworker_and_ps_finish_with_every_task_gone(slurm, tmp_path):
    for strategy, n, logs in [("multiworker", 2, {"worker-0.log", "worker-1.log"}),
                              ("ps", 4, {"chief.log", "ps-0.log", "worker-0.log", "worker-1.log"})]:
        t0 = time.monotonic()
        p = srun(tmp_path, [f"-n{n}"], strategy, f"strategy={strategy}", "cluster=slurm",
                 "workers=2", "ps=1", *TINY)
        out = p.communicate(timeout=240)[0]
        print(f"srun -n{n} {strategy}: exit {p.returncode} after {time.monotonic() - t0:.1f} s")
        assert p.returncode == 0, out[-3000:]
        written = {f.name for f in (tmp_path / strategy).iterdir()}
        assert logs <= written  # the resolver's roles
        # the chief's config.yaml, every other task's its own (a shared one was read half-written)
        chief = "worker-0" if strategy == "multiworker" else "chief"
        assert {f for f in written if f.startswith("config")} == {"config.yaml", *(
            f"config.{log[:-4]}.yaml" for log in logs if log != f"{chief}.log")}, written
        _nothing_left(tmp_path / strategy)
    runs = {r.data.params["strategy.name"]: r for r in _runs(tmp_path)}
    assert set(runs) == {"multiworker", "ps"}  # one run per job: only the chief's task logs
    for r in runs.values():
        assert r.info.status == "FINISHED" and r.data.params["num_workers"] == "2"
        assert r.data.metrics["eval/accuracy"] > 0


@pytest.mark.extended
def test_sbatch_without_srun_is_one_line_and_with_srun_finishes(slurm, tmp_path):
    common = " ".join(["strategy=multiworker", "cluster=slurm", *TINY,
                       f"tracking.uri={_uri(tmp_path)}"])
    script = tmp_path / "job.sh"
    script.write_text(f"""#!/bin/bash
#SBATCH --ntasks=2 --output={tmp_path}/slurm.out
{sys.executable} -m distexp {common} hydra.run.dir={tmp_path}/nosrun
echo "without srun: exit $?"
srun {sys.executable} -m distexp {common} hydra.run.dir={tmp_path}/mw
""")
    r = subprocess.run(["sbatch", "--wait", str(script)], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=300)
    out = (tmp_path / "slurm.out").read_text()
    assert r.returncode == 0, r.stdout + r.stderr + out[-3000:]
    assert "without srun: exit 2" in out and "Traceback" not in out
    assert "distexp: error: cluster: received 'slurm' in a Slurm job" in out
    assert "a batch script must start the tasks with srun" in out
    runs = _runs(tmp_path)
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    _nothing_left(tmp_path / "mw")


@pytest.mark.parametrize("strategy,n,rank,log", [("multiworker", 2, 1, "worker-0.log"),
                                                  pytest.param("ps", 4, 2, "chief.log",
                                                               marks=pytest.mark.extended)])
def test_sigkill_of_a_task_fails_the_run_and_leaves_nothing(slurm, tmp_path, strategy, n, rank,
                                                            log):
    """multiworker: the chief's collectives fail. ps (rank 2 = worker-0): TensorFlow's coordinator
    would go on with the other worker; the chief's task sees the server gone and fails the job."""
    job = tmp_path / "job"
    p = srun(tmp_path, [f"-n{n}"], "job", f"strategy={strategy}", "cluster=slurm", *LONG)
    try:
        _wait(_training(job, log), 180, "the first epoch")
        victim = _task_pids(job, rank)
        assert victim, f"task {rank}'s job process not found"
        os.kill(victim[0], signal.SIGKILL)
        killed = time.monotonic()
        out = p.communicate(timeout=120)[0]
    finally:
        p.kill()
    print(f"{strategy}: SIGKILL of task {rank} to srun's exit: {time.monotonic() - killed:.1f} s")
    assert p.returncode != 0, out[-3000:]
    runs = _runs(tmp_path)
    assert len(runs) == 1 and runs[0].info.status == "FAILED", out[-3000:]
    if strategy == "ps":
        # the job process's watcher names the server; the coordinator may see it first, when
        # TensorFlow re-runs the lost worker's steps elsewhere (distexp.train.step.PSDispatch)
        assert ("distexp: error: worker-0 stopped answering" in out
                or "ps: a worker stopped answering during a window" in out), out[-3000:]
    _nothing_left(job)


@pytest.mark.extended
def test_scancel_kills_the_run_and_leaves_nothing(slurm, tmp_path):
    job = tmp_path / "mw"
    p = srun(tmp_path, ["-n2"], "mw", "strategy=multiworker", "cluster=slurm", *LONG)
    try:
        _wait(_training(job, "worker-0.log"), 180, "the first epoch")
        ids = [line.split()[0] for line in _queue()]
        assert len(ids) == 1, ids
        subprocess.run(["scancel", ids[0]], check=True)
        out = p.communicate(timeout=120)[0]
    finally:
        p.kill()
    assert p.returncode != 0, out[-3000:]
    runs = _runs(tmp_path)
    assert len(runs) == 1 and runs[0].info.status == "KILLED", out[-3000:]
    _nothing_left(job)


def _slurm_sweep(tmp: Path, *args, launcher="slurm", name="sweep", **kw):
    return subprocess.Popen(_cmd("-m", f"hydra/launcher={launcher}", *args,
                                 f"tracking.uri={_uri(tmp)}", f"hydra.sweep.dir={tmp / name}"),
                            cwd=tmp, env=_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


@pytest.mark.extended
def test_submitit_sweep_runs_two_jobs_at_once(slurm, tmp_path):
    """multiworker with 1 worker (1 task) and ps with 1 worker + 1 ps (3 tasks): the launcher
    gives each its own task count, both fit the node's 4 CPUs together and run at the same time
    (ports from their job ids: no collision)."""
    p = _slurm_sweep(tmp_path, "strategy=multiworker,ps", "cluster=slurm", "workers=1", "ps=1",
                     *TINY)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, out[-3000:] + err[-3000:]
    assert "(1 task(s) per node)" in out and "(3 task(s) per node)" in out
    jobs = _runs(tmp_path, "job")
    assert len(jobs) == 2 and {r.info.status for r in jobs} == {"FINISHED"}
    assert [r.info.status for r in _runs(tmp_path, "sweep")] == ["FINISHED"]
    ids = sorted(d.name.split("_")[0] for d in (tmp_path / "sweep" / ".submitit").iterdir()
                 if d.name[0].isdigit())
    acct = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,Start,End,State", "-j",
                           ",".join(ids)], capture_output=True, text=True).stdout.split()
    spans = [line.split("|") for line in acct]
    print("sacct:", spans)
    assert len(spans) == 2 and all(s[3] == "COMPLETED" for s in spans)
    assert max(s[1] for s in spans) < min(s[2] for s in spans), "the two jobs did not overlap"
    assert (tmp_path / "sweep" / "1" / "chief.log").exists()
    _nothing_left(tmp_path / "sweep")


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGTERM, id="SIGTERM", marks=pytest.mark.extended),
                                 pytest.param(signal.SIGINT, id="SIGINT")])
def test_interrupted_sweep_waiting_on_slurm_is_killed_and_cancelled(slurm, tmp_path, sig):
    """Two one_device jobs of 3 CPUs each: one runs, the other pends (4 CPUs). SIGTERM or Ctrl-C
    to the sweep process: scancel of both, every run KILLED, the queue empty."""
    p = _slurm_sweep(tmp_path, "strategy=one_device", "seed=0,1", "hydra.launcher.cpus_per_task=3",
                     *LONG)
    try:
        _wait(lambda: (tmp_path / "sweep" / "sweep.json").exists(), 120, "the sweep's parent run")
        _wait(lambda: any(r.info.status == "RUNNING" for r in _runs(tmp_path, "job")), 180,
              "a running job's run")
        _wait(lambda: any("PENDING" in line for line in _queue()), 30, "a pending job")
        p.send_signal(sig)
        out, err = p.communicate(timeout=180)
    finally:
        p.kill()
    assert p.returncode == 130, out[-3000:] + err[-3000:]
    print("\n".join(line for line in out.splitlines() if line.startswith("distexp:")))
    assert "cancelling Slurm job(s)" in out
    assert [r.info.status for r in _runs(tmp_path, "sweep")] == ["KILLED"]
    # one child run: the pending job never started
    assert [r.info.status for r in _runs(tmp_path, "job")] == ["KILLED"]
    _nothing_left(tmp_path / "sweep")


@pytest.mark.extended
def test_bad_requests_are_one_line(slurm, tmp_path):
    # more CPUs than any node has: refused before sbatch, nothing queued
    p = _slurm_sweep(tmp_path, "strategy=one_device", "hydra.launcher.cpus_per_task=64", *TINY)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2, out + err
    assert err.count("distexp: error:") == 1 and "Traceback" not in err, err
    assert "cpus_per_task: received 64" in err and "would pend forever" in err
    assert not _queue()
    assert [r.info.status for r in _runs(tmp_path, "sweep")] == ["FAILED"]
    # a request sbatch refuses: one line with sbatch's reason
    p = _slurm_sweep(tmp_path, "strategy=one_device", "hydra.launcher.partition=nosuch", *TINY,
               name="refused")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and err.count("distexp: error:") == 1 and "Traceback" not in err, err
    assert "sbatch refused the job(s)" in err and "partition" in err, err
    # the plugin's own launcher gives 1 task: workers=2 is one line from the job, not 1 worker
    p = _slurm_sweep(tmp_path, "strategy=multiworker", "cluster=slurm", "workers=2", *TINY,
               launcher="submitit_slurm", name="plain")
    out, err = p.communicate(timeout=240)
    assert p.returncode == 1, out + err
    record = json.loads((tmp_path / "plain" / "sweep_jobs" / "0.json").read_text())
    assert record["error"].startswith("workers: received workers=2, which needs 2 Slurm tasks; "
                                      "this step has 1"), record
    _nothing_left(tmp_path / "plain")
