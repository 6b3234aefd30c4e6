"""Through the CLI, as a user runs it (slow: real tiny jobs): repeats=2 runs interleaved, each
its own child run tagged with its repeat, and the report aggregates them; sweep.resume skips
the finished job, re-runs the failed one from its own checkpoint dir and keeps one parent run."""
from __future__ import annotations

import json

import pytest

from helpers import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.extended]

TINY = ["epochs=1", "steps_per_epoch=2", "warmup_steps=1", "measure_peak_flops=false",
        "measure_step_split=false"]


def _children(runs):
    return [r for r in runs if r.data.tags.get("distexp.run_kind") == "job"]


def test_repeats_run_interleaved_and_are_reported_together(cli):
    r = cli("-m", "strategy=one_device,mirrored", "repeats=2", "model=mlp", *TINY,
            "hydra.sweep.dir=sweep", timeout=900)
    assert r.returncode == 0, r
    _, runs = mlflow_runs(cli.uri)
    jobs = sorted(_children(runs), key=lambda c: c.info.start_time)
    order = [(c.data.params["strategy.name"], c.data.tags["distexp.repeat"],
              c.data.tags["distexp.job_num"]) for c in jobs]
    assert order == [("one_device", "0", "0"), ("mirrored", "0", "1"),
                     ("one_device", "1", "2"), ("mirrored", "1", "3")]
    assert all(c.info.status == "FINISHED" for c in jobs)

    rep = cli("--no-log", module="distexp.report", timeout=120)
    assert rep.returncode == 0, rep
    # the console shows a 120-column table; report.md holds the full one
    md = (cli.cwd / "sweep" / "report" / "report.md").read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("| one_device") or
            ln.startswith("| mirrored")]
    assert len(rows) == 2  # one row per job config, over its 2 runs
    assert all(" | 2 | " in ln for ln in rows)
    mirrored = [ln for ln in rows if ln.startswith("| mirrored")][0]
    # one replica: the same work as one_device, an overhead, no scaling efficiency
    cells = [c.strip() for c in mirrored.strip("|").split("|")]
    assert "n/a (1 replica)" in cells and any(c.startswith("one_device x1") for c in cells)


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]],
                         ids=["basic", "joblib"])
def test_resume_skips_finished_jobs_and_reruns_failed_ones(cli, launcher):
    args = ["-m", "model=custom", "model.factory=factories:small_mlp,factories:fails_when_env",
            *TINY, *launcher]
    first = cli(*args, "hydra.sweep.dir=first", env={"DISTEXP_TEST_FAIL": "1"}, timeout=900)
    assert first.returncode == 1, first
    sweep_id = json.loads((cli.cwd / "first" / "sweep.json").read_text())["sweep_id"]
    _, runs = mlflow_runs(cli.uri)
    parent_id = [p.info.run_id for p in runs if p.data.tags.get("distexp.run_kind") == "sweep"][0]

    again = cli(*args, f"sweep.resume={sweep_id}", "hydra.sweep.dir=again", timeout=900)
    assert again.returncode == 0, again
    assert "1 job(s) FINISHED there (skipped), 1 re-run with resume=true" in again.stdout
    _, runs = mlflow_runs(cli.uri)
    parents = [p for p in runs if p.data.tags.get("distexp.run_kind") == "sweep"]
    assert [p.info.run_id for p in parents] == [parent_id]  # one parent: the original, reopened
    assert parents[0].info.status == "FINISHED"
    assert parents[0].data.metrics["sweep/failed_jobs"] == 0
    by_factory = {}
    for c in _children(runs):
        assert c.data.tags["distexp.sweep_id"] == sweep_id
        assert c.data.tags["mlflow.parentRunId"] == parent_id
        by_factory.setdefault(c.data.params["model.factory"], []).append(c)
    assert [c.info.status for c in by_factory["factories:small_mlp"]] == ["FINISHED"]  # not re-run
    done = by_factory["factories:small_mlp"][0]  # its record keeps the objective its run named
    kept = json.loads((cli.cwd / "again" / "sweep_jobs" /
                       f"{done.data.tags['distexp.job_num']}.json").read_text())
    assert done.data.params["objective_resolved"] == "eval/accuracy"
    assert kept["value"] == done.data.metrics["eval/accuracy"] and kept["skipped"], kept
    retried = sorted(by_factory["factories:fails_when_env"], key=lambda c: c.info.start_time)
    assert [c.info.status for c in retried] == ["FAILED", "FINISHED"]
    assert [c.data.params["resume"] for c in retried] == ["False", "True"]
    assert retried[0].data.tags["distexp.job_num"] == retried[1].data.tags["distexp.job_num"]
    # the re-run restores from the failed job's own checkpoint dir, in the first sweep's dir
    assert retried[1].data.params["checkpoint.dir"] == retried[0].data.params["checkpoint.dir"]
    assert retried[0].data.params["checkpoint.dir"].startswith(str(cli.cwd / "first"))

    bad = cli("-m", "model=mlp", *TINY, f"sweep.resume={sweep_id}", timeout=300)
    assert bad.returncode == 2 and "none of this command's 1 jobs matches" in bad.stderr, bad
    _, runs = mlflow_runs(cli.uri)
    assert [p.info.status for p in runs if p.data.tags.get("distexp.run_kind") == "sweep"] == \
        ["FINISHED"]  # a resume that matched nothing leaves the sweep as it was
