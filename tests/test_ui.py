"""The MLflow UI at first sight (distexp.ui), the quiet console, and --help that explains.

Unit tier: the shared view's tag (MLflow 3.17.2's envelope), the URL, one-line errors, the
console filter, the display tags, the verdict line, --help.
Slow: a 4-job sweep, then Debian's Chromium with a fresh profile opens the URL `python -m
distexp.ui` prints and, with no click, the page shows each job's strategy, replicas, examples/s,
accuracy and the verdict; the console of that sweep and of a default job is checked.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, child_env, mlflow_runs, run_cli
from helpers.browser import chromium_page, need_chromium
from servers import free_port

SCREENSHOT = ROOT / "docs" / "mlflow-ui-link.png"


# --- unit tier ---------------------------------------------------------------------------------

def _store_with_sweep(tmp_path: Path, sweep_id: str = "s1"):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    (tmp_path / "outputs").mkdir(exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("distexp")
    parent = client.create_run(exp, run_name=f"sweep-{sweep_id}", tags={
        "distexp.sweep_id": sweep_id, "distexp.run_kind": "sweep"})
    for s in ("one_device", "mirrored"):
        client.create_run(exp, run_name=f"{s}-r1", tags={
            "distexp.sweep_id": sweep_id, "distexp.run_kind": "job",
            "mlflow.parentRunId": parent.info.run_id})
    return uri, client, exp, parent.info.run_id


@pytest.mark.integration
def test_ui_writes_the_shared_view_mlflow_reads_and_prints_its_url(tmp_path):
    from distexp import ui

    uri, client, exp, parent = _store_with_sweep(tmp_path)
    old = client.create_run(exp, run_name="sweep-s0", tags={"distexp.sweep_id": "s0",
                                                             "distexp.run_kind": "sweep"})
    assert old  # a later parent: the latest is s0 now, unless --sweep-id asks for s1
    exp_id, key, sid = ui.sweep_view(uri, None, "s1")
    assert (exp_id, sid, key) == (exp, "s1", "distexp-sweep-s1")
    tag = client.get_experiment(exp).tags[f"mlflow.sharedViewState.{key}"]
    envelope = json.loads(tag)
    # the checks MLflow 3.17.2's bundle makes on the envelope (3448.*.chunk.js)
    assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == "tags.`distexp.sweep_id` = 's1'"
    assert state["orderByKey"] == "tags.`mlflow.runName`" and state["orderByAsc"] is True
    assert state["selectedColumns"] == [
        "params.`strategy.name`", "params.`num_replicas`", "params.`global_batch_size`",
        "tags.`examples/s`", "tags.`accuracy`", "tags.`speed-up`"]
    assert state["runsExpanded"] == {parent: True}
    assert len(tag) < 5000  # MLflow's experiment tag limit
    assert ui.url("http://127.0.0.1:5000", exp_id, key) == (
        f"http://127.0.0.1:5000/#/experiments/{exp}/runs?workflowType=machine_learning"
        "&viewStateShareKey=distexp-sweep-s1")
    # without --sweep-id: the latest sweep
    assert ui.sweep_view(uri, None, None)[2] == "s0"
    r = run_cli(["--print-url", "--sweep-id", "s1"], tmp_path, module="distexp.ui", timeout=120)
    assert r.returncode == 0, r
    assert r.stdout.strip() == ui.url("http://127.0.0.1:5000", exp, "distexp-sweep-s1")


@pytest.mark.integration
def test_ui_one_line_errors(tmp_path):
    r = run_cli([], tmp_path, module="distexp.ui", timeout=120)
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith("distexp.ui: error: --tracking-uri: no MLflow store at "), r
    _store_with_sweep(tmp_path)
    r = run_cli(["--sweep-id", "nope", "--print-url"], tmp_path, module="distexp.ui", timeout=120)
    assert r.returncode == 2 and "--sweep-id: received 'nope'" in r.stderr, r
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_cli(["--port", str(port)], tmp_path, module="distexp.ui", timeout=120)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r
    assert f"--port: received {port}; it is in use on 127.0.0.1" in r.stderr, r


def test_console_drops_the_tf_banner_and_says_known_errors_in_words():
    from distexp.job.launch import console_line

    said: set = set()
    banner = ["WARNING: All log messages before absl::InitializeLog() is called are written to "
              "STDERR\n",
              "I0000 00:00:1795455714.352199   21500 port.cc:153] oneDNN custom operations are "
              "on. You may see slightly different numerical results\n"]
    assert [console_line(x, said) for x in banner * 2] == [None] * 4
    e = "E0000 00:00:17.1 21500 mkl_util.h:1] oneDNN supports DT_BOOL only on platforms with AVX\n"
    first = console_line(e, said)
    assert first.startswith("TensorFlow: a boolean op") and "E0000" in first  # named, in words
    assert not first.startswith("E0000") and console_line(e, said) is None  # once
    assert console_line("distexp: detail: FLOPs: ValueError: x\n", said) is None
    assert console_line("epoch 1/1  loss 2.2\n", said) == "epoch 1/1  loss 2.2\n"


def test_display_tags_round_and_describe():
    from distexp.tracking.display import job_tags

    params = {"strategy.name": "mirrored", "num_replicas": "2", "global_batch_size": "128",
              "model.name": "cnn", "dataset.name": "digits", "loop.name": "custom"}
    tags = job_tags({"perf/examples_per_sec": 20586.4, "perf/examples_per_sec_ci95": 712.2,
                     "eval/accuracy": 0.913888888}, params)
    assert tags == {"mlflow.note.content": "mirrored, 2 replicas, global batch 128 (cnn on "
                                           "digits, custom loop)",
                    "examples/s": "20,586 [19,874, 21,299]", "accuracy": "0.914"}
    seq = job_tags({"eval/token_accuracy": 0.5}, {**params, "task.eval_metric":
                                                   "eval/token_accuracy", "num_replicas": "1"})
    assert seq["accuracy"] == "0.500 token_accuracy" and "examples/s" not in seq
    assert job_tags({"perf/examples_per_sec": 2563.4}, params)["examples/s"] == "2,563 (no CI)"
    assert seq["mlflow.note.content"].startswith("mirrored, 1 replica, ")


def test_verdict_line_names_each_strategy_best_speedup():
    from distexp.report.scaling import Row
    from distexp.report.console import verdict
    from distexp.sweeps.summary import clip, scaling_metrics

    def row(strategy, replicas, rate, speedup=None, verdict_="", low=None, high=None):
        return Row(run_id=f"{strategy}{replicas}", run_name="", status="FINISHED",
                   strategy=strategy, model="cnn", dataset="digits", loop="custom", workers=1,
                   replicas=replicas, global_batch=64 * replicas, rate=rate, ci95=None,
                   eval_accuracy=0.9, time_to_first_step=1.0, speedup=speedup,
                   speedup_low=low, speedup_high=high, verdict=verdict_,
                   baseline="one_device r1 (weak)", rates=[rate])

    rows = [row("one_device", 1, 100.0, 1.0, "baseline"),
            row("mirrored", 2, 162.0, 1.62, "significant", 1.4, 1.85),
            row("central", 2, 90.0, 0.9, "~", 0.7, 1.1)]
    from distexp.report.verdict import verdict_lines

    lines = verdict_lines(rows)  # the report's verdict (its content is tests/test_equal_work.py's)
    more = f" (+{len(lines) - 1} more in the report)" if len(lines) > 1 else ""
    assert lines and verdict(rows) == f"Verdict: {lines[0]}{more}"
    assert "not measured" in verdict(rows)  # no 1-replica job at global batch 128
    assert ("scaling/mirrored/speedup", 1.62, 2) in scaling_metrics(rows)
    assert ("scaling/one_device/examples_per_sec", 100.0, 1) in scaling_metrics(rows)
    assert len(clip("x" * 6000, 5000)) == 5000


def test_sweep_summary_puts_the_verdict_where_the_ui_shows_it(tmp_path):
    """distexp.sweeps.summary on a store written by hand: descriptions, speed-up tags, the
    scaling metrics keyed by replicas, the report's images, the shared view. No TensorFlow."""
    from mlflow.entities import Metric, Param

    from distexp import tracking
    from distexp.sweeps.summary import summarise

    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    (tmp_path / "sweep").mkdir()
    parent = tracking.JobRun(uri, "distexp", "sweep-s1", {
        "distexp.sweep_id": "s1", "distexp.run_kind": "sweep",
        "distexp.sweep_dir": str(tmp_path / "sweep")}, {"overrides": "x"})
    client = parent.client
    ids = {}
    for job, (strategy, replicas, rate) in enumerate([("one_device", 1, 1000.0),
                                                      ("mirrored", 2, 1800.0)]):
        run = client.create_run(parent.experiment_id, run_name=f"{strategy}-r{replicas}", tags={
            "distexp.sweep_id": "s1", "distexp.run_kind": "job", "distexp.job_num": str(job),
            "mlflow.parentRunId": parent.run_id, "distexp.overrides": f"strategy={strategy}"})
        rid = ids[strategy] = run.info.run_id
        client.log_batch(rid, params=[Param(k, str(v)) for k, v in {
            "strategy.name": strategy, "model.name": "cnn", "dataset.name": "digits",
            "loop.name": "custom", "num_replicas": replicas, "num_workers": 1,
            "global_batch_size": 64 * replicas}.items()], metrics=[
            Metric(k, v, 1000, 1) for k, v in {"perf/examples_per_sec": rate,
                                               "perf/examples_per_sec_ci95": rate * 0.02,
                                               "eval/accuracy": 0.9}.items()])
        client.set_terminated(rid, "FINISHED")
    line = summarise(parent, "s1", uri, "distexp")
    # no 1-replica job at global batch 128: the verdict says the replica effect was not measured
    assert line.startswith("Verdict: ") and "not measured" in line, line
    got = client.get_run(parent.run_id).data
    assert got.tags["mlflow.note.content"].splitlines()[0] == line
    assert "| mirrored |" in got.tags["mlflow.note.content"]  # the report's table below it
    exp = client.get_experiment(parent.experiment_id)
    assert exp.tags["mlflow.note.content"].startswith(line + "\n")
    assert "mlflow.sharedViewState.distexp-sweep-s1" in exp.tags
    assert client.get_run(ids["mirrored"]).data.tags["speed-up"].startswith("1.80x [1.75, 1.85]")
    assert client.get_run(ids["one_device"]).data.tags["speed-up"] == "1.00x baseline"
    hist = client.get_metric_history(parent.run_id, "scaling/mirrored/speedup")
    assert [(h.step, round(h.value, 6)) for h in hist] == [(2, 1.8)]
    assert [h.step for h in client.get_metric_history(
        parent.run_id, "scaling/one_device/examples_per_sec")] == [1]
    arts = {a.path for a in client.list_artifacts(parent.run_id, "report")}
    assert {"report/report.md", "report/throughput.png"} <= arts
    images = client.list_artifacts(parent.run_id, "images")
    assert images  # log_image's files: the run page's image grid


