"""A sweep job's figures as its rounds read them (distexp.sweeps.auto.Rounds.record): from its
record (a resumed sweep's run carries its figures) or its result.json (the trainer's final
figures), defensively: a figure missing or not a number is None, never an error."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional, Tuple

from distexp.figures import perf_keys

RATE = perf_keys.EXAMPLES_PER_SEC
ACCURACY = perf_keys.EVAL_ACCURACY
TIME = perf_keys.TIME_TO_ACCURACY_S


def result_of(record: dict) -> Optional[dict]:
    """The job's result.json (in its record's job_dir); None where it is absent or unreadable."""
    try:
        result = json.loads((Path(record["job_dir"]) / "result.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return result if isinstance(result, dict) else None


def _number(value, scale: float = 1.0) -> Optional[float]:
    try:
        return scale * float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def rate_of(record: dict) -> Optional[float]:
    """A job's steady-state examples/s: its record's, else its result.json's; None for a failed
    or diverged run."""
    if record.get("status") != "COMPLETED":
        return None
    if record.get("examples_per_sec") is not None:
        return float(record["examples_per_sec"])
    result = result_of(record)
    return None if result is None or result.get("diverged") else _number(result.get(RATE))


def accuracy_of(record: dict) -> Optional[float]:
    """A job's final eval accuracy in points (100 x eval/accuracy): its record's, else its
    result.json's; None for a failed or diverged run, or a task without it."""
    if record.get("status") != "COMPLETED":
        return None
    value = record.get("accuracy")
    if value is None:
        result = result_of(record)
        if result is None or result.get("diverged"):
            return None
        value = result.get(ACCURACY)
    return _number(value, 100.0)


def time_of(record: dict) -> Optional[float]:
    """A job's seconds of training to target_accuracy (perf/time_to_accuracy_s) from its
    result.json; math.inf for a completed run that missed it (a miss, never a time); None for a
    failed or diverged run, or one without its figures."""
    if record.get("status") != "COMPLETED":
        return None
    result = result_of(record)
    if result is None or result.get("diverged") or TIME not in result:
        return None
    return math.inf if result[TIME] is None else _number(result[TIME])


def window_of(record: dict) -> Tuple[Optional[float], Optional[str]]:
    """(CPU/wall of a job's timed window: result.json's cpu_seconds_timed / timed_seconds, the
    job's own `disturbed` reason, else the one its run was tagged with: a replayed run's record);
    a key absent or not a number is (None, None), not flagged."""
    tagged = record.get("disturbed")
    tagged = tagged if isinstance(tagged, str) and tagged else None
    result = result_of(record)
    if result is None:
        return None, tagged
    own = result.get("disturbed")
    reason = own if isinstance(own, str) and own else tagged
    wall = _number(result.get("timed_seconds"))
    cpu = _number(result.get("cpu_seconds_timed"))
    ratio = cpu / wall if cpu is not None and wall is not None and wall > 0 else None
    return ratio, reason
