"""How the job process watches its training processes (distexp.job.launch.run), with fake
processes in this process: no subprocess, nothing trained."""
from __future__ import annotations

import io

from distexp.cluster.processes import Proc


class _Reported:
    """A process that prints a line and exits, and whose exit status only `wait` learns: the warm
    trainer's child between the end of its output and the server's report of its exit."""

    def __init__(self):
        self.pid, self.args, self.returncode = 4_000_000, "fake", None
        self.stdout = io.BytesIO(b"trained\n")

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        self.returncode = 0
        return 0

    def signal_group(self, sig):
        self.signals = [*getattr(self, "signals", []), sig]


def test_the_job_goes_on_when_its_trainer_ends_not_at_the_next_poll(tmp_path):
    """Once a process's output ends, run asks for its exit status (a timeout of 1 s would fail
    the job if it only polled)."""
    from distexp.job import launch

    child = _Reported()
    chief = Proc(name="chief", module="x", argv=[], env={}, log=tmp_path / "chief.log")
    launch.run([chief], timeout=1.0, spawn=lambda proc, env, cwd: child)
    assert chief.returncode == 0
    assert (tmp_path / "chief.log").read_bytes() == b"trained\n"
