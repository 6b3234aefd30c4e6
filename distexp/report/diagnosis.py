"""What a job's own figures say about where its time went (no MLflow, no TensorFlow):

- `bottleneck`: the largest part of the step-time split (perf/step_input_ms, _compute_ms,
  _sync_ms, _other_ms; "other" is named "unattributed") and its share, e.g. ("sync", 0.61).
- `end_to_end_gap`: whether perf/examples_per_sec_end_to_end lies outside the steady-state
  interval (`steady_interval`) by more than E2E_GAP, and the likely cause.
Definitions: README, "The scaling report".
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

from distexp.figures import stats
from distexp.report.scaling import PARTS, Row

PART_NAMES = {"input": "input", "compute": "compute", "sync": "sync", "other": "unattributed"}
# An end-to-end figure this far below (or above) the steady state, and outside its interval, is
# flagged: below it the difference is the warm-up's share of any short job.
E2E_GAP = 0.10


def bottleneck(r: Row) -> Optional[Tuple[str, float]]:
    """(the largest part of the step-time split, its share of the four), e.g. ("sync", 0.61);
    "other" is named "unattributed". None without the split."""
    parts = {k: v for k, v in r.breakdown.items() if v is not None and v >= 0}
    total = sum(parts.values())
    if len(parts) < len(PARTS) or total <= 0:
        return None
    part = max(parts, key=parts.get)
    return PART_NAMES[part], parts[part] / total


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
    the steady-state interval by more than E2E_GAP; else None. The cause is read from what the
    run logged: a step split dominated by input, or warm-up steps far slower than the steady ones
    (input fill: a shuffle buffer or cache filled in the first steps; tracing), else the phases
    that are in the epochs' wall time but not in the timed steps (warm-up, checkpoint saves)."""
    e2e, band = r.rate_end_to_end, steady_interval(r)
    if e2e is None or band is None or r.rate is None or band[0] <= e2e <= band[1] or \
            abs(e2e / r.rate - 1) <= E2E_GAP:
        return None
    ratio = e2e / r.rate
    if ratio > 1:
        return ratio, "above the steady state: the timed steps were slower than the run as a whole"
    causes = []
    total_steps = r.optimizer_steps
    if total_steps and r.global_batch:
        wall = total_steps * r.global_batch / e2e              # the epochs' wall time
        timed_like = total_steps * r.global_batch / r.rate     # all steps at the steady rate
        gap = wall - timed_like
        warm = r.warmup_steps or 0
        if warm and gap > 0:
            per_warm = gap / warm * 1000
            steady_ms = r.global_batch / r.rate * 1000
            if per_warm > 5 * steady_ms:
                causes.append(f"input fill or tracing in the {warm} warm-up steps (excluded from "
                              f"the steady state; ~{gap:.2f} s beyond steady speed)")
    b = bottleneck(r)
    if b and b[0] == "input":
        causes.insert(0, f"input ({100 * b[1]:.0f} % of the step time)")
    if r.loop == "custom" and r.checkpoint_every not in (None, "0"):  # fit never checkpoints
        causes.append("checkpoint saves (excluded from step times)")
    if not causes:
        causes.append("warm-up steps (excluded from the steady state)")
    return ratio, "; ".join(causes)


