"""The done-when test of the MLflow UI: a job and the README's repeats=auto sweep through the CLI,
then the URL `python -m distexp.ui` prints, opened in Debian's Chromium with a fresh profile at
1600x1000, shows the outcome and one row per set-up with no click. Tier: slow."""
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
from helpers.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.extended]


SCREENSHOT = ROOT / "docs" / "mlflow-ui-link.png"


TINY = ["epochs=1", "steps_per_epoch=6", "warmup_steps=2", "measure_peak_flops=false", "measure_step_split=false"]


def _foreign(out: str):
    """Console lines that must not appear in a successful run."""
    return [ln for ln in out.splitlines()
            if re.search(r"E0000|Traceback|ValueError|Downloading artifacts|absl::InitializeLog"
                         r"|oneDNN custom operations", ln)]


# The set-ups, each named with its answer by the sweep's decision ("mirrored x2: 0.72x [0.45,
# 1.14] not settled vs control"; distexp.figures.outcomes.setup_answer): the names before ": ".
NAMES = {"one_device x1 batch 64", "mirrored x2", "one_device x1 batch 128 (control)"}


def test_printed_link_opens_the_sweep_with_no_click(tmp_path):
    """A job, then the README's sweep with repeats=auto (3 set-ups, at most 2 rounds); `python -m
    distexp.ui` prints a URL; Debian's Chromium with a fresh profile at 1600x1000 opens it and,
    with no click, shows the outcome: its line uncut, one row per set-up with its equal-work
    speed-up and examples/s (MLflow's averages over the set-up's runs) in view; one click on a
    set-up shows its runs. The console of the sweep (and of a default job) is quiet."""
    need_chromium()
    env = {"CUDA_VISIBLE_DEVICES": ""}
    t0 = time.time()
    job = run_cli(TINY, tmp_path, env=env, store=False)  # the first command creates the store
    assert job.returncode == 0, job
    assert _foreign(job.out) == [], job.out
    assert "Job directory: " in job.stdout and "Browse it: python -m distexp.ui" in job.stdout
    job_dir = Path(re.search(r"^Job directory: (.+)$", job.stdout, re.M).group(1))
    assert not (job_dir / "distexp.log").exists()  # no empty log file
    sweep = run_cli(["-m", "strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
                     "repeats=auto", "sweep.max_repeats=2", *TINY], tmp_path, env=env, timeout=900)
    assert sweep.returncode == 0, sweep
    assert _foreign(sweep.out) == [], sweep.out
    assert sweep.stdout.rstrip().endswith("Browse it: python -m distexp.ui"), sweep.stdout[-2000:]
    closing = [ln for ln in sweep.stdout.splitlines() if ln.startswith("repeats=auto: ")]
    assert len(closing) == 1  # the sweep's closing lines: its decision's (the records)
    left = [p.name for p in (tmp_path / "outputs").iterdir()]
    assert "mlflow.db" in left and not [n for n in left if n.endswith(".lock")], left
    client, runs = mlflow_runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    parent = next(r for r in runs if r.data.tags.get("distexp.run_kind") == "sweep")
    jobs = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert 3 <= len(jobs) <= 6
    from distexp.figures import outcomes

    decision = outcomes.from_json(parent.data.tags["distexp.outcomes"])
    assert all(line in sweep.stdout.splitlines() for line in outcomes.closing_lines(decision))
    outcome = outcomes.description_line(decision)  # the same records, one line
    assert parent.data.tags["mlflow.note.content"].splitlines()[0] == outcome
    exp = client.get_experiment(parent.info.experiment_id)
    assert exp.tags["mlflow.note.content"].splitlines()[0] == outcome
    setups = {r.data.tags["set-up"] for r in jobs}
    assert {s.split(": ")[0] for s in setups} == NAMES
    assert "one_device x1 batch 64: baseline" in setups
    mirrored = next(s for s in setups if s.startswith("mirrored x2: "))
    assert mirrored.endswith(" vs control") and re.search(r": \d\.\d\dx \[", mirrored)
    speedup = {s: None for s in setups}  # on a set-up's first run (the group's average: it)
    speedup.update({r.data.tags["set-up"]: r.data.metrics["scaling/speedup_equal_work"]
                    for r in jobs if "scaling/speedup_equal_work" in r.data.metrics})
    assert speedup[next(s for s in setups if "(control)" in s)] == 1.0
    print(f"\njob + sweep: {time.time() - t0:.0f} s ({len(jobs)} jobs)")

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
        _look(url, jobs, speedup, outcome, tmp_path / "ui.png", sorted(setups))
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


