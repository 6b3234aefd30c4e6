"""What both loops share: the per-example loss, the distributed evaluation, the loop's inputs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Tuple


@dataclass
class Context:
    cfg: Any
    strategy: Any
    model: Any
    optimizer: Any
    train_ds: Any          # tf.data at the global batch, repeated
    eval_ds: Any           # tf.data at the global batch, one pass
    global_batch: int
    steps_per_epoch: int
    epochs: int
    reporter: Any          # distexp.progress.Reporter


def per_example_loss(labels, logits):
    import tensorflow as tf

    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(labels, tf.int32),
                                                          logits=tf.cast(logits, tf.float32))


def correct_count(labels, logits):
    import tensorflow as tf

    pred = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return tf.reduce_sum(tf.cast(tf.equal(pred, tf.cast(labels, tf.int32)), tf.float32))


def make_evaluate(strategy, model, eval_ds) -> Callable[[], Tuple[float, float]]:
    """(mean loss, accuracy) over every eval example, exactly: sums and counts are all-reduced,
    so replicas that get a short or empty last batch are weighted correctly."""
    import tensorflow as tf

    dist = strategy.experimental_distribute_dataset(eval_ds)

    def replica_fn(x, y):
        logits = model(x, training=False)
        return (tf.reduce_sum(per_example_loss(y, logits)), correct_count(y, logits),
                tf.cast(tf.shape(y)[0], tf.float32))

    @tf.function(reduce_retracing=True)
    def step(x, y):
        out = strategy.run(replica_fn, args=(x, y))
        return [strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for v in out]

    def evaluate():
        loss = correct = count = 0.0
        for x, y in dist:
            l, c, n = step(x, y)
            loss += float(l)
            correct += float(c)
            count += float(n)
        return loss / count, correct / count

    return evaluate
