"""cluster=ray, a task's trainer: the actor that runs it on its node (`TaskActor`: where it is, a
free port there, the trainer started in its own session, its output kept until the job process
reads it) and the job process's view of it (`RemoteProc`, a distexp.cluster.processes.TrainerProcess:
its output, its exit status, a signal to its process group), so that distexp.job.launch streams
each task's output to `<task>.log`, fails the job naming the first task that failed, and stops
every task on Ctrl-C / SIGTERM / SIGHUP as it does for a local process. A task whose actor dies
(its node lost, its worker killed) ends with one line naming the task and its node. Imported
only once a job runs (no TensorFlow); placing the actors is distexp.cluster.ray_run's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

from distexp.cluster.processes import signal_group
from distexp.console_lines import ERROR
from distexp.errors import BAD_INPUT, FAILED

READ_S = 0.5
# A task failing as its peer's node goes (TensorFlow sees the socket close at once, Ray declares
# the actor dead seconds later): the failure waits this long at most for Ray's verdict on peers
# that stop answering, so the job names the lost task, not the one that saw it go.
LOSS_WAIT_S = 30.0
PING_S = 2.0


def gone() -> tuple:
    """What Ray raises when an actor, its node or the cluster is gone."""
    from ray.exceptions import RayError

    return RayError, ConnectionError, ValueError, TimeoutError


class TaskActor:
    """One task of the job on its node (a Ray actor in the task's bundle): where it is and a free
    port there; then the trainer, its output kept until the job process reads it."""

    def __init__(self, name: str):
        self.name, self.proc = name, None
        self.buf, self.eof = bytearray(), False
        self.cond = threading.Condition()

    def where(self) -> tuple:
        import ray

        from distexp.cluster.processes import free_ports

        return ray.util.get_node_ip_address(), ray.get_runtime_context().get_node_id(), \
            free_ports(1)[0]

    def start(self, module: str, argv: Sequence[str], config: Optional[str], env: Dict[str, str],
              cwd: str) -> tuple:
        """Start `python -u -m module *argv` (this node's Python): (its pid, None), or (None, the
        line why not: the job dir, where `config` is, not seen here)."""
        from distexp import stops

        if config and not os.path.exists(config):
            return None, (f"{ERROR}cluster=ray: task {self.name} on node {self.where()[0]} "
                          f"cannot see the job directory ({config} is not there): put it on a path "
                          "every node sees (hydra.run.dir / hydra.sweep.dir on a shared volume)")
        full = dict(os.environ)
        full.update(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", module, *argv], env=full,
            cwd=cwd if os.path.isdir(cwd) else None, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=stops.die_with_parent)
        threading.Thread(target=self._read, daemon=True).start()
        return self.proc.pid, None

    def _read(self) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
            with self.cond:
                self.buf += chunk
                self.cond.notify_all()
        self.proc.wait()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def read(self, wait_s: float) -> tuple:
        """(output since the last read, the exit status once the output has ended)."""
        with self.cond:
            if not self.buf and not self.eof:
                self.cond.wait(wait_s)
            out = bytes(self.buf)
            self.buf.clear()
            return out, (self.proc.returncode if self.eof else None)

    def ping(self) -> bool:
        return True

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            signal_group(self.proc.pid, sig)


class RemoteProc:
    """A task's trainer on its node, as a TrainerProcess: `stdout` (a pipe this process fills
    from the actor), `poll`, `wait`, and `signal_group` (through the actor); `pid` is its node's."""

    def __init__(self, actor, proc, node: str, env, cwd, peers: List["RemoteProc"]):
        """`proc`: the distexp.cluster.processes.Proc it runs."""
        import ray

        self.actor, self.name, self.node, self.peers = actor, proc.name, node, peers
        self.returncode: Optional[int] = None
        self.lost = False
        peers.append(self)
        r, w = os.pipe()
        self.stdout, self._w = os.fdopen(r, "rb"), os.fdopen(w, "wb")
        config = None if proc.config_path is None else str(proc.config_path)
        self.pid, refused = ray.get(actor.start.remote(proc.module, list(proc.argv), config, env,
                                                       cwd))
        if refused:
            self._w.write(refused.encode() + b"\n")
            self._end(BAD_INPUT)
            return
        threading.Thread(target=self._follow, daemon=True, name=f"distexp-ray-{self.name}").start()

    def _follow(self) -> None:
        import ray

        try:
            while True:
                out, rc = ray.get(self.actor.read.remote(READ_S))
                if out:
                    self._w.write(out)
                    self._w.flush()
                if rc is not None:
                    if rc != 0:
                        self._peers_settled()
                    return self._end(rc)
        except gone() as ex:  # RayActorError and kin: the actor or its node is gone
            self.lost = True
            cause = "it stopped answering" if "Unavailable" in type(ex).__name__ else "it died"
            line = (f"{ERROR}cluster=ray: task {self.name} on Ray node {self.node} was "
                    f"lost (its actor: {cause}): its node died or its actor was killed\n")
            try:
                self._w.write(line.encode())
            except (OSError, ValueError):
                pass
            self._end(FAILED)

    def _peers_settled(self) -> None:
        """Before this task's failure is reported: until every other task's actor answers, or one
        is found lost (LOSS_WAIT_S at most)."""
        deadline = time.monotonic() + LOSS_WAIT_S
        while time.monotonic() < deadline:
            others = [p for p in self.peers if p is not self]
            if any(p.lost for p in others) or all(p.returncode is not None or p.answers()
                                                  for p in others):
                return
            time.sleep(0.2)

    def answers(self) -> bool:
        import ray

        try:
            return bool(ray.get(self.actor.ping.remote(), timeout=PING_S))
        except gone():
            return False

    def _end(self, rc: int) -> None:
        self.returncode = rc
        try:
            self._w.close()
        except OSError:
            pass

    def poll(self) -> Optional[int]:
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.name, timeout)
            time.sleep(0.05)
        return self.returncode

    def signal_group(self, sig: int) -> None:
        import ray

        try:
            ray.get(self.actor.signal.remote(int(sig)), timeout=5)
        except gone():  # the actor is gone: so is its trainer (it dies with its parent)
            pass