# The first line of a description, as laid out: one line, inside the box that clips it.
FIRST_LINE = """p => { const r = document.createRange(); r.selectNodeContents(p);
  const rects = [...r.getClientRects()]; let clip = p.parentElement;
  while (clip && getComputedStyle(clip).overflow !== 'hidden') clip = clip.parentElement;
  const c = clip.getBoundingClientRect();
  return {lines: new Set(rects.map(x => Math.round(x.top))).size,
          right: Math.max(...rects.map(x => x.right)), bottom: Math.max(...rects.map(x => x.bottom)),
          clipRight: c.right, clipBottom: c.bottom}; }"""
SPEEDUP = '[col-id="metrics.`scaling/speedup_equal_work`"]'
RATE = '[col-id="metrics.`scaling/examples_per_sec_setup`"]'
ACCURACY = '[col-id="metrics.`scaling/eval_accuracy_setup`"]'


def _look(url: str, jobs, speedup: dict, outcome: str, shot: Path, setups) -> None:
    with chromium_page(1600, 1000) as page:
        page.goto(url)
        page.get_by_text(f"Group: {setups[0]}").first.wait_for(timeout=120_000)
        page.wait_for_timeout(1000)
        # the outcome: the experiment's description, its first line whole in its collapsed box
        line = page.locator("p", has_text=outcome.split(" (")[0]).first
        assert line.inner_text() == outcome
        box = line.evaluate(FIRST_LINE)
        assert box["lines"] == 1 and box["right"] <= box["clipRight"] + 0.5, box
        assert box["bottom"] <= box["clipBottom"] + 0.5, box
        # one row per set-up (and the sweep's parent, ungrouped); no job's row until a click
        grid = page.locator(".ag-root-wrapper").first.bounding_box()
        groups = {}
        for name in setups:  # its name with its answer, whole
            row = page.locator("[role=row][row-index]", has_text=f"Group: {name}").first
            assert row.is_visible(), name
            groups[name] = row.get_attribute("row-index")
        assert page.get_by_text("Additional runs").first.is_visible()
        assert page.get_by_role("link", name=jobs[0].info.run_name).count() == 0
        # the set-up's equal-work speed-up and examples/s: its row's cells, inside the grid
        for name, index in groups.items():
            for col, value in ((SPEEDUP, speedup[name]), (RATE, None), (ACCURACY, None)):
                if col == SPEEDUP and value is None:  # the baseline: no equal-work figure
                    continue
                cell = page.locator(f"[row-index='{index}'] {col}").first
                text, cbox = cell.inner_text(), cell.bounding_box()
                assert text.endswith("(average)") and not text.startswith("-"), (name, text)
                if col == RATE:  # a plain number: the median, whole
                    assert re.fullmatch(r"\d+ \(average\)", text), text
                if value is not None:
                    assert float(text.split()[0]) == pytest.approx(value, abs=1e-3), text
                assert cbox["x"] >= grid["x"] and cbox["x"] + cbox["width"] <= \
                    grid["x"] + grid["width"], (name, col, cbox, grid)
        for col in (SPEEDUP, RATE, ACCURACY):  # the header names the figure
            assert page.locator(f".ag-header-cell{col}").first.is_visible()
        shot.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(shot))
        # per-run detail: one click on a set-up shows its runs, with their display tags
        name = next(s for s in setups if s.startswith("mirrored x2: "))
        expander = f"[row-index='{groups[name]}'] span[role=button]"
        page.locator(expander).first.click()
        mirrored = [r for r in jobs if r.data.tags["set-up"] == name]
        page.get_by_role("link", name=mirrored[0].info.run_name).first.wait_for(timeout=30_000)
        text = page.inner_text("body")
        for r in mirrored:
            assert r.data.tags["speed-up"] in text or r.data.tags["speed-up"][:12] in text
        page.screenshot(path=str(shot.with_name("ui-open.png")))
    assert 0 < shot.stat().st_size < 2 * 2 ** 20
    if os.environ.get("DISTEXP_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.write_bytes(shot.read_bytes())
