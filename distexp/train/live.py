"""The chief trainer's feed of the live progress bar (drawn by the job process:
distexp.job.console). With progress=bar (the job passes the resolved form in progress_feed.ENV) the
reporter calls `update` wherever its loop already returns to the host (after each call of
steps_per_execution steps, or Keras' batch-end callback); a record is printed only when
progress_feed.MIN_INTERVAL_S has passed since the last one, or at an epoch's last step: at most ~10
short lines a second, nothing that waits on the device. After training, `phase` says what the
process does instead (the probes: PROBES), so that the bar does not sit at 100 % mute."""
from __future__ import annotations

import json
import time
from typing import Optional

from distexp.progress_feed import MIN_INTERVAL_S, PREFIX

PROBES = "measuring the step split"  # the phase after training (distexp.train.probe_phase)
WINDOW = "measuring on"  # the measurement window after training (distexp.train.window)


class Feed:
    def __init__(self, epochs: int, steps_per_epoch: int, global_batch: int):
        self.epochs, self.steps, self.global_batch = epochs, steps_per_epoch, global_batch
        self._t, self._done = time.perf_counter(), 0

    def update(self, epoch: int, step_in_epoch: int, steps_done: int,
               loss: Optional[float]) -> None:
        """`steps_done`: the run's steps so far (examples/s is over those since the last record)."""
        now = time.perf_counter()
        if now - self._t < MIN_INTERVAL_S and step_in_epoch < self.steps:
            return
        rate = (self.global_batch * (steps_done - self._done) / (now - self._t)
                if now > self._t and steps_done > self._done else None)
        self._t, self._done = now, steps_done
        record = {"epoch": epoch, "epochs": self.epochs, "step": step_in_epoch,
                  "steps": self.steps, "rate": rate,
                  "loss": loss if loss is not None and loss == loss else None}
        print(PREFIX + json.dumps(record), flush=True)

    def phase(self, what: str) -> None:
        """Training is over; the process does `what` now (a record the bar shows)."""
        print(PREFIX + json.dumps({"phase": what}), flush=True)
