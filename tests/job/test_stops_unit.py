"""The job process's stop rule (distexp.stops), in this process: the first SIGINT, SIGTERM or
SIGHUP raises KeyboardInterrupt, a later one only hurries the stop; inside `closing()` none
raises. No TensorFlow, no subprocess."""
from __future__ import annotations

import os
import signal
import time

import pytest

from distexp import stops
from distexp.job import launch


@pytest.fixture
def rule():
    """The rule as a job started from a shell installs it: SIGHUP at its default first (under
    `nohup` the suite inherits SIGHUP ignored, which the rule keeps ignored on purpose)."""
    hup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    stops.reset()
    old = stops.install()
    yield
    stops.restore(old)
    stops.reset()
    signal.signal(signal.SIGHUP, hup)


def _deliver(sig):
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # Python runs the handler at the next bytecode boundary


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_the_first_stop_raises_a_second_only_hurries(rule, sig):
    with pytest.raises(KeyboardInterrupt):
        _deliver(sig)
    assert stops.requested() == sig and stops.name() == sig.name and not stops.hurry()
    _deliver(signal.SIGINT)  # Ctrl-C again, inside the clean-up: no exception there
    assert stops.hurry() and stops.requested() == sig


def test_a_stop_while_closing_is_recorded_not_raised(rule):
    with stops.closing():
        _deliver(signal.SIGTERM)
        assert stops.requested() == signal.SIGTERM
    assert not stops.hurry()


def test_sigusr1_runs_the_forward_and_never_stops(rule):
    seen = []
    stops.on_usr1(lambda: seen.append(1))
    try:
        _deliver(signal.SIGUSR1)
    finally:
        stops.on_usr1(None)
    _deliver(signal.SIGUSR1)  # nothing to forward to: ignored, not Python's default (exit)
    assert seen == [1] and stops.requested() is None


class _Stubborn:
    """A process that ignores SIGTERM (as multi-worker TensorFlow does) until SIGKILL."""
    pid = 2 ** 22 + 12345

    def __init__(self):
        self.killed = False

    def poll(self):
        return -9 if self.killed else None

    def wait(self, timeout=None):
        return -9

    def signal_group(self, sig):
        self.killed = self.killed or sig == signal.SIGKILL


def test_a_second_signal_cuts_the_grace_of_a_stubborn_process(rule):
    p = _Stubborn()
    proc = launch.Proc(name="chief", module="x", argv=[], env={}, log=None)
    proc.process = p
    with pytest.raises(KeyboardInterrupt):
        _deliver(signal.SIGINT)
    _deliver(signal.SIGINT)
    t0 = time.monotonic()
    launch.stop([proc], grace=30)
    assert time.monotonic() - t0 < 1.0 and p.killed


def test_sigterm_as_ctrl_c_raises_and_restore_puts_back_the_handler():
    """The rule of a process without the job's (the UI's server, the Slurm launcher's wait)."""
    before = signal.getsignal(signal.SIGTERM)
    old = stops.sigterm_as_ctrl_c()
    try:
        assert old == {signal.SIGTERM: before}
        with pytest.raises(KeyboardInterrupt):
            _deliver(signal.SIGTERM)
    finally:
        stops.restore(old)
    assert signal.getsignal(signal.SIGTERM) is before
