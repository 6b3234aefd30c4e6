"""One training step for every strategy, and the two ways it is dispatched (Orbit's split).

- `forward_backward`: a replica's forward and backward pass, the only one (the step, the parity's
  `gradient_norm`, the compute probe): the task's loss divided by the *global* weight (see
  distexp.tasks.base), `optimizer.scale_loss` (identity unless mixed_float16's
  LossScaleOptimizer, which unscales in apply_gradients and skips non-finite steps), the task's
  training metrics as (sum, count). `replica_update` (`replica_step`, one per job): then the
  optimizer's update, which sums the gradients over replicas; with jit_compile, XLA compiles all
  but the update (`xla_step=split`), or all of it (`xla_step=whole`, GPU replicas and one-replica
  strategies).
- `steps(iterator, n)`: n replica steps in one `tf.function` call, in a `tf.while_loop`
  (Orbit's standard_runner), returning the n per-step losses stacked, so every step's loss still
  reaches steps.csv; metric sums and units (tokens) summed over the n steps.
- every function here is traced as plain TF, without autograph (distexp.train.tracing.traced).
- `SyncDispatch`: `strategy.run` on a distributed iterator (one_device, mirrored, central,
  multiworker). With n = 1 the batch is taken on the host and that wait is timed as input. On
  accelerator replicas (GPU, TPU) it queues a window of calls (`WINDOW_STEPS` steps) and fetches
  their results to the host once (`Step.fetch`): a fetch per call would make the host wait for
  the device after every call, and the device wait a launch for the next one. On CPU replicas a
  call runs synchronously anyway: one call per fetch, as before.
- `PSDispatch`: the same `steps` function scheduled on the workers by a ClusterCoordinator
  (per-worker datasets, worker i reads shard i), joined every window; steps counted by a
  tf.Variable on the ps that each call increments (Keras' optimizer.iterations undercounts
  under ps, docs/facts.md#ps).
The outer loop (epochs, evaluation, checkpoints, reporting) is distexp.train.loops.custom, once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from distexp.train.tracing import traced

PS_WINDOW = 10  # calls scheduled between joins under ps (at least 2 per worker)
WINDOW_STEPS = 10  # accelerator replicas: steps queued per host fetch (meter.WINDOW's size)


@dataclass
class Steps:
    """What n steps returned, on the host."""

    losses: List[float]
    sums: List[float] = field(default_factory=list)   # [sum, count] per train metric, flat
    units: Optional[float] = None                      # e.g. real target tokens
    launch_s: Optional[float] = None  # a window: host seconds spent queueing its calls


def replica_loss(task, labels, outputs, global_batch: int, weight: str = "global"):
    """This replica's share of the global mean loss (exact: see distexp.tasks.base). `weight`
    "batch": the task's sum over the global batch size, whatever the task counts (no
    all-reduce: the compute probe's, distexp.train.split_probes)."""
    import tensorflow as tf

    out = task.loss(labels, outputs)
    if not isinstance(out, (tuple, list)):  # the task reduced it itself: taken as is
        return tf.cast(out, tf.float32)
    total, count = (tf.cast(v, tf.float32) for v in out)
    if weight == "batch" or getattr(task, "unit_weight", False):
        return total / float(global_batch)
    ctx = tf.distribute.get_replica_context()
    return total / tf.maximum(ctx.all_reduce(tf.distribute.ReduceOp.SUM, count), 1.0)


WEIGHTS = ("global", "batch")  # forward_backward's `weight`


def forward_backward(task, model, optimizer, global_batch: int, *, weight: str = "global",
                     scale: bool = True, jit: bool = False):
    """A replica's forward and backward pass, distexp.train's one GradientTape (held to one by
    tests/project/test_layout.py): (x, y) -> (loss, gradients, flat metric sums, units). loss:
    the task's (`replica_loss`, `weight`) plus the model's own losses; gradients of
    `optimizer.scale_loss(loss)` (`scale`) or of the loss itself (False: `optimizer` unused);
    `jit`: XLA-compiled, `traced(..., jit_compile=True)`."""
    import tensorflow as tf

    if weight not in WEIGHTS:
        raise ValueError(f"weight: received {weight!r}; valid: {', '.join(WEIGHTS)}")
    names = tuple(task.train_metrics)
    counts_units = getattr(task, "units", None) is not None
    variables = model.trainable_variables

    def forward_backward(x, y):
        with tf.GradientTape() as tape:
            outputs = model(x, training=True)
            loss = replica_loss(task, y, outputs, global_batch, weight)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            scaled = optimizer.scale_loss(loss) if scale else loss
        grads = tape.gradient(scaled, variables)
        stats = task.metrics(y, outputs)
        flat = [tf.cast(v, tf.float32) for m in names for v in stats[m]]
        units = task.units_in(y) if counts_units else 0.0
        return loss, grads, flat, tf.cast(units, tf.float32)

    return traced(forward_backward, jit_compile=True) if jit else forward_backward


