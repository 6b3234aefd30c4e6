"""repeats=auto through the CLI, as a user runs it (slow: real tiny jobs): the README's sweep with
a budget of 3 rounds ends with every comparison in one of the five outcomes, the same records on
the console, in auto.json, on the parent run and in the report; continued with the command its
closing lines print (sweep.resume=<id> sweep.max_repeats=4), it replays its 3 rounds from the
runs (no job of them runs again), keeps its plan (horizon 3) and runs at most one round more."""
from __future__ import annotations

import pytest

from helpers import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.extended]

TINY = ["model=mlp", "epochs=1", "steps_per_epoch=5", "warmup_steps=1",
        "measure_peak_flops=false", "measure_step_split=false"]
OUTCOMES = {"faster", "slower", "equal", "at the margin", "not settled"}


def _in_report(line: str, report: str) -> bool:
    """A closing line in report.md: a bullet, or a continued line of one (indented under it, as
    tests/report/test_report_text.py reads them)."""
    return (f"  {line}" if line.startswith("  ") else f"- {line}") in report


def test_auto_sweep_ends_settled_or_not_and_continues(cli):
    from distexp.figures import outcomes

    args = ["-m", "strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
            "repeats=auto", *TINY]
    r = cli(*args, "sweep.max_repeats=3", "hydra.sweep.dir=sweep", timeout=1500)
    assert r.returncode == 0, r
    rounds = [ln for ln in r.stdout.splitlines() if ln.startswith("round ")]
    assert 1 <= len(rounds) <= 3 and rounds[0].startswith("round 1: mirrored x2 vs ")
    saved = outcomes.from_json((cli.cwd / "sweep" / "auto.json").read_text())
    assert saved.rounds == len(rounds) and saved.horizon == 3 and len(saved.comparisons) == 3
    assert {c.outcome for c in saved.comparisons} <= OUTCOMES
    closing = outcomes.closing_lines(saved)
    assert all(line in r.stdout.splitlines() for line in closing)  # the console: the records
    parents, runs = mlflow_runs(cli.uri)
    parent = next(p for p in runs if p.data.tags.get("distexp.run_kind") == "sweep")
    assert outcomes.from_json(parent.data.tags["distexp.outcomes"]) == saved
    assert parent.data.tags["mlflow.note.content"].splitlines()[0] == \
        outcomes.description_line(saved)
    report = (cli.cwd / "sweep" / "report" / "report.md").read_text()
    assert all(_in_report(line, report) for line in closing) and "## Verdict" not in report
    jobs = [c for c in runs if c.data.tags.get("distexp.run_kind") == "job"]

    sid = parent.data.tags["distexp.sweep_id"]
    again = cli(*args, f"sweep.resume={sid}", "sweep.max_repeats=4", "hydra.sweep.dir=again",
                timeout=900)
    assert again.returncode == 0, again
    more = outcomes.from_json((cli.cwd / "again" / "auto.json").read_text())
    assert more.horizon == 3  # the first sweep's plan: past it, the alpha kept for it
    _, after = mlflow_runs(cli.uri)
    new = len([c for c in after if c.data.tags.get("distexp.run_kind") == "job"]) - len(jobs)
    if all(c.settled for c in saved.comparisons if c.primary):  # the question answered
        assert new == 0 and more.rounds == saved.rounds
    else:  # one more round of the open set-ups, the 3 before replayed from their runs
        # (a disturbed run's round runs once more: up to 3 jobs again)
        assert more.rounds == saved.rounds + 1 and 0 < new <= 3 * (1 + bool(more.disturbed))
