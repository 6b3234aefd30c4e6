"""The custom distributed loop: strategy.run over a distributed iterator, the loss averaged over
the *global* batch (tf.nn.compute_average_loss), replica results summed with strategy.reduce."""
from __future__ import annotations

from distexp.loops.common import Context, correct_count, per_example_loss


def train(ctx: Context) -> None:
    import tensorflow as tf

    strategy, model, optimizer = ctx.strategy, ctx.model, ctx.optimizer
    G = ctx.global_batch
    variables = model.trainable_variables

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

    iterator = iter(strategy.experimental_distribute_dataset(ctx.train_ds))
    rep = ctx.reporter
    for epoch in range(1, ctx.epochs + 1):
        rep.start_epoch(epoch)
        loss_sum = correct_sum = 0.0
        for _ in range(ctx.steps_per_epoch):
            loss, correct = train_step(iterator)
            loss = float(loss)  # fetch: the step has finished on every replica
            rep.end_step(loss)
            loss_sum += loss
            correct_sum += float(correct)
        rep.end_epoch(loss_sum / ctx.steps_per_epoch,
                      correct_sum / (ctx.steps_per_epoch * G))
