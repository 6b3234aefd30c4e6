"""repeats=auto through the CLI, as a user runs it (slow: real tiny jobs): the README's sweep with
a budget of 3 rounds ends with every comparison in one of the four outcomes, on the console, in
auto.json, on the parent run and in the report; resumed, it replays its rounds from the runs
(no job runs again) and ends with the same outcomes."""
from __future__ import annotations

import json

import pytest

from helpers import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.extended]

TINY = ["model=mlp", "epochs=1", "steps_per_epoch=5", "warmup_steps=1",
        "measure_peak_flops=false", "measure_step_split=false"]
ENDINGS = ("faster", "slower", "equal within +-5%", "not settled after 1 round",
           "not settled after 2 rounds", "not settled after 3 rounds")


def test_auto_sweep_ends_settled_or_not_and_resumes(cli):
    args = ["-m", "strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
            "repeats=auto", "sweep.max_repeats=3", *TINY]
    r = cli(*args, "hydra.sweep.dir=sweep", timeout=1500)
    assert r.returncode == 0, r
    rounds = [ln for ln in r.stdout.splitlines() if ln.startswith("round ")]
    assert 1 <= len(rounds) <= 3 and rounds[0].startswith("round 1: mirrored x2")
    saved = json.loads((cli.cwd / "sweep" / "auto.json").read_text())["outcomes"]
    assert saved[0].startswith(f"repeats=auto: {len(rounds)} round(s)")
    assert len(saved) == 4 and all(s.endswith(ENDINGS) for s in saved[1:])
    assert any("(equal work)" in s for s in saved)
    parents, runs = mlflow_runs(cli.uri)
    parent = next(p for p in runs if p.data.tags.get("distexp.run_kind") == "sweep")
    assert parent.data.tags["distexp.outcomes"].splitlines() == saved
    assert parent.data.tags["mlflow.note.content"].startswith("Outcome: mirrored x2")
    jobs = [c for c in runs if c.data.tags.get("distexp.run_kind") == "job"]

    again = cli(*args, f"sweep.resume={parent.data.tags['distexp.sweep_id']}",
                "hydra.sweep.dir=again", timeout=900)
    assert again.returncode == 0, again
    assert json.loads((cli.cwd / "again" / "auto.json").read_text())["outcomes"] == saved
    _, after = mlflow_runs(cli.uri)
    assert len([c for c in after if c.data.tags.get("distexp.run_kind") == "job"]) == len(jobs)
