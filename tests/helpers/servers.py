"""Real servers for tests (a pytest plugin: `pytest_plugins = ["helpers.servers"]` in conftest.py).

- `postgres`: Debian's PostgreSQL on 127.0.0.1, a free port, a throw-away data dir; session-scoped.
- `mlflow_server`: `mlflow server` with that PostgreSQL as backend store and a local artifact root
  (--serve-artifacts); session-scoped.
- `MlflowServer.start(...)` for tests that need their own server (to kill it, or on a SQLite store).
- `Rest`: MLflow's REST API through plain HTTP requests (what any client sees).

Each fixture skips with the reason when the machine truly cannot run it (no PostgreSQL binaries):
.ci/run installs them.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import pytest
import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin(name: str) -> Optional[str]:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _as_postgres_user():
    """PostgreSQL refuses to run as root: drop to the `postgres` user Debian's package creates."""
    if os.geteuid() != 0:
        return None, None
    try:
        pw = pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and there is no 'postgres' user (apt-get install postgresql "
                    "creates it)")

    def demote():
        os.setsid()
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    return pw, demote


def _wait(check, timeout: float, what: str, log: Optional[Path] = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} did not come up in {timeout:.0f} s\n{tail}")


@pytest.fixture(scope="session")
def postgres():
    """postgresql+psycopg2://distexp@127.0.0.1:<port> (database mlflow), fresh."""
    initdb, server = _pg_bin("initdb"), _pg_bin("postgres")
    if not initdb or not server:
        pytest.skip("PostgreSQL binaries not found (apt-get install postgresql; .ci/run does)")
    import psycopg2

    pw, demote = _as_postgres_user()
    # Not under pytest's tmp dir: that one is private to root and the postgres user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="distexp-pg-"))
    data, log = base / "data", base / "postgres.log"
    if pw:
        os.chown(base, pw.pw_uid, pw.pw_gid)
    subprocess.run([initdb, "-D", str(data), "-U", "distexp", "-A", "trust", "--no-sync",
                    "-E", "UTF8"], check=True, capture_output=True, preexec_fn=demote)
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [server, "-D", str(data), "-p", str(port), "-k", str(base),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off",
             "-c", "max_connections=100"],
            stdout=out, stderr=subprocess.STDOUT, preexec_fn=demote or os.setsid)

    def ready():
        try:
            psycopg2.connect(host="127.0.0.1", port=port, user="distexp", dbname="postgres").close()
            return True
        except psycopg2.OperationalError:
            return False
    try:
        _wait(ready, 60, "PostgreSQL", log)
        conn = psycopg2.connect(host="127.0.0.1", port=port, user="distexp", dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE mlflow")
        conn.close()
        # SQLAlchemy 2.1 maps postgresql:// to psycopg 3; the test deps carry psycopg2-binary
        yield f"postgresql+psycopg2://distexp@127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGINT)  # fast shutdown
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)


class MlflowServer:
    """`mlflow server` in its own process group, on 127.0.0.1:<port>."""

    def __init__(self, backend: str, artifacts: Path, log: Path, port: Optional[int] = None):
        self.backend, self.artifacts, self.log = backend, artifacts, log
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[subprocess.Popen] = None

    @classmethod
    def start(cls, backend: str, artifacts: Path, log: Path, port: Optional[int] = None):
        s = cls(backend, artifacts, log, port)
        s.up()
        return s

    def up(self) -> None:
        self.artifacts.mkdir(parents=True, exist_ok=True)
        mlflow = str(Path(sys.executable).with_name("mlflow"))
        cmd = [mlflow if os.path.exists(mlflow) else "mlflow", "server",
               "--backend-store-uri", self.backend, "--serve-artifacts",
               "--artifacts-destination", str(self.artifacts),
               "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        with open(self.log, "ab") as out:
            # no job runner and its 7 huey consumers (GenAI scoring jobs; ~10 % of a core each
            # while idle), as distexp.ui serves it
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, env={
                                             **os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}:\n"
                                   f"{self.log.read_text()[-3000:]}")
            try:
                return requests.get(f"{self.url}/health", timeout=2).status_code == 200
            except requests.RequestException:
                return False
        _wait(ready, 120, "mlflow server", self.log)

    def kill(self) -> None:
        """SIGKILL the whole server (its workers too), as a crash would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


class Rest:
    """MLflow's REST API (2.0) through plain HTTP."""

    def __init__(self, url: str):
        self.api = f"{url}/api/2.0/mlflow"

    def get(self, endpoint: str, **params):
        r = requests.get(f"{self.api}/{endpoint}", params=params, timeout=30)
        r.raise_for_status()
        return r.json()

    def post(self, endpoint: str, body: dict):
        r = requests.post(f"{self.api}/{endpoint}", json=body, timeout=30)
        r.raise_for_status()
        return r.json()

    def experiment_id(self, name: str) -> str:
        return self.get("experiments/get-by-name", experiment_name=name)["experiment"]["experiment_id"]

    def runs(self, experiment: str = "distexp") -> list:
        exp = self.experiment_id(experiment)
        out, token = [], None
        while True:
            body = {"experiment_ids": [exp], "max_results": 1000}
            if token:
                body["page_token"] = token
            page = self.post("runs/search", body)
            out += page.get("runs", [])
            token = page.get("next_page_token")
            if not token:
                return out

    def history(self, run_id: str, key: str) -> list:
        return self.get("metrics/get-history", run_id=run_id, metric_key=key)["metrics"]

    def artifacts(self, run_id: str, path: str = "") -> set:
        """Every artifact file path of the run (recursively)."""
        files = self.get("artifacts/list", run_id=run_id, path=path).get("files", [])
        out = set()
        for f in files:
            out |= self.artifacts(run_id, f["path"]) if f["is_dir"] else {f["path"]}
        return out


def params(run: dict) -> dict:
    return {p["key"]: p["value"] for p in run["data"].get("params", [])}


def tags(run: dict) -> dict:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def metrics(run: dict) -> dict:
    return {m["key"]: m["value"] for m in run["data"].get("metrics", [])}


@pytest.fixture(scope="session")
def mlflow_server(postgres, tmp_path_factory):
    """An MLflow tracking server backed by PostgreSQL, with a local artifact root."""
    base = tmp_path_factory.mktemp("mlflow-server")
    server = MlflowServer.start(f"{postgres}/mlflow", base / "artifacts", base / "server.log")
    try:
        yield server
    finally:
        server.stop()
