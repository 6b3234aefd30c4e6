"""Warm trainers are honest by construction: a job forked from the warm trainer trains as the same
job in fresh interpreters, and perf/time_to_first_step_s agrees with a stamp taken outside.
Tier: slow."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from distexp.parity import losses
from helpers import FAST, child_env, mlflow_runs
from helpers.processes import parents_of

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("strategy", ["mirrored", "multiworker"])
@pytest.mark.extended
def test_warm_and_fresh_trainers_train_the_same(cli, strategy):
    """A fixed-seed job forked from the warm trainer and the same job in fresh interpreters: the
    same per-step losses (a fork that carried state, a started runtime or another seed would
    show here). Each job's training processes are watched while it runs: the warm job's every
    one a child of the warm trainer (a silent fallback to fresh processes would compare fresh
    with fresh), the fresh job's none."""
    jobs, parents = {}, {}
    tasks = 2 if strategy == "multiworker" else 1
    for warm in ("true", "false"):
        jobs[warm] = cli.cwd / f"job-{warm}"
        done = []
        run = threading.Thread(target=lambda: done.append(cli(
            f"strategy={strategy}", "epochs=1", "steps_per_epoch=12", "seed=3",
            "steps_per_execution=1", "measure_step_split=false", "tracking.enabled=false",
            f"warm_start={warm}", f"hydra.run.dir={jobs[warm]}", *FAST[1:])))
        run.start()
        seen = parents[warm] = {}
        while run.is_alive():  # the trainers' parents, while they run
            seen.update(parents_of(str(jobs[warm]), "distexp.train.trainer"))
            time.sleep(0.05)
        r = done[0]
        assert r.returncode == 0, r
        assert "warm trainer unavailable" not in r.out, r.out
        assert len(seen) == tasks, seen
    assert all("-m distexp.train.warm_server" in p for p in parents["true"].values()), parents
    assert not any("warm_server" in p for p in parents["false"].values()), parents
    warm_losses, fresh_losses = losses(jobs["true"]), losses(jobs["false"])
    assert len(warm_losses) == 12
    assert warm_losses == pytest.approx(fresh_losses, rel=1e-6, abs=1e-7)


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


IMPORTS_AFTER_FORK = """
import json, sys
from pathlib import Path
from distexp.train import warm_server
warm_server.preload()  # what the warm trainer imports before it forks
before = set(sys.modules)
from omegaconf import OmegaConf
from distexp.train import trainer
config = Path(sys.argv[1])
trainer.train(OmegaConf.load(config), config.parent)
print("NEW " + json.dumps(sorted(m for m in set(sys.modules) - before
                                 if m.split(".")[0] in ("distexp", "hydra", "sklearn"))))
"""


@pytest.mark.extended
def test_the_warm_trainer_preloads_what_a_default_job_imports(cli):
    """Every distexp, hydra and sklearn module the default job's trainer imports (probes and
    figures after training included) is imported by the warm trainer before it forks: a module
    left out costs every forked job its import (hydra's ~0.3 s, paid per job of a sweep)."""
    job = cli.cwd / "job"
    r = cli("epochs=1", "steps_per_epoch=4", "tracking.enabled=false", f"hydra.run.dir={job}")
    assert r.returncode == 0, r
    p = subprocess.run([sys.executable, "-c", IMPORTS_AFTER_FORK, str(job / "config.yaml")],
                       cwd=cli.cwd, env=child_env(), capture_output=True, text=True, timeout=300)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("NEW ")), None)
    assert p.returncode == 0 and line is not None, p.stderr[-3000:]
    import json

    assert json.loads(line[4:]) == [], line
