"""User factories for tests (model=custom model.factory=factories:...)."""


def small_mlp(input_shape, num_classes):
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(num_classes)])


def explode(input_shape, num_classes):
    raise RuntimeError("factory exploded on purpose")


def not_a_model(input_shape, num_classes):
    """A factory that forgot to build the model: returns the layer list."""
    import keras

    return [keras.layers.Flatten(), keras.layers.Dense(num_classes)]


def crash(input_shape, num_classes):
    """Kills the training process hard (no Python clean-up), as an OOM-kill or segfault would."""
    import os

    os._exit(3)


def hang(input_shape, num_classes):
    import time

    time.sleep(3600)


def kill_tracking_server(input_shape, num_classes):
    """Kills the MLflow server (process group in DISTEXP_TEST_KILL_PGID) mid-job: after the job
    process created the run and logged its params, before the trainer logs anything."""
    import os
    import signal

    os.killpg(int(os.environ["DISTEXP_TEST_KILL_PGID"]), signal.SIGKILL)
    return small_mlp(input_shape, num_classes)


def blobs(seed, n=512, dim=8):
    """dataset=custom: NumPy arrays (two Gaussian blobs per class, 3 classes), learnable in 1 epoch."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 3, size=(3, dim))

    def make(m):
        y = rng.integers(0, 3, size=m)
        return (centers[y] + rng.normal(0, 0.5, size=(m, dim))).astype("float32"), y
    x_tr, y_tr = make(n)
    x_ev, y_ev = make(n // 4)
    return x_tr, y_tr, x_ev, y_ev


def blobs_tfdata(seed, n=512, dim=8):
    """dataset=custom: the same data as unbatched tf.data.Datasets, with num_classes in a dict."""
    import tensorflow as tf

    x_tr, y_tr, x_ev, y_ev = blobs(seed, n, dim)
    return {"train": tf.data.Dataset.from_tensor_slices((x_tr, y_tr)),
            "eval": tf.data.Dataset.from_tensor_slices((x_ev, y_ev)), "num_classes": 3}


# -- user tasks (task.factory=factories:...) ---------------------------------------------------

def regression_data(seed, n=1024, dim=8):
    """dataset=custom: a noisy linear regression with float targets."""
    import numpy as np

    rng = np.random.default_rng(seed)
    w = rng.normal(size=dim)
    x = rng.normal(size=(n + n // 4, dim)).astype("float32")
    y = (x @ w + 0.1 * rng.normal(size=len(x))).astype("float32")
    return x[:n], y[:n], x[n:], y[n:]


def mse_task():
    """A regression task: mean squared error (sum, count) and mean absolute error as its metric."""
    from distexp.tasks import Task

    class Regression(Task):
        name = "regression"
        train_metrics = ("mae",)
        eval_metrics = ("mae",)
        objective = "eval/mae"

        def loss(self, labels, outputs):
            import tensorflow as tf

            err = tf.reshape(tf.cast(outputs, tf.float32), [-1]) - tf.cast(labels, tf.float32)
            return tf.reduce_sum(err * err), tf.cast(tf.size(err), tf.float32)

        def metrics(self, labels, outputs):
            import tensorflow as tf

            err = tf.reshape(tf.cast(outputs, tf.float32), [-1]) - tf.cast(labels, tf.float32)
            return {"mae": (tf.reduce_sum(tf.abs(err)), tf.cast(tf.size(err), tf.float32))}

    return Regression()


def seed_mistake_task():
    """Classification with the seed loop's mistake: each replica returns the mean over its own
    batch (a per-replica reduce_mean), which the replicas then sum."""
    from distexp.tasks import Classification

    class PerReplicaMean(Classification):
        name = "per_replica_mean"

        def loss(self, labels, outputs):
            total, count = super().loss(labels, outputs)
            return total / count

    return PerReplicaMean()


def seq2seq_replica_mean_task():
    """Seq2seq whose loss is what Keras 3 loss objects compute under a strategy: each replica's
    mean over its own real tokens, divided by the replicas (a mean of replica means)."""
    from distexp.tasks import Seq2Seq

    class ReplicaMean(Seq2Seq):
        name = "seq2seq_replica_mean"

        def loss(self, labels, outputs):
            import tensorflow as tf

            total, count = super().loss(labels, outputs)
            replicas = tf.distribute.get_replica_context().num_replicas_in_sync
            return total / count / replicas

    return ReplicaMean()


def fails_when_env(input_shape, num_classes):
    """Raises while DISTEXP_TEST_FAIL is set (a job that fails once, then succeeds on a re-run)."""
    import os

    if os.environ.get("DISTEXP_TEST_FAIL"):
        raise RuntimeError("failing on purpose (DISTEXP_TEST_FAIL is set)")
    return small_mlp(input_shape, num_classes)


# -- injected costs for the step-time split (tests/train/test_breakdown.py) ----------------------------

def slow_images(seed, delay_ms=0.0, batch=64, n=1024):
    """dataset=custom: random 8x8x1 images, 10 classes, as unbatched tf.data; with delay_ms > 0
    each example sleeps delay_ms / batch in a sequential map, i.e. ~delay_ms per global batch of
    `batch` (set dataset.cache=false, or the cache would pay it once)."""
    import time

    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    x = rng.random((n + n // 4, 8, 8, 1), dtype=np.float32)
    y = rng.integers(0, 10, size=n + n // 4).astype(np.int32)
    train = tf.data.Dataset.from_tensor_slices((x[:n], y[:n]))
    if delay_ms > 0:
        pause = delay_ms / 1000.0 / batch

        def nap():
            time.sleep(pause)
            return np.float32(0.0)

        def slow(a, b):  # the image depends on the sleep's output, so it cannot be pruned
            zero = tf.py_function(nap, [], tf.float32)
            zero.set_shape([])
            return a + zero, b
        train = train.map(slow)  # sequential: the sleeps add up per batch
    return {"train": train, "eval": tf.data.Dataset.from_tensor_slices((x[n:], y[n:])),
            "num_classes": 10}


def deep_cnn(input_shape, num_classes):
    """model=custom: the tutorial CNN with five 64-filter 3x3 convolutions in front ("same"
    padding on 8x8): ~300x its compute (~20 MFLOP per example forward), ~10x its parameters."""
    import keras

    layers = [keras.Input(shape=input_shape)]
    layers += [keras.layers.Conv2D(64, 3, padding="same", activation="relu") for _ in range(5)]
    layers += [keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.MaxPooling2D(),
               keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
               keras.layers.Dense(num_classes)]
    return keras.Sequential(layers, name="deep_cnn")


def dropout_mlp(input_shape, num_classes):
    """small_mlp with Dropout: its masks come from a Keras SeedGenerator whose state advances
    every step (the exact-resume test)."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dropout(0.5),
                             keras.layers.Dense(num_classes)])


