"""The probe phase: where a step's time goes, measured after training (definitions in
distexp.figures.breakdown and docs/tasks-and-figures.md).

It runs once the timed training is over, so nothing here can perturb `perf/examples_per_sec`,
and it leaves the model as training left it: every model and optimizer variable is copied to the
host first and assigned back at the end (the compute probe lets replicas drift apart).

Every process of a job runs the same probes with the same numbers of calls, in the same order
(multiworker: the sync probe is a collective, so a worker that skipped it would hang the others);
only the chief's figures are logged. The calls use the loop's k (steps per call), so the per-call
dispatch is amortised as in training.

What it costs: the input probe 0.1 s or more (until the pipeline's rate is steady) and a small trace
(its in-graph fetch), one trace of
the model (the compute probe; sync all-reduces zeros shaped as the gradients, so no gradient
function is traced) and two small ones (sync, empty), then 1 + 5..9 rounds of k steps. All four
are plain TF (tf.while_loop, autograph=False): autograph's conversion cost ~0.7 s a function on a
loaded 2-core machine, more than the tracing itself.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Optional

from distexp.train.input_probe import InGraph, local_sum, pipeline_ms

WARMUP = 1   # untimed rounds of the compute and sync probes (the first call traces)
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


class Probes:
    """The measuring functions of one job, built on its strategy, model and optimizer: compute
    (the model's step without the all-reduce), sync (the all-reduce of tensors shaped as the
    model's gradients) and empty (the dispatch both include). Only compute traces the model."""

    def __init__(self, strategy, task, model, optimizer, global_batch: int):
        import tensorflow as tf

        self.strategy = strategy
        variables = model.trainable_variables
        gradients = _gradients_fn(task, model, optimizer, global_batch, variables)
        # written in plain TF (tf.while_loop): autograph's conversion (~0.2 s a function here,
        # more under load) is not paid
        self.empty = tf.function(_empty_fn(strategy), autograph=False)
        self.compute = tf.function(_compute_fn(strategy, optimizer, gradients, variables),
                                   autograph=False)
        self.sync = tf.function(_sync_fn(strategy), autograph=False)
        self.variables = variables

    def measure(self, batch, k: int, calls: int = CALLS) -> Dict[str, float]:
        """{"compute", "sync"} in ms per step on `batch` (on the replicas' devices), each the
        median over `calls` rounds (a call preempted by another process does not move it).

        Compute and sync are interleaved (one call of each per round, so they see the same load
        on the machine), each net of the dispatch of an empty call of the same shape in the same
        round: the loop pays one dispatch per call, not one per part, and it belongs to
        `other`."""
        import statistics

        import tensorflow as tf

        kk = tf.constant(k)
        x, y = batch
        # what the sync probe all-reduces: a dense tensor per trainable variable, of its shape and
        # dtype (the gradients the optimizer all-reduces; a sum's cost does not depend on the
        # values), on each replica's device: no trace of the model
        grads = self.strategy.experimental_distribute_values_from_function(
            lambda _: [tf.zeros(v.shape, v.dtype) for v in self.variables])
        times: Dict[str, List[float]] = {"compute": [], "sync": [], "empty": []}
        for i in range(WARMUP + calls):
            t0 = time.perf_counter()
            float(self.empty(kk))
            t1 = time.perf_counter()
            float(self.compute(x, y, kk))
            t2 = time.perf_counter()
            float(self.sync(grads, kk))
            t3 = time.perf_counter()
            if i >= WARMUP:
                times["empty"].append((t1 - t0) / k)
                times["compute"].append((t2 - t1) / k)
                times["sync"].append((t3 - t2) / k)
        ms = {part: 1000.0 * statistics.median(v) for part, v in times.items()}
        floor = ms.pop("empty")
        return {"compute": max(0.0, ms["compute"] - floor), "sync": max(0.0, ms["sync"] - floor)}


def _gradients_fn(task, model, optimizer, global_batch: int, variables):
    """A replica's gradients of the task's loss over the global batch, as the optimizer scales it."""
    import tensorflow as tf

    def gradients(x, y):
        with tf.GradientTape() as tape:
            out = task.loss(y, model(x, training=True))
            total = out[0] if isinstance(out, (tuple, list)) else out
            # /global batch, not the task's all-reduced weight: no collective in compute
            loss = tf.cast(total, tf.float32) / float(global_batch)
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, variables)
        return [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                for g, v in zip(grads, variables)]

    return gradients


