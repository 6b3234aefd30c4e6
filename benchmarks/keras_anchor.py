"""The anchor of benchmarks/gpu.sh: distexp's `model=resnet50` written by hand, trained with
Keras fit on one device, at each precision asked for. What a user would write instead of distexp:
keras.applications.ResNet50(weights=None, classifier_activation=None) (logits, as distexp's),
SGD 0.01, sparse categorical cross-entropy from logits, random images and labels of the given
shape and classes held in memory (`--size` of them, repeated), `--batch` per step,
`keras.mixed_precision.set_global_policy(precision)` (Keras compile wraps the optimizer in a
LossScaleOptimizer under mixed_float16), `compile(jit_compile=...)` as `--jit-compile` says:
`auto` (Keras's own default, left unset: XLA on a machine with a GPU when no tf.distribute
strategy is set), `false` or `true`; each row says what Keras resolved it to (`xla`).

    python benchmarks/keras_anchor.py --precisions float32,mixed_float16 --batches 64,256 \
        --shape 224,224,3 --classes 1000 --steps 40 --warmup 10 --jit-compile auto,false

Per precision: a fit of `--warmup` steps (tracing, autotuning), then a fit of the other
`--steps - --warmup` steps timed from outside (wall clock; the last step's loss read back, so the
device has finished). Prints first {"build": TensorFlow's version and build (CUDA, cuDNN)}, then
one JSON line per precision, jit_compile and batch:
{"precision", "jit_compile", "xla", "examples_per_sec", "steps", "batch", "device"}.
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
    p.add_argument("--batches", default="64", help="batches to run, comma-separated")
    p.add_argument("--shape", default="224,224,3")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--size", type=int, default=128, help="images held in memory, repeated")
    p.add_argument("--steps", type=int, default=60, help="steps in all, warm-up included")
    p.add_argument("--warmup", type=int, default=10, help="steps before the timed ones")
    p.add_argument("--jit-compile", default="auto",
                   help="compile(jit_compile=...) values to run, comma-separated: auto (Keras's "
                        "default), false, true")
    return p.parse_args(argv)


def one(precision: str, jit: str, batch: int, a: argparse.Namespace) -> dict:
    import keras
    import tensorflow as tf

    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    shape = tuple(int(d) for d in a.shape.split(","))
    x = tf.random.uniform((a.size, *shape))
    y = tf.random.uniform((a.size,), maxval=a.classes, dtype=tf.int64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(
        batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    model = keras.applications.ResNet50(weights=None, input_shape=shape, classes=a.classes,
                                        classifier_activation=None)
    model.compile(optimizer=keras.optimizers.SGD(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  **({} if jit == "auto" else {"jit_compile": jit == "true"}))
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
    return {"precision": precision, "jit_compile": jit, "xla": bool(model.jit_compile),
            "examples_per_sec": batch * timed / seconds, "steps": timed, "batch": batch,
            "device": device}


def build() -> dict:
    """TensorFlow's version and what it was built with (tf.sysconfig.get_build_info)."""
    import tensorflow as tf

    info = dict(tf.sysconfig.get_build_info())
    keep = ("cuda_version", "cudnn_version", "is_cuda_build", "is_rocm_build")
    return {"tensorflow": tf.__version__, **{k: info.get(k) for k in keep if k in info}}


def main(argv=None) -> None:
    a = parse(argv)
    jits = [v.strip().lower() for v in a.jit_compile.split(",")]
    if set(jits) - {"auto", "false", "true"}:
        raise SystemExit(f"--jit-compile: received {a.jit_compile!r}; expected auto, false or "
                         "true, comma-separated")
    print(json.dumps({"build": build()}), flush=True)
    for precision in a.precisions.split(","):
        for jit in jits:
            for batch in (int(b) for b in a.batches.split(",")):
                print(json.dumps(one(precision, jit, batch, a)), flush=True)


if __name__ == "__main__":
    main()