def test_sweep_run_names_differ_where_the_ui_shows_them():
    """Issue 17 item 3: what the sweep varies comes first, and a swept value the name would not
    show (one_device's cpu_replicas) is added, so no two jobs of a sweep share a name."""
    from omegaconf import OmegaConf

    from distexp.sweeps.records import swept_keys
    from distexp.tracking import run_name

    cfg = OmegaConf.create({"hydra": {"overrides": {"task": [
        "strategy=one_device,mirrored", "cpu_replicas=1,2", "epochs=2", "repeats=3"]},
        "sweeper": {"params": {"optimizer.lr": "0.1,0.2"}}}})
    assert swept_keys(cfg) == ["strategy", "cpu_replicas", "optimizer.lr"]
    names = {run_name(s, "cnn", "digits", r, True, {"strategy": s, "cpu_replicas": str(c)})
             for s, c, r in [("one_device", 1, 1), ("one_device", 2, 1), ("mirrored", 1, 1),
                             ("mirrored", 2, 2)]}
    assert names == {"one_device-r1-cnn-digits", "one_device-r1-cpu2-cnn-digits",
                     "mirrored-r1-cnn-digits", "mirrored-r2-cnn-digits"}
    assert run_name("mirrored", "cnn", "digits", 2, True, {"optimizer.lr": "0.1"}) == \
        "mirrored-r2-lr=0.1-cnn-digits"
    assert run_name("mirrored", "cnn", "digits", 2) == "mirrored-cnn-digits-r2"