def _compute_fn(strategy, optimizer, gradients, variables):
    """The compute probe: k optimizer steps on every replica, each applying its own gradient."""
    import tensorflow as tf

    def local_step(x, y):
        optimizer.apply_gradients(zip(gradients(x, y), variables))
        return tf.constant(0.0)

    def compute(x, y, k):
        # The optimizer's own all-reduce (Keras: TFOptimizer._all_reduce_sum_gradients) is
        # bypassed while this function traces: each replica applies its own gradient. Under
        # mixed_float16 a LossScaleOptimizer applies through its inner optimizer, which
        # all-reduces on its own: bypassed too.
        bypassed = [o for o in (optimizer, getattr(optimizer, "inner_optimizer", None))
                    if o is not None]
        for o in bypassed:
            object.__setattr__(o, "_all_reduce_sum_gradients", lambda gv: gv)
        try:
            return tf.while_loop(
                lambda i, d: i < k,
                lambda i, d: (i + 1, d + local_sum(strategy, strategy.run(local_step,
                                                                            args=(x, y)))),
                (tf.constant(0), tf.constant(0.0)))[1]
        finally:
            for o in bypassed:
                object.__delattr__(o, "_all_reduce_sum_gradients")

    return compute


def _sync_fn(strategy):
    """The sync probe: k all-reduces (SUM) of the given gradients across the replicas."""
    import tensorflow as tf

    def all_reduce(*grads):
        ctx = tf.distribute.get_replica_context()
        # identity: placed on this replica's device (an argument tensor may carry none,
        # which the collective refuses under multiworker: "destinations can not be empty")
        reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [tf.identity(g) for g in grads])
        return tf.add_n([tf.reshape(t, [-1])[0] for t in reduced])  # waits for all of it

    def sync(grads, k):
        return tf.while_loop(
            lambda i, d: i < k,
            lambda i, d: (i + 1, d + local_sum(strategy, strategy.run(all_reduce,
                                                                        args=tuple(grads)))),
            (tf.constant(0), tf.constant(0.0)))[1]

    return sync


def _empty_fn(strategy):
    """The same k-call loop with nothing in it: the dispatch the other two probes include."""
    import tensorflow as tf

    def empty(k):
        return tf.while_loop(
            lambda i, d: i < k,
            lambda i, d: (i + 1, d + local_sum(strategy, strategy.run(
                lambda: tf.constant(0.0)))),
            (tf.constant(0), tf.constant(0.0)))[1]

    return empty


def run(ctx, job_dir: Path, chief: bool, step_ms: Optional[float]) -> Dict[str, Optional[float]]:
    """The probe phase (every process of the job): the optional profiler trace, then the three
    probes; the model and optimizer are restored afterwards. Returns the four logged figures."""
    import tensorflow as tf

    from distexp.figures import breakdown

    strategy, dispatch = ctx.strategy, ctx.dispatch
    if not ctx.dispatcher.local_replicas:
        return ps_run(ctx, job_dir, chief, step_ms)
    if dispatch is not None:  # the custom loop: its own iterator, as training left it
        iterator, k = dispatch.iterator, int(dispatch.k)
    else:  # fit: Keras' iterator is its own; a fresh one, its first fetch (the fill) not timed
        iterator = iter(strategy.experimental_distribute_dataset(ctx.train_ds))
        next(iterator)
        k = int(getattr(ctx.model, "steps_per_execution", 1) or 1)
    measure = bool(ctx.cfg.measure_step_split)
    # input first, alone, before anything else runs (no collective: a worker never waits here
    # for another); dataset.on_device: training took no batch from the pipeline
    input_ms = 0.0 if ctx.cfg.dataset.on_device else None
    if measure and input_ms is None:  # fetched as the loop fetches: on the host at k = 1 (custom)
        host = dispatch is not None and k == 1
        input_ms = pipeline_ms(iterator) if host else pipeline_ms(InGraph(strategy, iterator, k),
                                                                  batches=k)
    state = snapshot(ctx.model, ctx.optimizer)
    try:
        probes = Probes(strategy, ctx.task, ctx.model, ctx.optimizer, ctx.global_batch)
        if ctx.cfg.profile:
            _profile(ctx, probes, iterator, k, job_dir, chief)
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
    return breakdown.split(step_ms, input_ms, parts["compute"], parts["sync"])


