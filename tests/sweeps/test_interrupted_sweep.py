"""The line a stopped sweep ends with (distexp.sweeps.interrupted.stopped_line): a user's sweep
keeps each job's checkpoints for its resume; a measuring sweep (repeats=auto, repeats=N >= 2)
says that a job it stopped runs again from the start."""
from __future__ import annotations

import json

from distexp.sweeps import interrupted


def _dir(tmp_path):
    (tmp_path / "sweep_jobs").mkdir()
    (tmp_path / "sweep_jobs" / "0.json").write_text(json.dumps({"num": 0, "status": "COMPLETED"}))
    return tmp_path


def test_a_measuring_sweep_says_its_stopped_job_runs_again_from_the_start(tmp_path):
    d = _dir(tmp_path)
    argv = ["-m", "strategy=one_device,mirrored", "repeats=auto"]
    assert interrupted.stopped_line("S", d, argv, "SIGINT") == (
        "interrupted by SIGINT: sweep S stopped\nkept: 1 finished job (skipped when resumed; a "
        f"job stopped before its figures runs again from the start), in\n  {d}\ncontinue with:\n"
        "  python -m distexp -m strategy=one_device,mirrored repeats=auto sweep.resume=S")
    assert interrupted.measures(["repeats=3"], d) and not interrupted.measures(["repeats=1"], d)
    assert interrupted.stopped_line("S", d, ["-m", "seed=1,2"], "SIGTERM") == (
        "interrupted by SIGTERM: sweep S stopped\nkept: 1 finished job (skipped when resumed) and "
        f"each job's checkpoints, in\n  {d}\ncontinue with:\n  python -m distexp -m seed=1,2 "
        "sweep.resume=S")
    (d / "auto.json").write_text("{}")  # the decision of a preset's repeats=auto
    assert interrupted.measures(["-m", "experiment=scaling"], d)
