"""`python -m distexp.ui` against a store: the shared view MLflow reads and the URL it prints, its
one-line errors; `--help` describes each key of the chosen options. Tier: integration (processes,
no training)."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_env, run_cli
from helpers.servers import free_port

pytestmark = pytest.mark.integration


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


def test_ui_writes_the_shared_view_mlflow_reads_and_prints_its_url(tmp_path):
    from distexp.tracking import view

    uri, client, exp, parent = _store_with_sweep(tmp_path)
    client.create_run(exp, run_name="sweep-s0", tags={"distexp.sweep_id": "s0",
                                                             "distexp.run_kind": "sweep"})
    # a later parent with a job run: the latest is s0 now, unless --sweep-id asks for s1 (one
    # without job runs would not be: tests/ui/test_ui.py, the latest sweep with job runs)
    client.create_run(exp, run_name="job-s0", tags={"distexp.sweep_id": "s0",
                                                    "distexp.run_kind": "job"})
    exp_id, key, sid = view.sweep_view(uri, None, "s1")
    assert (exp_id, sid, key) == (exp, "s1", "distexp-sweep-s1")
    tag = client.get_experiment(exp).tags[f"mlflow.sharedViewState.{key}"]
    envelope = json.loads(tag)
    # the checks MLflow's UI bundle makes on the envelope (tests/ui/test_ui.py finds them there)
    assert isinstance(envelope["name"], str) and isinstance(envelope["createdAt"], int)
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == "tags.`distexp.sweep_id` = 's1'"
    # each set-up's runs by their place among its runs: every set-up on MLflow's first page
    assert state["orderByKey"] == "tags.`distexp.setup_rank`" and state["orderByAsc"] is True
    assert state["selectedColumns"] == [
        "metrics.`scaling/speedup_equal_work`", "metrics.`scaling/examples_per_sec_setup`",
        "metrics.`scaling/eval_accuracy_setup`", "tags.`speed-up`", "tags.`examples/s`",
        "tags.`accuracy`"]
    # the runs carry no set-up yet (a sweep not summarised): they are the open ungrouped rows
    assert state["groupsExpanded"] == {"tag.set-up": True}
    assert state["runsExpanded"] == {parent: True}
    assert len(tag) < 5000  # MLflow's experiment tag limit
    assert view.url("http://127.0.0.1:5000", exp_id, key) == (
        f"http://127.0.0.1:5000/#/experiments/{exp}/runs?workflowType=machine_learning"
        "&viewStateShareKey=distexp-sweep-s1")
    # without --sweep-id: the latest sweep
    assert view.sweep_view(uri, None, None)[2] == "s0"
    r = run_cli(["--print-url", "--sweep-id", "s1"], tmp_path, module="distexp.ui", timeout=120)
    assert r.returncode == 0, r
    assert r.stdout.strip() == view.url("http://127.0.0.1:5000", exp, "distexp-sweep-s1")


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


def test_ui_prints_one_url_and_keeps_the_servers_output_in_a_file(tmp_path):
    """The terminal gets one URL, the sweep's, once the server answers; MLflow's start-up lines
    and its access log go to outputs/mlflow-ui.log (before: four start-up lines, a first URL that
    opens MLflow's GenAI home, ~49 access-log lines per page load)."""
    import urllib.request

    _store_with_sweep(tmp_path)
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "distexp.ui", "--port", str(port)], cwd=tmp_path,
                         env=child_env(tests=False), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if "viewStateShareKey=" in line:
                break
        link = lines[-1].strip()
        assert link.startswith(f"http://127.0.0.1:{port}/#/experiments/"), lines
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=20) as r:
            assert r.status == 200  # it answers when the URL is printed
        with urllib.request.urlopen(link.split("#")[0], timeout=20) as r:
            r.read()  # a page load: its access-log lines go to the file
    finally:
        p.terminate()
        rest = p.communicate(timeout=30)[0]
    out = "".join(lines) + rest
    assert len(re.findall(r"https?://", out)) == 1, out
    # what it waits for is said at once, before the URL (the server takes ~10-40 s to answer)
    assert lines[0].startswith(f"Starting the MLflow server on 127.0.0.1 port {port}"), lines
    log = tmp_path / "outputs" / "mlflow-ui.log"
    assert f"\n  server log: {log}\n" in out  # a path on a line of its own
    assert [ln for ln in out.splitlines() if len(ln) > 120 and ln.strip() not in (link, f"server log: {log}",
            f"store: sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")] == []
    assert "GET / " in log.read_text() and "GET /" not in out, (out, log.read_text()[-2000:])


class _CountingClient:
    """An MLflow client that records every read (get_*, search_*, list_*) and passes all through."""

    def __init__(self, client):
        self.client, self.reads = client, []

    def __getattr__(self, name):
        if name.startswith(("get_", "search_", "list_")):
            self.reads.append(name)
        return getattr(self.client, name)


def test_closing_a_run_shows_the_chiefs_figures_without_reading_the_run_back(tmp_path):
    from distexp import tracking
    from helpers import new_store

    _, uri = new_store(tmp_path)
    params = {"strategy.name": "mirrored", "num_replicas": "2", "global_batch_size": "128",
              "model.name": "cnn", "dataset.name": "digits", "loop.name": "custom"}
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    for name, figures, reads in [("given", {"perf/examples_per_sec": 20586.4,
                                            "perf/examples_per_sec_ci95": 712.2,
                                            "eval/accuracy": 0.9138,
                                            "perf/time_to_accuracy_s": None, "diverged": False},
                                  []),
                                 ("no result", None, [])]:
        run = tracking.JobRun(uri, "distexp", name, {}, params)
        run.log_params({"task.eval_metric": "eval/accuracy"})  # as the chief's sink forwards it
        store = run.client
        run.client = counting = _CountingClient(store)
        run.close("FINISHED", job_dir, [], [], figures=figures)
        assert counting.reads == reads
        got = store.get_run(run.run_id)
        assert got.info.status == "FINISHED"
        assert got.data.tags["mlflow.note.content"] == ("mirrored, 2 replicas, global batch 128 "
                                                        "(cnn on digits, custom loop)")
        shown = {k: got.data.tags.get(k) for k in ("examples/s", "accuracy")}
        assert shown == ({"examples/s": "20,586 [19,874, 21,299]", "accuracy": "0.914"}
                         if figures else {"examples/s": None, "accuracy": None})
    # today's call (distexp.job, until it passes result.json) still reads the run back, once
    run = tracking.JobRun(uri, "distexp", "read back", {}, params)
    run.client = counting = _CountingClient(run.client)
    run.close("FINISHED", job_dir, [], [])
    assert counting.reads == ["get_run"]
