"""ParameterServerStrategy: the coordinator's loop and the worker / ps servers.

- `serve`: a worker or ps task starts its tf.distribute.Server and blocks in join() forever (no
  TensorFlow API stops it: distexp.launch stops it when the coordinator is done).
- `train`: the coordinator (the chief, the only process that logs) schedules training steps on
  the workers through tf.distribute.coordinator.ClusterCoordinator: per-worker datasets
  (create_per_worker_dataset), `schedule`, `join`. Steps are asynchronous: each runs on one
  worker with the whole global batch (TensorFlow's num_replicas_in_sync is per worker) and
  updates the variables on the ps as soon as it finishes.
- Steps are counted with a tf.Variable on the ps incremented by each step (Keras'
  optimizer.iterations undercounts under ps: its increment is not atomic, FACTS.md). Throughput
  comes from completed steps: the loop schedules a window of steps, joins, and counts what the
  variable says finished.
- Each worker reads its own shard of the training data (shard by the worker's index, shuffle
  seeded by `seed`), so the workers together see each example once per pass.
- Evaluation runs on the coordinator (the ps variables are read remotely), every example once.
"""
from __future__ import annotations

import os

from distexp.checkpoints import Checkpoints
from distexp.loops.common import Context, correct_count, per_example_loss

WINDOW = 10  # steps scheduled between joins (at least 2 per worker)


def serve(resolver) -> None:
    import tensorflow as tf

    from distexp.strategies import grpc_errors

    with grpc_errors(resolver):
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                      task_index=resolver.task_id, protocol="grpc", start=True)
    print(f"{resolver.task_type}:{resolver.task_id} serving at {server.target}", flush=True)
    server.join()


def make_evaluate(model, eval_ds):
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def batch(x, y):
        logits = model(x, training=False)
        return (tf.reduce_sum(per_example_loss(y, logits)), correct_count(y, logits),
                tf.cast(tf.shape(y)[0], tf.float32))

    def evaluate():
        loss = correct = count = 0.0
        for x, y in eval_ds:
            l, c, n = batch(x, y)
            loss, correct, count = loss + float(l), correct + float(c), count + float(n)
        return loss / count, correct / count

    return evaluate


def train(ctx: Context, arrays=None) -> None:
    import tensorflow as tf

    from distexp import datasets

    strategy, model, optimizer, rep = ctx.strategy, ctx.model, ctx.optimizer, ctx.reporter
    G = ctx.global_batch
    variables = model.trainable_variables
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    workers = int(os.environ.get("DISTEXP_NUM_WORKERS", "1"))
    cfg = ctx.cfg

    def dataset_fn():
        index = tf.distribute.coordinator.experimental_get_current_worker_index()
        train, _ = datasets.pipelines(cfg, arrays, G, shard=(workers, index))
        return train

    per_worker_iter = iter(coordinator.create_per_worker_dataset(dataset_fn))
    with strategy.scope():
        done = tf.Variable(0, dtype=tf.int64, trainable=False, name="distexp_step")

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
        done.assign_add(1)
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

    ckpts = Checkpoints(cfg, model=model, optimizer=optimizer, step=done, chief=True,
                        steps_per_epoch=ctx.steps_per_epoch, say=rep.print,
                        logger=rep.logger)
    start = ckpts.restore()
    rep.resume_at(start)
    total = ctx.epochs * ctx.steps_per_epoch
    step = start
    window = max(WINDOW, 2 * workers)
    try:
        for epoch in range(start // ctx.steps_per_epoch + 1, ctx.epochs + 1):
            rep.start_epoch(epoch)
            first = step - (epoch - 1) * ctx.steps_per_epoch
            rep.step_in_epoch = first
            loss_sum = correct_sum = 0.0
            left = ctx.steps_per_epoch - first
            while left:
                n = min(window, left)
                before = int(done.numpy())
                results = [coordinator.schedule(train_step, args=(per_worker_iter,))
                           for _ in range(n)]
                coordinator.join()
                finished = int(done.numpy()) - before
                if finished != n:
                    raise RuntimeError(f"ps: {n} steps scheduled, {finished} completed")
                out = [(float(loss), float(correct)) for loss, correct in
                       (r.fetch() for r in results)]
                rep.end_steps([loss for loss, _ in out])
                loss_sum += sum(loss for loss, _ in out)
                correct_sum += sum(c for _, c in out)
                step += n
                left -= n
                if ckpts.after_step(step, last=step == total, since=step - n):
                    rep.meter.exclude_since_last_step()
            k = ctx.steps_per_epoch - first
            rep.end_epoch(loss_sum / k, correct_sum / (k * G))
        if start >= total:
            rep.print(f"resume: the checkpoint is at the last step ({total}); nothing left to train")
            rep.start_epoch(ctx.epochs)
            rep.end_epoch(float("nan"), float("nan"))
    finally:
        ckpts.close()
