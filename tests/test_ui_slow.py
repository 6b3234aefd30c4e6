"""The done-when test of the MLflow UI: a job and a 4-job sweep through the CLI, then the URL
`python -m distexp.ui` prints, opened in Debian's Chromium with a fresh profile, shows every job's
figures and the verdict with no click. Tier: slow."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, child_env, mlflow_runs, run_cli
from helpers.browser import chromium_page, need_chromium
from servers import free_port

pytestmark = pytest.mark.slow


SCREENSHOT = ROOT / "docs" / "mlflow-ui-link.png"


TINY = ["epochs=1", "steps_per_epoch=6", "warmup_steps=2", "measure_peak_flops=false", "measure_step_split=false"]


def _foreign(out: str):
    """Console lines that must not appear in a successful run."""
    return [ln for ln in out.splitlines()
            if re.search(r"E0000|Traceback|ValueError|Downloading artifacts|absl::InitializeLog"
                         r"|oneDNN custom operations", ln)]


def test_printed_link_opens_the_sweep_with_no_click(tmp_path):
    """A 4-job sweep; `python -m distexp.ui` prints a URL; Debian's Chromium with a fresh profile
    opens it and, with no click, shows every job's strategy, replicas, examples/s and accuracy,
    and the verdict. The console of the sweep (and of a default job) is quiet."""
    need_chromium()
    env = {"CUDA_VISIBLE_DEVICES": ""}
    t0 = time.time()
    job = run_cli(TINY, tmp_path, env=env, store=False)  # the first command creates the store
    assert job.returncode == 0, job
    assert _foreign(job.out) == [], job.out
    assert "Job directory: " in job.stdout and "Browse it: python -m distexp.ui" in job.stdout
    job_dir = Path(re.search(r"^Job directory: (.+)$", job.stdout, re.M).group(1))
    assert not (job_dir / "distexp.log").exists()  # no empty log file
    sweep = run_cli(["-m", "strategy=mirrored,central", "cpu_replicas=1,2", *TINY], tmp_path,
                    env=env, timeout=900)
    assert sweep.returncode == 0, sweep
    assert _foreign(sweep.out) == [], sweep.out
    assert sweep.stdout.rstrip().endswith("Browse it: python -m distexp.ui"), sweep.stdout[-2000:]
    verdict = re.search(r"^Verdict: .+$", sweep.stdout, re.M).group(0)
    left = [p.name for p in (tmp_path / "outputs").iterdir()]
    assert "mlflow.db" in left and not [n for n in left if n.endswith(".lock")], left
    client, runs = mlflow_runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    parent = next(r for r in runs if r.data.tags.get("distexp.run_kind") == "sweep")
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(jobs) == 4
    assert parent.data.tags["mlflow.note.content"].splitlines()[0] == verdict
    exp = client.get_experiment(parent.info.experiment_id)
    assert exp.tags["mlflow.note.content"].splitlines()[0] == verdict
    # the scaling curve keyed by replicas (the chart's step), one point per replica count
    steps = sorted(m.step for m in client.get_metric_history(
        parent.info.run_id, "scaling/mirrored/examples_per_sec"))
    assert steps == [1, 2]
    assert {r.info.run_name for r in jobs} == {
        "mirrored-r1-cnn-digits", "mirrored-r2-cnn-digits", "central-r1-cnn-digits",
        "central-r2-cnn-digits"}
    print(f"\njob + sweep: {time.time() - t0:.0f} s")

    port = free_port()
    e = child_env(tests=False)
    ui = subprocess.Popen([sys.executable, "-m", "distexp.ui", "--port", str(port)],
                          cwd=tmp_path, env=e, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        url = None
        for line in ui.stdout:
            if "viewStateShareKey=" in line:
                url = line.strip()
                break
        assert url and url.startswith(f"http://127.0.0.1:{port}/#/experiments/"), url
        _look(url, jobs, verdict, tmp_path / "ui.png")
    finally:
        ui.terminate()
        try:
            ui.wait(timeout=20)
        except subprocess.TimeoutExpired:
            ui.kill()
    # SIGTERM stops distexp.ui as Ctrl-C does: its mlflow server (uvicorn, job runner, huey
    # consumers: a process group) goes with it (it was once left running)
    assert ui.returncode == 130, ui.returncode
    from helpers import processes_mentioning, wait_until

    wait_until(lambda: processes_mentioning(str(tmp_path)) == [], 20, "the UI's server to stop")
    print(f"with the UI: {time.time() - t0:.0f} s")


def _look(url: str, jobs, verdict: str, shot: Path) -> None:
    with chromium_page(1920, 1000) as page:
        page.goto(url)
        for r in jobs:  # every job's row, its figures in the chosen columns, no click
            row = page.get_by_role("row").filter(has_text=r.info.run_name).first
            row.wait_for(timeout=120_000)
        page.get_by_role("columnheader", name="examples/s").first.wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        rows = page.get_by_role("row")
        text = page.inner_text("body")
        for r in jobs:
            t = r.data.tags
            # MLflow's grid splits a row into pinned and scrolled parts: look for the values
            assert t["examples/s"] in text and t["accuracy"] in text, (t, text[:3000])
            assert r.data.params["strategy.name"] in text
        for h in ("strategy.name", "num_replicas", "global_batch_size", "examples/s",
                  "accuracy"):
            header = page.get_by_role("columnheader", name=h).first
            box = header.bounding_box()
            assert header.is_visible() and box and box["x"] + box["width"] <= 1920, (h, box)
        assert rows.count() >= 5
        # the verdict: the experiment's description, first line visible above the table
        line = page.get_by_text(verdict.split(" vs ")[0], exact=False).first
        assert line.is_visible()
        shot.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(shot))
    assert 0 < shot.stat().st_size < 2 * 2 ** 20
    if os.environ.get("DISTEXP_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.write_bytes(shot.read_bytes())
