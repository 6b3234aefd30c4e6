"""A finished job's summary: at most four lines of figures, from the chief's result.json (the
figures the run logged, as logged), before the job's "Job directory" and "Browse it" lines.

    throughput: 20,586 examples/s [19,874, 21,299] (95 % interval over 140 timed steps); end to end 15,210 examples/s
    step 6.22 ms = input 0.81 + compute 5.10 + sync 0.00 + other 0.31; bottleneck: compute, 82 % (...)
    MFU: 2.31 % of the devices' peak (1,234.0 GFLOP/s)
    final: eval_loss 0.2189  eval_accuracy 0.9417  time to first step 3.21 s

The step is the timed steps' mean (1000 x global batch / examples/s); its parts are the split's
logged figures (distexp.figures.breakdown), shown to two decimals with the step as their sum, so
that the line adds up as printed. Every figure's definition: docs/tasks-and-figures.md.
"""
from __future__ import annotations

from typing import List, Optional

from distexp.figures import perf_keys
from distexp.figures import breakdown

# The bottleneck in words: what the part is (docs/tasks-and-figures.md, the step-time split)
WORDS = {"input": "the input pipeline sets the pace",
         "compute": "the model's forward, backward and update",
         "sync": "the gradient all-reduce between replicas",
         "other": "unattributed: host, dispatch, what the probes do not see"}


def _num(result: dict, key: str) -> Optional[float]:
    v = result.get(key)
    return float(v) if isinstance(v, (int, float)) and v == v else None


def throughput(result: dict) -> str:
    rate, ci = _num(result, perf_keys.EXAMPLES_PER_SEC), _num(result, perf_keys.EXAMPLES_PER_SEC_CI95)
    if rate is None:
        if perf_keys.TIME_TO_FIRST_STEP_S in result and \
                _num(result, perf_keys.TIME_TO_FIRST_STEP_S) is None:
            return "throughput: not measured (no step was trained: resumed at the last step)"
        return "throughput: not measured (every step was a warm-up step: see warmup_steps)"
    steps = int(_num(result, perf_keys.TIMED_STEPS) or 0)
    interval = f" [{rate - ci:,.0f}, {rate + ci:,.0f}] (95 % interval over {steps} timed steps" \
        if ci is not None else f" ({steps} timed steps: too few for an interval"
    units = next((k for k in result if perf_keys.units_of(k) and _num(result, k) is not None), None)
    extra = f", {_num(result, units):,.0f} {perf_keys.units_of(units)}/s" if units else ""
    e2e = _num(result, perf_keys.EXAMPLES_PER_SEC_END_TO_END)
    tail = f"; end to end {e2e:,.0f} examples/s" if e2e is not None else ""
    return f"throughput: {rate:,.0f} examples/s{interval}{extra}){tail}"


def step_line(result: dict) -> Optional[str]:
    rate, batch = _num(result, perf_keys.EXAMPLES_PER_SEC), _num(result, "global_batch_size")
    parts = {p: _num(result, breakdown.KEYS[p]) for p in breakdown.PARTS}
    if rate is None or not batch:
        return None
    mean = 1000.0 * batch / rate
    if all(v is None for v in parts.values()):
        return f"step {mean:.2f} ms (mean of the timed steps; its split was not measured)"
    if any(v is None for v in parts.values()):
        shown = ", ".join(f"{p} {v:.2f}" for p, v in parts.items() if v is not None)
        return f"step {mean:.2f} ms: {shown} (the rest not measured)"
    rounded = {p: round(v, 2) for p, v in parts.items()}
    total = sum(rounded.values())
    sums = " + ".join(f"{p} {v:.2f}" for p, v in rounded.items())
    top = breakdown.bottleneck(result)
    why = f"; bottleneck: {top[0]}, {100 * top[1]:.0f} % ({WORDS[top[0]]})" if top else ""
    scale = _num(result, breakdown.SCALE_KEY)
    scaled = (f"; input, compute and sync x {scale:.2f}: they overlap in training"
              if scale is not None and scale < 1.0 else "")
    return f"step {total:.2f} ms = {sums}{scaled}{why}"


def mfu_line(result: dict) -> Optional[str]:
    mfu, peak = _num(result, perf_keys.MFU), _num(result, perf_keys.PEAK_FLOPS)
    if mfu is None or peak is None:
        return None
    return f"MFU: {100 * mfu:.2f} % of the devices' peak ({peak / 1e9:,.1f} GFLOP/s)"


def final_line(result: dict) -> str:
    shown = "  ".join(f"eval_{k[5:]} {v:.4f}" for k, v in result.items()
                      if k.startswith("eval/") and isinstance(v, (int, float)))
    first = _num(result, perf_keys.TIME_TO_FIRST_STEP_S)
    said = (f"  time to first step {first:.2f} s" if first is not None else
            "  time to first step not measured" if perf_keys.TIME_TO_FIRST_STEP_S in result else "")
    return f"final: {shown or 'no evaluation'}{said}"


def lines(result: dict) -> List[str]:
    """The summary's lines (none without a result)."""
    if not result:
        return []
    out = [throughput(result), step_line(result), mfu_line(result), final_line(result)]
    return [ln for ln in out if ln]
