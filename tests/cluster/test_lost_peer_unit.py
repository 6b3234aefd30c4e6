"""A lost peer or node is a failure whatever signal the scheduler sends after it (Slurm kills the
job step with SIGTERM once a task or node is gone): the liveness verdict, or a process's own
error, seen before the stop wins over the later signal; a stop with no failure before it stays
the user's (KILLED). Fake processes in this process: no subprocess, nothing trained."""
from __future__ import annotations

import io
import signal
import socket

import pytest

from distexp import stops
from distexp.cluster import liveness
from distexp.cluster.processes import Proc
from distexp.job import launch, lifecycle


class _Fake:
    """A training process: `poll` answers `exits` (None: still running) and, on its `at`-th call,
    the scheduler's SIGTERM lands in the job process (what stops._on_stop does)."""

    def __init__(self, exits, lines=b"", at=2):
        self.pid, self.args, self.returncode = 4_000_001, "fake", None
        self.stdout = io.BytesIO(lines)
        self.exits, self.at, self.calls = exits, at, 0

    def poll(self):
        self.calls += 1
        if self.calls == self.at:
            stops._first = signal.SIGTERM  # (the handler's record, then its raise)
            raise KeyboardInterrupt
        if self.exits is None and self.calls > self.at:
            return -signal.SIGTERM  # what the job process's stop then does to it
        return self.exits

    def wait(self, timeout=None):
        return self.poll()

    def signal_group(self, sig):
        self.signals = [*getattr(self, "signals", []), sig]


@pytest.fixture(autouse=True)
def _no_stop_left():
    stops.reset()
    yield
    stops.reset()


def _launch(tmp_path, fake, until=None):
    chief = Proc(name="chief", module="x", argv=[], env={}, log=tmp_path / "chief.log")
    launch.run([chief], until=until, spawn=lambda proc, env, cwd: fake)


def test_a_process_that_failed_before_the_step_kill_fails_the_job(tmp_path):
    fake = _Fake(exits=None, lines=b"distexp: error: UnavailableError: worker-1 is unhealthy\n")
    fake.exits = 1  # it had exited with its own error when the signal came
    fake.at = 1
    with pytest.raises(launch.JobFailed) as ex:
        _launch(tmp_path, fake)
    assert ex.value.before_stop is True
    assert str(ex.value).startswith("chief exited with code 1")


def test_a_peer_lost_before_the_step_kill_fails_the_job_naming_task_and_node(tmp_path):
    peer = socket.socket()
    peer.bind(("127.0.0.1", 0))
    peer.listen()
    address = f"127.0.0.1:{peer.getsockname()[1]}"
    watch = liveness.ServerWatch({"worker-1": address}, lost=False)
    assert watch() is False and watch.watches["worker-1"].seen  # seen while training
    peer.close()  # its node's link is cut
    with pytest.raises(launch.JobFailed) as ex:
        _launch(tmp_path, _Fake(exits=None), until=watch)
    assert ex.value.before_stop is True
    assert str(ex.value) == (f"worker-1 on node 127.0.0.1 stopped answering ({address}) while "
                             "the job trained: its node or its link was lost")


def test_a_stop_with_every_peer_answering_is_the_users(tmp_path):
    peer = socket.socket()
    peer.bind(("127.0.0.1", 0))
    peer.listen()
    watch = liveness.ServerWatch({"worker-1": f"127.0.0.1:{peer.getsockname()[1]}"}, lost=False)
    watch()
    try:
        with pytest.raises(launch.JobInterrupted):  # scancel, Ctrl-C: KILLED
            _launch(tmp_path, _Fake(exits=None), until=watch)
    finally:
        peer.close()


def test_a_process_killed_by_the_stop_itself_is_not_a_failure(tmp_path):
    with pytest.raises(launch.JobInterrupted):
        _launch(tmp_path, _Fake(exits=-signal.SIGTERM, at=1))


def test_a_failure_seen_first_keeps_its_status_when_the_signal_comes_during_the_close():
    out = lifecycle.Outcome(status="FAILED", error="chief exited with code 1")
    stops._first = signal.SIGTERM  # (Slurm's step kill, during the run's close)
    assert lifecycle.stopped_by_signal(out, failed_first=True) is False
    assert lifecycle.exit_code(out) == 1
    assert lifecycle.stopped_by_signal(out, failed_first=False) is True  # the stop came first
    assert lifecycle.stopped_by_signal(lifecycle.Outcome(status="FINISHED"), False) is True


def test_a_stop_while_the_processes_start_is_the_users(tmp_path):
    """The signal lands while the first process is being started (nothing to look at yet)."""
    def spawn(proc, env, cwd):
        stops._first = signal.SIGINT
        raise KeyboardInterrupt

    procs = [Proc(name=n, module="x", argv=[], env={}, log=tmp_path / f"{n}.log")
             for n in ("chief", "worker-1")]
    with pytest.raises(launch.JobInterrupted):
        launch.run(procs, spawn=spawn)
