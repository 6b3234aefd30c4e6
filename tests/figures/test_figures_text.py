"""One formatter per figure (distexp.figures.text), called by every surface that shows the figure:
the trainer's log (distexp.train.progress), the job's closing lines and a sweep's job line
(distexp.job.summary), the live bar (distexp.job.console), the runs' display tags in MLflow
(distexp.tracking.display) and the report's examples/s cells (distexp.report.wording). Each
surface renders a run's examples/s and its interval identically, and through the formatter
itself (replaced here, every surface shows the replacement). Tier: unit."""
from __future__ import annotations

import io
import types

import pytest

from distexp.figures import text

RATE, CI = 20586.4, 712.2
RESULT = {"perf/examples_per_sec": RATE, "perf/examples_per_sec_ci95": CI,
          "perf/timed_steps": 140.0, "perf/examples_per_sec_end_to_end": 15210.2,
          "perf/step_time_ms_p50": 6.1, "perf/step_time_ms_p90": 6.5,
          "perf/step_input_ms": 0.81, "perf/step_compute_ms": 5.1, "perf/step_sync_ms": 0.0,
          "perf/step_other_ms": 1000 * 128 / RATE - 5.91, "perf/mfu": 0.0231,
          "perf/peak_flops": 1.2345e12, "perf/flops_per_example": 1.1e6,
          "eval/loss": 0.21893, "eval/accuracy": 0.94167, "perf/time_to_first_step_s": 3.214,
          "objective": "eval/accuracy"}


def _surfaces() -> dict:
    """What each surface shows of RESULT's examples/s, whole lines or cells."""
    from distexp.job import console, summary
    from distexp.report import wording as report_text
    from distexp.tracking import tags as tag
    from distexp.tracking.display import job_tags
    from distexp.train.progress import log_lines

    pos = console.SweepPosition(k=1, n=2, started=0.0, name="mirrored x2")
    row = types.SimpleNamespace(rate=RATE, rates=[RATE], ci95=CI)
    out = io.StringIO()
    out.isatty = lambda: True
    bar = console.Bar(stream=out)
    bar.progress({"epoch": 1, "epochs": 1, "step": 5, "steps": 10, "rate": RATE, "loss": None})
    bar.close()
    return {"trainer's log": log_lines(RESULT, 128, 5)[0],
            "job's summary": summary.lines({**RESULT, "global_batch_size": 128})[0],
            "sweep's job line": summary.job_line(RESULT, pos),
            "MLflow tag": job_tags(RESULT, {})[tag.EXAMPLES_PER_SEC],
            "report (console)": report_text.rate(row, short=True),
            "report.md": report_text.rate(row),
            "live bar": out.getvalue()}


def test_every_surface_writes_a_rate_and_its_interval_the_same():
    with_unit, bare = text.rate(RATE, CI, "examples/s"), text.rate(RATE, CI)
    assert with_unit == "20,586 examples/s [19,874, 21,299]" and bare == "20,586 [19,874, 21,299]"
    shown = _surfaces()
    for where in ("trainer's log", "job's summary", "sweep's job line"):
        assert with_unit in shown[where], (where, shown[where])
    for where in ("MLflow tag", "report (console)", "report.md"):
        assert shown[where] == bare, (where, shown[where])
    assert text.rate(RATE, unit="ex/s") in shown["live bar"]  # no interval while it trains


def test_every_surface_calls_the_one_formatter(monkeypatch):
    """Replace the formatter: each surface shows the replacement (no surface formats a rate of
    its own)."""
    monkeypatch.setattr(text, "rate", lambda value, ci95=None, unit="": f"<{value:g} {ci95} {unit}>")
    for where, shown in _surfaces().items():
        assert f"<{RATE:g} " in shown, (where, shown)


def test_the_log_carries_the_summarys_lines_and_its_own():
    """The trainer's log says what the job's summary says (the same formatters), plus the step-time
    percentiles and FLOPs per example, which only the log and the run hold."""
    from distexp.job import summary
    from distexp.train.progress import log_lines

    logged = log_lines(RESULT, 128, 5)
    for line in summary.lines({**RESULT, "global_batch_size": 128}):
        assert line in logged, (line, logged)
    assert "step time p50 6.10 ms, p90 6.50 ms (5 warm-up steps excluded)" in logged
    # a run whose time to first step was not measured (a resume at the last step): no crash
    assert log_lines({**RESULT, "perf/time_to_first_step_s": None}, 128, 5)[-1] == \
        "final: eval_loss 0.2189  eval_accuracy 0.9417  time to first step not measured"


@pytest.mark.parametrize("value, ci, shown", [
    (20586.4, 712.2, "20,586 [19,874, 21,299]"), (512.0, None, "512"),
    (15.27, 0.41, "15.3 [14.9, 15.7]"), (0.8421, None, "0.842")])
def test_a_rate_is_whole_from_100_up_and_three_digits_below(value, ci, shown):
    assert text.rate(value, ci) == shown


@pytest.mark.parametrize("value,shown", [(0.0231, "2.31"), (0.5, "50.00"), (0.001, "0.10"),
                                         (0.00031, "0.031"), (0.0000123, "0.0012"), (0.0, "0.00")])
def test_a_small_mfu_keeps_two_significant_digits(value, shown):
    """A small model on a big GPU (a CNN on an H200: 3e-5 of its peak) printed "MFU: 0.00 %",
    which reads as nothing measured; below 0.1 % the figure keeps two significant digits."""
    line = text.mfu({"perf/mfu": value, "perf/peak_flops": 989.5e12})
    assert line == f"MFU: {shown} % of the devices' peak (989,500.0 GFLOP/s)"
