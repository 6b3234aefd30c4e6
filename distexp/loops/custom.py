"""The custom distributed loop: strategy.run over a distributed iterator, the loss averaged over
the *global* batch (tf.nn.compute_average_loss), replica results summed with strategy.reduce.
Checkpoints and resume: distexp.checkpoints (every worker takes part in a save).

Steps per call (`steps_per_execution` = k): with k = 1 the batch is taken from the distributed
iterator on the host (as the TF tutorial does) and that wait is timed as input time; with k > 1 one
`tf.function` call runs k steps in a `tf.range` loop over the iterator (as TF Model Garden's Orbit
does) and returns the k per-step losses stacked, so steps.csv still has every step's loss. A call
never crosses an epoch's end or a checkpoint.
`dataset.on_device`: one batch is fetched once and trained on at every step (no input at all).
"""
from __future__ import annotations

import time

from distexp.checkpoints import Checkpoints
from distexp.loops.common import Context, correct_count, per_example_loss


def train(ctx: Context) -> None:
    import tensorflow as tf

    strategy, model, optimizer = ctx.strategy, ctx.model, ctx.optimizer
    G = ctx.global_batch
    cfg = ctx.cfg
    variables = model.trainable_variables
    scaled = hasattr(optimizer, "scale_loss") and cfg.precision == "mixed_float16"
    rep = ctx.reporter

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

    def run_steps(iterator, fixed, n):
        """n steps -> (their losses on the host, correct count)."""
        if fixed is not None:  # on-device data: the same batch, one call per step
            losses, correct = [], 0.0
            for _ in range(n):
                loss, c = train_step(*fixed)
                losses.append(float(loss))
                correct += float(c)
            return losses, correct
        if n == 1:
            t0 = time.perf_counter()
            x, y = next(iterator)
            rep.input_wait(time.perf_counter() - t0)
            loss, correct = train_step(x, y)
            return [float(loss)], float(correct)  # fetch: the step has finished on every replica
        loss, correct = train_steps(iterator, tf.constant(n))
        return [float(v) for v in loss.numpy()], float(correct)

    # The step count lives outside the strategy: each worker keeps its own (they agree).
    step_var = tf.Variable(0, dtype=tf.int64, trainable=False, name="distexp_step")
    ckpts = Checkpoints(ctx.cfg, model=model, optimizer=optimizer, step=step_var, chief=rep.chief,
                        steps_per_epoch=ctx.steps_per_epoch, say=rep.print,
                        logger=rep.logger)
    start = ckpts.restore()
    total = ctx.epochs * ctx.steps_per_epoch
    rep.resume_at(start)
    # The data order depends only on the step: skip what the restored checkpoint already trained.
    train_ds = ctx.train_ds.skip(start) if start else ctx.train_ds
    iterator = iter(strategy.experimental_distribute_dataset(train_ds))
    fixed = next(iterator) if cfg.dataset.on_device else None
    k = int(cfg.steps_per_execution)
    every = ckpts.every if ckpts.saves else 0
    step = start
    try:
        for epoch in range(start // ctx.steps_per_epoch + 1, ctx.epochs + 1):
            rep.start_epoch(epoch)
            first = step - (epoch - 1) * ctx.steps_per_epoch
            rep.step_in_epoch = first
            loss_sum = correct_sum = 0.0
            end = epoch * ctx.steps_per_epoch
            while step < end:
                n = min(k, end - step, (every - step % every) if every else k)
                losses, correct = run_steps(iterator, fixed, n)
                rep.end_step(losses, steps=n)
                loss_sum += sum(losses)
                correct_sum += correct
                step += n
                if ckpts.after_step(step, last=step == total, since=step - n):
                    rep.meter.exclude_since_last_step()
            n = ctx.steps_per_epoch - first
            rep.end_epoch(loss_sum / n, correct_sum / (n * G))
        if start >= total:
            rep.print(f"resume: the checkpoint is at the last step ({total}); nothing left to train")
            rep.start_epoch(ctx.epochs)
            rep.end_epoch(float("nan"), float("nan"))
    finally:
        ckpts.close()
