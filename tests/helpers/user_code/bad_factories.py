"""A user's own data and models that are wrong in the ways users get them wrong, and
keras-io's "Simple MNIST convnet" (tests/train/test_training_errors.py).

Datasets (dataset=custom dataset.factory=bad_factories:...): 8x8x1 images like digits, 3 classes,
each with one thing wrong. Models (model=custom model.factory=bad_factories:...): each ignores or
misuses what distexp passes (input_shape, num_classes). No TensorFlow at import.
"""
from __future__ import annotations

N, EVAL, CLASSES = 256, 64, 3


def _arrays(seed, n=N, n_eval=EVAL):
    import numpy as np

    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, size=n + n_eval)
    x = (rng.random((n + n_eval, 8, 8, 1)) * 0.1 + y[:, None, None, None] / CLASSES)
    return x[:n].astype("float32"), y[:n], x[n:].astype("float32"), y[n:]


# -- labels of the wrong kind ------------------------------------------------------------------

def digit_strings(seed):
    x, y, xe, ye = _arrays(seed)
    return x, y.astype(str), xe, ye.astype(str)


def class_names(seed):
    import numpy as np

    names = np.array(["cat", "dog", "bird"])
    x, y, xe, ye = _arrays(seed)
    return x, names[y], xe, names[ye]


def float_labels(seed):
    x, y, xe, ye = _arrays(seed)
    return x, y.astype("float32"), xe, ye.astype("float32")


def fractional_labels(seed):
    x, y, xe, ye = _arrays(seed)
    return x, y * 0.5, xe, ye * 0.5


def negative_labels(seed):
    x, y, xe, ye = _arrays(seed)
    return x, y - 1, xe, ye - 1


def labels_beyond_classes(seed):
    """num_classes=2 while the labels go up to 2."""
    x, y, xe, ye = _arrays(seed)
    return {"x_train": x, "y_train": y, "x_eval": xe, "y_eval": ye, "num_classes": 2}


def one_hot_labels(seed):
    import numpy as np

    x, y, xe, ye = _arrays(seed)
    eye = np.eye(CLASSES, dtype="int64")
    return x, eye[y], xe, eye[ye]


def eval_labels_one_hot(seed):
    import numpy as np

    x, y, xe, ye = _arrays(seed)
    return x, y, xe, np.eye(CLASSES, dtype="int64")[ye]


# -- inputs that are not numbers, no examples -------------------------------------------------

def nan_inputs(seed):
    import numpy as np

    x, y, xe, ye = _arrays(seed)
    x[17, 3, 4, 0] = np.nan
    x[40, 0, 0, 0] = np.nan
    return x, y, xe, ye


def inf_eval_inputs(seed):
    import numpy as np

    x, y, xe, ye = _arrays(seed)
    xe[5, 1, 1, 0] = np.inf
    return x, y, xe, ye


def no_examples(seed):
    x, y, xe, ye = _arrays(seed)
    return x[:0], y[:0], xe, ye


def no_eval_examples(seed):
    x, y, xe, ye = _arrays(seed)
    return x, y, xe[:0], ye[:0]


# -- the same through tf.data -----------------------------------------------------------------

def _tfdata(x, y, xe, ye, **extra):
    import tensorflow as tf

    return {"train": tf.data.Dataset.from_tensor_slices((x, y)),
            "eval": tf.data.Dataset.from_tensor_slices((xe, ye)), **extra}


def tfdata_beyond_classes(seed):
    """dataset.num_classes (2, set on the command line) below the largest label (2)."""
    return _tfdata(*_arrays(seed))


def tfdata_one_label_beyond(seed):
    """Labels 0..1 (dataset.num_classes=2) but the sixth example's, 9: inside the first batch
    (dataset.shuffle_buffer=1 keeps the order), not its first. The range check (one per batch)
    must name 9, not the batch's first label."""
    x, y, xe, ye = _arrays(seed)
    y = y % 2
    y[5] = 9
    return _tfdata(x, y, xe, ye % 2)


