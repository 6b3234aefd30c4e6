"""A starved job is caught (distexp.figures.disturbance): a real default-sized job run on one core
beside busy processes pinned to that core is flagged in result.json, its console and its run's
tag; the same job on a machine at rest is not.

The undisturbed half needs a machine at rest (a load far above the cores starves any job, rightly
flagged): on a loaded machine it is skipped, saying the load."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from helpers import mlflow_runs

pytestmark = pytest.mark.slow

JOB = ["strategy=one_device", "epochs=2", "measure_step_split=false", "measure_peak_flops=false",
       "measure_min_seconds=1"]
BUSY = "while True: pass"


def _job_result(cli, name):
    return json.loads(next((cli.cwd / "outputs").rglob(f"{name}/result.json")).read_text())


def test_job_starved_by_busy_processes_on_its_core_is_flagged(cli):
    core = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    busy = [subprocess.Popen([sys.executable, "-c", BUSY],
                             preexec_fn=lambda: os.sched_setaffinity(0, {core})) for _ in range(2)]
    os.sched_setaffinity(0, {core})  # the job's processes inherit it: the three share one core
    try:
        r = cli(*JOB, "hydra.run.dir=outputs/starved")
    finally:
        os.sched_setaffinity(0, mine)
        for p in busy:
            p.kill()
            p.wait()
    assert r.returncode == 0, r
    result = _job_result(cli, "starved")
    assert result["cpu_per_wall"] < 0.8, result
    assert result["cpu_per_wall"] == pytest.approx(result["cpu_seconds_timed"] /
                                                   result["timed_seconds"])
    shown = math.floor(result["cpu_per_wall"] * 100) / 100
    assert result["disturbed"].startswith(f"CPU/wall {shown:.2f} < 0.8, load ")
    warning = [ln for ln in r.stdout.splitlines() if ln.startswith("distexp: warning: disturbed:")]
    assert warning == [f"distexp: warning: disturbed: {result['disturbed']} (tag "
                       "distexp.disturbed)"], r
    _, runs = mlflow_runs(cli.uri)
    assert runs[0].data.tags["distexp.disturbed"] == result["disturbed"]


def test_job_with_the_machine_to_itself_is_not_flagged(cli):
    """On a machine at rest (load average below its cores) the job's trainer is never off a core
    for long: CPU/wall at least the floor, no flag. On a loaded one the premise does not hold
    (a load far above the cores starves the job, rightly flagged): skipped, saying the load."""
    cpus = os.cpu_count()
    if os.getloadavg()[0] > cpus:
        pytest.skip(f"load {os.getloadavg()[0]:.1f} on {cpus} CPUs: not a machine at rest")
    r = cli(*JOB, "hydra.run.dir=outputs/quiet")
    assert r.returncode == 0, r
    result = _job_result(cli, "quiet")
    if result["disturbed"] is not None and result["load_average"] > cpus:
        pytest.skip(f"the load rose to {result['load_average']:.1f} during the job: "
                    f"{result['disturbed']}")
    assert result["disturbed"] is None and result["cpu_per_wall"] >= 0.8, result
    assert "disturbed" not in r.stdout
    _, runs = mlflow_runs(cli.uri)
    assert "distexp.disturbed" not in runs[0].data.tags
