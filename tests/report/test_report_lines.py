"""`python -m distexp.report`'s console within 120 columns (the `Written to` line was 210
characters): the report's directory on a line of its own. On a store written by hand."""
from __future__ import annotations

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
