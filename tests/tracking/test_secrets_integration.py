"""A sweep stopped once, before any job, by a store that is down or a setting every job rejects
(one line, no password shown); the rules by which a run's owner is judged dead. Tier: integration
(processes, no training)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from helpers import mlflow_runs, run_cli
from helpers.servers import free_port

pytestmark = pytest.mark.integration
PW = "Pw-k27-t4Rx"  # unique to this file (tests/tracking/test_secrets.py has its own)
TINY = ["strategy=one_device", "model=mlp", "steps_per_epoch=3", "warmup_steps=1"]


def test_an_unreachable_store_stops_a_sweep_once_before_any_job(tmp_path):
    """The server is down: one line (no Hydra warning with a file path, no per-job repeat, no
    password), exit 2, no job started (no job dir)."""
    port = free_port()
    r = run_cli(["-m", f"tracking.uri=http://alice:{PW}@127.0.0.1:{port}", "seed=0,1", *TINY],
                tmp_path, timeout=120)
    assert r.returncode == 2, r
    lines = [ln for ln in r.out.splitlines() if ln.strip()]
    assert lines == [f"distexp: error: tracking.uri: received 'http://***@127.0.0.1:{port}'; MLflow "
                     "cannot be reached there ([Errno 111] Connection refused); valid: the URI of a "
                     "running tracking server or store (check the URI and the server), or "
                     "tracking.enabled=false"], r
    assert not [p for p in (tmp_path / "outputs").rglob("*") if p.is_dir() and p.name.isdigit()]
    shown = run_cli(["--cfg", "job", f"tracking.uri='https://u:{PW}@h/?token={PW}&x=1'"], tmp_path)
    assert "uri: https://***@h/?token=***&x=1" in shown.stdout and PW not in shown.out, shown


def test_a_setting_every_job_rejects_stops_the_sweep_once(tmp_path):
    """Every job fails the same config check: one line, exit 2, no parent run, no child run and no
    job dir (a refused sweep leaves nothing); an unknown option anywhere in the sweep: one line
    before any job."""
    r = run_cli(["-m", "seed=0,1,2", "epochs=0", *TINY], tmp_path, timeout=120)
    assert r.returncode == 2, r
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert err == ["distexp: error: epochs: received 0; expected >= 1"], r
    assert "Launching" not in r.stdout, r
    assert not (tmp_path / "outputs" / "multirun").exists()
    if (tmp_path / "outputs" / "mlflow.db").exists():
        _, runs = mlflow_runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
        assert runs == []

    r = run_cli(["-m", "strategy=one_device,nosuch", "tracking.enabled=false"], tmp_path,
                timeout=120)
    assert r.returncode == 2, r
    assert [ln for ln in r.out.splitlines() if ln.strip()] == [
        "distexp: error: strategy: received 'nosuch'; valid: central, mirrored, multiworker, "
        "one_device, ps, tpu"], r


def test_owner_liveness_rules():
    """A run is judged dead only on proof: same host, the pid gone, a zombie or reused; another
    host, a heartbeat older than STALE_S. No owner tag, a live owner, a sweep parent elsewhere:
    left alone."""
    from distexp.tracking import owner
    from distexp.tracking import tags as tag

    here = owner.host()
    me = owner.owner_tags()
    assert owner.dead(me) is None  # this process: alive
    assert owner.dead({}) is None  # not distexp's: never touched
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    tags_gone = owner.owner_tags(gone.pid)
    gone.wait()
    assert "is gone" in owner.dead(tags_gone)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    tags_z = owner.owner_tags(zombie.pid)
    deadline = time.time() + 30
    while owner._start_ticks(zombie.pid) is not None and time.time() < deadline:
        time.sleep(0.05)  # exited, not yet reaped: a zombie counts as gone
    assert "is gone" in owner.dead(tags_z)
    zombie.wait()
    _, pid, start = me[tag.OWNER].split()
    reused = {tag.OWNER: f"{here} {pid} {int(start) - 1}"}
    assert "another process" in owner.dead(reused)
    now = time.time()
    far = {tag.OWNER: "node-b 123 456", tag.HEARTBEAT: str(int(now - owner.STALE_S - 5))}
    assert "no heartbeat" in owner.dead(far, now)
    assert owner.dead({**far, tag.HEARTBEAT: str(int(now - 30))}, now) is None
    assert owner.dead({**far, "distexp.run_kind": "sweep"}, now) is None
    assert owner.dead({tag.OWNER: "node-b 123 456"}, now) is None  # no beat: no proof
