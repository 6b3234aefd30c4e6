"""What a job's own figures say about where its time went (no MLflow, no TensorFlow):

- `bottleneck`: the largest part of the step-time split (perf/step_input_ms, _compute_ms,
  _sync_ms, _other_ms; "other" is named "unattributed") and its share, e.g. ("sync", 0.61).
- `end_to_end_gap`: whether perf/examples_per_sec_end_to_end lies outside the steady-state
  interval (`steady_interval`) by more than E2E_GAP, and the likely cause.
Definitions: docs/report.md.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

from distexp.figures import breakdown, stats
from distexp.options import loops
from distexp.report.scaling import PARTS, Row

PART_NAMES = {"input": "input", "compute": "compute", "sync": "sync", "other": "unattributed"}
# An end-to-end figure this far below (or above) the steady state, and outside its interval, is
# flagged: below it the difference is the warm-up's share of any short job.
E2E_GAP = 0.10


def bottleneck(r: Row) -> Optional[Tuple[str, float]]:
    """(the largest part of the step-time split, its share), e.g. ("sync", 0.61), by the same
    rule as the trainer's console line (distexp.figures.breakdown.bottleneck); "other" is named
    "unattributed". None unless all four parts were logged."""
    if any(r.breakdown.get(p) is None for p in PARTS):
        return None
    top = breakdown.bottleneck({breakdown.KEYS[p]: r.breakdown[p] for p in breakdown.PARTS})
    return None if top is None else (PART_NAMES[top[0]], top[1])


def steady_interval(r: Row) -> Optional[Tuple[float, float]]:
    """The steady-state examples/s interval: between runs (a t-interval of the geometric mean
    over the repeats), or one run's own 95 % interval over 10-step windows."""
    if len(r.rates) >= 2:
        logs = [math.log(x) for x in r.rates]
        m = sum(logs) / len(logs)
        s = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
        half = stats.t_quantile(0.975, len(logs) - 1) * s / math.sqrt(len(logs))
        return math.exp(m - half), math.exp(m + half)
    if r.rate is not None and r.ci95 is not None:
        return r.rate - r.ci95, r.rate + r.ci95
    return None


def end_to_end_gap(r: Row) -> Optional[Tuple[float, str]]:
    """(end-to-end / steady state, the likely cause) when the end-to-end examples/s lies outside
    the steady-state interval by more than E2E_GAP; else None.

    The end-to-end wall time (steps x global batch / end-to-end examples/s) splits into: every
    step at the steady rate; the epochs' training time beyond that (the sum of perf/epoch_time_s
    minus the steady time: warm-up steps, i.e. tracing and input fill, e.g. a shuffle buffer or
    cache filled in the first steps); and the time between epochs' training (the wall time minus
    the epochs' training time: evaluation and checkpoint saves). The larger of the last two is
    the likely cause; a step split dominated by input is named first. Without the epoch times,
    the gap is put on the warm-up steps when it exceeds 5 steady steps per warm-up step."""
    e2e, band = r.rate_end_to_end, steady_interval(r)
    if e2e is None or band is None or r.rate is None or band[0] <= e2e <= band[1] or \
            abs(e2e / r.rate - 1) <= E2E_GAP:
        return None
    ratio = e2e / r.rate
    if ratio > 1:
        return ratio, "above the steady state: the timed steps were slower than the run as a whole"
    causes = []
    b = bottleneck(r)
    if b and b[0] == "input":
        causes.append(f"input ({100 * b[1]:.0f} % of the step time)")
    steps, batch, warm = r.optimizer_steps, r.global_batch, r.warmup_steps or 0
    loop = loops.named(r.loop)
    between = ("evaluation and checkpoint saves" if loop is not None and loop.checkpoints and
               r.checkpoint_every not in (None, "0") else "evaluation")
    if steps and batch:
        wall = steps * batch / e2e
        steady = steps * batch / r.rate
        if r.curves.epoch_times:
            training = sum(r.curves.epoch_times)
            warmup_s, between_s = training - steady, wall - training
            parts = sorted([(warmup_s, f"input fill or tracing in the warm-up steps "
                                       f"({warmup_s:.2f} s beyond steady speed)"),
                            (between_s, f"{between} between epochs ({between_s:.2f} s)")],
                           reverse=True)
            causes += [text for secs, text in parts if secs > 0.1 * (wall - steady)]
        elif warm and (wall - steady) / warm > 5 * batch / r.rate:
            causes.append(f"input fill or tracing in the {warm} warm-up steps (excluded from "
                          f"the steady state; ~{wall - steady:.2f} s beyond steady speed)")
    if len(causes) == (1 if b and b[0] == "input" else 0):
        causes.append(f"warm-up steps or {between} (the run logged no epoch times to tell)")
    return ratio, "; ".join(causes)