def slow_input(seed, kind="none", ms=0.5, batch=64, n=1024):
    """dataset=custom: random 8x8x1 images, 10 classes, whose input pipeline costs about
    ms x batch per batch of `batch` examples, injected one of three ways (`kind`):
    - "example": a per-example Python map (tf.numpy_function sleeping `ms`), sequential;
    - "batch": the same map, sleeping `ms` x `batch` on every batch-th example (one lump a batch);
    - "generator": tf.data.Dataset.from_generator whose generator sleeps `ms` per example;
    - "none": the same examples, no cost.
    Use with dataset.cache=false (a cache pays the cost once) and a small dataset.shuffle_buffer
    (a large one pulls the epoch through the pipeline before the first batch)."""
    import time

    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    x = rng.random((n + n // 4, 8, 8, 1), dtype=np.float32)
    y = rng.integers(0, 10, size=n + n // 4).astype(np.int32)
    ev = tf.data.Dataset.from_tensor_slices((x[n:], y[n:]))
    pause = ms / 1000.0
    seen = [0]

    def nap():  # sleeps, returns 0.0 (added to the image: the map cannot be pruned)
        seen[0] += 1
        if kind == "example":
            time.sleep(pause)
        elif kind == "batch" and seen[0] % batch == 0:
            time.sleep(pause * batch)
        return np.float32(0.0)

    if kind == "generator":
        def examples():
            for i in range(n):
                time.sleep(pause)
                yield x[i], y[i]
        spec = (tf.TensorSpec((8, 8, 1), tf.float32), tf.TensorSpec((), tf.int32))
        return {"train": tf.data.Dataset.from_generator(examples, output_signature=spec),
                "eval": ev, "num_classes": 10}
    if kind not in ("none", "example", "batch"):
        raise ValueError(f"kind: received {kind!r}; valid: none, example, batch, generator")
    train = tf.data.Dataset.from_tensor_slices((x[:n], y[:n]))
    if kind != "none":
        def slow(a, b):
            zero = tf.numpy_function(nap, [], tf.float32, stateful=True)
            zero.set_shape([])
            return a + zero, b
        train = train.map(slow)  # sequential: the sleeps add up per batch
    return {"train": train, "eval": ev, "num_classes": 10}
