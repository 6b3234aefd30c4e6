"""cluster=local: a network namespace of the job's own for its training processes, with loopback
only, so that TensorFlow's servers (whose gRPC server binds every interface, with no credentials,
whatever address TF_CONFIG names) answer this machine only.

A small holder process (`python -I -S -c HOLDER`, the standard library only) unshares a network
namespace (as root; elsewhere a user namespace with it, where the kernel allows unprivileged user
namespaces), brings its `lo` up and waits for EOF on its stdin (the job process's end). Each
training process joins it before it runs anything: a fresh interpreter between fork and exec
(`preexec`), a process forked from the warm trainer in `distexp.train.warm_server._become`; both
read the namespaces to join from `env.NETNS` in the process's own environment. A process that
cannot join fails: it never trains on the machine's network instead. The job process keeps the
machine's network (MLflow: the trainers never talk to it, distexp.tracking).

Where the kernel refuses (no privilege, user namespaces off, a container's seccomp), `refused`
is the one line the job prints before its processes start: the ports open on every interface
and how to close them. No TensorFlow here.
"""
from __future__ import annotations

import ctypes
import os
import select
import subprocess
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Union

from distexp import env, stops
from distexp.console_lines import WARNING

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
READY_S = 10.0  # a bare interpreter's start; seconds only on a machine in trouble

# The holder: stdlib only, isolated (-I -S: no site, no user code), single-threaded (a user
# namespace needs it). Prints "ready <paths to join>" or "error <why>".
HOLDER = r"""
import ctypes, errno, fcntl, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
NET, USER = 0x40000000, 0x10000000
def err(what):
    e = ctypes.get_errno()
    print(f"error {what}: {errno.errorcode.get(e, e)}", flush=True)
    sys.exit(1)
joins = []
if libc.unshare(NET) != 0:
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(USER | NET) != 0:
        err("unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    joins.append(f"/proc/{os.getpid()}/ns/user")
joins.append(f"/proc/{os.getpid()}/ns/net")
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))  # SIOCSIFFLAGS: IFF_UP
s.close()
print("ready " + ":".join(joins), flush=True)
sys.stdin.buffer.read()
"""


@dataclass
class Namespace:
    """The job's namespace, held by `holder` until `close`; `paths`: what a process joins, in order
    (the holder's user namespace first where it has one)."""

    holder: subprocess.Popen
    paths: List[str]

    def env(self) -> Dict[str, str]:
        return {env.NETNS: ":".join(self.paths)}

    def close(self) -> None:
        try:
            self.holder.stdin.close()  # EOF: the holder exits (the namespace goes with its last process)
        except OSError:
            pass
        try:
            self.holder.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.holder.kill()
            self.holder.wait()


def open_namespace() -> Union[Namespace, str]:
    """The job's namespace, or why there is none (one phrase, the kernel's errno in it)."""
    if not sys.platform.startswith("linux"):
        return f"no network namespaces on {sys.platform}"
    try:
        holder = subprocess.Popen([sys.executable, "-I", "-S", "-c", HOLDER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  start_new_session=True, preexec_fn=stops.die_with_parent)
    except OSError as ex:
        return f"its holder did not start ({ex})"
    ready, _, _ = select.select([holder.stdout], [], [], READY_S)
    line = holder.stdout.readline().decode("utf-8", "replace").strip() if ready else ""
    if line.startswith("ready "):
        return Namespace(holder, line[len("ready "):].split(":"))
    holder.kill()
    holder.wait()
    rest = holder.stdout.read().decode("utf-8", "replace").strip().splitlines()
    why = line[len("error "):] if line.startswith("error ") else (line or (rest[-1] if rest else ""))
    return why or f"its holder said nothing within {READY_S:g} s"


_libc = None


def _loaded():
    """libc's handle, resolved once (in the parent before a fork: the child only calls it)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def join(spec: Optional[str]) -> None:
    """In a new process, before it runs anything (single-threaded: a user namespace needs it):
    join the namespaces `spec` names (env.NETNS's value: paths joined by ':'). Raises OSError."""
    if not spec:
        return
    libc = _loaded()
    for path in spec.split(":"):
        kind = CLONE_NEWUSER if path.endswith("/user") else CLONE_NEWNET
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, kind) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"setns({path}): {os.strerror(e)}")
        finally:
            os.close(fd)


def preexec(spec: Optional[str]):
    """`subprocess.Popen`'s preexec_fn for a fresh training process: dies with its parent, and
    joins the job's namespace (`spec`) when there is one."""
    if not spec:
        return stops.die_with_parent
    _loaded()

    def _pre() -> None:
        stops.die_with_parent()
        join(spec)
    return _pre


def refused(ports: Sequence[int], why: str, kernel: bool = True) -> str:
    """The line a local job with TensorFlow servers prints when they are on the machine's network:
    `kernel`, the namespace was refused (`why`: e.g. `unshare: EPERM`); else the job needs the
    network (`why`: dataset.download=true). docs/strategies-and-clusters.md says more."""
    listed = ",".join(str(p) for p in ports)
    how = "allow user namespaces" if kernel else "prepare the data first"  # or a firewall: the docs
    return f"{WARNING}ports {listed} (TensorFlow, no auth) open to other hosts ({why}): {how}"
