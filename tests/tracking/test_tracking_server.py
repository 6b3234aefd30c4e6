"""distexp against a real MLflow tracking server (PostgreSQL backend store, served artifacts),
checked through MLflow's REST API; and the tracking faults: a server that is down at start, a
server that dies mid-job, credentials in the URI."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, processes_mentioning, run_cli
from helpers.servers import MlflowServer, Rest, metrics, params, tags

pytestmark = [pytest.mark.slow, pytest.mark.extended]

SMALL = ["strategy=one_device", "model=mlp", "epochs=2", "steps_per_epoch=3", "warmup_steps=1",
         "measure_step_split=false"]
SECRET = "s3cr3t-pw"


def _files_text(root: Path, skip=(".hydra",)) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and not any(part in skip for part in p.parts):
            out.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(out)


def test_run_lands_on_the_server_without_credentials(mlflow_server, tmp_path):
    """Run, params, metrics and artifacts on a PostgreSQL-backed server; a user:password in the
    URI reaches the server but is never printed, logged as a param/tag, or stored in an artifact."""
    job = tmp_path / "job"
    uri = f"http://distexp:{SECRET}@127.0.0.1:{mlflow_server.port}"
    r = run_cli([f"hydra.run.dir={job}", f"tracking.uri={uri}", "tracking.experiment=server",
                 *SMALL], tmp_path)
    assert r.returncode == 0, r
    assert SECRET not in r.out, r
    assert f"http://***@127.0.0.1:{mlflow_server.port}" in r.stdout

    api = Rest(mlflow_server.url)
    runs = api.runs("server")
    assert len(runs) == 1
    run = runs[0]
    run_id = run["info"]["run_id"]
    assert run["info"]["status"] == "FINISHED"
    assert run["info"]["run_name"] == "one_device-mlp-digits-r1"
    p = params(run)
    assert p["strategy.name"] == "one_device" and p["model.name"] == "mlp" and p["epochs"] == "2"
    assert p["num_replicas"] == "1" and p["tf_version"].startswith("2.")
    assert p["tracking.uri"] == f"http://***@127.0.0.1:{mlflow_server.port}"
    loss = api.history(run_id, "train/loss")
    assert sorted(m["step"] for m in loss) == [1, 2]  # one point per epoch (no doubled last point)
    assert all(0 < m["value"] < 5 for m in loss)
    m = metrics(run)
    assert m["perf/examples_per_sec"] > 0 and 0 <= m["eval/accuracy"] <= 1
    arts = api.artifacts(run_id)
    assert {"config.yaml", "overrides.yaml", "logs/chief.log", "steps.csv"} <= arts, arts
    # nowhere: params, tags, artifacts on the server's disk, files in the job dir (but Hydra's own
    # .hydra/ record of the command line, which stays local)
    assert not any(SECRET in v for v in p.values())
    assert not any(SECRET in v for v in tags(run).values())
    assert SECRET not in _files_text(mlflow_server.artifacts)
    assert SECRET not in _files_text(job)
    assert processes_mentioning(str(job)) == []


def test_server_dying_mid_job_loses_nothing(mlflow_server, tmp_path):
    """The server is SIGKILLed after the run was created (by the trainer's model factory): training
    finishes, exit 3 with one line saying so and how to import what was kept, nothing hangs or
    stays behind; after a restart the printed command puts every metric, artifact and the final
    status into the run."""
    # A second server on the same (already migrated) PostgreSQL store, killed and restarted here.
    server = MlflowServer.start(mlflow_server.backend, tmp_path / "artifacts", tmp_path / "server.log")
    job = tmp_path / "job"
    try:
        r = run_cli([f"hydra.run.dir={job}", f"tracking.uri={server.url}", "model=custom",
                     "tracking.experiment=dies",
                     "model.factory=factories:kill_tracking_server", "strategy=one_device",
                     "epochs=3", "steps_per_epoch=3", "warmup_steps=1"], tmp_path, timeout=300,
                    env={"DISTEXP_TEST_KILL_PGID": str(server.proc.pid)})
        assert server.proc.poll() is not None, "the factory should have killed the server"
        assert r.returncode == 3, r
        assert "Traceback" not in r.out
        assert "distexp: warning: MLflow at" in r.stdout and "training goes on" in r.stdout
        err = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(err) == 1, r
        assert err[0].startswith(f"distexp: error: tracking: MLflow at {server.url} stopped answering "
                                 "during the job ([Errno 111] Connection refused); training FINISHED"), r
        assert "15 metric values" not in err[0] and "the run's final status are kept in" in err[0]
        cmd = err[0].split("when the server is back: ")[1]
        assert cmd == f"python -m distexp.tracking import {job}"
        assert (job / "result.json").exists()
        assert processes_mentioning(str(job)) == []

        server.up()  # back, same port and store
        api = Rest(server.url)
        (run,) = api.runs("dies")
        assert run["info"]["status"] == "RUNNING"  # the dead server could not be told
        assert params(run)["strategy.name"] == "one_device"  # logged before it died
        imp = subprocess.run([sys.executable, *shlex.split(cmd)[1:]], cwd=tmp_path, text=True,
                             capture_output=True, timeout=120,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert imp.returncode == 0, imp.stderr
        assert "run status FINISHED" in imp.stdout
        (run,) = api.runs("dies")
        run_id = run["info"]["run_id"]
        assert run["info"]["status"] == "FINISHED"
        assert sorted(m["step"] for m in api.history(run_id, "train/loss")) == [1, 2, 3]
        assert metrics(run)["perf/examples_per_sec"] > 0
        assert params(run)["tf_version"].startswith("2.")  # the trainer's params, kept offline
        assert {"config.yaml", "logs/chief.log", "steps.csv"} <= api.artifacts(run_id)
        assert not (job / "mlflow-offline.jsonl").exists()  # imported once, not twice
    finally:
        server.stop()


def test_run_lands_in_a_postgresql_store_directly(postgres, tmp_path):
    """tracking.uri=postgresql://... (MLflow's database store, no server) with the drivers of the
    `postgres` extra: the run ends FINISHED with its metrics, artifacts under outputs/."""
    import psycopg2

    from helpers import mlflow_runs

    dsn = postgres.split("://", 1)[1]  # distexp@127.0.0.1:<port>
    conn = psycopg2.connect(f"postgresql://{dsn}/postgres")
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE direct_store")
    conn.close()
    uri = f"postgresql://{dsn}/direct_store"  # SQLAlchemy's default driver for postgresql://
    r = run_cli(["tracking.experiment=direct", *SMALL, f"tracking.uri={uri}"], tmp_path, timeout=300)
    assert r.returncode == 0, r
    client, runs = mlflow_runs(uri, "direct")
    assert [run.info.status for run in runs] == ["FINISHED"]
    assert runs[0].data.metrics["perf/examples_per_sec"] > 0
    arts = {a.path for a in client.list_artifacts(runs[0].info.run_id)}
    assert {"config.yaml", "steps.csv"} <= arts
    assert (tmp_path / "outputs" / "mlartifacts").is_dir() and not (tmp_path / "mlruns").exists()
