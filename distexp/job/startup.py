"""The job process's start-up: when it began (`job_start`, for perf/time_to_first_step_s) and
Python's garbage collector (no TensorFlow here).

A full collection scans every object, and the start-up (Hydra, MLflow, SQLAlchemy, the report's
matplotlib in a sweep) makes them by the hundred thousand: full collections took ~0.6 s of a
sweep's start here, on its first job's path once the warm trainer was ready sooner. So
`python -m distexp` collects seldom from its first line (`begin`), and once the start-up is over
(its first training process is about to start: `over`) what it made is frozen, out of every later
collection, and the usual thresholds are back. Seldom, not never: a launcher that never starts a
training process here (submitit's sweep process waits on Slurm for hours) still collects.
"""
from __future__ import annotations

import gc
import os
import time
from typing import Optional, Tuple

START_UP = (100_000, 20, 100)  # allocations per young collection (Python's: 700, 10, 10)
_usual: Optional[Tuple[int, int, int]] = None


def begin() -> None:
    global _usual
    if _usual is None:
        _usual = gc.get_threshold()
        gc.set_threshold(*START_UP)


def over() -> None:
    """Freeze what the start-up made and collect as usual again (once; a no-op without `begin`)."""
    global _usual
    if _usual is not None:
        gc.freeze()
        gc.set_threshold(*_usual)
        _usual = None


_process_jobs = 0  # the jobs this process has prepared (a sweep runs several in one)


def job_start(now: float) -> float:
    """When the job started, for perf/time_to_first_step_s: the interpreter's own start for the
    first job of this process (what the user waits from: imports and Hydra's composition
    included), `now` for a later job of a sweep run in the same process (the launcher hands it
    over then)."""
    global _process_jobs
    _process_jobs += 1
    if _process_jobs > 1:
        return now
    return process_start()


def process_start() -> float:
    """This interpreter's start as unix time, from /proc/self/stat's start time (clock ticks after
    boot) and /proc/uptime: to ~10 ms (psutil's create_time adds the boot time, which /proc/stat
    gives in whole seconds). Off Linux: the time this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rpartition(")")[2].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _IMPORTED
    return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


_IMPORTED = time.time()
