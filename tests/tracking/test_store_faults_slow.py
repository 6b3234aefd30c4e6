"""A store whose disk fills during training: the run's metrics kept in the offline file, the line
says where and how to import them, and the import puts every one of them in the run."""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from helpers import child_env, wait_until
from helpers.faults import fill, job, one_line

pytestmark = [pytest.mark.slow, pytest.mark.extended]


def test_a_disk_that_fills_during_training_loses_no_metric(tmp_path, mounts):
    full = mounts(tmp_path / "full", "8m")
    db = full / "mlflow.db"
    marker = tmp_path / "held"
    env = child_env(DISTEXP_TEST_HOLD=f"training:{marker}")
    box = {}
    t = threading.Thread(target=lambda: box.update(r=job(tmp_path, db, "epochs=2", "steps_per_epoch=4",
                                                          env=env, timeout=400)))
    t.start()
    wait_until(marker.exists, 300, "the chief's first step")
    fill(full)
    marker.unlink()  # training goes on, on a store with no room left
    t.join()
    r = box["r"]
    assert r.returncode == 3, r
    line = one_line(r, "failed during the job (the disk under the store is full)")
    offline = tmp_path / "job" / "mlflow-offline.jsonl"
    assert str(offline) in line and f"python -m distexp.tracking import {tmp_path / 'job'}" in line
    records = [json.loads(ln) for ln in offline.read_text().splitlines()]
    kept = sum(len(rec["metrics"]) for rec in records if rec["kind"] == "metrics")
    (full / "filler").unlink()
    imp = subprocess.run([sys.executable, "-m", "distexp.tracking", "import", str(tmp_path / "job")],
                         env=child_env(), capture_output=True, text=True, timeout=120)
    assert imp.returncode == 0, imp
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    run = client.search_runs([client.get_experiment_by_name("distexp").experiment_id])[0]
    assert run.info.status == "FINISHED"
    history = sum(len(client.get_metric_history(run.info.run_id, k)) for k in run.data.metrics)
    assert kept > 0 and history >= kept, (kept, history, imp.stdout)
