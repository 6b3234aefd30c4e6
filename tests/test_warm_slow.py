"""Warm trainers are honest by construction: a job forked from the warm trainer trains as the same
job in fresh interpreters, and perf/time_to_first_step_s agrees with a stamp taken outside.
Tier: slow."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from distexp.parity import losses
from helpers import FAST, child_env, mlflow_runs

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("strategy", ["mirrored", "multiworker"])
def test_warm_and_fresh_trainers_train_the_same(cli, strategy):
    """A fixed-seed job forked from the warm trainer and the same job in fresh interpreters: the
    same per-step losses (a fork that carried state, a started runtime or another seed would
    show here)."""
    jobs = {}
    for warm in ("true", "false"):
        jobs[warm] = cli.cwd / f"job-{warm}"
        r = cli(f"strategy={strategy}", "epochs=1", "steps_per_epoch=12", "seed=3",
                "steps_per_execution=1", "measure_step_split=false", "tracking.enabled=false",
                f"warm_start={warm}", f"hydra.run.dir={jobs[warm]}", *FAST[1:])
        assert r.returncode == 0, r
    warm_losses, fresh_losses = losses(jobs["true"]), losses(jobs["false"])
    assert len(warm_losses) == 12
    assert warm_losses == pytest.approx(fresh_losses, rel=1e-6, abs=1e-7)
    assert "warm trainer unavailable" not in r.out


@pytest.mark.alone
def test_time_to_first_step_agrees_with_an_outside_stamp(tmp_path):
    """perf/time_to_first_step_s counts from the job process's own start: the first step's line,
    stamped here from the moment the command was started, agrees within 0.2 s."""
    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-m", "distexp", "epochs=1", "steps_per_epoch=8",
                          "log_every_steps=1", "steps_per_execution=1", "measure_step_split=false",
                          f"tracking.uri={uri}"], cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    stamp, out = None, []
    for line in p.stdout:
        out.append(line)
        if stamp is None and " step 1/8 " in line:
            stamp = time.time() - t0
    assert p.wait(timeout=300) == 0, "".join(out)
    _, runs = mlflow_runs(uri)
    figure = runs[0].data.metrics["perf/time_to_first_step_s"]
    assert stamp is not None, "".join(out)
    assert abs(figure - stamp) < 0.2, (figure, stamp)
