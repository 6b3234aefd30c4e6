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
training alone, bit for bit (tests/train/test_window_slow.py).

How many steps: planned from the latest LATEST timed steps' mean time, the most of (a) what reaches
min_seconds (aimed MARGIN past it) and (b) what reaches min_steps, but never a window predicted
longer than about min_seconds (a slow step: the step minimum gives way, the seconds do not); in
whole calls of the run's k.
Up to `ROUNDS` plans (the machine's pace changes: a plan can fall short).
Every process of a multiworker job runs the same calls (each call is a collective): they timed
the same steps in lockstep at the same k, and each round every process plans from the mean of
their timed seconds, agreed by a collective before it runs. A ps job's coordinator alone
schedules. loop=fit: no window (Keras runs its own loop): its figures rest on training's
timed steps alone, and a run with no timed step stays unmeasured.
"""
from __future__ import annotations

import math
from typing import Optional

ROUNDS = 3
MARGIN = 1.05
LATEST = 50  # the steps whose mean time plans the next round (the machine's pace now)


def plan(timed: int, seconds: float, step: float, min_steps: int, min_seconds: float,
         k: int) -> int:
    """Steps the window should run after `timed` steps that took `seconds`, at `step` seconds a
    step (the latest steps' mean): a multiple of k."""
    if timed == 0 or step <= 0 or (timed >= min_steps and seconds >= min_seconds):
        return 0
    # aimed MARGIN past min_seconds: a plan short by a step's noise would need another round
    for_seconds = max(0, math.ceil((min_seconds * MARGIN - seconds) / step)) \
        if seconds < min_seconds else 0
    steps = min(max(for_seconds, min_steps - timed), max(for_seconds, math.ceil(min_seconds / step)))
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
            recent = meter.timed[-LATEST:]
            seconds, step = _agreed(ctx, meter.timed_seconds(), sum(recent) / max(1, len(recent)))
            n = plan(len(meter.timed), seconds, step, min_steps, min_seconds, int(dispatch.k))
            if not n:
                break
            if state is None:
                from distexp.train import live

                ctx.reporter.phase(live.WINDOW)  # the bar says what the process does now
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


def _agreed(ctx, seconds: float, step: float):
    """(timed seconds, latest step) as every process plans from: their means over the job's
    processes (each timed the same steps in lockstep, so with the same count and k they plan the
    same calls); one process, or a ps coordinator: its own."""
    if int(ctx.workers) <= 1 or not ctx.dispatch_cls.local_replicas:
        return seconds, step
    import tensorflow as tf

    strategy = ctx.strategy
    mine = tf.constant([seconds, step], dtype=tf.float64)
    both = strategy.reduce("MEAN", strategy.run(lambda: mine), axis=None).numpy()
    return float(both[0]), float(both[1])


def _snapshot(ctx, dispatch):
    from distexp.train.probe_phase import snapshot

    return snapshot(ctx.model, ctx.optimizer) + [(dispatch.step_var, dispatch.step_var.numpy())]


def _restore(state) -> None:
    from distexp.train.probe_phase import restore

    restore(state)
