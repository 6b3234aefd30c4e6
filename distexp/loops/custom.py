"""The custom distributed loop: strategy.run over a distributed iterator, the loss averaged over
the *global* batch (tf.nn.compute_average_loss), replica results summed with strategy.reduce.
Checkpoints and resume: distexp.checkpoints (every worker takes part in a save)."""
from __future__ import annotations

from distexp.checkpoints import Checkpoints
from distexp.loops.common import Context, correct_count, per_example_loss


def train(ctx: Context) -> None:
    import tensorflow as tf

    strategy, model, optimizer = ctx.strategy, ctx.model, ctx.optimizer
    G = ctx.global_batch
    variables = model.trainable_variables
    rep = ctx.reporter

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(per_example_loss(y, logits), global_batch_size=G)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss, correct_count(y, logits)

    @tf.function
    def train_step(iterator):
        loss, correct = strategy.run(replica_step, args=next(iterator))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

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
    step = start
    try:
        for epoch in range(start // ctx.steps_per_epoch + 1, ctx.epochs + 1):
            rep.start_epoch(epoch)
            first = step - (epoch - 1) * ctx.steps_per_epoch
            rep.step_in_epoch = first
            loss_sum = correct_sum = 0.0
            for _ in range(first, ctx.steps_per_epoch):
                loss, correct = train_step(iterator)
                loss = float(loss)  # fetch: the step has finished on every replica
                rep.end_step(loss)
                loss_sum += loss
                correct_sum += float(correct)
                step += 1
                if ckpts.after_step(step, last=step == total):
                    rep.meter.exclude_since_last_step()
            n = ctx.steps_per_epoch - first
            rep.end_epoch(loss_sum / n, correct_sum / (n * G))
        if start >= total:
            rep.print(f"resume: the checkpoint is at the last step ({total}); nothing left to train")
            rep.start_epoch(ctx.epochs)
            rep.end_epoch(float("nan"), float("nan"))
    finally:
        ckpts.close()
