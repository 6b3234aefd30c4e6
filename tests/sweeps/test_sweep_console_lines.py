"""A sweep's console lines within 120 columns (the README's sweep): a stopped sweep's lines
(distexp.sweeps.interrupted.stopped_line, one line of 355 characters before) with its directory
and the command that continues it on lines of their own; the control's overrides at the start."""
from __future__ import annotations

import json

from distexp.sweeps import interrupted
from distexp.sweeps.seat import JOBS_DIR

README_SWEEP = ["-m", "strategy=one_device,mirrored", "cpu_replicas=2", "repeats=auto",
                "sweep.controls=true"]


def test_the_readme_sweep_stopped_reads_in_lines_of_120_columns(tmp_path):
    sweep_dir = tmp_path / "home" / "me" / "outputs" / "multirun" / "2026-11-28" / "12-00-00"
    (sweep_dir / JOBS_DIR).mkdir(parents=True)
    (sweep_dir / JOBS_DIR / "0.json").write_text(json.dumps({"num": 0, "status": "COMPLETED"}))
    said = "distexp: " + interrupted.stopped_line("20261128-120000-a1b2c3", sweep_dir, README_SWEEP,
                                                   "SIGINT")
    assert said.splitlines() == [
        "distexp: interrupted by SIGINT: sweep 20261128-120000-a1b2c3 stopped",
        "kept: 1 finished job (skipped when resumed; a job stopped before its figures runs again from the "
        "start), in",
        f"  {sweep_dir}",
        "continue with:",
        "  python -m distexp -m strategy=one_device,mirrored cpu_replicas=2 repeats=auto "
        "sweep.controls=true \\",
        "    sweep.resume=20261128-120000-a1b2c3"]  # the shell joins them again
    assert max(len(ln) for ln in said.splitlines()) <= 120


def test_the_readme_sweep_starts_with_lines_within_120_columns(tmp_path, capsys):
    """Its first lines: the parent run, the store and the jobs' directory (on lines of their
    own), the control it adds with its overrides (cut between words)."""
    from helpers import launched

    launched(tmp_path, *README_SWEEP[1:], "epochs=1")
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("sweep.controls: "))
    assert lines[at:at + 2] == [
        "sweep.controls: + one_device at global batch 128 (equal work for mirrored x2):",
        "  strategy=one_device cpu_replicas=2 repeats=auto sweep.controls=True epochs=1 "
        "global_batch_size=128"]
    assert [ln for ln in lines if len(ln) > 120] == []
