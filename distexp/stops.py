"""How a job's processes stop: the one rule for SIGINT, SIGTERM and SIGHUP (a leaf: it imports
nothing of distexp, so that the job, the sweep and the trainers share it).

- The first of them (Ctrl-C; SIGTERM from `kill`, `scancel`, `docker stop`, Kubernetes; SIGHUP from
  a closed terminal or ssh session) starts the orderly stop: KeyboardInterrupt in the main thread,
  which stops the training processes, closes the MLflow run KILLED, prints the `interrupted: ...`
  line and exits 130 (distexp.errors.INTERRUPTED).
- A later one (Ctrl-C pressed again because the first seemed slow) makes that stop faster, never
  dirtier: it raises nothing (an exception inside the clean-up would leave the run RUNNING and
  the line unprinted); the training processes get SIGKILL at once instead of their grace
  (`hurry`).
- Inside `closing()` (the run's close, once every training process is gone) the first signal too
  raises nothing: the close finishes with the run KILLED when the signal came before its status
  was written, and the job then exits 130 (`requested`).
- A process without the job's rule that must still stop on SIGTERM as on Ctrl-C (the UI's MLflow
  server, the Slurm launcher's submit-and-wait) takes `sigterm_as_ctrl_c`: KeyboardInterrupt on
  each, nothing else changed; `restore` puts back what it replaced.
- SIGUSR1 (Slurm's `--signal=USR1@<seconds>` warning before its time limit) is handed to the chief
  trainer, which saves a checkpoint at its next step and trains on (distexp.train.checkpoints;
  a trainer that gets it from Slurm directly does the same). It never stops the job.
- A child process dies with its parent (`die_with_parent`: the training processes with the job
  process or the warm trainer, the warm trainer with the job process), even a SIGKILLed one.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from distexp import env

STOPS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
_first: Optional[int] = None
_closing = 0
_hurry = threading.Event()
_usr1_forward: Optional[Callable[[], None]] = None


def _on_stop(signum, frame) -> None:
    global _first
    if _first is not None:
        _hurry.set()
        return
    _first = signum
    if _closing:
        return
    raise KeyboardInterrupt


def _on_usr1(signum, frame) -> None:
    if _usr1_forward is not None:
        _usr1_forward()


def die_with_parent() -> None:
    """In a child (between fork and exec, or just after a fork): SIGKILL when its parent dies
    (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except OSError:
        pass


def install() -> Optional[dict]:
    """The job process's rule, from its main thread (elsewhere Python cannot set handlers); the
    handlers it replaced, for `restore`."""
    if threading.current_thread() is not threading.main_thread():
        return None
    old = {}
    for sig in STOPS + ((signal.SIGUSR1,) if hasattr(signal, "SIGUSR1") else ()):
        before = signal.getsignal(sig)
        if before is signal.SIG_IGN and sig != signal.SIGTERM:
            continue  # nohup, or a shell's background job: the user asked to outlive it
        old[sig] = signal.signal(sig, _on_usr1 if sig == getattr(signal, "SIGUSR1", 0) else _on_stop)
    return old


def sigterm_as_ctrl_c() -> Optional[dict]:
    """SIGTERM (kill, scancel, a batch system's stop) raises KeyboardInterrupt in the main thread,
    as Ctrl-C does; the handler it replaced, for `restore` (None off the main thread, where Python
    cannot set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_term(signum, frame):
        raise KeyboardInterrupt

    return {signal.SIGTERM: signal.signal(signal.SIGTERM, on_term)}


def restore(old: Optional[dict]) -> None:
    for sig, handler in (old or {}).items():
        if handler is not None:
            signal.signal(sig, handler)


def on_usr1(forward: Optional[Callable[[], None]]) -> None:
    """What SIGUSR1 does while a job trains (None: nothing, the job goes on)."""
    global _usr1_forward
    _usr1_forward = forward


def done() -> None:
    """The stop is over (the run closed, the line printed): a later signal cannot change the end,
    so it is ignored (the interpreter's teardown runs with Python's default handlers, under which
    a second Ctrl-C killed the process by SIGINT instead of its exit 130)."""
    if _first is not None and threading.current_thread() is threading.main_thread():
        for sig in STOPS:
            signal.signal(sig, signal.SIG_IGN)


def requested() -> Optional[int]:
    """The first stop signal this process received, or None."""
    return _first


def name(sig: Optional[int] = None) -> str:
    sig = _first if sig is None else sig
    try:
        return signal.Signals(sig).name
    except (ValueError, TypeError):
        return "a signal"


def hurry() -> bool:
    """A second stop signal came: skip the graces."""
    return _hurry.is_set()


def wait_or_hurry(seconds: float) -> bool:
    """Sleep up to `seconds`, less when a second signal comes; whether it came."""
    return _hurry.wait(seconds)


@contextlib.contextmanager
def closing() -> Iterator[None]:
    """A stop signal arriving in here is recorded (`requested`), not raised."""
    global _closing
    _closing += 1
    try:
        yield
    finally:
        _closing -= 1


def reset() -> None:
    """Forget a stop (tests; a process that runs several jobs in turn never needs it)."""
    global _first
    _first = None
    _hurry.clear()


# Tests' way to land a signal (or a fault) in one phase of a job: "<phase>:<marker file>". The
# process that reaches the phase writes the marker and waits there once: until a stop, the
# marker's removal (the test lets it go on), or HOLD_S.
HOLD_ENV = env.TEST_HOLD
PHASES = ("start-up", "fork", "training", "evaluation", "checkpoint", "probe", "close")
HOLD_S = 60.0
_held: set = set()


def hold(phase: str) -> None:
    spec = os.environ.get(HOLD_ENV)
    if not spec or phase in _held:
        return
    want, _, marker = spec.partition(":")
    if want != phase:
        return
    _held.add(phase)
    Path(marker).write_text(f"{phase} {os.getpid()}\n")
    deadline = time.monotonic() + HOLD_S
    while _first is None and time.monotonic() < deadline and os.path.exists(marker):
        time.sleep(0.02)
