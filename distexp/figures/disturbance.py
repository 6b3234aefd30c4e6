"""Whether a run's timed steps were starved by the machine (pure Python: no TensorFlow).

A trainer whose replicas are this process's CPUs keeps at least one of its threads busy for the
whole of every timed step (the step computes on the host, or the host thread waits for the input
threads that do), so over its timed steps its CPU time (all threads) is at least about its wall
time: CPU/wall measured 1.20-1.46 for the README sweep's 15 jobs (2 cores, load 1.3; a starved
sweep's siblings 1.23-1.28). Below `CPU_PER_WALL_FLOOR` more than a fifth of the window had no
thread of the trainer on a core: the machine ran something else (another process, the
hypervisor). Starved jobs measured 0.40 (a busy process beside it) and 0.19 (two busy processes
pinned to its one core, load 15); at load 11-15 the README sweep's jobs spread over 0.2-1.15.

Judged only where that premise holds: one process holding CPU replicas. A GPU's or TPU's host
waits for the device; a ps coordinator or a multiworker worker waits for other processes: their
CPU/wall is recorded (`cpu_per_wall`) but not judged. The machine's steal share (from /proc/stat:
the hypervisor ran another guest on this one's CPUs) is judged for every run: above
`STEAL_FLOOR` of the window's CPU time stolen. The 1-minute load average at the window's end is
said beside (not judged: a load above the cores does not tell which process waited).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Optional

CPU_PER_WALL_FLOOR = 0.8
STEAL_FLOOR = 0.10


@dataclass
class Sample:
    """The machine's CPU counters (ticks since boot, every CPU summed) at one moment."""

    total: int
    steal: int


def sample(path: str = "/proc/stat") -> Optional[Sample]:
    """The `cpu` line of /proc/stat (None where there is none: not Linux)."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return Sample(total=sum(ticks), steal=ticks[7] if len(ticks) > 7 else 0)


def steal_share(start: Optional[Sample], end: Optional[Sample]) -> Optional[float]:
    """The share of the machine's CPU time stolen between two samples (None: unknown)."""
    if start is None or end is None or end.total <= start.total:
        return None
    return (end.steal - start.steal) / (end.total - start.total)


def load_average() -> Optional[float]:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def verdict(cpu_per_wall: Optional[float], judged: bool, steal: Optional[float],
            load: Optional[float], cpus: Optional[int] = None) -> Optional[str]:
    """Why the run's timed steps count as disturbed (a short reason), or None: they do not (or
    cannot be told)."""
    why = []
    if judged and cpu_per_wall is not None and cpu_per_wall < CPU_PER_WALL_FLOOR:
        # rounded down: a ratio just below the floor never reads as the floor itself
        why.append(f"CPU/wall {math.floor(cpu_per_wall * 100) / 100:.2f} < {CPU_PER_WALL_FLOOR}")
    if steal is not None and steal > STEAL_FLOOR:
        why.append(f"steal {100 * steal:.0f} % > {100 * STEAL_FLOOR:.0f} %")
    if not why:
        return None
    if load is not None:
        why.append(f"load {load:.1f} on {cpus or os.cpu_count()} CPUs")
    return ", ".join(why)
