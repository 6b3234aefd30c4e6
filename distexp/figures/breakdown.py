"""Where a step's time goes: the split of the mean step time (pure Python: no TensorFlow).

The probes that measure the parts run in the training process (distexp.train.probe_phase); this
module names and combines their figures, so the report can read them without TensorFlow.

- input: the training pipeline's own time per batch: the median of back-to-back fetches from the
  loop's training iterator, with nothing else consuming, once the buffers that filled while
  training paused (evaluation, the probes' set-up) are drained.
- compute: forward + backward + the optimizer's update (and the task's training metrics) on a
  batch already on the replicas' devices, without the gradient all-reduce, per step, net of an
  empty call's dispatch. One replica: the training's own one-step function (it has no
  all-reduce: its optimizer's sum over one replica is the gradient itself).
- sync: the gradient all-reduce, made by the optimizer's own all-reduce call on tensors of the
  gradients' shapes and dtypes on the replicas' devices, per step, net of the same dispatch.
  One replica: 0, by construction (nothing is all-reduced, no probe runs). Under ps: a worker
  pulling every trainable variable from the parameter servers and pushing an update of the same
  size (PS traffic).
- other: the run's mean timed step time minus the three (host work between steps, dispatch,
  round trips to the host, what the probes do not see): a difference, labelled unattributed.
- noise: 1.96 x the standard error of `other`, from the spread of what it is made of (the timed
  steps' mean over 10-step windows, each probe's median over its rounds, `median_se`).
- overlap: where `other` would be below -noise, the probed parts add up to more than the step
  (they overlap in training, e.g. input prefetched during compute, or the probes read high): the
  three are scaled by step / their sum, so that they add up to the step, and `other` is 0; the
  scale (< 1) is logged, 1 otherwise. `other` is never below -noise, and the four always add up to
  the step.
"""
from __future__ import annotations

import math
import statistics
from typing import Dict, Optional, Sequence

from distexp.figures import perf_keys

PARTS = ("input", "compute", "sync", "other")
KEYS = {p: perf_keys.step_part_ms(p) for p in PARTS}
NOISE_KEY = perf_keys.STEP_SPLIT_NOISE_MS
SCALE_KEY = perf_keys.STEP_SPLIT_SCALE
WINDOW = 10  # steps per window of the step time's standard error (distexp.figures.meter's)


def median_se(samples: Sequence[float]) -> float:
    """The standard error of a sample's median, robustly: 1.2533 x sigma / sqrt(n), sigma from the
    median absolute deviation (x 1.4826), so one preempted round does not inflate it. 0 for a
    single sample (no spread known)."""
    if len(samples) < 2:
        return 0.0
    m = statistics.median(samples)
    sigma = 1.4826 * statistics.median(abs(s - m) for s in samples)
    return 1.2533 * sigma / math.sqrt(len(samples))


def mean_se(steps: Sequence[float]) -> float:
    """The standard error of the mean of per-step times: the spread of WINDOW-step windows' means
    (consecutive steps of one call share its time, so single steps are not independent); of the
    steps themselves under 2 windows."""
    n = len(steps) // WINDOW
    if n >= 2:
        means = [statistics.fmean(steps[i * WINDOW:(i + 1) * WINDOW]) for i in range(n)]
        return statistics.stdev(means) / math.sqrt(n)
    return statistics.stdev(steps) / math.sqrt(len(steps)) if len(steps) >= 2 else 0.0


def noise(*standard_errors: Optional[float]) -> float:
    """The noise of a difference of independent estimates: 1.96 x their combined standard error."""
    return 1.96 * math.sqrt(sum(se * se for se in standard_errors if se))


def split(step_ms: Optional[float], input_ms: Optional[float], compute_ms: Optional[float],
          sync_ms: Optional[float], noise_ms: float = 0.0) -> Dict[str, Optional[float]]:
    """The logged figures: the four parts, and (when `other` is known) its noise and the scale.
    `other` only when the step time and all three parts are known (else it would absorb the
    missing part). Where other < -noise the three parts are scaled to add up to the step."""
    parts = [input_ms, compute_ms, sync_ms]
    out: Dict[str, Optional[float]] = {KEYS["input"]: input_ms, KEYS["compute"]: compute_ms,
                                       KEYS["sync"]: sync_ms, KEYS["other"]: None}
    if step_ms is None or any(p is None for p in parts):
        return out
    total = sum(parts)
    other, scale = step_ms - total, 1.0
    if other < -noise_ms and total > 0:
        scale = step_ms / total
        parts, other = [p * scale for p in parts], 0.0
    out.update({KEYS["input"]: parts[0], KEYS["compute"]: parts[1], KEYS["sync"]: parts[2],
                KEYS["other"]: other, NOISE_KEY: noise_ms, SCALE_KEY: scale})
    return out


def bottleneck(figures: Dict[str, Optional[float]]) -> Optional[tuple]:
    """(part, share) of the largest measured part, e.g. ("sync", 0.61): its share of the sum of
    the parts above zero (a negative `other`, within its noise, counts as none of it). None when
    nothing was measured. `other` can be the answer (it is labelled unattributed). The one rule
    for the split's line (distexp.figures.text) and the report."""
    values = {p: figures.get(KEYS[p]) for p in PARTS}
    known = {p: v for p, v in values.items() if v is not None and v > 0}
    if not known:
        return None
    part = max(known, key=known.get)
    return part, known[part] / sum(known.values())
