"""Equal-work comparisons end to end: one lean sweep with controls (mirrored x2 and the
one_device job the sweep adds at its global batch), then the report's strong speedup and verdict
from its runs. The arithmetic: tests/report/test_equal_work.py. Tier: slow (trains through the CLI)."""
from __future__ import annotations

import math

import pytest

from distexp.report import cli as report
from distexp.report import conclusions
from distexp.report.scaling import Significance
from helpers import mlflow_runs

pytestmark = pytest.mark.slow


def test_sweep_with_controls_end_to_end(cli):
    """Two jobs: mirrored x2 (64 per replica) and the control the sweep adds for it."""
    r = cli("-m", "strategy=mirrored", "cpu_replicas=2", "sweep.controls=true", "epochs=1",
            "steps_per_epoch=6", "warmup_steps=2", "steps_per_execution=1",
            "tracking.system_metrics=false", timeout=900)
    assert r.returncode == 0, r
    assert "sweep.controls: + one_device at global batch 128" in r.stdout
    _, runs = mlflow_runs(cli.uri)
    jobs = [x for x in runs if x.data.tags.get("distexp.run_kind") == "job"]
    got = sorted((x.data.params["strategy.name"], x.data.params["num_replicas"],
                  x.data.params["global_batch_size"], x.data.params["cpu_replicas"])
                 for x in jobs)
    assert got == [("mirrored", "2", "128", "2"), ("one_device", "1", "128", "2")]
    assert all(x.info.status == "FINISHED" for x in jobs)
    rows, _, md = report.build(cli.uri, log=False)
    mir = [x for x in rows if x.strategy == "mirrored"][0]
    control = [x for x in rows if x.strategy == "one_device"][0]
    assert mir.strong.value == pytest.approx(mir.rate / control.rate)
    assert mir.strong.baseline == "one_device r1 (strong, same cpu_replicas=2)"
    assert mir.weak is None and mir.batch_effect is None  # no 1-replica job at 64: not made up
    assert mir.strong.significance == Significance.WITHIN_RUN and not mir.strong.significant
    lines = conclusions.verdict_lines(rows)
    assert lines[0].startswith("At equal global batch 128: no winner can be claimed from one run "
                               "each") and lines[-1].startswith("One run per job")
    assert all(x.rate > 0 and not math.isnan(x.rate) for x in rows)