def test_report_console_table_fits_120_columns_and_tells_rows_apart():
    from distexp.report.console import table
    from distexp.report.scaling import Row, add_scaling, aggregate

    def run(strategy, replicas, cpu, rate, job):
        return Row(run_id=f"id{job}", run_name="", status="FINISHED", strategy=strategy,
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=replicas,
                   global_batch=64 * replicas, rate=rate, ci95=rate * 0.03,
                   eval_accuracy=0.913888, time_to_first_step=1.0, job_num=job,
                   overrides=f"strategy={strategy} cpu_replicas={cpu}", rates=[rate],
                   run_ids=[f"id{job}"])

    rows = aggregate([run("one_device", 1, 1, 20000.0, 0), run("one_device", 1, 2, 19000.0, 1),
                      run("mirrored", 1, 1, 21000.0, 2), run("mirrored", 2, 2, 33000.0, 3),
                      run("central", 2, 2, 30123.4, 4)])
    add_scaling(rows)
    text = table(rows)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 120, text
    assert lines[0].split()[:3] == ["strategy", "replicas", "global"]
    # the two one_device rows differ in cpu_replicas: the set-up column says so
    od = [ln for ln in lines if ln.startswith("one_device")]
    assert len(od) == 2 and "cpu_replicas=1" in od[0] and "cpu_replicas=2" in od[1], text
    mir = next(ln for ln in lines if ln.startswith("mirrored") and " 128 " in ln)
    assert "33,000 ±990" in mir and "0.914" in mir and "one run a side" in mir, mir
    assert "1.74x [" in mir  # 33,000 / 19,000: the same cpu_replicas=2 set-up is the baseline


