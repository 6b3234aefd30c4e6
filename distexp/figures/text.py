"""One run's figures as text: one formatter per figure, for every place that shows it (a leaf: pure
Python, no TensorFlow, no MLflow).

Called by the trainer's log (distexp.train.progress), the job's closing lines and a sweep's job
line (distexp.job.summary), the live bar (distexp.job.console), the runs' display tags in MLflow
(distexp.tracking.display) and the report's examples/s cells (distexp.report.wording), so that one
figure reads the same wherever it is shown (tests/figures/test_figures_text.py checks each surface):

- ``rate``: a throughput and its 95 % interval, "20,586 examples/s [19,874, 21,299]" (`number`:
  thousands separated, whole numbers from 100 up, 3 significant digits below);
- ``throughput``: the run's line, with the timed steps and seconds it rests on and end to end;
- ``step_split``: "step 6.22 ms = input 0.81 + compute 5.10 + sync 0.00 + other 0.31; bottleneck: ..."
  (the parts to two decimals, the step as their sum: the line adds up as printed);
- ``mfu``: "MFU: 2.31 % of the devices' peak (1,234.5 GFLOP/s)"; ``mfu_percent``: "2.31" (the
  report's column);
- ``final``: the final evaluation and the time to first step.

Every figure's definition: docs/tasks-and-figures.md.
"""
from __future__ import annotations

import math
from typing import Mapping, Optional

from distexp.figures import breakdown, perf_keys

# The bottleneck in words: what the part is (docs/tasks-and-figures.md, the step-time split)
WORDS = {"input": "the input pipeline sets the pace",
         "compute": "the model's forward, backward and update",
         "sync": "the gradient all-reduce between replicas",
         "other": "unattributed: host, dispatch, what the probes do not see"}


def _num(figures: Mapping, key: str) -> Optional[float]:
    v = figures.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
        and math.isfinite(v) else None


def number(x: float) -> str:
    """A rate's number: 20,586 / 512 / 15.3 / 0.842 (whole numbers from 100 up)."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def seconds(x: float) -> str:
    """A duration's number: 2.1 / 0.1 / 1,234 (one decimal below 100 s)."""
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"


def rate(value: float, ci95: Optional[float] = None, unit: str = "") -> str:
    """A throughput with its 95 % interval: "20,586 examples/s [19,874, 21,299]" (`unit` after the
    number; none: "20,586 [19,874, 21,299]"); without an interval the number alone."""
    head = number(value) + (f" {unit}" if unit else "")
    if ci95 is None or not math.isfinite(ci95):
        return head
    return f"{head} [{number(value - ci95)}, {number(value + ci95)}]"


def throughput(result: Mapping) -> str:
    """throughput: 41,987 examples/s [41,042, 42,931] (95 %, 1,312 timed steps, 2.0 s); end to end
    11,376 examples/s: the 95 % interval and the timed steps and seconds it rests on (and the
    task's own units per second, e.g. tokens/s)."""
    value, ci = _num(result, perf_keys.EXAMPLES_PER_SEC), _num(result, perf_keys.EXAMPLES_PER_SEC_CI95)
    if value is None:
        if perf_keys.TIME_TO_FIRST_STEP_S in result and \
                _num(result, perf_keys.TIME_TO_FIRST_STEP_S) is None:
            return "throughput: not measured (no step was trained: resumed at the last step)"
        return "throughput: not measured (every step was a warm-up step: see warmup_steps)"
    steps = int(_num(result, perf_keys.TIMED_STEPS) or 0)
    batch = _num(result, "global_batch_size")
    # the timed steps' summed time, exactly: examples/s is global batch x timed steps / it
    span = f"{steps:,} timed steps" + (f", {seconds(batch * steps / value)} s" if batch else "")
    why = f"95 %, {span}" if ci is not None else f"{span}: too few for an interval"
    units = next((k for k in result if perf_keys.units_of(k) and _num(result, k) is not None), None)
    extra = f", {rate(_num(result, units), unit=perf_keys.units_of(units) + '/s')}" if units else ""
    e2e = _num(result, perf_keys.EXAMPLES_PER_SEC_END_TO_END)
    tail = f"; end to end {rate(e2e, unit='examples/s')}" if e2e is not None else ""
    return f"throughput: {rate(value, ci, 'examples/s')} ({why}{extra}){tail}"


def step_split(result: Mapping) -> Optional[str]:
    """The mean timed step (1000 x global batch / examples/s) and its split, as logged; None
    without a throughput or a global batch."""
    value, batch = _num(result, perf_keys.EXAMPLES_PER_SEC), _num(result, "global_batch_size")
    parts = {p: _num(result, breakdown.KEYS[p]) for p in breakdown.PARTS}
    if value is None or not batch:
        return None
    mean = 1000.0 * batch / value
    if all(v is None for v in parts.values()):
        return f"step {mean:.2f} ms (mean of the timed steps; its split was not measured)"
    if any(v is None for v in parts.values()):
        shown = ", ".join(f"{p} {v:.2f}" for p, v in parts.items() if v is not None)
        return f"step {mean:.2f} ms: {shown} (the rest not measured)"
    rounded = {p: round(v, 2) for p, v in parts.items()}
    sums = " + ".join(f"{p} {v:.2f}" for p, v in rounded.items())
    top = breakdown.bottleneck(dict(result))
    why = f"; bottleneck: {top[0]}, {100 * top[1]:.0f} % ({WORDS[top[0]]})" if top else ""
    scale = _num(result, breakdown.SCALE_KEY)
    scaled = (f"; input, compute and sync x {scale:.2f}: they overlap in training"
              if scale is not None and scale < 1.0 else "")
    return f"step {sum(rounded.values()):.2f} ms = {sums}{scaled}{why}"


def mfu_percent(value: float) -> str:
    """An MFU (a fraction of the peak) in percent, without the sign: two decimals; below 0.1 %,
    two significant digits (a small model on a big GPU is never "0.00")."""
    pct = 100 * value
    return f"{pct:.2f}" if pct >= 0.1 or pct == 0 else f"{pct:.2g}"


def mfu(result: Mapping) -> Optional[str]:
    value, peak = _num(result, perf_keys.MFU), _num(result, perf_keys.PEAK_FLOPS)
    if value is None or peak is None:
        return None
    return f"MFU: {mfu_percent(value)} % of the devices' peak ({peak / 1e9:,.1f} GFLOP/s)"


def final(result: Mapping) -> str:
    """final: eval_loss 0.2189  eval_accuracy 0.9417  time to first step 3.21 s ("not measured"
    when the result holds it as None: no step was trained; left out when the result lacks it)."""
    shown = "  ".join(f"eval_{k[5:]} {v:.4f}" for k, v in result.items()  # nan: a diverged run
                      if k.startswith("eval/") and isinstance(v, (int, float)))
    first = _num(result, perf_keys.TIME_TO_FIRST_STEP_S)
    return (f"final: {shown or 'no evaluation'}" +
            (f"  time to first step {first:.2f} s" if first is not None else
             "  time to first step not measured" if perf_keys.TIME_TO_FIRST_STEP_S in result else ""))
