"""The hand-written TensorFlow a user would write instead of distexp (the distributed-training
tutorials' code), for benchmarks/overhead.py. Same model (the tutorial CNN), data (seeded random
images, batched once and cached, as distexp's dataset=synthetic), optimizer and batch as distexp.

Prints one JSON line: examples/s over the steps after warm-up (wall time, outside the loop), the
process's CPU seconds per example over the same steps, and the Unix time at which the first
training step had finished.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--strategy", choices=["one_device", "mirrored"], default="one_device")
    p.add_argument("--loop", choices=["custom", "fit"], default="custom")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--batch-per-replica", type=int, default=64)
    p.add_argument("--shape", default="28,28,1")
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.003)
    a = p.parse_args()

    import keras
    import numpy as np
    import tensorflow as tf

    if a.strategy == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(a.replicas)])
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(a.replicas)])
    else:
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    G = a.batch_per_replica * strategy.num_replicas_in_sync

    keras.utils.set_random_seed(0)
    shape = tuple(int(d) for d in a.shape.split(","))
    rng = np.random.default_rng(0)
    x = rng.random((a.size, *shape), dtype=np.float32)
    y = rng.integers(0, 10, size=a.size, dtype=np.int32)
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).batch(G, drop_remainder=True).cache()
          .repeat().prefetch(tf.data.AUTOTUNE))

    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=shape),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ])
        optimizer = keras.optimizers.Adam(a.lr)

    total = a.warmup + a.steps
    marks = {}
    if a.loop == "fit":
        class TimeHistory(keras.callbacks.Callback):  # as TF official models' keras_utils does
            def on_train_batch_end(self, batch, logs=None):
                if batch == 0:
                    marks["first"] = time.time()
                if batch == a.warmup - 1:
                    marks["t0"], marks["c0"] = time.perf_counter(), time.process_time()
                if batch == total - 1:
                    marks["t1"], marks["c1"] = time.perf_counter(), time.process_time()

        with strategy.scope():
            model.compile(optimizer=optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"])
        model.fit(ds, epochs=1, steps_per_epoch=total, callbacks=[TimeHistory()], verbose=0)
    else:
        with strategy.scope():
            loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                     reduction="none")
            optimizer.build(model.trainable_variables)

        def train_step(inputs):
            images, labels = inputs
            with tf.GradientTape() as tape:
                logits = model(images, training=True)
                loss = tf.nn.compute_average_loss(loss_object(labels, logits), global_batch_size=G)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            # Accuracy as a count reduced with the loss (the tutorial's Keras metric would cost a
            # cross-replica sync per step under MirroredStrategy: distexp does not pay it either).
            pred = tf.argmax(logits, axis=-1, output_type=tf.int32)
            correct = tf.reduce_sum(tf.cast(tf.equal(pred, labels), tf.float32))
            return loss, correct

        @tf.function
        def distributed_train_step(dist_inputs):
            loss, correct = strategy.run(train_step, args=(dist_inputs,))
            return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                    strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

        it = iter(strategy.experimental_distribute_dataset(ds))
        total_loss = 0.0
        for step in range(total):
            loss, correct = distributed_train_step(next(it))
            total_loss += loss
            if step == 0:
                float(total_loss)
                marks["first"] = time.time()
            if step == a.warmup - 1:
                float(total_loss)
                marks["t0"], marks["c0"] = time.perf_counter(), time.process_time()
        float(total_loss)
        marks["t1"], marks["c1"] = time.perf_counter(), time.process_time()
    print(json.dumps({"examples_per_sec": G * a.steps / (marks["t1"] - marks["t0"]),
                      "first_step_unix": marks["first"],
                      "cpu_per_example": (marks["c1"] - marks["c0"]) / (G * a.steps)}), flush=True)


if __name__ == "__main__":
    main()
