"""The anchor of benchmarks/gpu.sh: distexp's `model=resnet50` written by hand, trained with
Keras fit on one device, at each precision asked for. What a user would write instead of distexp:
keras.applications.ResNet50(weights=None, classifier_activation=None) (logits, as distexp's),
SGD 0.01, sparse categorical cross-entropy from logits, random images and labels of the given
shape and classes held in memory (`--size` of them, repeated), `--batch` per step,
`keras.mixed_precision.set_global_policy(precision)` (Keras compile wraps the optimizer in a
LossScaleOptimizer under mixed_float16).

    python benchmarks/keras_anchor.py --precisions float32,mixed_float16 --batch 64 \
        --shape 224,224,3 --classes 1000 --steps 60 --warmup 10

Per precision: a fit of `--warmup` steps (tracing, autotuning), then a fit of the other
`--steps - --warmup` steps timed from outside (wall clock; the last step's loss read back, so the
device has finished). Prints one JSON line per precision:
{"precision", "examples_per_sec", "steps", "batch", "device"}.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--precisions", default="float32,mixed_float16")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--shape", default="224,224,3")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--size", type=int, default=128, help="images held in memory, repeated")
    p.add_argument("--steps", type=int, default=60, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=10, help="steps before the timed ones")
    return p.parse_args(argv)


def one(precision: str, a: argparse.Namespace) -> dict:
    import keras
    import tensorflow as tf

    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    shape = tuple(int(d) for d in a.shape.split(","))
    x = tf.random.uniform((a.size, *shape))
    y = tf.random.uniform((a.size,), maxval=a.classes, dtype=tf.int64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
        a.batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    model = keras.applications.ResNet50(weights=None, input_shape=shape, classes=a.classes,
                                        classifier_activation=None)
    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(data, epochs=1, steps_per_epoch=max(1, a.warmup), verbose=0)
    timed = max(1, a.steps - a.warmup)
    t0 = time.perf_counter()
    hist = model.fit(data, epochs=1, steps_per_epoch=timed, verbose=0)
    float(hist.history["loss"][-1])  # read back: the device is done
    seconds = time.perf_counter() - t0
    gpus = tf.config.list_physical_devices("GPU")
    device = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "GPU") \
        if gpus else "CPU"
    keras.mixed_precision.set_global_policy("float32")
    return {"precision": precision, "examples_per_sec": a.batch * timed / seconds,
            "steps": timed, "batch": a.batch, "device": device}


def main(argv=None) -> None:
    a = parse(argv)
    for precision in a.precisions.split(","):
        print(json.dumps(one(precision, a)), flush=True)


if __name__ == "__main__":
    main()
