"""cluster=local's network namespace (distexp.cluster.netns), seen in the kernel's socket table
while a job trains (held at `training` through distexp.stops.HOLD_ENV): TensorFlow's servers bind
every interface, so a local multiworker or ps job must have no listening socket reachable from
another machine: every listener is on loopback, or in a namespace whose only interface is `lo`.
A listener planted on 0.0.0.0 in every Python process of a job (a sitecustomize) is caught in the
job process, which keeps the machine's network, and not in the trainers. Where the kernel refuses
a namespace, the job says which ports are open, and those are the ones the table shows."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import cli_env, descendants, still_running, wait_until
from helpers.sockets import Listener, listeners

pytestmark = pytest.mark.slow

TINY = ["epochs=1", "steps_per_epoch=6", "warmup_steps=1", "measure_step_split=false",
        "tracking.enabled=false"]
# every Python process that runs site (the job process, the warm trainer, a fresh trainer; not
# the namespace's holder, `python -I -S`) listens on 0.0.0.0
PLANT = """import os, socket
if os.environ.get("PLANT_LISTENER"):
    _planted = socket.socket()
    _planted.bind(("0.0.0.0", 0))
    _planted.listen()
"""


def reachable(found) -> list:
    return sorted((f.pid, f.address, f.port) for f in found if f.reachable)


def held(tmp: Path, *args: str, wrap=(), plant: bool = False):
    """Run a short local job held once a trainer trains; (its listeners then, the job process's pid,
    its output, its exit code, what is left of it after)."""
    marker = tmp / "held"
    extra = {"DISTEXP_TEST_HOLD": f"training:{marker}"}
    if plant:
        (tmp / "plant").mkdir()
        (tmp / "plant" / "sitecustomize.py").write_text(PLANT)
        extra["PLANT_LISTENER"] = "1"
    env = cli_env(**extra)
    if plant:
        env["PYTHONPATH"] = f"{tmp / 'plant'}{os.pathsep}{env['PYTHONPATH']}"
    cmd = [*wrap, sys.executable, "-m", "distexp", *args, *TINY, f"hydra.run.dir={tmp / 'job'}"]
    p = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        wait_until(lambda: marker.exists() or p.poll() is not None, 300, "the job to train", every=0.05)
        assert p.poll() is None, p.communicate()[0]
        pids = descendants(p.pid)
        found = listeners(pids)
        marker.unlink()
        out = p.communicate(timeout=300)[0]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    return found, p.pid, out, p.returncode, still_running(pids)


def _trainers(found, job_pid) -> list:
    return [f for f in found if f.pid != job_pid]


def test_multiworker_listens_on_loopback_only(tmp_path):
    """Warm-forked workers: both in one namespace of their own (not the machine's), with only
    `lo`; nothing of the job reachable from outside; the holder gone with the job."""
    found, job, out, rc, left = held(tmp_path, "strategy=multiworker", "workers=2")
    assert rc == 0, out
    assert reachable(found) == [], found
    servers = _trainers(found, job)
    assert len({f.pid for f in servers}) == 2, found  # each worker's gRPC server, in the table
    assert os.readlink("/proc/self/ns/net") not in {f.netns for f in servers}  # the machine's
    assert len({f.netns for f in servers}) == 1 and {f.interfaces for f in servers} == {frozenset({"lo"})}
    assert "open to other hosts" not in out
    assert left == [], left


def test_ps_fresh_trainers_listen_on_loopback_only_and_a_planted_listener_is_caught(tmp_path):
    """warm_start=false: fresh interpreters join the namespace between fork and exec. A 0.0.0.0
    listener planted in every Python process: reachable in the job process only (it keeps the
    machine's network), not in any of the 4 trainers (coordinator, 2 workers, 1 ps)."""
    found, job, out, rc, left = held(tmp_path, "strategy=ps", "workers=2", "ps=1",
                                     "warm_start=false", plant=True)
    assert rc == 0, out
    planted = [f for f in found if f.pid == job]
    assert len(planted) == 1 and planted[0].address == "0.0.0.0", found
    assert reachable(found) == reachable(planted) != []  # the check sees what is really open
    servers = _trainers(found, job)
    assert len({f.pid for f in servers}) == 4, found
    assert len({f.netns for f in servers}) == 1 and not any(f.reachable for f in servers)
    assert left == [], left


def test_refused_namespace_names_the_open_ports(tmp_path):
    """Inside a user namespace that may create no more network or user namespaces (the kernel
    says ENOSPC, as a container's or a distribution's policy says EPERM), the job trains on the
    machine's network and its one line names exactly the ports its servers listen on."""
    limits = ("echo 0 > /proc/sys/user/max_net_namespaces && "
              "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
    found, job, out, rc, left = held(tmp_path, "strategy=multiworker", "workers=2",
                                     wrap=("unshare", "--user", "--map-root-user", "sh", "-c", limits, "sh"))
    assert rc == 0, out
    lines = [line for line in out.splitlines() if "open to other hosts" in line]
    assert len(lines) == 1 and "unshare: ENOSPC" in lines[0], out
    named = {int(p) for p in re.search(r"ports ([\d,]+) ", lines[0]).group(1).split(",")}
    assert len(lines[0]) <= 120, lines[0]
    assert {f.port for f in found if f.reachable} == named and len(named) == 2, (found, named)
    assert left == [], left


def test_the_check_reads_a_wildcard_listener_as_reachable_unless_only_lo():
    """The rule the tests above apply, on its own."""
    lo, eth = frozenset({"lo"}), frozenset({"lo", "eth0"})
    assert Listener(1, "n", "0.0.0.0", 1, eth).reachable
    assert Listener(1, "n", "::", 1, eth).reachable
    assert Listener(1, "n", "10.0.0.5", 1, eth).reachable
    assert not Listener(1, "n", "0.0.0.0", 1, lo).reachable
    assert not Listener(1, "n", "127.0.0.1", 1, eth).reachable
    assert not Listener(1, "n", "::ffff:127.0.0.1", 1, eth).reachable
    assert not Listener(1, "n", "::1", 1, eth).reachable
