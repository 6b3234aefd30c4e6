"""The outer loop (Orbit's Controller): epochs, evaluation, checkpoints, reporting - once, for
every strategy. How steps run is the dispatcher's business (distexp.train.step): strategy.run on a
distributed iterator, or ClusterCoordinator.schedule under ps.

- A call runs n steps: `steps_per_execution` (k) under sync strategies, a window of k-step calls
  under ps; a call never crosses an epoch's end or a checkpoint.
- k is owned by distexp.train.autotune.Schedule: the dispatcher is given the schedule and reads k
  from it; this loop reports each call's cost to it. `auto`: measured at the start of the run;
  under a lockstep strategy (multiworker) a fixed rule instead (every worker must run the same
  call sizes, and each would time differently); with `dataset.on_device` 1 (one call per step).
- Per epoch: train/loss = mean of the epoch's per-step losses (each the exact mean over the
  global batch); train/<metric> = the metric's sums over the epoch's steps, divided.
- On accelerator replicas a call is a window of k-step calls fetched once
  (distexp.train.step.SyncDispatch): the meter and the schedule see one interval per window.
- Non-finite loss (`terminate_on_nan`, default true): training stops after the call that
  produced it (within one steps_per_execution call, or one window), the run is tagged distexp.diverged and the
  trainer fails with one line naming the epoch and step. With terminate_on_nan=false it trains
  on, and the run is still tagged diverged (its throughput is not reported as valid).
"""
from __future__ import annotations

import time

from distexp import stops, strategies
from distexp.config import xla
from distexp.figures.stats import first_non_finite
from distexp.train import autotune
from distexp.train.checkpoints import Checkpoints
from distexp.train.loops.context import Context
from distexp.train.step import Step, metric_figures


class Diverged(Exception):
    """The training loss became NaN or infinite."""


def train(ctx: Context):
    """Train; return the dispatcher it ran (the probe phase after training reuses its iterator and
    step: distexp.train.probe_phase)."""
    cfg, rep = ctx.cfg, ctx.reporter
    schedule = autotune.Schedule(cfg.steps_per_execution)  # k's one owner; the dispatcher reads it
    step = Step(ctx.strategy, ctx.task, ctx.model, ctx.optimizer, ctx.global_batch,
                jit=xla.on(cfg), local_replicas=ctx.dispatch_cls.local_replicas,
                xla_step=str(cfg.get("xla_step", "split")))
    dispatch = ctx.dispatch_cls.start(step, ctx, schedule)
    ckpts = Checkpoints(cfg, model=ctx.model, optimizer=ctx.optimizer, step=dispatch.step_var,
                        chief=rep.chief or not dispatch.local_replicas,  # ps: the coordinator
                        steps_per_epoch=ctx.steps_per_epoch, say=rep.print, logger=rep.logger)
    start = ckpts.restore()
    rep.resume_at(start)
    dispatch.begin(start)
    every = ckpts.every if ckpts.saves else 0
    schedule.begin(announce=lambda k, why: _announce(rep, k, why),
                   steps_per_epoch=ctx.steps_per_epoch, every=every, log_every=rep.log_every,
                   warmup=rep.meter.warmup_steps, lockstep=strategies.of(cfg).lockstep,
                   on_device=bool(cfg.dataset.on_device), strategy=cfg.strategy.name,
                   window=dispatch.window, parallel=dispatch.workers,
                   steps_left=ctx.epochs * ctx.steps_per_epoch - start,
                   window_steps=dispatch.window_steps)
    try:
        _epochs(ctx, step, dispatch, schedule, ckpts, start, every)
        schedule.finish()  # training ended before the tuner decided
    finally:
        ckpts.close()
    return dispatch


def _epochs(ctx, step, dispatch, schedule, ckpts, start: int, every: int) -> None:
    cfg, rep = ctx.cfg, ctx.reporter
    total = ctx.epochs * ctx.steps_per_epoch
    diverged = None
    at = start
    for epoch in range(start // ctx.steps_per_epoch + 1, ctx.epochs + 1):
        rep.start_epoch(epoch)
        first = at - (epoch - 1) * ctx.steps_per_epoch
        rep.step_in_epoch = first
        loss_sum, sums = 0.0, [0.0] * (2 * len(step.names))
        end = epoch * ctx.steps_per_epoch
        while at < end:
            n = min(dispatch.max_steps, end - at, (every - at % every) if every else end)
            if schedule.warmup_left():
                n = min(n, schedule.warmup_left())  # no timed call holds a warm-up step
            warm = rep.meter.warmup_steps - rep.meter.step
            if warm > 0:  # for any k: warm-up ends at a call's end, never inside one
                n = min(n, warm)
            t0, c0 = time.perf_counter(), time.process_time()
            out = dispatch.run(n)
            stops.hold("training")  # tests (distexp.stops.HOLD_ENV)
            rep.end_step(out.losses, steps=n, units=out.units)
            schedule.observe(n, time.perf_counter() - t0, full=n == dispatch.max_steps,
                             cost=time.process_time() - c0, launch=out.launch_s)
            loss_sum += sum(out.losses)
            sums = [a + b for a, b in zip(sums, out.sums)]
            bad = first_non_finite(out.losses) if diverged is None else None
            if bad is not None:
                diverged = (epoch, at + bad + 1 - (epoch - 1) * ctx.steps_per_epoch,
                            at - start + bad + 1, out.losses[bad])
                rep.diverged(*diverged)
                if cfg.terminate_on_nan:
                    raise Diverged()
            at += n
            if ckpts.after_step(at, last=at == total, since=at - n):
                rep.meter.exclude_since_last_step()
        done = ctx.steps_per_epoch - first
        rep.end_epoch({"train/loss": loss_sum / done,
                       **metric_figures(step.names, sums, "train")})
    if start >= total:
        rep.print(f"resume: the checkpoint is at the last step ({total}); nothing left to train")
        rep.start_epoch(ctx.epochs)
        rep.end_epoch({"train/loss": None})  # no step trained: no training loss (not "nan")


def _announce(rep, k: int, why: str) -> None:
    rep.logger.log_params({"steps_per_execution_resolved": k})
    rep.detail(f"steps_per_execution: {k} ({why})")
