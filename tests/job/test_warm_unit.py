"""Which command lines warm the trainer up (distexp.job.warm_client.trains). The server and its children:
tests/job/test_warm.py; training warm and fresh: tests/job/test_warm_slow.py. Tier: unit."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv,trains", [
    ([], True), (["-m", "seed=0,1"], True), (["strategy=ps", "warm_start=true"], True),
    (["--help"], False), (["--cfg", "job"], False), (["-c", "job"], False), (["--info"], False),
    (["--hydra-help"], False), (["warm_start=false"], False), (["+warm_start=False"], False),
    (["-m", "warm_start=true,false"], True)])
def test_only_a_command_that_trains_warms_up(argv, trains):
    from distexp.job import warm_client

    assert warm_client.trains(argv) is trains


class _Popen:
    pid = 4_000_002  # no such process: the SIGKILL finds nothing

    def __init__(self):
        self.waited = False

    def wait(self, timeout=None):
        self.waited = True
        return -9


@pytest.mark.parametrize("wait", [True, False])
def test_the_commands_end_does_not_wait_for_the_warm_trainers_teardown(wait):
    """The command's last act SIGKILLs the warm trainer without waiting for it to be reaped (the
    kernel's teardown of a process holding TensorFlow was 0.3 s of every job's tail); a stop in
    the middle of a command (a bad input, a sweep) still waits."""
    import io
    import socket

    from distexp.job import warm_client

    server = warm_client.Server.__new__(warm_client.Server)
    server.sock, peer = socket.socketpair()
    server.popen, server.output = _Popen(), io.BytesIO()
    server.stop(wait)
    peer.close()
    assert server.popen.waited is wait
