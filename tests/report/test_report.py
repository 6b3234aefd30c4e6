"""distexp.report on runs written straight into a temporary MLflow store: exact speed-up and
efficiency, the missing-baseline wording, valid PNGs, artifacts on the parent run. No TensorFlow."""
from __future__ import annotations

import csv

import pytest

from distexp.report import cli as report
from helpers import job_params as _job
from helpers import perf_metrics as _perf
from helpers import report_store
from helpers import store_run as _run


@pytest.fixture
def store(tmp_path):
    return report_store(tmp_path)


def test_speedup_and_efficiency_are_exact(store):
    client, uri, pid, sweep_dir = store
    rows, out, md = report.build(uri)  # default: the latest sweep
    assert out == sweep_dir / "report"
    by = {r.run_name: r for r in rows}
    assert set(by) == {"one_device-r1", "mirrored-r2", "central-r2", "mirrored-r4", "resnet-r2"}
    assert by["one_device-r1"].speedup == 1.0 and by["one_device-r1"].efficiency == 1.0
    assert by["mirrored-r2"].speedup == pytest.approx(1.8, abs=1e-12)
    assert by["mirrored-r2"].efficiency == pytest.approx(0.9, abs=1e-12)
    assert by["central-r2"].speedup == pytest.approx(1.5, abs=1e-12)
    assert by["central-r2"].efficiency == pytest.approx(0.75, abs=1e-12)
    # spread of the speed-up: first-order propagation of both 95 % half-widths
    assert by["mirrored-r2"].speedup_ci95 == pytest.approx(1.8 * ((40 / 1800) ** 2 + (30 / 1000) ** 2) ** 0.5)
    assert by["mirrored-r2"].baseline == "one_device r1 (weak)"
    # no invented numbers: no baseline for resnet50, nothing for the failed run
    assert by["resnet-r2"].speedup is None and by["resnet-r2"].baseline == report.NO_BASELINE
    assert by["mirrored-r4"].speedup is None and by["mirrored-r4"].baseline == "n/a (failed)"
    assert "no 1-replica baseline" in md and "1.80x" in md and "90%" in md and "75%" in md
    assert by["one_device-r1"].curves.loss == [(1, 2.0), (2, 1.5)]

    with open(out / "report.csv") as f:
        got = {r["run_name"]: r for r in csv.DictReader(f)}
    assert float(got["mirrored-r2"]["speedup"]) == pytest.approx(1.8)
    assert float(got["mirrored-r2"]["efficiency"]) == pytest.approx(0.9)
    assert got["resnet-r2"]["speedup"] == "" and got["resnet-r2"]["baseline"] == report.NO_BASELINE

    from PIL import Image

    for name in ("throughput", "efficiency", "speedup", "loss"):
        path = out / f"{name}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(path) as im:
            im.verify()
            assert im.size[0] > 100 and im.size[1] > 100
    logged = {a.path for a in client.list_artifacts(pid, "report")}
    assert logged == {f"report/{n}" for n in ("report.md", "report.csv", "throughput.png",
                                              "efficiency.png", "speedup.png", "loss.png")}


def test_strong_scaling_baseline_and_filter(store):
    client, uri, pid, sweep_dir = store
    exp = client.get_experiment_by_name("distexp").experiment_id
    # fixed global batch 128: the 1-replica run at 128 is the baseline of a 2-replica run at 128
    tags = {"distexp.sweep_id": "s2", "distexp.run_kind": "job"}
    parent = client.create_run(exp, run_name="sweep-s2", tags={
        "distexp.sweep_id": "s2", "distexp.run_kind": "sweep"})
    _run(client, exp, "od", "FINISHED", _job("one_device", 1, 128), _perf(1200.0, 10.0), tags)
    _run(client, exp, "mir", "FINISHED", _job("mirrored", 2, 128), _perf(1800.0, 10.0), tags)
    rows, out, _ = report.build(uri, sweep_id="s2", out=sweep_dir / "s2", log=False)
    by = {r.run_name: r for r in rows}
    assert by["mir"].speedup == pytest.approx(1.5) and by["mir"].efficiency == pytest.approx(0.75)
    assert by["mir"].baseline == "one_device r1 (strong)"
    assert not client.list_artifacts(parent.info.run_id)
    rows, _, _ = report.build(uri, sweep_id="s1", filter_string="params.`strategy.name` = 'mirrored'",
                              out=sweep_dir / "f", log=False)
    assert {r.run_name for r in rows} == {"mirrored-r2", "mirrored-r4", "resnet-r2"}
    assert all(r.speedup is None for r in rows)  # the baseline was filtered out: said, not made up


def test_report_cli_errors_are_one_line(tmp_path, capsys):
    assert report.main(["--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("distexp.report: error: --tracking-uri: no MLflow "
                                               "store at")


def test_report_cli_unknown_sweep(store, capsys):
    _, uri, _, _ = store
    assert report.main(["--tracking-uri", uri, "--sweep-id", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("distexp.report: error: --sweep-id: found no sweep 'nope' in experiment "
                   "'distexp'; run `python -m distexp -m ...` or pass --filter to report any runs")