@pytest.mark.integration
def test_help_describes_each_key_for_the_chosen_options(tmp_path):
    r = run_cli(["--help"], tmp_path, timeout=120)
    assert r.returncode == 0, r
    keys = {m.group(1): m.group(2).strip() for m in
            re.finditer(r"^  ([\w.]+)=\S*\s*(.*)$", r.stdout, re.M)}
    for key in ("gpus", "cpu_replicas", "epochs", "batch_size_per_replica", "global_batch_size",
                "seed", "steps_per_execution", "tracking.uri", "tracking.experiment",
                "tracking.enabled", "model.name", "dataset.test_fraction"):
        assert keys.get(key), f"{key} has no description:\n{r.stdout}"
    assert "logical devices" in keys["cpu_replicas"]
    # only the chosen options' keys: the CNN has no embedding_dim, digits no shape
    assert "model.embedding_dim" not in keys and "dataset.shape" not in keys
    assert "strategy.communication" not in keys and "strategy.cross_device_ops" in keys
    r = run_cli(["model=gru_seq2seq", "dataset=synthetic_pairs", "strategy=multiworker",
                 "--help"], tmp_path, timeout=120)
    assert r.returncode == 0, r
    assert re.search(r"^  model\.embedding_dim=\d+\s+embedding size", r.stdout, re.M), r.stdout
    assert re.search(r"^  strategy\.communication=auto\s+collective implementation", r.stdout,
                     re.M), r.stdout
    assert "== Config groups" in r.stdout and "strategy: central, mirrored" in r.stdout


# --- slow: the done-when test ------------------------------------------------------------------

TINY = ["epochs=1", "steps_per_epoch=6", "warmup_steps=2", "measure_peak_flops=false", "measure_step_split=false"]


def _foreign(out: str):
    """Console lines that must not appear in a successful run."""
    return [ln for ln in out.splitlines()
            if re.search(r"E0000|Traceback|ValueError|Downloading artifacts|absl::InitializeLog"
                         r"|oneDNN custom operations", ln)]


@pytest.mark.slow
def test_printed_link_opens_the_sweep_with_no_click(tmp_path):
    """A 4-job sweep; `python -m distexp.ui` prints a URL; Debian's Chromium with a fresh profile
    opens it and, with no click, shows every job's strategy, replicas, examples/s and accuracy,
    and the verdict. The console of the sweep (and of a default job) is quiet."""
    need_chromium()
    env = {"CUDA_VISIBLE_DEVICES": ""}
    t0 = time.time()
    job = run_cli(TINY, tmp_path, env=env)
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
