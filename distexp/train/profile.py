"""`profile=true`: a TensorFlow profiler trace of a few training steps, as a run artifact.

The trace is taken in the probe phase after training (distexp.train.probe_phase), so the
profiler's overhead never enters the timed steps: STEPS calls of the loop's own step function
(k steps each) on the training pipeline, after one untraced call. Each call is marked as a step
(`tf.profiler.experimental.Trace("train", step_num=i, _r=1)`), so the viewer's overview splits
step time into input, host compute, device compute and other. Only this process's activity is
recorded (multiworker: the chief's; ps: the coordinator's).

The files (`<job dir>/profile/plugins/profile/<date>/<host>.xplane.pb`) are logged as the run's
artifact directory `profile/`. To view: download it and run TensorBoard with the profile plugin
(`pip install "distexp[profile]"`: xprof) on the directory holding `plugins/`. Nothing is
downloaded at run time; taking the trace needs only TensorFlow.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

STEPS = 3


def trace(call: Callable[[], object], logdir: Path, steps: int = STEPS) -> Path:
    """Run `call` once untraced, then `steps` times under the profiler; return `logdir`."""
    import tensorflow as tf

    call()
    logdir.mkdir(parents=True, exist_ok=True)
    tf.profiler.experimental.start(str(logdir))
    try:
        for i in range(steps):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                call()
    finally:
        tf.profiler.experimental.stop()
    return logdir
