"""`python -m distexp.report`'s console within 120 columns (the `Written to` line was 210
characters): the report's directory on a line of its own. On a store written by hand."""
from __future__ import annotations

import pytest

from distexp.report import cli as report
from helpers import report_store


def test_the_report_prints_lines_within_120_columns(tmp_path, capsys):
    client, uri, pid, sweep_dir = report_store(tmp_path)
    assert report.main(["--tracking-uri", uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("Written: report.md, report.csv, throughput.png, efficiency.png, speedup.png, "
                     "loss.png, in")
    assert lines[at:] == [lines[at], f"  {sweep_dir / 'report'}",
                          "(also logged to the sweep's parent run under report/)"]
    assert [ln for ln in lines if len(ln) > 120 and ln != f"  {sweep_dir / 'report'}"] == []


def test_a_filter_mlflow_refuses_is_one_line_even_without_a_message(monkeypatch):
    """--filter's refusal is the first line of MLflow's message (errors.first_line): one line,
    cut with "...", and the exception's type when the message is empty (was an IndexError)."""
    from distexp.tracking import lookup

    class Refusing:
        def __init__(self, ex):
            self.ex = ex

        def search_runs(self, *args, **kwargs):
            raise self.ex

    monkeypatch.setattr(lookup, "experiment_ids", lambda client, name: ["1"])
    for ex, said in [(ValueError("bad token 'x'\nat position 3"), "bad token 'x'"),
                     (ValueError(""), "ValueError"),
                     (ValueError("y" * 400), "y" * 297 + "...")]:
        with pytest.raises(report.ReportError) as got:
            report.find(Refusing(ex), "distexp", None, "x = 1")
        assert str(got.value) == f"--filter: received 'x = 1'; MLflow says: {said}"
