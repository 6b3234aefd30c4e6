"""The Keras loop: compile/fit inside the strategy's scope. A callback times each step (it fetches
the batch's logs, so the step has finished) and hands epochs to the shared reporter, which also
runs the shared evaluation: both loops' eval figures come from the same code."""
from __future__ import annotations

from distexp.loops.common import Context


def train(ctx: Context) -> None:
    import keras

    rep = ctx.reporter

    class Timing(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            rep.start_epoch(epoch + 1)

        def on_train_batch_end(self, batch, logs=None):
            # Keras reports the epoch's running mean loss, not the batch's.
            rep.end_step(float(logs["loss"]), kind="running_mean")

        def on_epoch_end(self, epoch, logs=None):
            rep.end_epoch(float(logs["loss"]), float(logs["accuracy"]))

    with ctx.strategy.scope():
        ctx.model.compile(optimizer=ctx.optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    ctx.model.fit(ctx.train_ds, epochs=ctx.epochs, steps_per_epoch=ctx.steps_per_epoch,
                  callbacks=[Timing()], verbose=0, shuffle=False)
