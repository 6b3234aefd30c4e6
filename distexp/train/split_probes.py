"""The step-time split's compute and sync probes (definitions in distexp.figures.breakdown;
the phase that runs them is distexp.train.probe_phase).

- one replica: compute is the training's own one-step function (distexp.train.step.Step.one,
  already traced when the loop ran one step per call; it has no all-reduce), sync is 0 and no
  probe runs. `loop=fit` (no Step): the compute probe below.
- several replicas: compute is the model's step with the optimizer's all-reduce bypassed (each
  replica applies its own gradient), sync is the optimizer's own all-reduce call
  (`_all_reduce_sum_gradients`, what Keras' TFOptimizer calls in apply) on one tensor per
  trainable variable, of its shape and dtype, made on each replica's device as the gradients
  are: the same cross-device ops, the same destinations, the same collective ops on the same
  devices (tests/train/test_split_probes.py compares the traced graphs).
Each is net of an empty call of the same shape (the dispatch the loop pays once per call, which
belongs to `other`), the median over rounds of (probe - empty) in the same round.

All written in plain TF (tf.while_loop, autograph=False): autograph's conversion costs ~0.2-0.7 s a
function on a loaded 2-core machine, more than the tracing itself.
"""
from __future__ import annotations

import statistics
import time
from typing import Dict, List, Tuple

from distexp.figures.breakdown import median_se
from distexp.train.input_probe import local_sum
from distexp.train.step import replica_update, traced

WARMUP = 1   # untimed rounds (a probe's first call traces it)


def reducer(optimizer):
    """The optimizer whose apply all-reduces the gradients: mixed_float16's LossScaleOptimizer
    applies through its inner optimizer."""
    return getattr(optimizer, "inner_optimizer", None) or optimizer


class Probes:
    """The measuring functions of one job, built on its strategy, model and optimizer.
    `one_step`: the training's own one-step function (the custom loop's), used as the compute
    probe when there is one replica. Nothing is traced before its first call."""

    def __init__(self, strategy, task, model, optimizer, global_batch: int, *, one_step=None,
                 jit: bool = False, xla_step: str = "split"):
        import tensorflow as tf

        self.strategy = strategy
        self.replicas = int(strategy.num_replicas_in_sync)
        variables = model.trainable_variables
        self.variables = variables
        self.one_step = one_step if self.replicas == 1 else None
        self.empty = tf.function(_empty_fn(strategy), autograph=False)
        self.empty_call = tf.function(lambda x, y: tf.constant(0.0), autograph=False)
        local = _local_step_fn(task, model, optimizer, global_batch, jit, xla_step)
        self.compute = traced(_compute_fn(strategy, optimizer, local))
        self.sync = tf.function(_sync_fn(strategy, optimizer, variables), autograph=False)

    def measure(self, batch, k: int, calls: int) -> Dict[str, Tuple[float, float]]:
        """{"compute", "sync"}: (ms per step, its standard error) on `batch` (on the replicas'
        devices), each the median over `calls` rounds of the probe's call net of the empty call
        made in the same round (a call preempted by another process does not move it). The
        probes are interleaved, one call of each per round, so they see the same load. The
        k-step probes run k steps a call (as the loop does); the one-step function one."""
        import tensorflow as tf

        x, y = batch
        kk = tf.constant(k)
        if self.one_step is not None:
            rounds = [(lambda: self.empty_call(x, y), lambda: self.one_step(x, y), 1)]
        else:
            rounds = [(lambda: self.empty(kk), lambda: self.compute(x, y, kk), k)]
        if self.replicas > 1:
            # what the sync probe all-reduces: a tensor per trainable variable, of its shape and
            # dtype (a sum's cost does not depend on the values), on each replica's device
            grads = self.strategy.experimental_distribute_values_from_function(
                lambda _: [tf.zeros(v.shape, v.dtype) for v in self.variables])
            rounds.append((None, lambda: self.sync(grads, kk), k))
        net: Dict[str, List[float]] = {"compute": [], "sync": []}
        for i in range(WARMUP + calls):
            empty_s = 0.0
            for (empty, probe, n), part in zip(rounds, ("compute", "sync")):
                if empty is not None:
                    t0 = time.perf_counter()
                    _wait(empty())
                    empty_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                _wait(probe())
                if i >= WARMUP:
                    net[part].append(1000.0 * (time.perf_counter() - t0 - empty_s) / n)
        out = {"sync": (0.0, 0.0)}  # one replica: nothing to all-reduce
        for part, samples in net.items():
            if samples:
                out[part] = (max(0.0, statistics.median(samples)), median_se(samples))
        return out


def _wait(result) -> None:
    """Until the call's first output reached the host (as the loop's fetch of its loss)."""
    import tensorflow as tf

    float(tf.nest.flatten(result)[0])


def _local_step_fn(task, model, optimizer, global_batch: int, jit: bool = False,
                   xla_step: str = "split"):
    """A replica's step with its own gradient: the training's (distexp.train.step.replica_update,
    XLA as there) with the task's loss over the global batch size (no all-reduced weight: no
    collective), summed with its metric sums and units into one number to wait for."""
    import tensorflow as tf

    update = replica_update(task, model, optimizer, global_batch, weight="batch", jit=jit,
                            xla_step=xla_step)

    def local_step(x, y):
        loss, flat, units = update(x, y)
        return tf.add_n([loss, units] + [tf.reduce_sum(v) for v in flat])

    return local_step


def _compute_fn(strategy, optimizer, local_step):
    """The compute probe: k steps on every replica, each applying its own gradient."""
    import tensorflow as tf

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


def _sync_fn(strategy, optimizer, variables):
    """The sync probe: k calls of the optimizer's own gradient all-reduce."""
    import tensorflow as tf

    reduce_gradients = reducer(optimizer)._all_reduce_sum_gradients

    def all_reduce(*grads):
        # identity: made on this replica's device, as a gradient is (an argument tensor may
        # carry no device, and a reduction's destination is its value's device)
        reduced = reduce_gradients([(tf.identity(g), v) for g, v in zip(grads, variables)])
        return tf.add_n([tf.reshape(g, [-1])[0] for g, _ in reduced])  # waits for all of it

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
