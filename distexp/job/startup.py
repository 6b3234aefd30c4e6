"""The job process's start-up and Python's garbage collector (no TensorFlow here).

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
