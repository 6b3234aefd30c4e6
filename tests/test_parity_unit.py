"""`python -m distexp.parity` before any run: bad input is one line, the strategies to compare
are read from the overrides. The runs: tests/test_parity.py. Tier: unit."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, line", [
    (["strategy=one_device"], "strategy: received 'one_device'; parity compares a strategy with "
                              "one_device: choose another strategy"),
    (["strategy=mirrored,central,mirrored"], "strategy: received mirrored,central,mirrored; each "
                                             "strategy once"),
    (["strategy=central,one_device"], "strategy: received 'one_device'; parity compares"),
    (["strategy=ps", "workers=2"], "workers: received 2 with strategy=ps; its steps update "
                                   "asynchronously"),
    (["--steps", "0", "strategy=mirrored"], "--steps: received 0; expected >= 1"),
])
def test_parity_refuses_bad_input_in_one_line_before_any_run(capsys, tmp_path, args, line):
    from distexp import parity

    assert parity.main(["--out", str(tmp_path / "p"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"distexp.parity: error: {line}"), err
    assert not (tmp_path / "p").exists()  # nothing ran


def test_parity_strategies_list():
    from distexp.parity import strategies

    assert strategies(["cpu_replicas=2", "strategy=mirrored, central"]) == ["mirrored", "central"]
    assert strategies(["strategy=ps"]) == ["ps"] and strategies(["workers=2"]) == []


def test_a_failed_run_of_the_sweep_is_named_in_one_line(monkeypatch, tmp_path):
    """The runs are one sweep (one warm trainer): a job that failed is named with its record's
    line and its directory; the command the sweep ran trains every strategy at once."""
    import subprocess

    from distexp import parity
    from distexp.sweeps.records import write_record

    ran = []

    def sweep(cmd, **kw):  # the sweep's jobs: one_device finished, mirrored failed
        ran.append(cmd)
        for num, (name, status) in enumerate([("one_device", "COMPLETED"), ("mirrored", "FAILED")]):
            write_record(tmp_path, {"num": num, "overrides": [f"strategy={name}", "seed=0"],
                                    "status": status, "value": None, "job_dir": "",
                                    "error": "chief exited with code 1: ValueError: boom"
                                    if status == "FAILED" else None})
        return subprocess.CompletedProcess(cmd, 1, "", "distexp: error: sweep x: 1 of 2 failed")

    monkeypatch.setattr(subprocess, "run", sweep)
    with pytest.raises(SystemExit) as ex:
        parity.run_jobs(["one_device", "mirrored"], ["seed=0"], tmp_path)
    assert str(ex.value) == ("distexp.parity: error: the mirrored run failed: chief exited with "
                             f"code 1: ValueError: boom (log: {tmp_path / 'mirrored'})")
    (cmd,) = ran
    assert cmd[2:5] == ["distexp", "-m", "strategy=one_device,mirrored"]
    assert f"hydra.sweep.dir={tmp_path}" in cmd and "hydra.sweep.subdir=${strategy.name}" in cmd