def replica_update(task, model, optimizer, global_batch: int, *, weight: str = "global",
                   jit: bool = False, xla_step: str = "split"):
    """A replica's training step (the step's, the compute probe's), (x, y) -> (loss, flat metric
    sums, units): `forward_backward`, then the optimizer's update. With `jit`, xla_step=split:
    XLA compiles forward and backward, not the update: it sums the replicas' gradients (a
    merge_call), which TensorFlow refuses inside a nested tf.function. xla_step=whole (Model
    Garden's shape): the whole replica step, update included, in one XLA function inside
    strategy.run; on all-GPU replicas TensorFlow skips that merge_call (one_device and
    one-replica mirrored compile it on a CPU too)."""
    variables = model.trainable_variables
    compute = forward_backward(task, model, optimizer, global_batch, weight=weight,
                               jit=jit and xla_step == "split")

    def replica_step(x, y):
        loss, grads, flat, units = compute(x, y)
        optimizer.apply_gradients(zip(grads, variables))
        return loss, flat, units

    return traced(replica_step, jit_compile=True) if jit and xla_step == "whole" else replica_step


class Step:
    """The replica step and the k-step function of one job (built once, traced once)."""

    def __init__(self, strategy, task, model, optimizer, global_batch: int, jit: bool = False,
                 local_replicas: bool = True, xla_step: str = "split"):
        import tensorflow as tf

        self.strategy, self.task, self.global_batch = strategy, task, global_batch
        self.names = tuple(task.train_metrics)
        self.counts_units = getattr(task, "units", None) is not None
        # where the replicas' losses and metric sums are summed: the first replica's GPU, so a
        # call's results stay on the device until fetched (strategy.reduce's default is the host;
        # `local_replicas` False: ps schedules the step onto remote workers, the coordinator reduces)
        first = (getattr(strategy.extended, "worker_devices", None) or [None])[0]
        self.on_gpu = first if local_replicas and first \
            and tf.DeviceSpec.from_string(first).device_type == "GPU" else None
        self.replica_step = replica_update(task, model, optimizer, global_batch, jit=jit,
                                           xla_step=xla_step)
        self.one = traced(self._one_step)
        self.steps = traced(self._steps)

    def _steps(self, iterator, n):
        """n steps in one call (a tf.while_loop, as Orbit's standard_runner), their losses stacked;
        metric sums and units summed over the n steps."""
        import tensorflow as tf

        def body(i, losses, sums, units):
            loss, flat, u = self._one_step(*next(iterator))
            return i + 1, losses.write(i, loss), [a + b for a, b in zip(sums, flat)], units + u

        start = (tf.constant(0), tf.TensorArray(tf.float32, size=n),
                 [tf.constant(0.0) for _ in range(2 * len(self.names))], tf.constant(0.0))
        _, losses, sums, units = tf.while_loop(lambda i, *_: i < n, body, start,
                                               maximum_iterations=n)  # as autograph sets it
        return losses.stack(), sums, units

    def _one_step(self, x, y):
        import tensorflow as tf

        loss, flat, units = self.strategy.run(self.replica_step, args=(x, y))

        def total(v):
            return self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)

        if self.on_gpu is None:
            return total(loss), [total(v) for v in flat], total(units)
        with tf.device(self.on_gpu):  # reduced onto the host, a call would wait for its step
            return total(loss), [total(v) for v in flat], total(units)

    def host(self, losses, sums, units) -> Steps:
        vals = losses.numpy() if hasattr(losses, "numpy") else losses
        losses = [float(v) for v in (vals.reshape(-1) if hasattr(vals, "reshape") else [vals])]
        return Steps(losses, [float(s) for s in sums],
                     float(units) if self.counts_units else None)

    def fetch(self, results) -> Steps:
        """Several calls' results (each `(losses, sums, units)`, still on the device) on the host
        with one transfer: packed into one vector on the device, then fetched once."""
        import tensorflow as tf

        parts, sizes = [], []
        for losses, sums, units in results:
            losses = tf.reshape(losses, [-1])
            sizes.append(int(losses.shape[0]))
            parts += [losses, tf.stack([*sums, units])]
        flat = tf.concat(parts, 0).numpy().tolist()  # the one host sync
        out, at, width = [], 0, 2 * len(self.names) + 1
        for size in sizes:
            vals = flat[at + size: at + size + width]
            out.append(Steps(flat[at:at + size], vals[:-1],
                             vals[-1] if self.counts_units else None))
            at += size + width
        return _merge(out)


