"""A job whose console is gone (`| true`, `| grep -m1`, a closed terminal) goes on and ends as it
would have: its output is dropped, its runs end FINISHED, its logs are complete
(not a job that waits for good with the trainer's log empty)."""
from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from helpers import FAST, cli_env, mlflow_runs, processes_mentioning

pytestmark = [pytest.mark.slow, pytest.mark.extended]


def _piped(cwd, *args, timeout=400) -> tuple:
    """`python -m distexp ARGS | true` through a real shell: stdout's reader exits at once, before
    the job's first line. (exit code of the job, its stderr)"""
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "distexp", *args])
    script = f'{cmd} 2>stderr.txt | true; exit "${{PIPESTATUS[0]}}"'
    p = subprocess.run(["bash", "-c", script], cwd=cwd, env=cli_env(), timeout=timeout)
    return p.returncode, (cwd / "stderr.txt").read_text()


def test_a_job_piped_to_a_closed_console_finishes(cli):
    job = cli.cwd / "job"
    code, err = _piped(cli.cwd, *FAST, f"hydra.run.dir={job}")
    assert code == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    _, runs = mlflow_runs(cli.uri)
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert runs[0].data.metrics["eval/accuracy"] > 0
    log = (job / "chief.log").read_text()
    assert "Strategy:" in log and "final: eval_loss" in log, log  # the whole job, in its log
    assert processes_mentioning(str(job)) == []


def test_a_sweep_piped_to_a_closed_console_finishes(cli):
    sweep = cli.cwd / "sweep"
    code, err = _piped(cli.cwd, "-m", *FAST, "seed=0,1", f"hydra.sweep.dir={sweep}")
    assert code == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    _, runs = mlflow_runs(cli.uri)
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 3  # the sweep's run + 2 jobs
    for n in (0, 1):
        assert "final: eval_loss" in (sweep / str(n) / "chief.log").read_text()
    assert processes_mentioning(str(sweep)) == []
