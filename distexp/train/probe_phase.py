"""The probe phase: where a step's time goes, measured after training (definitions in
distexp.figures.breakdown and docs/tasks-and-figures.md; the compute and sync probes are
distexp.train.split_probes', the input probe distexp.train.input_probe's).

It runs once the timed training is over, so nothing here can perturb `perf/examples_per_sec`,
and it leaves the model as training left it: every model and optimizer variable is copied to the
host first and assigned back at the end (the probes apply updates).

Every process of a job runs the same probes with the same numbers of calls, in the same order
(multiworker: the sync probe is a collective, so a worker that skipped it would hang the others);
only the chief's figures are logged. The k-step probes use the loop's k (steps per call), so the
per-call dispatch is amortised as in training.

What it costs: the input probe 0.1 s or more (until the pipeline's rate is steady; a small trace
for its in-graph fetch when k > 1). One replica in the custom loop: no trace of the model (the
compute probe is the training's one-step function, traced already at k = 1) and one tiny empty
function; sync is 0 without a probe. Several replicas (or loop=fit): one trace of the model (the
compute probe) and two small ones (sync, empty). Then 1 + 5..9 rounds.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from distexp.config import xla
from distexp.train.input_probe import InGraph, pipeline_samples
from distexp.train.split_probes import WARMUP, Probes

CALLS = 9    # timed rounds at most (one call of each probe per round)
MIN_CALLS = 5
BUDGET_S = 3.0  # the rounds are cut to fit about this long, from the training's mean step


def rounds(step_ms: Optional[float], k: int) -> int:
    """Timed rounds for a step of `step_ms`: a round costs about k steps (a compute call of k
    steps; sync and the empty call are a small part of a step); 5..9 rounds."""
    if not step_ms:
        return MIN_CALLS
    return max(MIN_CALLS, min(CALLS, int(BUDGET_S * 1000.0 / (k * step_ms))))


def snapshot(model, optimizer) -> List:
    variables = list(model.variables) + list(optimizer.variables)
    return [(v, v.numpy()) for v in variables]


def restore(state) -> None:
    for v, value in state:
        v.assign(value)


def run(ctx, dispatch, job_dir: Path, chief: bool, step_ms: Optional[float]) -> Dict[str, Optional[float]]:
    """The probe phase (every process of the job): the optional profiler trace, then the three
    probes; the model and optimizer are restored afterwards. `dispatch`: the dispatcher the custom
    loop ran (its iterator and step are reused), None after another loop. Returns the logged
    figures."""
    import statistics

    import tensorflow as tf

    from distexp.figures import breakdown

    strategy = ctx.strategy
    if not ctx.dispatch_cls.local_replicas:
        return ps_run(ctx, dispatch, job_dir, chief, step_ms)
    if dispatch is not None:  # the custom loop: its own iterator, as training left it
        iterator, k = dispatch.iterator, int(dispatch.k)
    else:  # fit: Keras' iterator is its own; a fresh one, its first fetch (the fill) not timed
        iterator = iter(strategy.experimental_distribute_dataset(ctx.train_ds))
        next(iterator)
        k = int(getattr(ctx.model, "steps_per_execution", 1) or 1)
    measure = bool(ctx.cfg.measure_step_split)
    # input first, alone, before anything else runs (no collective: a worker never waits here
    # for another); dataset.on_device: training took no batch from the pipeline
    input_ms, input_se = (0.0, 0.0) if ctx.cfg.dataset.on_device else (None, None)
    if measure and input_ms is None:  # fetched as the loop fetches: on the host at k = 1 (custom)
        host = dispatch is not None and k == 1
        samples = pipeline_samples(iterator) if host else \
            pipeline_samples(InGraph(strategy, iterator, k), batches=k)
        input_ms, input_se = statistics.median(samples), breakdown.median_se(samples)
    state = snapshot(ctx.model, ctx.optimizer)
    try:
        probes = Probes(strategy, ctx.task, ctx.model, ctx.optimizer, ctx.global_batch,
                        one_step=dispatch.step.one if dispatch is not None else None,
                        jit=xla.on(ctx.cfg),
                        xla_step=str(ctx.cfg.get("xla_step", "split")))
        if ctx.cfg.profile:
            _profile(ctx, dispatch, probes, iterator, k, job_dir, chief)
        if not measure:
            return {}
        # every process must run the same number of calls (multiworker): their mean, agreed (one
        # process: nothing to agree, and no eager cross-replica call)
        want = tf.constant(float(rounds(step_ms, k)))
        calls = int(strategy.reduce("MEAN", strategy.run(lambda: want), axis=None)) \
            if int(ctx.workers) > 1 else int(want)
        parts = probes.measure(next(iterator), k, calls)  # a batch on the replicas' devices
    finally:
        restore(state)
    (compute, compute_se), (sync, sync_se) = parts["compute"], parts["sync"]
    noise = breakdown.noise(_step_se(ctx), input_se, compute_se, sync_se)
    return breakdown.split(step_ms, input_ms, compute, sync, noise)


def _step_se(ctx) -> float:
    """The standard error of the timed steps' mean step time, in ms."""
    from distexp.figures import breakdown

    return 1000.0 * breakdown.mean_se(ctx.reporter.meter.timed)


