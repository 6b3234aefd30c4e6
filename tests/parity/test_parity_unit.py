"""`python -m distexp.parity` before any run: bad input is one line, the strategies to compare
are read from the overrides. The runs: tests/parity/test_parity.py. Tier: unit."""
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


def test_a_failed_run_is_named_and_does_not_hide_the_other_verdicts(monkeypatch, tmp_path,
                                                                     capsys):
    """The runs are one sweep (one warm trainer). With strategy=mirrored,central and central's
    run failed: mirrored's verdict is printed, then one line naming central's run with its
    record's error and its directory; exit 2. The sweep trains every strategy in one command."""
    import subprocess

    from distexp import parity
    from distexp.sweeps.records import write_record

    ran = []

    def sweep(cmd, **kw):  # one_device and mirrored finished (equal losses), central failed
        ran.append(cmd)
        for num, name in enumerate(["one_device", "mirrored", "central"]):
            ok = name != "central"
            write_record(tmp_path, {"num": num, "overrides": [f"strategy={name}", "seed=0"],
                                    "status": "COMPLETED" if ok else "FAILED", "value": None,
                                    "job_dir": "", "error": None if ok else
                                    "chief exited with code 1: ValueError: boom"})
            if ok:
                (tmp_path / name).mkdir()
                (tmp_path / name / "steps.csv").write_text(
                    "step,epoch,loss\n" + "".join(f"{i},1,{2.0 - i / 10}\n" for i in range(1, 4)))
        return subprocess.CompletedProcess(cmd, 1, "", "distexp: error: sweep x: 1 of 3 failed")

    monkeypatch.setattr(subprocess, "run", sweep)
    code = parity.main(["--out", str(tmp_path), "--steps", "3", "strategy=mirrored,central",
                        "cpu_replicas=2"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "parity: OK: mirrored reproduces one_device" in out
    assert "parity: mirrored OK, central not run" in out
    assert err.strip().splitlines() == [
        "distexp.parity: error: the central run failed: chief exited with code 1: ValueError: "
        f"boom (log: {tmp_path / 'central'})"]
    (cmd,) = ran
    assert cmd[2:5] == ["distexp", "-m", "strategy=one_device,mirrored,central"]
    assert f"hydra.sweep.dir={tmp_path}" in cmd and "hydra.sweep.subdir=${strategy.name}" in cmd
    assert {"repeats=1", "sweep.controls=false", "hydra.sweeper.params=null"} <= set(cmd)
