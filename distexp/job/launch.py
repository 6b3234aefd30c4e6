"""Fresh training processes for one job, their output, and their clean-up.

TensorFlow fixes logical devices, inter-op threads and collective ops once per process, so every
job trains in new processes (docs/facts.md#process-state). This module starts them, streams each one's output to its
log file (and the chief's to the console), and guarantees that when the job ends - success, a
failed or killed process, a timeout, Ctrl-C or SIGTERM on the job process - none is left behind:
each child runs in its own process group, dies with its parent (PR_SET_PDEATHSIG), and is stopped
with SIGTERM then SIGKILL (multi-worker TensorFlow ignores SIGTERM).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Callable, Dict, List, Mapping, Optional, Sequence

from distexp import stops
from distexp.cluster import netns
from distexp.cluster.processes import LocalProcess, Proc, TrainerProcess
from distexp.console_lines import kind_of, text_of
from distexp.env import NETNS
from distexp.job import console as live
from distexp.library_logs import LOG_ONLY_PREFIX

KILL_GRACE_S = 3.0
# starts a Proc (`python -m proc.module *proc.argv`) with env (the whole environment) in a
# directory, elsewhere than a fresh interpreter here (the warm trainer, a Ray task's actor)
Spawn = Callable[[Proc, Mapping[str, str], str], TrainerProcess]
POLL_S = 0.1


class JobFailed(Exception):
    """A process failed, a peer was lost, or the job timed out. `before_stop`: the failure was
    there before any stop signal (distexp.stops) came, so it is the job's outcome whatever signal
    follows (a scheduler's step kill after a lost node: FAILED, not KILLED)."""

    def __init__(self, message: str, procs: Sequence[Proc], before_stop: Optional[bool] = None):
        super().__init__(message)
        self.procs = list(procs)
        self.before_stop = stops.requested() is None if before_stop is None else before_stop


class JobInterrupted(Exception):
    """Ctrl-C, SIGTERM or SIGHUP on the job process (distexp.stops)."""


# Known, harmless lines a trainer prints that the console does not repeat (the process's log
# keeps every line): TensorFlow's start-up banner (absl's pre-init warning and the oneDNN notice,
# printed by each TF library that loads: twice per process), and lines marked for the log only.
LOG_ONLY = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
            LOG_ONLY_PREFIX)
LOG_ONLY_RE = re.compile(r"^I0000 .*\] oneDNN custom operations are on")
# ... and a known, harmless error-level line, said once in words instead.
IN_WORDS = [(re.compile(r"^E0000 .*oneDNN supports DT_BOOL only"),
             "TensorFlow: a boolean op ran on TensorFlow's own kernels, not oneDNN's (harmless; "
             "TensorFlow's E0000 line is in the process's log)\n")]


def console_line(line: str, said: set) -> Optional[str]:
    """What the console shows of a trainer's output line (None: nothing). The trainer marks its
    detail lines for the log (LOG_ONLY): the run and the job's summary (distexp.job.summary) hold
    their figures."""
    if line.startswith(LOG_ONLY) or LOG_ONLY_RE.match(line) or kind_of(line) == "error":
        return None  # an error line: the job process reports it
    for pattern, words in IN_WORDS:
        if pattern.match(line):
            if words in said:
                return None
            said.add(words)
            return words
    return line


class _Ended:
    """The processes whose output has ended (they are exiting), and an event that wakes `run`."""

    def __init__(self):
        self.names: set = set()
        self.event = threading.Event()

    def add(self, name: str) -> None:
        self.names.add(name)
        self.event.set()


def _pump(stream: IO[bytes], log: IO[bytes], console, last_lines: List[str],
          on_end: Optional[Callable[[], None]] = None) -> None:
    """Copy a process's output to its log (and the console) until it closes it (it exits);
    then `on_end()`. `console`: False, True (stdout) or a display (distexp.job.console: its
    `write`, and `progress` for the trainer's progress records, which the log does not keep)."""
    said: set = set()
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if line.startswith(live.PREFIX):
            record = live.parse(line) if hasattr(console, "progress") else None
            if record is not None:
                try:
                    console.progress(record)
                except (OSError, ValueError):  # the console is gone
                    console = False
            continue
        log.write(raw)
        log.flush()
        last_lines.append(line)
        del last_lines[:-20]
        shown = console_line(line, said) if console else None
        if shown:
            try:
                if hasattr(console, "write"):
                    console.write(shown)
                else:
                    sys.stdout.write(shown)
                    sys.stdout.flush()
            except (OSError, ValueError):  # the console is gone: the log keeps every line
                console = False
    stream.close()
    if on_end is not None:
        on_end()