def dispatcher(record):
    """The dispatcher class of a strategy (its record's `coordinated`): ClusterCoordinator.schedule
    onto remote workers (ps), else strategy.run on this process's replicas. What a ps job does
    differently (who runs the loop, where evaluation and the probes run) is asked of it."""
    return PSDispatch if record.coordinated else SyncDispatch


class SyncDispatch:
    """strategy.run on a distributed iterator; the step count lives outside the strategy (each
    multiworker worker keeps its own, they agree)."""

    # Steps run on this process's replicas: every process of the job runs the loop; evaluation,
    # the parity probe and the step-time probes distribute over the strategy.
    local_replicas = True
    window = workers = 1  # one k-step call at a time, by this process (autotune.Schedule.begin)

    @classmethod
    def start(cls, step: Step, ctx, schedule) -> "SyncDispatch":
        """The dispatcher of the custom loop's Context `ctx`."""
        window = WINDOW_STEPS if accelerated(step.strategy) else 1
        if ctx.reporter.log_every:  # a progress line at least every log_every steps
            window = min(window, ctx.reporter.log_every)
        return cls(step, ctx.train_ds, schedule=schedule, on_device=bool(ctx.cfg.dataset.on_device),
                   input_wait=ctx.reporter.input_wait, window_steps=window)

    def __init__(self, step: Step, train_ds, *, schedule, on_device: bool, input_wait,
                 window_steps: int = 1):
        """`window_steps` > 1: calls are queued and fetched once per window of about that many
        steps (accelerator replicas); 1: every call is fetched (CPU replicas)."""
        import tensorflow as tf

        self.step, self.train_ds, self.schedule = step, train_ds, schedule
        self.on_device, self.input_wait = on_device, input_wait
        self.window_steps = window_steps
        self.step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="distexp_step")
        self.iterator = self.fixed = None

    @property
    def k(self) -> int:
        """Steps per call: the schedule's (distexp.train.autotune, k's one owner)."""
        return self.schedule.k

    @property
    def max_steps(self) -> int:
        """Steps in the next call, or window of k-step calls (k may change while
        steps_per_execution=auto tunes it; its warm-up runs one call at a time)."""
        k = self.k
        if self.window_steps <= k or self.schedule.warmup_left():
            return k
        return self.window_steps // k * k

    def begin(self, start: int) -> None:
        # The data order depends only on the step: skip what a restored checkpoint trained.
        ds = self.train_ds.skip(start) if start else self.train_ds
        self.iterator = iter(self.step.strategy.experimental_distribute_dataset(ds))
        self.fixed = next(self.iterator) if self.on_device else None

    def run(self, n: int) -> Steps:
        if self.window_steps > 1:
            t0 = time.perf_counter()
            sizes = [1] * n if self.fixed is not None else _sizes(n, self.k)
            queued = [self._call(s) for s in sizes]
            launch = time.perf_counter() - t0
            out = self.step.fetch(queued)  # fetched: every call finished on every replica
            out.launch_s = launch
            return out
        if self.fixed is not None:  # on-device data: the same batch, one call per step
            out = [self.step.host(*self.step.one(*self.fixed)) for _ in range(n)]
            return _merge(out)
        return self.step.host(*self._call(n))  # fetched: finished on every replica

    def _call(self, n: int):
        """One call of n steps, queued; its results stay where the step left them."""
        import tensorflow as tf

        if self.fixed is not None:  # on-device data: the same batch, one call per step
            return self.step.one(*self.fixed)
        if n == 1 and self.k == 1:  # k > 1: the k-step function (traced in warm-up) runs it
            t0 = time.perf_counter()
            x, y = next(self.iterator)
            self.input_wait(time.perf_counter() - t0)
            return self.step.one(x, y)
        return self.step.steps(self.iterator, tf.constant(n))


