"""A tracking server that is down when a job starts: one line with the hint, in seconds, before
any training process, with no credentials shown. The server's runs: tests/tracking/test_tracking_server.py.
Tier: integration (a process, no training)."""
from __future__ import annotations

import pytest

from helpers import run_cli
from helpers.servers import free_port

pytestmark = pytest.mark.integration
SECRET = "s3cr3t-pw"


def test_unreachable_server_is_one_line_before_training(tmp_path):
    """Down at start: one line with the hint, in seconds (the subprocess timeout would catch
    MLflow's default minutes of retries), no training process started, no credentials shown."""
    job = tmp_path / "job"
    port = free_port()  # nothing listens there
    r = run_cli([f"hydra.run.dir={job}", f"tracking.uri=http://me:{SECRET}@127.0.0.1:{port}",
                 "strategy=one_device", "model=mlp", "epochs=2"], tmp_path, timeout=60)
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == [f"distexp: error: tracking.uri: received 'http://***@127.0.0.1:{port}'; MLflow "
                     "cannot be reached there ([Errno 111] Connection refused); valid: the URI of a "
                     "running tracking server or store (check the URI and the server), or "
                     "tracking.enabled=false"], r
    assert SECRET not in r.out
    assert not (job / "chief.log").exists(), "no training process may start"
