"""The processes a command leaves behind, found by where they came from, not by their command line.

`run_reaped` runs a command under a small wrapper that is a child subreaper (Linux's
PR_SET_CHILD_SUBREAPER): every descendant whose parent dies is re-parented to the wrapper instead
of init, whatever it is called and even when it left the command's session (the training
processes and the warm trainer each start a session of their own). The command itself starts in
a new session (start_new_session=True, as the tests start jobs). Once the command exited, the
wrapper waits up to GRACE_S for its descendants to end, then names those still alive: its own
children (the orphans) and any process whose session or process group is the command's, then
kills them, so a failing test leaves nothing either."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

GRACE_S = 3.0

_WRAPPER = r"""
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
report, grace, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
child = subprocess.Popen(argv, start_new_session=True)
code = child.wait()

def stat(pid):
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    state, ppid, pgrp, sid = text[text.rindex(")") + 2:].split()[:4]
    return state, int(ppid), int(pgrp), int(sid)

def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"

def alive():
    me, found = os.getpid(), {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        s = stat(int(name))
        if s and s[0] != "Z" and (s[1] == me or child.pid in (s[2], s[3])):
            found[int(name)] = cmdline(int(name))
    return found

deadline = time.monotonic() + grace
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass  # the orphans that ended (re-parented here as zombies)
    except ChildProcessError:
        pass
    left = alive()
    if not left or time.monotonic() > deadline:
        break
    time.sleep(0.05)
with open(report, "w") as f:
    json.dump([f"{pid} {line}" for pid, line in sorted(left.items())], f)
for pid in left:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
sys.exit(code)
"""


def in_session(pid: int) -> List[str]:
    """The live processes whose session or process group is `pid` (a command started with
    start_new_session=True: everything it started that stayed in its session), as "pid command"."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, _, pgrp, sid = text[text.rindex(")") + 2:].split()[:4]
        if state != "Z" and pid in (int(pgrp), int(sid)):
            found.append(f"{entry.name} {line.strip()}")
    return found


def run_reaped(argv: Sequence[str], tmp: Path, **kw) -> Tuple[subprocess.CompletedProcess, List[str]]:
    """Run `argv` (keywords as subprocess.run's); (its result, the processes it left behind as
    "pid command line")."""
    report = Path(tmp) / "left.json"
    report.unlink(missing_ok=True)
    r = subprocess.run([sys.executable, "-c", _WRAPPER, str(report), str(GRACE_S), *argv], **kw)
    return r, json.loads(report.read_text())