class PSDispatch:
    """ClusterCoordinator.schedule of the k-step function; joins every window of calls."""

    # Steps run on remote workers: only the coordinator runs the loop (it keeps the checkpoints)
    # and evaluates in-process; the probes are scheduled (distexp.train.probe_phase.ps_run).
    local_replicas = False
    window_steps = 1  # its window is of k-step calls (`window`)

    @classmethod
    def start(cls, step: Step, ctx, schedule) -> "PSDispatch":
        """The dispatcher of the custom loop's Context `ctx` (each worker reads its own shard)."""
        return cls(step, ctx.cfg, ctx.data, ctx.global_batch, schedule=schedule,
                   workers=ctx.workers)

    def __init__(self, step: Step, cfg, data, global_batch: int, *, schedule, workers: int):
        import tensorflow as tf

        from distexp.data import loaders

        strategy = step.strategy
        self.step, self.schedule = step, schedule
        self.coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

        def dataset_fn():
            index = tf.distribute.coordinator.experimental_get_current_worker_index()
            train, _ = loaders.pipelines(cfg, data, global_batch, shard=(workers, index))
            return train

        self.dataset_fn = dataset_fn
        with strategy.scope():
            self.step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="distexp_step")
        counter = self.step_var

        def scheduled(iterator, n):
            out = step.steps.python_function(iterator, n)
            counter.assign_add(tf.cast(n, tf.int64))
            return out

        self.scheduled = traced(scheduled)
        self.window = max(PS_WINDOW, 2 * workers)  # k-step calls per join
        self.workers = workers
        self.iterator = None

    @property
    def k(self) -> int:
        """Steps per scheduled call: the schedule's (distexp.train.autotune, k's one owner)."""
        return self.schedule.k

    @property
    def max_steps(self) -> int:
        """Steps in the next window (k may change while steps_per_execution=auto tunes it)."""
        return self.window * self.k

    def begin(self, start: int) -> None:
        self.iterator = iter(self.coordinator.create_per_worker_dataset(self.dataset_fn))

    def run(self, n: int) -> Steps:
        import tensorflow as tf

        sizes = _sizes(n, self.k)
        before = int(self.step_var.numpy())
        results = [self.scheduled.via(lambda scheduled, s=s: self.coordinator.schedule(
                       scheduled, args=(self.iterator, tf.constant(s)))) for s in sizes]
        self.coordinator.join()
        finished = int(self.step_var.numpy()) - before
        if finished != n:
            from distexp.errors import UserFailure

            if finished > n:  # ClusterCoordinator re-ran a lost worker's calls on another one
                raise UserFailure(f"ps: a worker stopped answering during a window of {n} steps; "
                                  f"TensorFlow re-ran its calls on another worker ({finished} "
                                  "steps completed), so this run's figures are not valid")
            raise RuntimeError(f"ps: {n} steps scheduled, {finished} completed")
        return _merge([self.step.host(*r.fetch()) for r in results])


def accelerated(strategy) -> bool:
    """Whether the strategy's replicas on this process are GPUs or TPUs."""
    import tensorflow as tf

    devices = getattr(strategy.extended, "worker_devices", ())
    return any(tf.DeviceSpec.from_string(d).device_type in ("GPU", "TPU") for d in devices)


def _sizes(n: int, k: int) -> List[int]:
    """n steps as calls of k steps (the last one shorter)."""
    return [k] * (n // k) + ([n % k] if n % k else [])


def _merge(parts: List[Steps]) -> Steps:
    losses = [v for p in parts for v in p.losses]
    sums = [sum(vals) for vals in zip(*(p.sums for p in parts))] if parts[0].sums else []
    units = None if parts[0].units is None else sum(p.units for p in parts)
    return Steps(losses, sums, units)


def gradient_norm(step: Step, model, batch) -> float:
    """The global norm of the first step's gradient as the optimizer would apply it (summed over
    replicas, loss scaling undone), without applying it: what `distexp.parity` compares."""
    import tensorflow as tf

    strategy, variables = step.strategy, model.trainable_variables
    compute = forward_backward(step.task, model, None, step.global_batch, scale=False)

    def replica(x, y):
        grads = compute(x, y)[1]
        grads = [tf.cast(g, tf.float32) if g is not None else tf.zeros_like(v, tf.float32)
                 for g, v in zip(grads, variables)]
        ctx = tf.distribute.get_replica_context()
        return tf.linalg.global_norm(ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads))

    norm = traced(lambda x, y: strategy.run(replica, args=(x, y)))(*batch)
    values = strategy.experimental_local_results(norm)
    return float(values[0])


def metric_figures(names, sums, prefix: str) -> Dict[str, Optional[float]]:
    """{prefix/name: sum / count} from a flat [sum, count, ...] list."""
    return {f"{prefix}/{m}": (sums[2 * i] / sums[2 * i + 1] if sums[2 * i + 1] else None)
            for i, m in enumerate(names)}
