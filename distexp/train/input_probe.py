"""The step-time split's input probe: the training pipeline's own rate (distexp.train.probe_phase
runs it first in the probe phase; definition in distexp.figures.breakdown).

Fetched back to back, with nothing else consuming, once the buffers that filled while training
paused are drained: a prefetch buffer's batches come at once, and only then does each fetch wait
for the pipeline. Fetched as the loop fetches: on the host (the custom loop at k = 1), or k batches
in one tf.function call (`InGraph`: the k-step function, Keras' train function).
"""
from __future__ import annotations

import time
from typing import List

# the input probe: back-to-back fetches until the second half of its time holds this many, its
# first and second quarters agree (nothing left in a buffer), and at least MIN_S has passed;
# never past MAX_S (then the latest half is taken as it is)
INPUT_FETCHES = 10
INPUT_MIN_S = 0.1
INPUT_MAX_S = 3.0


def pipeline_ms(iterator, clock=time.perf_counter, batches: int = 1) -> float:
    """ms per batch the training pipeline produces on its own: the median of `pipeline_samples`."""
    import statistics

    return statistics.median(pipeline_samples(iterator, clock, batches))


def pipeline_samples(iterator, clock=time.perf_counter, batches: int = 1) -> List[float]:
    """ms per batch of each timed back-to-back fetch, once the pipeline's buffers are drained.

    Nothing else consumes meanwhile. A prefetch buffer (the pipeline's, a parallel map's, the
    distributed iterator's) refilled while evaluation ran and the probes were built; its batches
    come at once, then each fetch waits for the pipeline to make one. Draining takes little time
    (buffered fetches are fast), so the fetches timed are those that start in the second half of
    the probe's time, and the probe goes on until that half holds INPUT_FETCHES fetches and its
    first quarter is not faster than its last (a buffer still draining would make it so).
    `batches`: batches one next() takes (the figure is per batch)."""
    import statistics

    fetches: List[tuple] = []  # (start since t0, seconds)
    t0 = clock()
    while True:
        a = clock()
        next(iterator)
        b = clock()
        fetches.append((a - t0, b - a))
        elapsed = b - t0
        window = [d for s, d in fetches if s >= elapsed / 2]
        if elapsed > INPUT_MAX_S and window:
            break
        if elapsed < INPUT_MIN_S or len(window) < max(4, -(-INPUT_FETCHES // batches)):
            continue
        q = len(window) // 4
        if statistics.median(window[:q]) >= 0.8 * statistics.median(window[-q:]):
            break
    return [1000.0 * d / batches for d in window]


class InGraph:
    """An iterator whose next() takes k batches inside one tf.function call, as the loop's k-step
    function (and Keras' train function) does: no Python per replica, one dispatch per k."""

    def __init__(self, strategy, iterator, k: int):
        import tensorflow as tf

        def first(*parts):  # a value of the batch on its replica: the fetch cannot be pruned
            return tf.cast(tf.reshape(tf.nest.flatten(parts)[-1], [-1])[0], tf.float32)

        def take(it, k):
            return tf.while_loop(
                lambda i, d: i < k,
                lambda i, d: (i + 1, d + local_sum(strategy, strategy.run(
                    first, args=tuple(next(it))))),
                (tf.constant(0), tf.constant(0.0)))[1]
        take = tf.function(take, autograph=False)  # plain TF: no AST conversion to pay

        self.take, self.iterator, self.k = take, iterator, tf.constant(k)

    def __next__(self):
        return float(self.take(self.iterator, self.k))


def local_sum(strategy, value):
    """This process's replicas' values added on the host side of the graph (no collective)."""
    import tensorflow as tf

    return tf.add_n(list(strategy.experimental_local_results(value)))