def _profile(ctx, probes, iterator, k: int, job_dir: Path, chief: bool) -> None:
    """The loop's own k-step function (custom) or the compute probe (fit), same calls on every
    process; only the chief records."""
    import tensorflow as tf

    from distexp.train import profile

    kk = tf.constant(k)
    if ctx.dispatch is not None:
        step = ctx.dispatch.step
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


def ps_run(ctx, job_dir: Path, chief: bool, step_ms):
    """Under ps the step runs on a worker against variables on the parameter servers, so the
    parts are probed where they happen: input and sync (PS traffic) by calls scheduled on a
    worker, each net of an empty scheduled call (the schedule/fetch round trip); compute on the
    coordinator, on a local copy of the model and optimizer (no parameter server involved; on
    this machine the same CPU as the workers, on a cluster the coordinator's hardware)."""
    from distexp.figures import breakdown

    d = ctx.dispatch
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
    ms = _scheduled_ms(coord, iterator, variables, n)
    floor = ms.pop("empty")
    compute = _local_compute_ms(ctx, n)
    # The loop's step time under ps is a window's time over its steps, which run concurrently on
    # the workers: one worker spends `workers` times that on each of its steps.
    per_worker = None if step_ms is None else step_ms * d.workers
    return breakdown.split(per_worker, max(0.0, ms["input"] - floor), compute,
                           max(0.0, ms["sync"] - floor))


def _scheduled_ms(coord, iterator, variables, n: int) -> Dict[str, float]:
    """ps: the median ms of an empty, an input and a parameter-server traffic call scheduled on a
    worker, over n rounds after the warm-up."""
    import statistics

    import tensorflow as tf

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
    times = {k: [] for k in calls}
    for i in range(WARMUP + n):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            if i >= WARMUP:
                times[name].append(time.perf_counter() - t0)
    return {k: 1000.0 * statistics.median(v) for k, v in times.items()}


def _local_compute_ms(ctx, n: int) -> Optional[float]:
    """ps: forward + backward + optimizer at the global batch on a copy of the model held by the
    coordinator (keras.models.clone_model; None when the model cannot be cloned)."""
    import statistics

    import keras
    import tensorflow as tf

    try:
        model = keras.models.clone_model(ctx.model)
        optimizer = ctx.optimizer.__class__.from_config(ctx.optimizer.get_config())
        optimizer.build(model.trainable_variables)
    except Exception as ex:  # noqa: BLE001  (a subclassed user model, a wrapped optimizer)
        ctx.reporter.print(f"step time split: compute not measured under ps ({type(ex).__name__}: "
                           f"{ex})")
        return None
    probes = Probes(tf.distribute.get_strategy(), ctx.task, model, optimizer, ctx.global_batch)
    x, y = next(iter(ctx.train_ds))
    one = tf.constant(1)
    times = {"empty": [], "compute": []}
    for i in range(WARMUP + n):
        t0 = time.perf_counter()
        float(probes.empty(one))
        t1 = time.perf_counter()
        float(probes.compute(x, y, one))
        if i >= WARMUP:
            times["empty"].append(t1 - t0)
            times["compute"].append(time.perf_counter() - t1)
    return max(0.0, 1000.0 * (statistics.median(times["compute"]) - statistics.median(times["empty"])))
