"""The jobs a user would write by hand instead of a distexp sweep, for benchmarks/warm.py: one
process, TensorFlow imported once, then per job a fresh model, optimizer and tf.function, trained
on scikit-learn's digits (the default job's data, model, batch and optimizer: the tutorial CNN,
global batch 64, Adam 1e-3), evaluated after each epoch.

    python benchmarks/handwritten.py --jobs 6 --epochs 2     # the 6-job sweep's counterpart
    python benchmarks/handwritten.py --jobs 1 --epochs 1     # the first step's counterpart

Prints `first step done` once the first job's first step has finished (stamped from outside),
then one JSON line: each job's epoch times (s, evaluation included), its training times (s, the
epoch's steps only: what distexp's examples/s times) and the examples per epoch.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=6)
    p.add_argument("--epochs", type=int, default=2)
    a = p.parse_args()

    import keras
    import tensorflow as tf
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x.reshape(-1, 8, 8, 1) / 16.0).astype("float32")
    xt, xe, yt, ye = train_test_split(x, y.astype("int64"), test_size=0.2, random_state=0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    jobs, first = [], True
    for seed in range(a.jobs):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([
            keras.Input((8, 8, 1)), keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(), keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
        opt = keras.optimizers.Adam(1e-3)
        train = tf.data.Dataset.from_tensor_slices((xt, yt)).shuffle(10000, seed=seed).batch(64) \
            .prefetch(tf.data.AUTOTUNE)
        evals = tf.data.Dataset.from_tensor_slices((xe, ye)).batch(64)

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
            return loss

        @tf.function
        def evaluate(xb, yb):
            return tf.reduce_sum(tf.cast(tf.argmax(model(xb), 1) == yb, tf.float32))

        epochs, trained = [], []
        for _ in range(a.epochs):
            t = time.perf_counter()
            for xb, yb in train:
                loss = step(xb, yb)
                if first:
                    print("first step done", flush=True)
                    first = False
            float(loss)  # the epoch's steps have run (as distexp's last timed step is fetched)
            trained.append(time.perf_counter() - t)
            correct = sum(float(evaluate(xb, yb)) for xb, yb in evals)
            epochs.append(time.perf_counter() - t)
        jobs.append({"epoch_s": epochs, "train_s": trained, "eval_accuracy": correct / len(ye)})
    print(json.dumps({"jobs": jobs, "examples_per_epoch": len(yt)}), flush=True)
    os._exit(0)  # as distexp's trainer: no TensorFlow teardown


if __name__ == "__main__":
    main()
