"""FLOPs: what a model costs per example, and what the devices can do (for perf/mfu).

- `forward_flops(model, input_shape)`: floating-point operations of one example's forward pass,
  counted by TensorFlow's graph profiler (tf.compat.v1.profiler, `float_operation`) on the traced
  inference graph at batch 1. It counts the ops with registered FLOP statistics: MatMul, Conv2D,
  BiasAdd, element-wise arithmetic, pooling ...; one multiply-add is 2 FLOPs. Training costs 3x the
  forward pass (the backward pass is ~2x: gradients for activations and for weights), the usual
  convention (Kaplan et al. 2020; PaLM's MFU definition).
- `peak_flops(devices, dtype=)`: a matmul micro-benchmark (float32 unless told) run on every
  replica device at once (one tf.function, ~0.5-1 s), i.e. the achievable peak of the whole
  device set the strategy uses.
  Logical CPU devices share the same cores, so the CPU's peak is measured, not counted twice.
"""
from __future__ import annotations

import time
from typing import List, Optional, Sequence

TRAIN_FACTOR = 3.0


def forward_flops(model, input_shape: Sequence[int]) -> Optional[float]:
    if any(isinstance(d, (tuple, list)) for d in input_shape):
        # Several inputs (seq2seq): its GRUs are tf.while loops, whose body the graph profiler
        # counts once, not once per time step: a count would be wrong, so there is none.
        raise ValueError("a model with several (sequence) inputs: the graph profiler counts a "
                         "recurrent loop's body once, not per time step")
    import tensorflow as tf
    from tensorflow.python.util import deprecation

    fn = tf.function(lambda x: model(x, training=False))
    graph = fn.get_concrete_function(tf.TensorSpec([1, *input_shape], tf.float32)).graph
    opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    opts["output"] = "none"
    with deprecation.silence():
        prof = tf.compat.v1.profiler.profile(graph=graph, options=opts)
    return float(prof.total_float_ops) if prof.total_float_ops else None


def train_flops_per_example(model, input_shape: Sequence[int]) -> Optional[float]:
    fwd = forward_flops(model, input_shape)
    return None if fwd is None else TRAIN_FACTOR * fwd


def peak_flops(devices: List[str], n: int = 512, seconds: float = 0.5,
               dtype: str = "float32") -> float:
    """Measured `dtype` matmul FLOP/s over `devices` together (best of short rounds)."""
    import tensorflow as tf

    mats = []
    for d in devices:
        with tf.device(d):
            mats.append(tf.cast(tf.random.uniform((n, n), dtype=tf.float32), dtype))

    @tf.function
    def run(reps):
        outs = []
        for d, a in zip(devices, mats):  # independent chains: the devices run concurrently
            with tf.device(d):
                acc = a
                for _ in tf.range(reps):
                    acc = tf.matmul(acc, a) * (1.0 / n)  # keep values bounded
                outs.append(tf.reduce_sum(acc))
        return tf.add_n(outs)

    run(tf.constant(1)).numpy()  # trace and warm up
    reps = 4
    best = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        run(tf.constant(reps)).numpy()
        dt = time.perf_counter() - t0
        best = max(best, 2.0 * n ** 3 * reps * len(mats) / dt)
        if time.perf_counter() > deadline:
            return best
        if dt < 0.05:
            reps *= 2
