"""A finished job's closing lines, from the chief's result.json (the figures the run logged, as
logged; each figure by its one formatter, distexp.figures.text).

A single job: at most four lines of figures, before the job's "Job directory" and "Browse it" lines.

    throughput: 41,987 examples/s [41,042, 42,931] (95 %, 1,312 timed steps, 2.0 s); end to end 11,376 examples/s
    step 6.22 ms = input 0.81 + compute 5.10 + sync 0.00 + other 0.31; bottleneck: compute, 82 % (...)
    MFU: 2.31 % of the devices' peak (1,234.5 GFLOP/s)
    final: eval_loss 0.2189  eval_accuracy 0.9417  time to first step 3.21 s

A sweep's job: one line (the rest is in the job's log and its run), so that a sweep reads in one
screen (distexp.job.console.SweepPosition):

    job 4 of ≤12 (round 2 of ≤6) mirrored x2: 24,709 examples/s [23,900, 25,500], accuracy 0.694; ~2 min left

(≤: repeats=auto, whose rounds may end sooner: the time left is at most that too.)

Every figure's definition: docs/tasks-and-figures.md.
"""
from __future__ import annotations

import math
from typing import List, Optional

from distexp.figures import perf_keys, text


def lines(result: dict, sweep=None) -> List[str]:
    """The closing lines (none without a result); `sweep`: the job's place in its sweep
    (distexp.job.console.SweepPosition): then the one job line."""
    if not result:
        return []
    if sweep is not None:
        return [job_line(result, sweep)]
    out = [text.throughput(result), text.step_split(result), text.mfu(result), text.final(result)]
    return [ln for ln in out if ln]


def job_line(result: dict, sweep, now: Optional[float] = None) -> str:
    """A sweep's finished job in one line: where it stands, its set-up, examples/s with its
    interval, its evaluation figure (the job's objective) and the sweep's time left."""
    rate = result.get(perf_keys.EXAMPLES_PER_SEC)
    shown = text.rate(rate, result.get(perf_keys.EXAMPLES_PER_SEC_CI95), "examples/s") \
        if isinstance(rate, (int, float)) and math.isfinite(rate) else "examples/s not measured"
    name = result.get("objective") or ""
    value = result.get(name)
    if isinstance(value, (int, float)):
        shown += f", {name.split('/', 1)[-1]} {value:.3f}"
    left = sweep.left_text(now)
    return f"{sweep.short()} {sweep.name}: {shown}" + (f"; {left}" if left else "")
