"""The measurement window: a run's figures rest on at least `measure_min_seconds` of timed steps
and at least `measure_min_steps` of them, without changing what is trained.

Where training's own timed steps fall short (the default job: ~105 timed steps, 0.1-0.25 s, so
one 50-100 ms hiccup of the machine moved its figure by 20-100 %), the custom loop's dispatcher
runs the same compiled step on, on the same input pipeline, after training and before the probe
phase: its calls are timed as training's are (distexp.figures.meter.Meter.window_call) and join
the run's figures (examples/s, its interval, step-time percentiles), never an epoch's, the step
count or end to end. Every model and optimizer variable (seed generators and the optimizer's
iteration count included) and the loop's step counter are copied to the host first and assigned
back after, so the trained weights, the losses, the evaluations and the checkpoints are those of
training alone, bit for bit (tests/train/test_window.py).

How many steps: planned from the mean timed step so far, the most of (a) what reaches
min_seconds and (b) what reaches min_steps, but never a window predicted longer than min_seconds
(a slow step: the step minimum gives way, the seconds do not); in whole calls of the run's k.
Up to `ROUNDS` plans (a plan made from tuning calls at a smaller k falls short at the final k).
Every process of a multiworker job runs the same calls (each call is a collective): each round's
step count is the largest any worker planned, agreed before it runs. A ps job's coordinator
alone schedules. loop=fit: no window (Keras runs its own loop): its figures rest on training's
timed steps alone, and a run with no timed step stays unmeasured.
"""
from __future__ import annotations

import math
from typing import Optional

ROUNDS = 3
MARGIN = 1.05


def plan(timed: int, seconds: float, min_steps: int, min_seconds: float, k: int) -> int:
    """Steps the window should run after `timed` steps that took `seconds` (a multiple of k)."""
    if timed == 0 or seconds <= 0 or (timed >= min_steps and seconds >= min_seconds):
        return 0
    mean = seconds / timed
    # aimed MARGIN past min_seconds: a plan short by a step's noise would need another round
    for_seconds = max(0, math.ceil((min_seconds * MARGIN - seconds) / mean)) \
        if seconds < min_seconds else 0
    steps = min(max(for_seconds, min_steps - timed), max(for_seconds, math.ceil(min_seconds / mean)))
    return -(-steps // k) * k if steps > 0 else 0


def extend(ctx, dispatch) -> Optional[int]:
    """Run the window where the run needs one (the custom loop's `dispatch`; None: another loop,
    nothing run). Returns the steps it ran."""
    cfg, meter = ctx.cfg, ctx.reporter.meter
    if dispatch is None:
        return None
    min_steps, min_seconds = int(cfg.measure_min_steps), float(cfg.measure_min_seconds)
    state = None
    try:
        for _ in range(ROUNDS):
            n = _agreed(ctx, plan(len(meter.timed), meter.timed_seconds(), min_steps,
                                  min_seconds, int(dispatch.k)))
            if not n:
                break
            if state is None:
                state = _snapshot(ctx, dispatch)
                meter.begin_window()
            _run(ctx.reporter, dispatch, n)
    finally:
        if state is not None:
            _restore(state)
    return meter.window_steps


def _run(reporter, dispatch, n: int) -> None:
    while n > 0:
        size = min(n, dispatch.max_steps)
        out = dispatch.run(size)
        reporter.window_call(size, out.units)
        n -= size


def _agreed(ctx, n: int) -> int:
    """The largest `n` any process of the job planned (one process, or a ps coordinator: its own)."""
    if int(ctx.workers) <= 1 or not ctx.dispatch_cls.local_replicas:
        return n
    import tensorflow as tf

    strategy = ctx.strategy
    want = tf.constant(float(n))
    return int(strategy.reduce("MAX", strategy.run(lambda: want), axis=None))


def _snapshot(ctx, dispatch):
    from distexp.train.probe_phase import snapshot

    return snapshot(ctx.model, ctx.optimizer) + [(dispatch.step_var, dispatch.step_var.numpy())]


def _restore(state) -> None:
    from distexp.train.probe_phase import restore

    restore(state)