def stop(procs: Sequence[Proc], grace: float = KILL_GRACE_S) -> None:
    """SIGTERM every live process group, SIGKILL what is left after `grace` seconds, reap all
    (a warm-forked process: its exit seen by the warm trainer, which reaps it)."""
    live = [p.process for p in procs if p.process is not None and p.process.poll() is None]
    for p in live:
        p.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (any(p.poll() is None for p in live) and time.monotonic() < deadline
           and not stops.wait_or_hurry(0.05)):  # a second Ctrl-C: SIGKILL now
        pass
    for p in live:
        # the group, not just the leader: a trainer's own children must go too
        p.signal_group(signal.SIGKILL)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for pr in procs:
        if pr.process is not None and pr.returncode is None:
            pr.returncode = pr.process.poll()


def run(procs: Sequence[Proc], timeout: Optional[float] = None,
        until: Optional[Callable[[], bool]] = None, spawn: Optional[Spawn] = None) -> None:
    """Start `procs`, wait until every non-server process exits 0 (then stop the servers), or
    until `until()` is true (a server task of an external cluster whose job is over: stop it).
    `spawn(proc, env, cwd)`: starts a process elsewhere than a fresh interpreter here (the warm
    trainer, distexp.job.warm_client; a Ray task's actor); a TrainerProcess either way.

    Raises JobFailed naming the first process that failed (or the timeout), JobInterrupted on
    Ctrl-C / SIGTERM; in every case all processes are gone when this returns or raises.
    """
    old = stops.install()  # SIGINT, SIGTERM, SIGHUP: KeyboardInterrupt once (distexp.stops)
    pumps: List[threading.Thread] = []
    logs: List[IO[bytes]] = []
    tails = {}
    ended = _Ended()
    start = time.monotonic()
    # SIGUSR1 (Slurm's time-limit warning): the chief saves a checkpoint now (distexp.stops)
    stops.on_usr1(lambda: procs[0].process is not None and procs[0].process.signal_group(signal.SIGUSR1))
    pump_of: Dict[str, threading.Thread] = {}
    try:
        for pr in procs:
            pumps.append(_start(pr, logs, tails, spawn, ended))
            pump_of[pr.name] = pumps[-1]
        while True:
            _raise_if_failed(procs, tails, pump_of)
            if _over(procs, until):
                return
            if timeout is not None and time.monotonic() - start > timeout:
                raise JobFailed(f"timeout: the job ran longer than {timeout:g} s and was stopped",
                                procs)
            _wait_for_news(procs, ended)
    except KeyboardInterrupt:
        failure = _failed_before_the_stop(procs, tails, pump_of, until)
        if failure is not None:  # the signal came after it (Slurm's step kill): still a failure
            raise failure from None
        raise JobInterrupted("interrupted") from None
    finally:
        with stops.closing():  # a signal now: recorded (the caller ends the run KILLED), not raised
            stop(procs)
            _finish_pumps(pumps)
            for log in logs:
                log.close()
        stops.on_usr1(None)
        stops.restore(old)


def _wait_for_news(procs: Sequence[Proc], ended: _Ended) -> None:
    """Up to POLL_S, less when a process's output ends (it exits): then wait for its exit status
    (the warm trainer reports it a moment after the output ends), so that the job goes on as
    soon as its trainer is gone, not at the next poll (0.05 s on average, paid by every job)."""
    ended.event.wait(POLL_S)
    ended.event.clear()
    for pr in procs:
        if pr.name in ended.names and pr.process.poll() is None:
            try:
                pr.process.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:  # its output closed, the process still runs
                pass


def _start(pr: Proc, logs: List[IO[bytes]], tails: Dict[str, List[str]],
           spawn: Optional[Spawn] = None, ended: Optional[_Ended] = None) -> threading.Thread:
    """Start one process in its own session (forked by the warm trainer when `spawn` is given),
    its output pumped to its log; the pump thread."""
    pr.log.parent.mkdir(parents=True, exist_ok=True)
    log = open(pr.log, "ab")
    logs.append(log)
    env = dict(os.environ)
    env.update(pr.env)
    if spawn is not None:
        pr.process = spawn(pr, env, os.getcwd())
    else:  # the job's network namespace joined between fork and exec (distexp.cluster.netns)
        try:
            pr.process = LocalProcess(subprocess.Popen(
                pr.cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=netns.preexec(pr.env.get(NETNS))))
        except subprocess.SubprocessError as ex:  # never on the machine's network instead
            raise JobFailed(f"{pr.name} could not join the job's network namespace ({ex})", [pr]) from None
    tails[pr.name] = []
    on_end = None if ended is None else (lambda: ended.add(pr.name))
    t = threading.Thread(target=_pump, args=(pr.process.stdout, log, pr.console, tails[pr.name],
                                             on_end), daemon=True)
    t.start()
    stops.hold("fork")
    return t


