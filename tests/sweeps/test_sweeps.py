"""A multirun through the CLI, as a user runs it: one MLflow parent run with a child per job; a
failed job fails the parent but not the other jobs; the report reads the real sweep; Optuna finds
a best trial; the joblib launcher runs jobs in parallel."""
from __future__ import annotations

import re

import pytest

from helpers import mlflow_runs, processes_mentioning

pytestmark = pytest.mark.slow

SMALL = ["model=mlp", "epochs=1", "warmup_steps=2", "measure_peak_flops=false", "measure_step_split=false"]


def _split(runs):
    parents = [r for r in runs if r.data.tags.get("distexp.run_kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("distexp.run_kind") == "job"]
    return parents, children


FACTORIES = ["factories:small_mlp", "factories:crash", "factories:fails_when_env",
             "factories:small_mlp"]


def test_sweep_is_a_parent_run_and_a_failed_job_does_not_stop_it(cli):
    # 4 jobs planned; the last repeats the first's set-up, so it is merged into it (3 jobs run);
    # exactly one (the factory that kills its process) passes the checks up front and fails at
    # run time, in the trainer
    r = cli("-m", "model=custom", "model.factory=" + ",".join(FACTORIES), "epochs=1",
            "steps_per_epoch=8", "warmup_steps=2", "measure_step_split=false", "hydra.sweep.dir=sweep", timeout=900)
    assert r.returncode == 1, r
    assert "sweep: 1 job(s) merged into an earlier job of the same set-up" in r.stdout, r
    client, runs = mlflow_runs(cli.uri)
    parents, children = _split(runs)
    assert len(runs) == 4 and len(parents) == 1 and len(children) == 3
    parent = parents[0]
    sid = parent.data.tags["distexp.sweep_id"]
    assert parent.info.status == "FAILED"
    assert parent.data.params["job_count"] == "3"
    assert parent.data.params["overrides"].startswith("model=custom model.factory=" + ",".join(FACTORIES)), \
        parent.data.params["overrides"]
    assert parent.data.metrics["sweep/jobs"] == 3 and parent.data.metrics["sweep/failed_jobs"] == 1
    assert all(c.data.tags["distexp.sweep_id"] == sid for c in children)
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    status = {int(c.data.tags["distexp.job_num"]): c.info.status for c in children}
    assert status == {0: "FINISHED", 1: "FAILED", 2: "FINISHED"}
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("distexp: error: sweep")]
    assert len(err) == 1 and "1 of 3 jobs failed (the others ran to the end); first: job 1" in err[0]
    assert processes_mentioning(str(cli.cwd / "sweep")) == []
    arts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"sweep.json", "multirun.yaml", "sweep_jobs"} <= arts

    # the report on the real sweep (its own process, no TensorFlow): table, files, artifacts
    rep = cli("--no-log", module="distexp.report", timeout=120)
    assert rep.returncode == 0, rep
    # the console table (distexp.report.table): the failed job's row says so; <= 120 columns
    assert rep.stdout.startswith(f"Sweep {sid}\n") and re.search(r" failed$", rep.stdout, re.M)
    assert max(len(ln) for ln in rep.stdout.splitlines()[:7]) <= 120, rep.stdout
    assert "| FAILED |" in (cli.cwd / "sweep" / "report" / "report.md").read_text()
    for name in ("report.md", "report.csv", "throughput.png", "efficiency.png", "loss.png"):
        assert (cli.cwd / "sweep" / "report" / name).stat().st_size > 0


@pytest.mark.extended
def test_optuna_search_reports_a_best_trial(cli):
    r = cli("hparams_search=optuna", "hydra.sweeper.n_trials=3", *SMALL, "hydra.sweep.dir=sweep",
            timeout=900)
    assert r.returncode == 0, r
    best = [ln for ln in r.stdout.splitlines() if ln.startswith("Best trial: job ")]
    assert len(best) == 1, r
    from omegaconf import OmegaConf

    res = OmegaConf.load(cli.cwd / "sweep" / "optimization_results.yaml")
    assert set(res.best_params) == {"learning_rate", "batch_size_per_replica"}
    assert 0.1 < res.best_value <= 1.0  # eval/accuracy of the best of 3 one-epoch trials
    client, runs = mlflow_runs(cli.uri)
    parents, children = _split(runs)
    assert len(parents) == 1 and len(children) == 3
    parent = parents[0]
    assert parent.info.status == "FINISHED" and parent.data.params["sweeper"] == "OptunaSweeper"
    assert parent.data.metrics["sweep/best_value"] == pytest.approx(res.best_value)
    best_child = [c for c in children
                  if c.data.tags["distexp.job_num"] == parent.data.tags["distexp.best_job"]][0]
    assert best_child.data.metrics["eval/accuracy"] == pytest.approx(res.best_value)
    assert "optimization_results.yaml" in {a.path for a in client.list_artifacts(parent.info.run_id)}


@pytest.mark.extended
def test_joblib_launcher_runs_jobs_in_parallel(cli):
    r = cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "strategy=one_device,mirrored",
            *SMALL, timeout=900)
    assert r.returncode == 0, r
    # the launcher's lines are in the sweep's log, not on the console (a sweep reads in one screen)
    sweep_log = next((cli.cwd / "outputs" / "multirun").rglob("sweep.log")).read_text()
    assert "Joblib.Parallel(n_jobs=2" in sweep_log and "Joblib.Parallel" not in r.stdout, r
    _, runs = mlflow_runs(cli.uri)
    parents, children = _split(runs)
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert parents[0].data.params["launcher"] == "JoblibLauncher"
    assert sorted(c.info.status for c in children) == ["FINISHED", "FINISHED"]
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
