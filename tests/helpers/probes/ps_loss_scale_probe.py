"""Run in a subprocess by tests/tasks/test_tasks.py: one ps step (distexp.train.step.PSDispatch, the real
dispatcher) under mixed_float16 with SGD behind a LossScaleOptimizer, on an in-process cluster
(1 worker, 1 ps; docs/facts.md#ps: inter-op threads >= workers + 1). Prints JSON: the weight update of
that step divided by lr x the float32 gradient of the same batch (1 when the loss was scaled
before the gradient and unscaled in apply_gradients; 2**-15 when the scaling was skipped), and
the optimizer's loss scale."""
from __future__ import annotations

import json
import os
import socket

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    import keras
    import numpy as np
    import tensorflow as tf
    from omegaconf import OmegaConf

    from distexp.data.loaded import Data
    from distexp.tasks import Classification
    from distexp.train.autotune import Schedule
    from distexp.train.step import PSDispatch, Step

    spec = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{port()}"], "ps": [f"127.0.0.1:{port()}"]})
    threads = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=3)
    for job in ("worker", "ps"):
        tf.distribute.Server(spec, job_name=job, task_index=0, protocol="grpc", config=threads,
                             start=True)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, rpc_layer="grpc")
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)

    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    cfg = OmegaConf.create({"seed": 0, "dataset": {"prefetch": 0, "shuffle_buffer": 64,
                                                   "threadpool": 0}})
    rng = np.random.default_rng(0)
    x = rng.random((64, 8), dtype=np.float32)
    y = rng.integers(0, 3, 64).astype(np.int32)
    data = Data(x, y, x, y, num_classes=3, cache_batches=True)
    lr = 0.1
    with strategy.scope():
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3, dtype="float32")])
        opt = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(lr))
        opt.build(model.trainable_variables)
    if os.environ.get("PROBE_SKIP_SCALING"):  # the negative control: the ps loop's old bug
        opt.scale_loss = lambda loss: loss
    task = Classification()
    before = [v.numpy() for v in model.trainable_variables]
    with tf.GradientTape() as tape:  # the same batch in float32, on the coordinator
        total, _ = task.loss(tf.constant(y), model(tf.constant(x)))
        loss = total / 64.0
    grads = [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]

    step = Step(strategy, task, model, opt, global_batch=64, local_replicas=False)  # ps
    dispatch = PSDispatch(step, cfg, data, 64, schedule=Schedule(1), workers=1)
    dispatch.begin(0)
    out = dispatch.run(1)
    after = [v.numpy() for v in model.trainable_variables]
    update = np.concatenate([(b - a).ravel() for a, b in zip(after, before)])
    expected = lr * np.concatenate([g.ravel() for g in grads])
    ratio = float(np.dot(update, expected) / np.dot(expected, expected))
    print(json.dumps({"ratio": ratio, "loss": out.losses[0], "float32_loss": float(loss),
                      "scale": float(opt.dynamic_scale.numpy()), "steps": int(
                          dispatch.step_var.numpy())}), flush=True)
    os._exit(0)  # the in-process servers never stop by themselves (docs/facts.md#ps)


if __name__ == "__main__":
    main()
