"""One evaluation for every strategy: every evaluation example exactly once.

The task returns `{name: (sum, count)}` per batch (the loss as (sum, weight)); sums and counts
are summed over replicas (strategy.reduce SUM) and batches, then divided, so replicas that get a
short or empty last batch are weighted correctly and the figures are exact. Under ps the
coordinator evaluates (the variables are read from the ps): no strategy.run, same task code.
"""
from __future__ import annotations

from typing import Callable, Dict

from distexp import stops


def make_evaluate(task, model, eval_ds, strategy=None, distributed_input_only: bool = False) \
        -> Callable[[], Dict[str, float]]:
    """`strategy`: run each batch on its replicas (split over them when there are several);
    None: evaluate in this process. `distributed_input_only`: the strategy's record says it takes
    its input from a distributed dataset only (a TPU), even with one replica."""
    import tensorflow as tf

    from distexp.train.step import traced

    def replica_fn(x, y):
        return {k: (tf.cast(s, tf.float32), tf.cast(c, tf.float32))
                for k, (s, c) in task.eval_sums(model, x, y).items()}

    # traced once for every batch: the batches' own spec (batch dimension None) is the signature,
    # so the partial last batch does not trace the step a second time (seq2seq's unrolled greedy
    # decoding made that second trace cost seconds)
    if strategy is not None:
        # One replica takes every batch whole: the batches go to strategy.run as they are. A
        # distributed dataset would split each into one part, and its iterator (TensorFlow's
        # MultiDeviceIterator) cost ~0.035 s to create, at every evaluation.
        whole = strategy.num_replicas_in_sync == 1 and not distributed_input_only
        batches = eval_ds if whole else strategy.experimental_distribute_dataset(eval_ds)

        def distributed(x, y):
            out = strategy.run(replica_fn, args=(x, y))
            return tf.nest.map_structure(
                lambda v: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None), out)

        step = traced(distributed, input_signature=list(batches.element_spec))
    else:
        batches = eval_ds
        step = traced(replica_fn, input_signature=list(eval_ds.element_spec))

    def evaluate() -> Dict[str, float]:
        stops.hold("evaluation")  # tests (distexp.stops.HOLD_ENV)
        totals: Dict[str, list] = {}
        for x, y in batches:
            for k, (s, c) in step(x, y).items():
                t = totals.setdefault(k, [0.0, 0.0])
                t[0] += float(s)
                t[1] += float(c)
        return {f"eval/{k}": (s / c if c else float("nan")) for k, (s, c) in totals.items()}

    # how often the step was traced (asked each time: traced() replaces its function when the
    # task needs autograph)
    evaluate.traces = lambda: step.experimental_get_tracing_count()
    return evaluate
