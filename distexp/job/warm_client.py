"""The job process's side of the warm trainer (distexp.train.warm_server): start it early, fork training
processes from it, and see them end. No TensorFlow here.

One server per job process, started as early as the command allows (distexp.__main__ starts it
before Hydra composes; a job that finds none starts it in `prepare`), kept across the jobs of a
sweep, so that only the first job waits for TensorFlow's import. A job whose config says
`warm_start=false`, or a server that could not start, trains in fresh interpreters.

`spawn` returns a `Child`, a distexp.cluster.processes.TrainerProcess (pid, stdout, poll, wait,
signal_group): the server is its parent and reaps it, and tells us its exit code.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence

from distexp import stops
from distexp.cluster.processes import Proc, signal_group

READY_TIMEOUT_S = 300.0   # TensorFlow's import on a loaded machine: seconds, not minutes
REPLY_TIMEOUT_S = 30.0    # a fork answers in milliseconds
# Arguments after which a command trains nothing: Hydra's help, config and info printing.
_NO_TRAINING = ("--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--resolve",
                "--shell-completion", "-sc", "--version")


class Unavailable(Exception):
    """The server could not start or died: the job trains cold (a fresh interpreter)."""


class Child:
    """A training process forked by the server (in a session of its own), as a TrainerProcess."""

    def __init__(self, server: "Server", pid: int, stdout):
        self.server, self.pid, self.stdout = server, pid, stdout
        self.returncode: Optional[int] = None
        self.args = f"warm child {pid}"

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.server.cond:
            while self.poll() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                self.server.cond.wait(left if left is not None else 1.0)
        return self.returncode

    def signal_group(self, sig: int) -> None:
        signal_group(self.pid, sig)


class Server:
    def __init__(self, env: Dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.output = tempfile.TemporaryFile()  # its import-time lines; shown if it fails
        self.popen = subprocess.Popen(
            # the job process's pid in its command line: `ps` shows whose it is
            [sys.executable, "-m", "distexp.train.warm_server", str(theirs.fileno()), "--for",
             str(os.getpid())],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL, stdout=self.output,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=stops.die_with_parent)
        theirs.close()
        self.sock = ours
        self.cond = threading.Condition()
        self.ready: Optional[bool] = None
        self.error = ""
        self.import_s: Optional[float] = None
        self.replies: Dict[int, dict] = {}
        self.codes: Dict[int, int] = {}
        self.children: List[int] = []
        self.dead = False
        self._next_id = 0
        threading.Thread(target=self._read, name="distexp-warm", daemon=True).start()

    # -- the server's messages ------------------------------------------------------------------
    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                data = b""
            if not data:
                return self._lost()
            msg = json.loads(data)
            with self.cond:
                if "ready" in msg:
                    self.ready, self.error = msg["ready"], msg.get("error", "")
                    self.import_s = msg.get("import_s")
                elif "exit" in msg:
                    self.codes[msg["exit"]] = msg["code"]
                else:
                    self.replies[msg["id"]] = msg
                self.cond.notify_all()

    def _lost(self) -> None:
        """The server exited: its children died with it (PR_SET_PDEATHSIG), as if SIGKILLed."""
        with self.cond:
            self.dead = True
            if self.ready is None:
                self.ready, self.error = False, self._output_tail()
            for pid in self.children:
                self.codes.setdefault(pid, -9)
            self.cond.notify_all()

    def _output_tail(self) -> str:
        try:
            self.output.seek(0)
            lines = self.output.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            lines = []
        return lines[-1] if lines else "the warm trainer exited before it was ready"

    def exit_code(self, pid: int) -> Optional[int]:
        with self.cond:
            return self.codes.get(pid)

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.ready is not None, timeout):
                raise Unavailable(f"the warm trainer was not ready after {timeout:g} s")
            if not self.ready:
                raise Unavailable(self.error)

    def spawn(self, proc: Proc, env: Dict[str, str], cwd: str) -> Child:
        """Fork `python -u -m proc.module *proc.argv` with `env` in `cwd`, its output to a pipe."""
        self.wait_ready()
        r, w = os.pipe()
        with self.cond:
            self._next_id += 1
            rid = self._next_id
        req = {"id": rid, "module": proc.module, "argv": list(proc.argv), "env": dict(env),
               "cwd": cwd}
        try:
            socket.send_fds(self.sock, [json.dumps(req).encode()], [w])
        except OSError as ex:
            os.close(r)
            raise Unavailable(f"the warm trainer is gone ({ex})") from None
        finally:
            os.close(w)
        with self.cond:
            if not self.cond.wait_for(lambda: rid in self.replies or self.dead, REPLY_TIMEOUT_S):
                os.close(r)
                raise Unavailable(f"the warm trainer did not fork within {REPLY_TIMEOUT_S:g} s")
            reply = self.replies.pop(rid, None)
            if reply is None or "pid" not in reply:
                os.close(r)
                raise Unavailable((reply or {}).get("error", "the warm trainer is gone"))
            self.children.append(reply["pid"])
        return Child(self, reply["pid"], os.fdopen(r, "rb"))

    def stop(self, wait: bool = True) -> None:
        """SIGKILL the server's group; `wait`: until it is reaped. The command's last act does not
        wait: the kernel tearing down a process that holds TensorFlow's memory took 0.3 s of the
        job's tail (seen, benchmarks/tail.py), and it goes all the same (SIGKILL cannot be caught;
        once this process exits, init reaps it)."""
        try:
            self.sock.close()  # the server sees EOF and exits; its children die with it
        except OSError:
            pass
        signal_group(self.popen.pid, signal.SIGKILL)
        if wait:
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.output.close()


_server: Optional[Server] = None


def trains(argv: Sequence[str]) -> bool:
    """Whether a `python -m distexp` command line will train (Hydra's --help, --cfg, --info and
    warm_start=false start no warm trainer)."""
    for a in argv:
        if a in _NO_TRAINING or a.startswith(("--cfg=", "--info=", "--help=")):
            return False
        key, _, value = a.lstrip("+~").partition("=")
        if key == "warm_start" and value.strip().lower() in ("false", "0", "no", "off"):
            return False
    return True


def server_env() -> Dict[str, str]:
    env = dict(os.environ)
    # read once, by TensorFlow's import (the trainers' own default, distexp.job.lifecycle)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def start() -> Optional[Server]:
    """The job process's server, started now if it is not running (from the main thread only: a
    server dies with the thread that started it). None where it cannot be."""
    global _server
    if _server is not None and not _server.dead:
        return _server
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        _server = Server(server_env())
    except OSError:
        _server = None
    return _server


def start_early(argv: Sequence[str]) -> None:
    """`python -m distexp ...`: the first thing the command does, for commands that will train."""
    if trains(argv):
        start()


def stop(wait: bool = True) -> None:
    """Stop the warm trainer (`wait`: until it is reaped; see Server.stop)."""
    global _server
    if _server is not None:
        _server.stop(wait)
        _server = None