def _profile(ctx, dispatch, probes, iterator, k: int, job_dir: Path, chief: bool) -> None:
    """The loop's own k-step function (custom) or the compute probe (fit), same calls on every
    process; only the chief records."""
    import tensorflow as tf

    from distexp.train import profile

    kk = tf.constant(k)
    if dispatch is not None:
        step = dispatch.step
        call = lambda: step.host(*step.steps(iterator, kk))  # noqa: E731
    else:
        def call():
            x, y = next(iterator)
            return float(probes.compute(x, y, kk))
    if chief:
        profile.trace(call, job_dir / "profile")
        ctx.reporter.logger.log_artifact_dir(job_dir / "profile", "profile")
        ctx.reporter.print(f"profile: a trace of {profile.STEPS} calls of {k} step(s) logged as "
                           "the run's artifact directory profile/ (open with xprof)")
    else:
        for _ in range(1 + profile.STEPS):
            call()


def ps_run(ctx, d, job_dir: Path, chief: bool, step_ms):
    """Under ps the step runs on a worker against variables on the parameter servers, so the
    parts are probed where they happen: input and sync (PS traffic) by calls scheduled on a
    worker, each net of an empty scheduled call (the schedule/fetch round trip); compute on the
    coordinator, on a local copy of the model and optimizer (no parameter server involved; on
    this machine the same CPU as the workers, on a cluster the coordinator's hardware)."""
    from distexp.figures import breakdown

    coord, iterator = d.coordinator, d.iterator
    variables = ctx.model.trainable_variables
    if ctx.cfg.profile and chief:
        from distexp.train import profile

        profile.trace(lambda: d.run(d.k), job_dir / "profile")  # the coordinator's side only
        ctx.reporter.logger.log_artifact_dir(job_dir / "profile", "profile")
        ctx.reporter.print(f"profile: a trace of {profile.STEPS} scheduled calls of {d.k} step(s) "
                           "(the coordinator's side) logged as the run's artifact directory profile/")
    if not ctx.cfg.measure_step_split:
        return {}
    n = rounds(None if step_ms is None else step_ms * d.workers, 1)
    scheduled = _scheduled_ms(coord, iterator, variables, n)
    (input_ms, input_se), (sync, sync_se) = scheduled["input"], scheduled["sync"]
    compute, compute_se = _local_compute_ms(ctx, n)
    # The loop's step time under ps is a window's time over its steps, which run concurrently on
    # the workers: one worker spends `workers` times that on each of its steps.
    per_worker = None if step_ms is None else step_ms * d.workers
    noise = breakdown.noise(d.workers * _step_se(ctx), input_se, compute_se, sync_se)
    return breakdown.split(per_worker, input_ms, compute, sync, noise)


def _scheduled_ms(coord, iterator, variables, n: int) -> Dict[str, Tuple[float, float]]:
    """ps: {"input", "sync"}: (ms, standard error) of an input and a parameter-server traffic
    call scheduled on a worker, each the median over n rounds after the warm-up of its time net
    of an empty scheduled call's in the same round."""
    import statistics

    import tensorflow as tf

    from distexp.figures.breakdown import median_se

    @tf.function
    def empty():
        return tf.constant(0.0)

    @tf.function
    def fetch(it):
        x, y = next(it)  # the worker's own pipeline produces the whole batch
        return tf.cast(tf.size(y), tf.float32)

    @tf.function
    def traffic():
        # every trainable variable read from the parameter servers, and an update of the same
        # size written back (zeros: nothing changes)
        pulled = tf.add_n([tf.reduce_sum(tf.cast(v, tf.float32)) for v in variables])
        for v in variables:
            v.assign_add(tf.zeros_like(v))
        return pulled

    calls = {"empty": lambda: coord.schedule(empty).fetch(),
             "input": lambda: coord.schedule(fetch, args=(iterator,)).fetch(),
             "sync": lambda: coord.schedule(traffic).fetch()}
    net: Dict[str, List[float]] = {"input": [], "sync": []}
    for i in range(WARMUP + n):
        took = {}
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            took[name] = 1000.0 * (time.perf_counter() - t0)
        if i >= WARMUP:
            for name in net:
                net[name].append(took[name] - took["empty"])
    return {k: (max(0.0, statistics.median(v)), median_se(v)) for k, v in net.items()}


def _local_compute_ms(ctx, n: int) -> Tuple[Optional[float], float]:
    """ps: forward + backward + optimizer at the global batch on a copy of the model held by the
    coordinator (keras.models.clone_model; None when the model cannot be cloned): (ms, standard
    error)."""
    import keras
    import tensorflow as tf

    try:
        model = keras.models.clone_model(ctx.model)
        optimizer = ctx.optimizer.__class__.from_config(ctx.optimizer.get_config())
        optimizer.build(model.trainable_variables)
    except Exception as ex:  # noqa: BLE001  (a subclassed user model, a wrapped optimizer)
        ctx.reporter.detail(f"step time split: compute not measured under ps ({type(ex).__name__}: "
                           f"{ex})")
        return None, 0.0
    probes = Probes(tf.distribute.get_strategy(), ctx.task, model, optimizer, ctx.global_batch)
    return probes.measure(next(iter(ctx.train_ds)), 1, n)["compute"]
