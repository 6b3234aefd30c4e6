"""The warm trainer (distexp.job.warm_client, distexp.train.warm_server): what a forked training process is, how
it ends, and that nothing outlives the job process; and that a warm-forked job trains and
measures as a fresh one does."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distexp.cluster.processes import Proc
from helpers import ROOT, child_env, processes_mentioning

PROBE = "warm_probe"  # the module a warm child runs (tests/helpers/probes)
pytestmark = pytest.mark.integration
ENV = child_env()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except OSError:
        return False
    return state != "Z"


def _gone_within(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(scope="module")
def server():
    from distexp.job import warm_client

    old = dict(os.environ)
    os.environ["PYTHONPATH"] = ENV["PYTHONPATH"]
    s = warm_client.Server(warm_client.server_env())
    os.environ.clear()
    os.environ.update(old)
    s.wait_ready()
    yield s
    s.stop()


def _spawn(server, tmp_path, *argv, marker="m1"):
    proc = Proc(name="chief", module=PROBE, argv=list(argv), env={}, log=tmp_path / "chief.log")
    return server.spawn(proc, {**ENV, "PROBE_MARKER": marker}, str(tmp_path))


def test_a_forked_process_is_what_a_fresh_one_would_be(server, tmp_path):
    """Its output on the pipe (stdout and stderr), its own session (killpg stops it alone), the
    request's environment, directory and argv, the fresh command line in /proc, its exit code;
    its garbage collector on, with the server's imports frozen out of its collections."""
    child = _spawn(server, tmp_path, "describe", "3")
    lines = child.stdout.read().decode().splitlines()
    assert child.wait(timeout=30) == 3 and child.returncode == 3
    seen = json.loads(lines[0])
    assert lines[1] == "to stderr"
    assert seen["pid"] == child.pid and seen["sid"] == child.pid
    assert seen["cwd"] == str(tmp_path) and seen["marker"] == "m1"
    assert seen["argv"] == ["warm_probe", "describe", "3"]
    assert server.popen.pid not in (child.pid, seen["sid"])
    assert seen["gc"] is True and seen["frozen"] > 500_000  # TensorFlow's and Keras' objects


def test_each_child_sets_its_own_devices(server, tmp_path):
    """The server imported TensorFlow without starting its runtime: two children in a row each
    configure 2 logical CPU devices (a started runtime refuses: 'Virtual devices cannot be
    modified after being initialized')."""
    for _ in range(2):
        child = _spawn(server, tmp_path, "devices")
        out = child.stdout.read().decode().split()
        assert child.wait(timeout=120) == 0, out
        assert out[-1] == "2"


def test_exit_codes_signals_and_failures(server, tmp_path):
    child = _spawn(server, tmp_path, "sleep", "60")
    assert child.stdout.readline() == b"sleeping\n"
    assert child.poll() is None
    # `ps` shows the command a fresh process would have had, and its task (its environ is the
    # server's): what the job's "nothing left behind" checks look for
    cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert cmdline.startswith(f"{sys.executable} -u -m warm_probe sleep 60"), cmdline
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    os.killpg(child.pid, signal.SIGTERM)
    assert child.wait(timeout=30) == -signal.SIGTERM
    failing = _spawn(server, tmp_path, "raise")
    out = failing.stdout.read().decode()
    assert failing.wait(timeout=30) == 1
    assert "RuntimeError: probe failed on purpose" in out and "Traceback" in out


_OWNER = """
import sys, time
sys.path[:0] = [{root!r}, {tests!r}]
from distexp.cluster.processes import Proc
from distexp.job import warm_client
s = warm_client.start()
s.wait_ready()
c = s.spawn(Proc("chief", {probe!r}, {argv!r}, {{}}, None), dict(__import__('os').environ), {cwd!r})
print(s.popen.pid, c.pid, flush=True)
c.stdout.readline()
time.sleep(600)
"""


def test_a_killed_job_process_takes_the_server_and_its_children(tmp_path):
    """kill -9 of the job process: the server dies with it, the training process with the server
    (PR_SET_PDEATHSIG on both), nothing is left."""
    code = _OWNER.format(root=str(ROOT), tests=str(ROOT / "tests"), probe=PROBE, argv=["sleep", "600"],
                         cwd=str(tmp_path))
    owner = subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE,
                             text=True)
    try:
        server_pid, child_pid = map(int, owner.stdout.readline().split())
        assert _alive(server_pid) and _alive(child_pid)
        owner.kill()
        owner.wait(timeout=30)
        assert _gone_within([server_pid, child_pid], 20)
    finally:
        owner.kill()


def test_help_and_bad_input_leave_no_warm_trainer(tmp_path):
    """--help starts none; a bad input's server (started before Hydra composed) is stopped before
    the command exits."""
    for args, code in ((["--help"], 0), (["strategy=nosuch"], 2)):
        p = subprocess.Popen([sys.executable, "-m", "distexp", *args], cwd=tmp_path, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = p.communicate(timeout=120)
        assert p.returncode == code, err
        assert processes_mentioning(f"--for {p.pid}") == []
