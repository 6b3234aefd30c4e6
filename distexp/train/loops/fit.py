"""The Keras loop: compile/fit inside the strategy's scope. A callback times each step (it fetches
the batch's logs, so the step has finished) and hands epochs to the shared reporter, which also
runs the shared evaluation: both loops' eval figures come from the same code.

`steps_per_execution` and `jit_compile` go to `compile`; with k steps per execution Keras calls the
callback once per k steps, so the interval is shared by those k steps (one steps.csv row each call).
k is decided by distexp.train.autotune.fit_k_for (its one owner): Keras takes it once, at compile
time, and it must divide the steps per epoch, so no measurement under `auto`.
Only tasks whose figures Keras computes exactly (`Task.fit_ok`: classification) train here; the
config check refuses the others before TensorFlow starts. A non-finite loss stops fit as Keras'
TerminateOnNaN does (distexp.train.loops.custom.Diverged).
"""
from __future__ import annotations

from distexp.config import xla
from distexp.figures.stats import first_non_finite
from distexp.train import autotune
from distexp.train.loops.context import Context
from distexp.train.loops.custom import Diverged


def train(ctx: Context) -> None:
    import keras

    rep = ctx.reporter
    k, why = autotune.fit_k_for(ctx.cfg.steps_per_execution, steps_per_epoch=ctx.steps_per_epoch,
                                log_every=rep.log_every,
                                after_warmup=ctx.epochs * ctx.steps_per_epoch
                                - rep.meter.warmup_steps,
                                replicas=int(ctx.strategy.num_replicas_in_sync))
    rep.logger.log_params({"steps_per_execution_resolved": k})
    rep.detail(f"steps_per_execution: {k} ({why})")

    class Timing(keras.callbacks.Callback):
        diverged = None

        def on_epoch_begin(self, epoch, logs=None):
            rep.start_epoch(epoch + 1)
            self.next_step = 0

        def on_train_batch_end(self, batch, logs=None):
            # Keras reports the epoch's running mean loss, not the batch's; `batch` is the index of
            # the execution's last step.
            steps = batch + 1 - self.next_step
            self.next_step = batch + 1
            loss = float(logs["loss"])
            rep.end_step([loss], kind="running_mean", steps=steps)
            if self.diverged is None and first_non_finite([loss]) is not None:
                self.diverged = (rep.epoch, rep.step_in_epoch, rep.meter.step, loss)
                rep.diverged(*self.diverged)
                if ctx.cfg.terminate_on_nan:
                    self.model.stop_training = True

        def on_epoch_end(self, epoch, logs=None):
            if self.diverged is not None and ctx.cfg.terminate_on_nan:
                return
            rep.end_epoch({"train/loss": float(logs["loss"]),
                           "train/accuracy": float(logs["accuracy"])})

    with ctx.strategy.scope():
        ctx.model.compile(optimizer=ctx.optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(
                              from_logits=getattr(ctx.task, "from_logits", True)),
                          metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                          steps_per_execution=k, jit_compile=xla.on(ctx.cfg))
    timing = Timing()
    ctx.model.fit(ctx.train_ds, epochs=ctx.epochs, steps_per_epoch=ctx.steps_per_epoch,
                  callbacks=[timing], verbose=0, shuffle=False)
    if timing.diverged is not None and ctx.cfg.terminate_on_nan:
        raise Diverged()
