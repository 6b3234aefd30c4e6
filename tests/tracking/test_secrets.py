"""Credentials never leave the command line, a sweep refuses a setting every job would
fail on once, before any job, and a run whose job process was SIGKILLed does not stay RUNNING."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import child_env, mlflow_runs, processes_mentioning, run_cli
from helpers import wait_until as _wait
from helpers.servers import Rest, params, tags

pytestmark = [pytest.mark.slow, pytest.mark.extended]

PW = "Pw-h18-q9Zk"  # unique to this file: other tests use other secrets on the shared server
TINY = ["strategy=one_device", "model=mlp", "steps_per_epoch=3", "warmup_steps=1",
        "tracking.system_metrics=false", "measure_peak_flops=false", "measure_step_split=false"]


def _hits(root: Path, needle: bytes) -> list:
    """Every file under `root` (hidden ones included) whose bytes contain `needle`."""
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _db_hits(postgres: str, needle: str) -> dict:
    """{table: rows} of every table of the server's database whose row text holds `needle`."""
    import psycopg2

    conn = psycopg2.connect(f"postgresql://{postgres.split('://', 1)[1]}/mlflow")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")
            tables = [t for (t,) in cur.fetchall()]
            out = {}
            for t in tables:
                cur.execute(f'SELECT count(*) FROM "{t}" AS r WHERE r::text LIKE %s',
                            (f"%{needle}%",))
                out[t] = cur.fetchone()[0]
        return out
    finally:
        conn.close()


def test_a_password_in_the_uri_is_stored_and_printed_nowhere(mlflow_server, postgres, tmp_path):
    """A 4-job sweep (2 train, 2 fail their config check: a failed job's line and records too)
    and a single job, with user:password in tracking.uri against a real server: the password is
    in no table of the server's database, no artifact, no file under outputs/ (Hydra's .hydra/
    and multirun.yaml included) and no console line; the runs still landed."""
    port = mlflow_server.port
    uri = f"http://alice:{PW}@127.0.0.1:{port}/"
    common = [f"tracking.uri={uri}", "tracking.experiment=secrets", *TINY]
    sweep = run_cli(["-m", *common, "seed=0,1", "epochs=1,0"], tmp_path, timeout=600)
    single = run_cli([*common, "epochs=1"], tmp_path, timeout=600)
    assert sweep.returncode == 1, sweep  # two jobs failed their check; the sweep went on
    assert single.returncode == 0, single
    for r in (sweep, single):
        assert PW not in r.out, r
    assert f"http://***@127.0.0.1:{port}/" in single.stdout, single  # the "MLflow run" line
    # a sweep's: in its logs (a sweep reads in one screen), redacted there too
    logs = "".join(p.read_text() for p in (tmp_path / "outputs" / "multirun").rglob("*.log"))
    assert f"http://***@127.0.0.1:{port}/" in logs  # the jobs' "MLflow run" lines (distexp.log)
    assert f"#0 : tracking.uri=http\\://***@127.0.0.1\\:{port}/" in logs  # Hydra's (sweep.log)
    assert "Error executing job with overrides" not in sweep.stderr, sweep
    assert "jobs failed" in sweep.stderr and "epochs: received 0" in sweep.stderr, sweep

    api = Rest(mlflow_server.url)
    runs = api.runs("secrets")
    kinds = sorted((tags(r).get("distexp.run_kind", "single"), r["info"]["status"]) for r in runs)
    assert kinds == [("job", "FINISHED"), ("job", "FINISHED"), ("single", "FINISHED"),
                     ("sweep", "FAILED")], kinds
    parent = next(r for r in runs if tags(r).get("distexp.run_kind") == "sweep")
    assert params(parent)["overrides"].startswith(f"tracking.uri=http://***@127.0.0.1:{port}/ ")
    arts = api.artifacts(parent["info"]["run_id"])
    assert {"multirun.yaml", "sweep.json", "sweep_jobs/0.json", "sweep_jobs/1.json"} <= arts, arts

    # the server's database, every table: the password nowhere, the runs there (the search works)
    assert not any(_db_hits(postgres, PW).values()), _db_hits(postgres, PW)
    assert _db_hits(postgres, parent["info"]["run_id"])["runs"] == 1
    assert _hits(mlflow_server.artifacts, PW.encode()) == []
    assert _hits(mlflow_server.artifacts, b"***@127.0.0.1")  # the redacted URI is there
    # every file under outputs/: Hydra's .hydra/ of every job, multirun.yaml, sweep records, logs
    outputs = tmp_path / "outputs"
    hydra_files = list(outputs.rglob(".hydra/*.yaml"))
    assert len(hydra_files) == 3 * 5, hydra_files  # config, hydra, overrides: 4 sweep jobs + 1
    assert _hits(outputs, PW.encode()) == []
    assert len(_hits(outputs, b"***@127.0.0.1")) >= 20


