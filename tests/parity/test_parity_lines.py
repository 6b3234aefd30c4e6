"""`python -m distexp.parity strategy=mirrored cpu_replicas=2` (the README's command) prints lines
of 120 columns at most: each run's overrides cut between words (they were one line of ~240
characters), the runs' directories on lines of their own. The sweep is faked (subprocess.run):
what is checked is the printing."""
from __future__ import annotations

import subprocess


def test_the_readme_parity_command_prints_lines_within_120_columns(monkeypatch, tmp_path, capsys):
    from distexp import parity
    from distexp.sweeps.records import write_record

    out_dir = tmp_path / "home" / "someone" / "projects" / "distexp" / "outputs" / "parity" / "x"

    def sweep(cmd, **kw):  # both runs finished with equal losses
        for num, name in enumerate(["one_device", "mirrored"]):
            write_record(out_dir, {"num": num, "overrides": [f"strategy={name}"],
                                   "status": "COMPLETED", "value": None, "job_dir": "", "error": None})
            (out_dir / name).mkdir()
            (out_dir / name / "steps.csv").write_text("step,epoch,loss\n" + "".join(
                f"{i},1,{2.0 - i / 10}\n" for i in range(1, 21)))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", sweep)
    assert parity.main(["--out", str(out_dir), "strategy=mirrored", "cpu_replicas=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        "parity: one_device: strategy=one_device cpu_replicas=2 epochs=1 warmup_steps=0 "
        "steps_per_execution=1",
        "    tracking.enabled=false checkpoint.every_steps=0 measure_peak_flops=false "
        "measure_step_split=false resume=false",
        "    repeats=1 sweep.controls=false hydra.sweeper.params=null global_batch_size=128 "
        "steps_per_epoch=20"]
    assert lines[3].startswith("parity: mirrored: strategy=mirrored cpu_replicas=2 ")
    at = lines.index("  runs:")
    assert lines[at + 1:at + 3] == [f"    {out_dir / 'one_device'}", f"    {out_dir / 'mirrored'}"]
    assert lines[-1] == "parity: OK: mirrored reproduces one_device within 1e-05", lines
    paths = {f"    {out_dir / n}" for n in ("one_device", "mirrored")}  # as long as the directory
    assert [ln for ln in lines if len(ln) > 120 and ln not in paths] == []