def tfdata_strings(seed):
    x, y, xe, ye = _arrays(seed)
    return _tfdata(x, y.astype(str), xe, ye.astype(str), num_classes=CLASSES)


def tfdata_float_labels(seed):
    x, y, xe, ye = _arrays(seed)
    return _tfdata(x, y.astype("float32"), xe, ye.astype("float32"), num_classes=CLASSES)


def tfdata_one_hot(seed):
    import numpy as np

    x, y, xe, ye = _arrays(seed)
    eye = np.eye(CLASSES, dtype="int32")
    return _tfdata(x, eye[y], xe, eye[ye], num_classes=CLASSES)


def tfdata_empty(seed):
    x, y, xe, ye = _arrays(seed)
    return _tfdata(x[:0], y[:0], xe, ye, num_classes=CLASSES)


def tfdata_fails(seed):
    """A pipeline whose own code fails on the first element (not translated: its first line)."""
    import tensorflow as tf

    x, y, xe, ye = _arrays(seed)

    def boom(a, b):
        tf.debugging.assert_equal(tf.reduce_sum(a) * 0.0 + 1.0, 0.0,
                                  message="the pipeline check failed")
        return a, b
    out = _tfdata(x, y, xe, ye, num_classes=CLASSES)
    out["train"] = out["train"].map(boom)
    return out


# -- models that do not match the data ----------------------------------------------------------

def cifar_cnn(input_shape, num_classes):
    """Built for CIFAR's 32x32x3, whatever the data."""
    import keras

    return keras.Sequential([keras.Input(shape=(32, 32, 3)), keras.layers.Conv2D(8, 3),
                             keras.layers.Flatten(), keras.layers.Dense(num_classes)])


def flat_mlp(input_shape, num_classes):
    """Built for flat 64-vectors (digits flattened), given 8x8x1 images."""
    import keras

    return keras.Sequential([keras.Input(shape=(64,)), keras.layers.Dense(num_classes)])


def five_classes(input_shape, num_classes):
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(5)])


def no_flatten(input_shape, num_classes):
    """Forgot the Flatten: one output per pixel."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Dense(num_classes)])


def sigmoid_one(input_shape, num_classes):
    """A binary head (one sigmoid unit) on a multi-class dataset."""
    import keras

    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(1, activation="sigmoid")])


def two_outputs(input_shape, num_classes):
    import keras

    inp = keras.Input(shape=input_shape)
    x = keras.layers.Flatten()(inp)
    return keras.Model(inp, [keras.layers.Dense(num_classes)(x), keras.layers.Dense(1)(x)])


def buggy_layer(input_shape, num_classes):
    """A custom layer whose call fails the first time it runs on a batch."""
    import keras

    class Buggy(keras.layers.Layer):
        def call(self, x):
            if x.shape[0] is not None:  # on a real batch, not the symbolic build
                raise ValueError("my layer does not handle batches yet")
            return x

    return keras.Sequential([keras.Input(shape=input_shape), Buggy(), keras.layers.Flatten(),
                             keras.layers.Dense(num_classes)])


# -- keras-io "Simple MNIST convnet" (https://keras.io/examples/vision/mnist_convnet/) -----------

def mnist_convnet(input_shape, num_classes, head="softmax"):
    """keras-io's model as published, softmax head included; only the input shape follows the data
    (its (28, 28, 1) does not fit digits' 8x8: the 3x3 convolutions and 2x2 poolings of the
    original would leave nothing), so the second convolution uses "same" padding."""
    import keras
    from keras import layers

    return keras.Sequential([
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu", padding="same"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation=head),
    ])


def mnist_convnet_logits(input_shape, num_classes):
    """The same model ending in logits (what distexp's loss expects)."""
    return mnist_convnet(input_shape, num_classes, head=None)
