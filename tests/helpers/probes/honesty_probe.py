"""Run one training job in this process with an independent stopwatch around the loop's steps.

`python honesty_probe.py <job_dir> key=value ...` composes the config, wraps Reporter.end_step so
that the wall clock is read (time.perf_counter, not perf.Meter) whenever a step's result has
reached the host (before the Reporter handles it, as the Meter reads its own), trains, and prints
JSON: the Meter's logged figure and the stopwatch's examples counted / wall time over the same
(timed) steps, the measurement window's after training included (distexp.train.window: its
start and each call's end read the same way). Run in a subprocess: TensorFlow's devices are fixed once per process.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

import distexp
from distexp.config import schema
from distexp.figures import meter
from distexp.train import progress, trainer

CONF = Path(distexp.__file__).resolve().parent / "conf"
schema.register()


def main() -> None:
    job_dir = Path(sys.argv[1])
    job_dir.mkdir(parents=True, exist_ok=True)
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose(config_name="config", overrides=sys.argv[2:] + ["tracking.enabled=false"])
    marks = []  # (steps finished so far, perf_counter) at every end_step call
    real = progress.Reporter.end_step

    def end_step(self, loss, kind="step", steps=1, **kw):
        # read as the call's result reaches the host, before the Reporter's own bookkeeping (its
        # steps.csv row, its progress line), as the Meter reads its clock: the same span. Read
        # after it, a slow flush of call 1's row on a loaded machine (CI: 6 ms in a 50 ms span)
        # fell outside the stopwatch's span and inside the Meter's.
        marks.append((self.meter.step + steps, time.perf_counter(), self.epoch))
        real(self, loss, kind, steps, **kw)

    window = []  # the measurement window after training: (steps so far, perf_counter)
    real_begin, real_call = meter.Meter.begin_window, progress.Reporter.window_call

    def begin_window(self):
        window.append((0, time.perf_counter()))
        real_begin(self)

    def window_call(self, steps, units=None):
        window.append((window[-1][0] + steps, time.perf_counter()))
        real_call(self, steps, units)

    progress.Reporter.end_step = end_step
    meter.Meter.begin_window, progress.Reporter.window_call = begin_window, window_call
    final = trainer.train(cfg, job_dir)
    warm = int(cfg.warmup_steps)
    # The stopwatch: from the end of the call that finished the warm-up to the last step, within
    # the first epoch (no evaluation in between), examples = global batch x steps in that span;
    # then the measurement window after training, from its start to its last call.
    start = next(m for m in marks if m[0] >= warm)
    end = [m for m in marks if m[2] == start[2]][-1]
    steps, seconds = end[0] - start[0], end[1] - start[1]
    if window:
        steps, seconds = steps + window[-1][0], seconds + window[-1][1] - window[0][1]
    print(json.dumps({"steps": steps, "seconds": seconds, "window_steps": window[-1][0] if window
                      else 0, "final": final}))


if __name__ == "__main__":
    main()
