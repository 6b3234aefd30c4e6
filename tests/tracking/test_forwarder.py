"""tracking.Forwarder / RunLogger sink, without TensorFlow or a real store: records written by the
chief reach the run whole and in order, the gate tells the chief the run exists or why not, and
neither side waits for good, nor fails when the console is gone."""
from __future__ import annotations

import pytest

from distexp import env, tracking
from distexp.errors import UserError


class FakeRun:
    run_id = "r1"
    offline = None

    def __init__(self):
        self.records = []

    def log_record(self, record):
        self.records.append(record)


def _logger(monkeypatch, fwd):
    for k, v in fwd.env().items():
        monkeypatch.setenv(k, v)
    return tracking.RunLogger()


def test_records_are_forwarded_in_order(tmp_path, monkeypatch):
    run = FakeRun()
    fwd = tracking.Forwarder(lambda: run, tmp_path).start()
    log = _logger(monkeypatch, fwd)
    log.wait_ready()
    log.log_params({"devices": "/cpu:0"})
    log.log_metrics({"a": 1.0, "nan": float("nan"), "none": None}, step=1)
    log.log_metrics({"a": 2.0}, step=2)
    with open(fwd.sink, "a") as f:
        f.write('{"kind": "metrics", "metrics": [["half", 1')  # a line still being written: not read
    assert fwd.close() is run
    log.close()
    assert [r["kind"] for r in run.records] == ["params", "metrics", "metrics"]
    assert run.records[0]["params"] == {"devices": "/cpu:0"}
    (a1,), (a2,) = run.records[1]["metrics"], run.records[2]["metrics"]
    assert (a1[0], a1[1], a1[3]) == ("a", 1.0, 1) and (a2[0], a2[1], a2[3]) == ("a", 2.0, 2)
    assert a1[2] < a2[2]  # strictly later timestamps


def test_failed_run_creation_stops_the_chief(tmp_path, monkeypatch):
    def create():
        raise UserError("tracking.uri: cannot reach MLflow at http://x (refused)")

    fwd = tracking.Forwarder(create, tmp_path).start()
    log = _logger(monkeypatch, fwd)
    with pytest.raises(UserError, match="tracking.uri: cannot reach MLflow"):
        log.wait_ready()
    assert fwd.close() is None and fwd.error.startswith("tracking.uri")


def test_no_job_process_means_no_logging(monkeypatch, tmp_path):
    """A trainer with no job process above it (no sink, no gate in its environment): the logger
    neither waits for a run nor writes a record anywhere."""
    from distexp.tracking import sink

    def no_wait(seconds):
        raise AssertionError(f"waited {seconds} s for a gate no job process will open")

    for k in (env.METRICS_SINK, env.TRACKING_GATE):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sink.time, "sleep", no_wait)
    log = tracking.RunLogger()
    assert not log.enabled and (log.sink, log.gate) == (None, None)
    log.wait_ready()
    log.log_params({"devices": "/cpu:0"})
    log.log_metrics({"a": 1.0}, step=1)
    log.close()
    assert list(tmp_path.iterdir()) == []


def test_the_chief_gives_up_at_a_gate_that_never_opens(tmp_path, monkeypatch):
    """A run whose creation hangs: the chief's wait ends, FAILED (UserFailure: exit 1), naming the
    gate it waited at, instead of waiting for good."""
    import time

    from distexp.errors import UserFailure

    gate = tmp_path / "tracking.gate"
    log = tracking.RunLogger(sink=str(tmp_path / "metrics.jsonl"), gate=str(gate))
    t0 = time.monotonic()
    with pytest.raises(UserFailure) as ex:
        log.wait_ready(timeout=0.3)
    assert time.monotonic() - t0 < 5
    assert str(ex.value) == (f"tracking: waited 0.3 s for the job process to create the MLflow run "
                             f"(its gate file {gate} never appeared); the job process's output "
                             "says why")


def test_a_console_line_that_fails_still_opens_the_gate(tmp_path, monkeypatch):
    """The run's console line raised (BrokenPipeError: `python -m distexp | true`): the gate opens
    all the same and records are still forwarded (the chief waited for good before)."""
    run = FakeRun()

    def announce(_run):
        raise BrokenPipeError(32, "Broken pipe")

    fwd = tracking.Forwarder(lambda: run, tmp_path, on_ready=announce).start()
    log = _logger(monkeypatch, fwd)
    log.wait_ready(timeout=10)
    log.log_metrics({"a": 1.0}, step=1)
    assert fwd.close() is run
    assert [r["kind"] for r in run.records] == ["metrics"]


def test_close_does_not_wait_for_good_for_a_hanging_creation(tmp_path, monkeypatch):
    import threading

    from distexp.tracking import forward

    monkeypatch.setattr(forward, "READY_S", 0.2)
    release = threading.Event()
    fwd = tracking.Forwarder(lambda: release.wait(30) and FakeRun(), tmp_path).start()
    try:
        assert fwd.close() is None
    finally:
        release.set()


def test_a_console_that_is_gone_is_dropped_not_raised():
    """The job's stdout after its reader went (`| true`): writes and flushes do not raise, and the
    descriptor then points at /dev/null, so every other holder of it writes nowhere too."""
    import os

    from distexp.tracking.redaction import RedactingStream

    r, w = os.pipe()
    raw = os.fdopen(w, "w")
    out = RedactingStream(raw)
    os.close(r)  # the reader is gone
    try:
        out.write("MLflow run abc (sqlite:///x, experiment 'distexp')\n")
        out.flush()
        print("a line after", file=out, flush=True)
        raw.write("the raw stream too\n")
        raw.flush()
        assert os.fstat(raw.fileno()).st_rdev == os.stat(os.devnull).st_rdev
    finally:
        raw.close()