class _BasicAuthProxy:
    """A reverse proxy on 127.0.0.1 in front of the MLflow server that answers 401 unless the
    request carries HTTP basic auth for user/password (what an MLflow server behind an
    authenticating proxy, or with its basic-auth app, does). Counts what it saw."""

    def __init__(self, target: str, user: str, password: str):
        import base64
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import requests

        want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        seen = self.seen = {"ok": 0, "refused": 0}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Authorization") != want:
                    seen["refused"] += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="mlflow"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                seen["ok"] += 1
                r = requests.request(self.command, target + self.path, data=body, timeout=60,
                                     headers={k: v for k, v in self.headers.items()
                                              if k.lower() not in ("host", "authorization")})
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("Content-Type", "text/plain"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_mlflow_native_credentials_work(mlflow_server, tmp_path):
    """The way docs/tracking-and-ui.md recommends: MLFLOW_TRACKING_USERNAME /
    MLFLOW_TRACKING_PASSWORD in the environment, a plain URI. Through a proxy that refuses
    requests without them, the job's run lands FINISHED with its metrics; every request the job
    made carried them (none refused)."""
    proxy = _BasicAuthProxy(mlflow_server.url, "bob", PW)
    try:
        r = run_cli([f"tracking.uri={proxy.url}", "tracking.experiment=native-auth", *TINY,
                     "epochs=1"], tmp_path, timeout=600,
                    env={"MLFLOW_TRACKING_USERNAME": "bob", "MLFLOW_TRACKING_PASSWORD": PW})
        assert r.returncode == 0, r
        assert proxy.seen["refused"] == 0 and proxy.seen["ok"] >= 5, proxy.seen
        (run,) = Rest(mlflow_server.url).runs("native-auth")
        assert run["info"]["status"] == "FINISHED"
        assert {m["key"] for m in run["data"]["metrics"]} >= {"train/loss", "eval/accuracy"}
        assert PW not in r.out and _hits(tmp_path / "outputs", PW.encode()) == []
        before = dict(proxy.seen)
        bad = run_cli(["--tracking-uri", proxy.url, "--experiment", "native-auth", "--no-log"],
                      tmp_path, module="distexp.report", timeout=120)
        assert bad.returncode != 0 and proxy.seen["refused"] > before["refused"], bad  # control
    finally:
        proxy.close()


def test_a_sigkilled_job_is_ended_failed_by_the_next_command(tmp_path):
    """kill -9 of the job process (its trainer dies with it: PR_SET_PDEATHSIG): the run stays
    RUNNING until the next distexp command on the store (here the report, which needs no
    TensorFlow) ends it FAILED with distexp.ended_by; run while the job lived, that command
    left it RUNNING."""
    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    job = tmp_path / "job"
    env = child_env()
    proc = subprocess.Popen([sys.executable, "-m", "distexp", f"hydra.run.dir={job}",
                             "strategy=one_device", "model=mlp", "epochs=100000",
                             "tracking.system_metrics=false"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    report = [sys.executable, "-m", "distexp.report", "--tracking-uri", uri, "--no-log"]
    try:
        # the job writes "ok <run id>" to its gate file once the run exists (tracking.forward);
        # the store is not opened before that (a second process migrating a new SQLite store races)
        gate = job / "tracking.gate"
        run_id = _wait(lambda: gate.exists() and gate.read_text().startswith("ok ") and
                       gate.read_text().split()[1], 240, "the job's run")
        _wait(lambda: (job / "steps.csv").exists() or
              len(processes_mentioning(str(job))) >= 2, 240, "the trainer")
        trainers = [p for p in processes_mentioning(str(job)) if p != proc.pid]
        assert trainers, "the trainer process should be running"
        alive = subprocess.run(report, cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=120)
        assert "ended FAILED" not in alive.stdout, alive.stdout
        assert mlflow_runs(uri)[1][0].info.status == "RUNNING"  # a live job is never ended

        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _wait(lambda: processes_mentioning(str(job)) == [], 30, "the trainer to die too")
        assert mlflow_runs(uri)[1][0].info.status == "RUNNING"  # nobody closed it

        after = subprocess.run(report, cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=120)
        assert f"run {run_id}" in after.stdout and "ended FAILED" in after.stdout, after
        (ended,) = mlflow_runs(uri)[1]
        assert ended.info.run_id == run_id
        assert ended.info.status == "FAILED"
        why = ended.data.tags["distexp.ended_by"]
        assert why == (f"distexp: its owner, process {proc.pid} on {os.uname().nodename}, is gone "
                       "(killed without closing the run)"), why
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
