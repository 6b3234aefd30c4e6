"""No run RUNNING forever: each run names the process that owns it, and the next distexp command
on the store ends the runs whose owner is provably gone.

A job's run (and a sweep's parent run) carries at creation the tag ``distexp.owner`` = "<host>
<pid> <start>" (the owning process: the job process / the sweep process; <start> is the
process's start time in clock ticks after boot, from /proc, so a reused pid is not mistaken for
it) and ``distexp.heartbeat`` (unix seconds), which a job's Forwarder renews every BEAT_S while
the job lives. A process killed with SIGKILL (Slurm after KillWait, the OOM killer, a lost node)
closes nothing, so its run stays RUNNING; ``end_dead_runs`` (one search of the experiment's
RUNNING runs, called when a job's run or a sweep's parent is created and by
``python -m distexp.report``) ends each run whose owner is

- on this host (the same host name, boot and pid namespace: ``host()``): not running (no such
  pid, a zombie, or a pid whose start time differs);
- on another host: silent, its last heartbeat older than STALE_S (a sweep's parent does not
  beat, and a run without the tag proves nothing: neither is ended from another host);

as FAILED, with the tag ``distexp.ended_by`` saying why. Runs without ``distexp.owner`` (other
tools, older distexp) are never touched; neither is a run whose owner is alive.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from typing import Mapping, Optional

from distexp.console_lines import WARNING
from distexp.tracking import tags as tag

BEAT_S = 60.0      # a live job renews its heartbeat this often
STALE_S = 600.0    # a run on another host whose heartbeat is older is ended (10 beats missed)


def _start_ticks(pid: int) -> Optional[str]:
    """The process's start time (clock ticks after boot, /proc/<pid>/stat field 22), or None when
    there is no such process or it is a zombie (dead, not yet reaped). Without /proc (not Linux):
    "?" while the pid exists (no protection against a reused pid there)."""
    if not os.path.isdir("/proc/self"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "; comm may hold spaces
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


def host() -> str:
    """The pid space this process lives in: "<host name>/<boot id>/<pid namespace>". Containers
    that share a host name (--network=host, hostNetwork pods) do not share pids: a pid is only
    judged on the same host name, boot and pid namespace; elsewhere the heartbeat decides."""
    ident = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            ident.append(f.read().strip()[:8])
        ident.append(str(os.stat("/proc/self/ns/pid").st_ino))
    except OSError:  # not Linux: the host name alone
        pass
    return "/".join(ident)


def owner_tags(pid: Optional[int] = None) -> dict:
    """The tags a new run carries: this process (or `pid`) owns it; heartbeat now."""
    pid = os.getpid() if pid is None else pid
    return {tag.OWNER: f"{host()} {pid} {_start_ticks(pid) or '?'}", tag.HEARTBEAT: str(int(time.time()))}


def dead(tags: Mapping[str, str], now: Optional[float] = None,
         here: Optional[str] = None) -> Optional[str]:
    """Why the run with these tags has no live owner, or None when it has one (or may have)."""
    owner = tags.get(tag.OWNER, "").split()
    if len(owner) != 3:
        return None
    who, pid, start = owner
    where = who.split("/")[0]  # the host name, for the reason
    if who == (here or host()):
        if not pid.isdigit():
            return None
        now_start = _start_ticks(int(pid))
        if now_start is None:
            return f"its owner, process {pid} on {where}, is gone (killed without closing the run)"
        if "?" not in (start, now_start) and now_start != start:
            return (f"its owner, process {pid} on {where}, is gone (the pid now belongs to another "
                    "process)")
        return None
    try:
        beat = float(tags[tag.HEARTBEAT])
    except (KeyError, ValueError):
        return None
    silent = (time.time() if now is None else now) - beat
    if tags.get(tag.RUN_KIND) == "sweep" or silent <= STALE_S:
        return None  # a sweep's parent does not beat: judged on its own host only
    return (f"its owner, process {pid} on {where}, sent no heartbeat for {silent:.0f} s "
            f"(> {STALE_S:.0f} s)")


def _offline_hint(job_dir: Optional[str]) -> str:
    """A job that lost its server exits with its run RUNNING there and the rest in its offline
    file: say how to give the run its real status."""
    from pathlib import Path

    from distexp.tracking.offline import OFFLINE_FILE, import_command

    if job_dir and (Path(job_dir) / OFFLINE_FILE).exists():
        return f"; its offline file holds its real status: {import_command(Path(job_dir), '')}"
    return ""


def end_dead_runs(client, experiment_ids, quiet: bool = False) -> list:
    """End FAILED every RUNNING run of these experiments whose owner is gone (one search); return
    their ids. Best effort: never raises (a store problem is the caller's to report)."""
    ended = []
    try:
        runs = client.search_runs(list(experiment_ids), "attributes.status = 'RUNNING'",
                                  max_results=1000)
        here, now = host(), time.time()
        for run in runs:
            why = dead(run.data.tags, now, here)
            if why is None:
                continue
            why += _offline_hint(run.data.tags.get(tag.JOB_DIR))
            client.set_tag(run.info.run_id, tag.ENDED_BY, f"distexp: {why}")
            client.set_terminated(run.info.run_id, status="FAILED")
            ended.append(run.info.run_id)
            if not quiet:
                print(f"distexp: run {run.info.run_id} ({run.info.run_name}) was still RUNNING; "
                      f"ended FAILED: {why}", flush=True)
    except Exception as ex:  # noqa: BLE001
        print(f"{WARNING}could not look for runs left RUNNING ({type(ex).__name__})",
              file=sys.stderr, flush=True)
    return ended
