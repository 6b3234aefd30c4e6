"""The custom distributed loop: strategy.run over a distributed iterator, the loss averaged over
the *global* batch (tf.nn.compute_average_loss), replica results summed with strategy.reduce.

Steps per call (`steps_per_execution` = k): with k = 1 the batch is taken from the distributed
iterator on the host (as the TF tutorial does) and that wait is timed as input time; with k > 1 one
`tf.function` call runs k steps in a `tf.range` loop over the iterator (as TF Model Garden's Orbit
does) and returns the k per-step losses stacked, so steps.csv still has every step's loss.
`dataset.on_device`: one batch is fetched once and trained on at every step (no input at all).
"""
from __future__ import annotations

import time

from distexp.loops.common import Context, correct_count, per_example_loss


def train(ctx: Context) -> None:
    import tensorflow as tf

    strategy, model, optimizer = ctx.strategy, ctx.model, ctx.optimizer
    G = ctx.global_batch
    cfg = ctx.cfg
    variables = model.trainable_variables
    scaled = hasattr(optimizer, "scale_loss") and cfg.precision == "mixed_float16"

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(per_example_loss(y, logits), global_batch_size=G)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
            # mixed_float16: scale the loss so small float16 gradients do not underflow;
            # LossScaleOptimizer.apply_gradients unscales them (and skips non-finite steps).
            target = optimizer.scale_loss(loss) if scaled else loss
        grads = tape.gradient(target, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss, correct_count(y, logits)

    if cfg.jit_compile:
        replica_step = tf.function(replica_step, jit_compile=True)

    def one_step(x, y):
        loss, correct = strategy.run(replica_step, args=(x, y))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

    @tf.function
    def train_step(x, y):
        return one_step(x, y)

    @tf.function
    def train_steps(iterator, n):
        """n steps in one call: the per-step losses stacked, the correct counts summed."""
        losses = tf.TensorArray(tf.float32, size=n)
        correct = tf.constant(0.0)
        for i in tf.range(n):
            loss, c = one_step(*next(iterator))
            losses = losses.write(i, loss)
            correct += c
        return losses.stack(), correct

    dist = strategy.experimental_distribute_dataset(ctx.train_ds)
    iterator = iter(dist)
    fixed = next(iterator) if cfg.dataset.on_device else None
    k = int(cfg.steps_per_execution)
    rep = ctx.reporter
    for epoch in range(1, ctx.epochs + 1):
        rep.start_epoch(epoch)
        loss_sum = correct_sum = 0.0
        done = 0
        while done < ctx.steps_per_epoch:
            n = min(k, ctx.steps_per_epoch - done)
            if n == 1:
                if fixed is None:
                    t0 = time.perf_counter()
                    x, y = next(iterator)
                    rep.input_wait(time.perf_counter() - t0)
                else:
                    x, y = fixed
                loss, correct = train_step(x, y)
                losses = [float(loss)]  # fetch: the step has finished on every replica
            elif fixed is None:
                loss, correct = train_steps(iterator, tf.constant(n))
                losses = [float(v) for v in loss.numpy()]
            else:
                loss, correct = _repeat_fixed(train_step, fixed, n)
                losses = loss
            rep.end_step(losses, steps=n)
            loss_sum += sum(losses)
            correct_sum += float(correct)
            done += n
        rep.end_epoch(loss_sum / ctx.steps_per_epoch,
                      correct_sum / (ctx.steps_per_epoch * G))


def _repeat_fixed(train_step, fixed, n):
    """On-device data with several steps per call is n plain calls on the same batch."""
    losses, correct = [], 0.0
    for _ in range(n):
        loss, c = train_step(*fixed)
        losses.append(float(loss))
        correct += float(c)
    return losses, correct
