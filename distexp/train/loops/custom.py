"""The outer loop (Orbit's Controller): epochs, evaluation, checkpoints, reporting - once, for
every strategy. How steps run is the dispatcher's business (distexp.train.step): strategy.run on a
distributed iterator, or ClusterCoordinator.schedule under ps.

- A call runs n steps: `steps_per_execution` (k) under sync strategies, a window of k-step calls
  under ps; a call never crosses an epoch's end or a checkpoint.
- `steps_per_execution=auto` (distexp.train.autotune): k is measured at the start of the run; under
  multiworker it is a fixed rule instead (every worker must run the same call sizes, and each
  would time differently); with `dataset.on_device` it stays 1 (one call per step).
- Per epoch: train/loss = mean of the epoch's per-step losses (each the exact mean over the
  global batch); train/<metric> = the metric's sums over the epoch's steps, divided.
- Non-finite loss (`terminate_on_nan`, default true): training stops after the call that
  produced it (within one steps_per_execution call), the run is tagged distexp.diverged and the
  trainer fails with one line naming the epoch and step. With terminate_on_nan=false it trains
  on, and the run is still tagged diverged (its throughput is not reported as valid).
"""
from __future__ import annotations

import time

from distexp.train import autotune
from distexp import strategies
from distexp.train.checkpoints import Checkpoints
from distexp.train.loops.context import Context
from distexp.train.step import PSDispatch, Step, SyncDispatch, finite, metric_figures


class Diverged(Exception):
    """The training loss became NaN or infinite."""


def train(ctx: Context) -> None:
    cfg, rep = ctx.cfg, ctx.reporter
    auto = cfg.steps_per_execution == "auto"
    k = 1 if auto else int(cfg.steps_per_execution)
    step = Step(ctx.strategy, ctx.task, ctx.model, ctx.optimizer, ctx.global_batch,
                jit=bool(cfg.jit_compile))
    if ctx.is_ps:
        dispatch = PSDispatch(step, cfg, ctx.data, ctx.global_batch, k=k)
    else:
        dispatch = SyncDispatch(step, ctx.train_ds, k=k, on_device=bool(cfg.dataset.on_device),
                                input_wait=rep.input_wait)
    ckpts = Checkpoints(cfg, model=ctx.model, optimizer=ctx.optimizer, step=dispatch.step_var,
                        chief=True if ctx.is_ps else rep.chief,
                        steps_per_epoch=ctx.steps_per_epoch, say=rep.print, logger=rep.logger)
    ctx.dispatch = dispatch  # the probe phase after training reuses its iterator and step
    start = ckpts.restore()
    rep.resume_at(start)
    dispatch.begin(start)
    total = ctx.epochs * ctx.steps_per_epoch
    every = ckpts.every if ckpts.saves else 0
    tuner = _resolve(ctx, dispatch, every) if auto else _fixed(rep, k, "as configured")
    diverged = None
    at = start
    try:
        for epoch in range(start // ctx.steps_per_epoch + 1, ctx.epochs + 1):
            rep.start_epoch(epoch)
            first = at - (epoch - 1) * ctx.steps_per_epoch
            rep.step_in_epoch = first
            loss_sum, sums = 0.0, [0.0] * (2 * len(step.names))
            end = epoch * ctx.steps_per_epoch
            while at < end:
                if tuner is not None:
                    dispatch.k = tuner.size()
                n = min(dispatch.max_steps, end - at, (every - at % every) if every else end)
                if tuner is not None and tuner.warmup_left():
                    n = min(n, tuner.warmup_left())  # no timed call holds a warm-up step
                warm = rep.meter.warmup_steps - rep.meter.step
                if warm > 0:  # for any k: warm-up ends at a call's end, never inside one
                    n = min(n, warm)
                t0, c0 = time.perf_counter(), time.process_time()
                out = dispatch.run(n)
                rep.end_step(out.losses, steps=n, units=out.units)
                if tuner is not None:
                    tuner.observe(dispatch.k, n, time.perf_counter() - t0,
                                  full=n == dispatch.max_steps, cost=time.process_time() - c0)
                    if tuner.done:
                        _announce(rep, tuner.k, tuner.reason)
                        tuner = None
                loss_sum += sum(out.losses)
                sums = [a + b for a, b in zip(sums, out.sums)]
                if diverged is None and not finite(out.losses):
                    bad = next(i for i, v in enumerate(out.losses) if not v == v or abs(v) == float("inf"))
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
            rep.end_epoch({"train/loss": float("nan")})
        if tuner is not None:  # training ended before the tuner decided
            tuner.stop("training ended while tuning")
            _announce(rep, tuner.k, tuner.reason)
    finally:
        ckpts.close()


def _resolve(ctx, dispatch, every: int):
    """steps_per_execution=auto: a Tuner, or None once k is fixed (multiworker, on-device)."""
    cfg, rep = ctx.cfg, ctx.reporter
    # ps: one run is a window of k-step calls, so the caps bound the window
    window = getattr(dispatch, "window", 1)
    cap = autotune.cap_for(*(max(1, v // window) if v else v
                             for v in (ctx.steps_per_epoch, every, rep.log_every)))
    if strategies.get(cfg.strategy.name).layout == "multiworker":  # workers must agree on k
        k = min(autotune.FIXED_K, cap)
        dispatch.k = k
        return _fixed(rep, k, f"auto under multiworker: the fixed rule min({autotune.FIXED_K}, "
                              f"cap {cap}), so that every worker runs the same calls")
    if bool(cfg.dataset.on_device):
        return _fixed(rep, 1, "auto with dataset.on_device: one call per step")
    workers = getattr(dispatch, "workers", 1)
    return autotune.Tuner(cap, rep.meter.warmup_steps, parallel=workers, cost_name="CPU")


def _fixed(rep, k: int, why: str) -> None:
    _announce(rep, k, why)
    return None


def _announce(rep, k: int, why: str) -> None:
    rep.logger.log_params({"steps_per_execution_resolved": k})
    rep.print(f"steps_per_execution: {k} ({why})")
