"""What is still running, and waiting for something to happen (no TensorFlow here).

- `processes_mentioning`, `processes_with`: what is still running for a job (nothing may be left)
- `descendants`: a process and every process below it (a job's warm trainer, its trainers, the
  namespace's holder; a Ray this job started, its workers and their trainers)
- `still_running`: which of some processes have not gone within a bound
- `parents_of`: which process started them (the warm trainer, or the job process)
- `wait_until`: a condition's first true value within a bound, else an AssertionError naming it
- `run_together`: several commands started at once (a cluster's tasks by hand), their outputs
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Dict, List


def processes_mentioning(text: str):
    """PIDs whose command line contains `text` (the job's unique directory)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmd:
            pids.append(int(d.name))
    return pids


def processes_with(text: str, cmd_part: bytes, env_part: bytes = b""):
    """PIDs mentioning `text` whose command line holds `cmd_part` and environment `env_part`."""
    pids = []
    for pid in processes_mentioning(text):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        # a warm-forked trainer names its task in its command line (distexp.train.warm_server)
        # a warm-forked trainer names its task in its command line, "(DISTEXP_TASK=worker-1)"
        # (distexp.train.warm_server): its environ is the warm trainer's
        in_title = b"(" + env_part.rstrip(b"\0") + b")" in cmd
        if cmd_part in cmd and (env_part in env or in_title):
            pids.append(pid)
    return pids


def descendants(root: int) -> List[int]:
    """`root` and every live process below it."""
    children: Dict[int, List[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def still_running(pids, within: float = 10.0) -> list:
    """The command lines of `pids` (zombies aside) still running `within` s from now (a job's last
    act SIGKILLs its warm trainer without waiting: distexp.job.warm_client.Server.stop)."""
    def running():
        cmds = []
        for q in pids:
            try:
                stat = Path(f"/proc/{q}/stat").read_text()
                if stat.rpartition(")")[2].split()[0] != "Z":
                    cmds.append(Path(f"/proc/{q}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
        return cmds
    try:
        wait_until(lambda: not running(), within, "the job's processes to go", every=0.1)
    except AssertionError:
        pass
    return running()


def parents_of(text: str, cmd_part: str) -> dict:
    """{pid: its parent's command line} of the processes mentioning `text` whose command line
    holds `cmd_part` (a warm-forked trainer's is its title: the fresh trainer's command line)."""
    out = {}
    for pid in processes_mentioning(text):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            parent = Path(f"/proc/{ppid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):
            continue
        if cmd_part in cmd:
            out[pid] = parent
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(cond, timeout: float, what: str, every: float = 0.2):
    """cond()'s first true value within `timeout` seconds, else an AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def run_together(cmds, cwd, envs, timeout: float = 240):
    """Start every command at once (stdout and stderr merged, as text), wait for each within
    `timeout` s; whatever is still running then, or when a wait or a start fails, is killed.
    Returns (the Popen objects, their outputs), in the commands' order."""
    procs = []
    try:
        for cmd, env in zip(cmds, envs):
            procs.append(subprocess.Popen(cmd, cwd=cwd, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return procs, outs