def _raise_if_failed(procs: Sequence[Proc], tails: Dict[str, List[str]],
                     pump_of: Dict[str, threading.Thread]) -> None:
    """Record the exit codes; raise JobFailed naming the one to blame if a process failed (or a
    server exited)."""
    failed = []
    for pr in procs:
        rc = pr.process.poll()
        if rc is None:
            continue
        pr.returncode = rc
        if rc != 0 or pr.server:
            failed.append(pr)
    if failed:
        # Only the failed processes' output is complete; the others are still running.
        _finish_pumps([pump_of[pr.name] for pr in failed])
        pr = min(failed, key=lambda f: _blame_order(f, tails[f.name]))
        rc = pr.returncode
        why = _describe(rc) if rc != 0 else "exited while the job was still running"
        raise JobFailed(f"{pr.name} {why}{_last_error(tails[pr.name], rc)}", procs)


def _failed_before_the_stop(procs: Sequence[Proc], tails: Dict[str, List[str]],
                            pump_of: Dict[str, threading.Thread],
                            until: Optional[Callable[[], bool]]) -> Optional[JobFailed]:
    """On a stop signal: the failure that was already there, or None (the stop is the outcome).
    A process that had exited with an error of its own (code > 0: one killed by a signal may have
    got this very stop), or a peer the liveness watch had seen that no longer answers (its node or
    link lost: distexp.cluster.liveness.ServerWatch.lost_now)."""
    started = [pr for pr in procs if pr.process is not None and pr.name in pump_of]
    with stops.closing():  # a second signal while this looks: recorded, not raised
        try:
            _raise_if_failed(started, tails, pump_of)
        except JobFailed as ex:
            if any(pr.returncode is not None and pr.returncode > 0 for pr in ex.procs
                   if pr.process is not None and pr.process.poll() is not None and not pr.server):
                return JobFailed(str(ex), procs, before_stop=True)
        lost = getattr(until, "lost_now", None)
        line = lost() if callable(lost) else None
        return JobFailed(line, procs, before_stop=True) if line else None


def _over(procs: Sequence[Proc], until: Optional[Callable[[], bool]]) -> bool:
    """Whether the job is done: every non-server process exited 0, or `until()` says so."""
    if all(pr.returncode == 0 for pr in procs if not pr.server):
        return True
    try:
        if until is not None and until():
            return True
    except (TimeoutError, ConnectionError, RuntimeError) as ex:  # the watch's verdict
        raise JobFailed(str(ex), procs) from None
    return False


def _finish_pumps(pumps: Sequence[threading.Thread]) -> None:
    for t in pumps:
        t.join(timeout=2)


# What a process prints when a *peer* went away: not the cause of a failure.
_PEER_LOST = ("UnavailableError", "Socket closed", "unhealthy", "Connection reset", "aborted")


def _blame_order(pr: Proc, tail: Sequence[str]) -> int:
    """When several processes are found failed at once, the one to name: killed by a signal, then
    a failure of its own, then one that only reports a lost peer."""
    if pr.returncode is not None and pr.returncode < 0:
        return 0
    return 2 if any(m in "".join(tail[-8:]) for m in _PEER_LOST) else 1


def _describe(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with code {rc}"


# TensorFlow's C++ log lines (glog/absl: "I0000 00:00:17.. 1234 port.cc:153] ...") say nothing
# about why a process failed.
_NATIVE_LOG = re.compile(r"^([IWEF]\d{4} \d\d:\d\d|WARNING: All log messages before absl)")


def _last_error(lines: Sequence[str], rc: Optional[int] = None) -> str:
    """The most telling line of a failed process's output: our own error line, else the last
    Python line (a process killed by a signal: the signal says why, its output does not)."""
    for line in reversed(lines):
        if kind_of(line) == "error":
            return ": " + text_of(line)
    if rc is not None and rc < 0:
        return ""
    for line in reversed(lines):
        s = line.strip()
        if s and not s.startswith(("File ", "^", "~")) and not _NATIVE_LOG.match(s):
            return f": {s[:300]}"
    return ""
