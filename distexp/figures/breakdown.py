"""Where a step's time goes: the split of the mean step time (pure Python: no TensorFlow).

The probes that measure the parts run in the training process (distexp.train.breakdown); this
module only names and combines their figures, so the report can read them without TensorFlow.

- input: the training pipeline's own time per batch: the median of back-to-back fetches from the
  loop's training iterator, with nothing else consuming, once the buffers that filled while
  training paused (evaluation, the probes' set-up) are drained. A pipeline slower than the rest
  of the step sets the step's pace; a faster one overlaps compute (prefetch), and its part is
  then counted in full although training hid it (so `other` goes negative).
- compute: mean time of forward + backward + the optimizer's update on a batch already on the
  replicas' devices, with the gradient all-reduce left out (each replica applies its own
  gradient), per step, in calls of k steps as the loop runs them.
- sync: mean time of the all-reduce (SUM) of the model's own gradient tensors under the job's
  strategy (the same `ReplicaContext.all_reduce` the optimizer calls), per step, in calls of k.
  Under ps: a worker pulling every trainable variable from the parameter servers and pushing an
  update of the same size (PS traffic).
- other: the run's mean timed step time minus the three (host, dispatch, what the probes do not
  see): a difference, labelled unattributed; negative when the probes' sum exceeds the step
  (parts that overlap in training, e.g. input prefetched during compute, are counted in full).
"""
from __future__ import annotations

from typing import Dict, Optional

from distexp.figures import perf_keys

PARTS = ("input", "compute", "sync", "other")
KEYS = {p: perf_keys.step_part_ms(p) for p in PARTS}


def split(step_ms: Optional[float], input_ms: Optional[float], compute_ms: Optional[float],
          sync_ms: Optional[float]) -> Dict[str, Optional[float]]:
    """The four logged figures; `other` only when the step time and all three parts are known."""
    parts = (input_ms, compute_ms, sync_ms)
    other = (None if step_ms is None or any(p is None for p in parts)
             else step_ms - sum(parts))
    return {KEYS["input"]: input_ms, KEYS["compute"]: compute_ms, KEYS["sync"]: sync_ms,
            KEYS["other"]: other}


def bottleneck(figures: Dict[str, Optional[float]]) -> Optional[tuple]:
    """(part, share) of the largest measured part, e.g. ("sync", 0.61): its share of the sum of
    the parts above zero (a negative `other`, the probes summing past the mean step, counts as
    none of it). None when nothing was measured. `other` can be the answer (it is labelled
    unattributed). The one rule for the trainer's console line and the report."""
    values = {p: figures.get(KEYS[p]) for p in PARTS}
    known = {p: v for p, v in values.items() if v is not None and v > 0}
    if not known:
        return None
    part = max(known, key=known.get)
    return part, known[part] / sum(known.values())


def describe(figures: Dict[str, Optional[float]]) -> Optional[str]:
    """One console line: "step 12.3 ms = input 1.2 + compute 8.0 + sync 2.0 + other 1.1 (...)"."""
    if all(figures.get(KEYS[p]) is None for p in PARTS):
        return None
    shown = "  ".join(f"{p} {figures[KEYS[p]]:.2f}" for p in PARTS
                      if figures.get(KEYS[p]) is not None)
    top = bottleneck(figures)
    tail = f"; bottleneck: {top[0]} {100 * top[1]:.0f} %" if top else ""
    return f"step time split (ms, measured after training): {shown} (other = unattributed){tail}"
