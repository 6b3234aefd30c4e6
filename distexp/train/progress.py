"""What a training process says about its progress: console lines, steps.csv, MLflow metrics.

Only the chief reports; on other workers every method still keeps time (cheap) but prints and
logs nothing. Loops call start_epoch / end_step / end_epoch; evaluation runs in end_epoch, after
the epoch's timing window has closed. Figures are named by the task (train/loss, eval/accuracy,
eval/token_accuracy, ...): the Reporter knows no loss or metric of its own.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Union

from distexp import progress_feed
from distexp.figures import perf_keys, text
from distexp.figures.meter import Meter
from distexp.library_logs import LOG_ONLY_PREFIX
from distexp.tracking import RunLogger
from distexp.tracking import tags as tag
from distexp.train.live import Feed


class Reporter:
    def __init__(self, *, meter: Meter, logger: RunLogger, chief: bool, job_dir: Path,
                 epochs: int, steps_per_epoch: int, log_every: int,
                 evaluate: Callable[[], Dict[str, float]],
                 target_accuracy: Optional[float] = None, target_metric: Optional[str] = None):
        self.meter, self.logger, self.chief = meter, logger, chief
        self.epochs, self.steps_per_epoch = epochs, steps_per_epoch
        # Long epochs get a progress line ~10 times per epoch unless told otherwise.
        self.log_every = log_every or (steps_per_epoch // 10 if steps_per_epoch >= 200 else 0)
        self.evaluate = evaluate
        self.epoch = 0
        self.step_in_epoch = 0
        self.step_offset = 0
        self.final: Dict[str, Optional[float]] = {}
        self.target_accuracy, self.target_metric = target_accuracy, target_metric
        self.time_to_accuracy: Optional[float] = None
        self.diverged_at: Optional[tuple] = None
        self._expected_said = False  # the job's expected duration, said once (expected_line)
        self._csv = open(job_dir / "steps.csv", "w") if chief else None
        # the console's form, resolved by the job process (distexp.job.console): bar, lines, quiet
        self.progress = os.environ.get(progress_feed.ENV, "lines")
        self.live = Feed(epochs, steps_per_epoch, meter.global_batch) \
            if chief and self.progress == "bar" else None
        if self._csv:
            self._csv.write("step,epoch,loss,loss_kind,step_time_ms\n")

    def print(self, *args) -> None:
        if self.chief:
            print(*args, flush=True)

    def detail(self, line: str) -> None:
        """A line for the log only (the job's summary, the run and its params hold its figures)."""
        self.print(LOG_ONLY_PREFIX + line)

    def phase(self, what: str) -> None:
        """Training is over and the process does `what` now (the bar says so)."""
        if self.live is not None:
            self.live.phase(what)

    def start_epoch(self, epoch: int) -> None:
        self.epoch, self.step_in_epoch = epoch, 0
        self.meter.start_epoch()

    def input_wait(self, seconds: float) -> None:
        self.meter.input_wait(seconds)

    def resume_at(self, step: int) -> None:
        """Training continues after `step` steps restored from a checkpoint: steps.csv numbers the
        steps of the whole training (warm-up is counted again from this process's first step)."""
        self.step_offset = step

    def end_step(self, loss: Union[float, Sequence[float]], kind: str = "step",
                 steps: int = 1, units: Optional[float] = None) -> None:
        """`steps` steps just finished; `loss` is each one's loss (one row each in steps.csv) or a
        single value measured at the last of them (one row); `units`: e.g. their real tokens."""
        losses = [loss] if isinstance(loss, (int, float)) else list(loss)
        first = self.meter.step + 1
        dt = self.meter.end_step(steps, units)
        self.step_in_epoch += steps
        if self._csv:
            start = self.step_offset + (first if len(losses) == steps else self.meter.step)
            for i, value in enumerate(losses):
                self._csv.write(f"{start + i},{self.epoch},{value!r},{kind},{dt * 1000:.4f}\n")
            self._csv.flush()  # a failed job keeps every step it trained
        self._expect()
        self._progress(losses[-1], dt, steps)

    def _expect(self) -> None:
        """Once EXPECT_AFTER_STEPS steps were timed (or EXPECT_AFTER_S seconds of them), the time
        the steps left will take at their speed, said once where it is a minute or more."""
        timed = self.meter.timed
        if self._expected_said or not self.chief or len(timed) < 3 or (
                len(timed) < EXPECT_AFTER_STEPS and sum(timed) < EXPECT_AFTER_S):
            return
        self._expected_said = True
        left = self.epochs * self.steps_per_epoch - self.step_offset - self.meter.step
        line = expected_line(left, sum(timed) / len(timed), self.epochs)
        if line:
            self.print(f"{LOG_ONLY_PREFIX if self.progress == 'quiet' else ''}{line}")

    def window_call(self, steps: int, units: Optional[float] = None) -> None:
        """A call of the measurement window after training (distexp.train.window) finished: timed
        for the run's figures; not a step of training (no steps.csv row, no progress line)."""
        self.meter.window_call(steps, units)

    def diverged(self, epoch: int, step_in_epoch: int, step: int, value: float) -> None:
        """The training loss became non-finite at this step: tag the run, say it once."""
        self.diverged_at = (epoch, step_in_epoch, step, value)
        self.logger.set_tags({tag.DIVERGED: "true",
                              tag.DIVERGED_AT: f"epoch {epoch} step {step_in_epoch}"})

    def diverged_line(self, stopped: bool) -> str:
        epoch, in_epoch, step, value = self.diverged_at
        what = ("training stopped there; set terminate_on_nan=false to keep training" if stopped
                else "training went on (terminate_on_nan=false); its figures are not valid")
        return (f"training diverged: train/loss is {value} at epoch {epoch} step {in_epoch} "
                f"(step {self.step_offset + step} of the run); {what}")

    def _progress(self, loss: float, dt: float, steps: int = 1) -> None:
        if self.live is not None:
            self.live.update(self.epoch, self.step_in_epoch, self.meter.step, loss)
            return
        if self.progress == "lines" and self.log_every and self.step_in_epoch % self.log_every < steps:
            done = self.step_in_epoch / self.steps_per_epoch
            bar = "=" * int(20 * done)
            self.print(f"  epoch {self.epoch}/{self.epochs} [{bar:<20}] step "
                       f"{self.step_in_epoch}/{self.steps_per_epoch}  loss {loss:.4f}  "
                       f"{text.rate(self.meter.global_batch / dt, unit='ex/s')}")

    def end_epoch(self, train: Dict[str, Optional[float]]) -> None:
        """`train`: the epoch's training figures (train/loss, train/<metric> ...)."""
        figures = self.meter.epoch_figures()  # before evaluation: eval is not training time
        ev = self.evaluate()
        metrics = {**train, **ev, **figures}
        target = ev.get(self.target_metric) if self.target_metric else None
        if (self.target_accuracy is not None and self.time_to_accuracy is None
                and target is not None and target >= self.target_accuracy):
            self.time_to_accuracy = time.perf_counter() - self.meter.train_start
            metrics[perf_keys.TIME_TO_ACCURACY_S] = self.time_to_accuracy
            self.print(f"target {self.target_metric} {self.target_accuracy} reached after "
                       f"{self.time_to_accuracy:.2f} s of training")
        self.logger.log_metrics(metrics, step=self.epoch)
        self.meter.end_epoch()
        rate = figures[perf_keys.EPOCH_EXAMPLES_PER_SEC]
        shown = "  ".join(f"{_short(k)} {v:.4f}" for k, v in {**train, **ev}.items()
                          if v is not None)
        self.print(f"{LOG_ONLY_PREFIX if self.progress == 'quiet' else ''}"
                   f"epoch {self.epoch}/{self.epochs}  {shown}  "
                   f"{text.rate(rate, unit='ex/s') if rate else 'warm-up (not timed)'}  "
                   f"epoch {figures[perf_keys.EPOCH_TIME_S]:.2f} s")
        self.final = {**train, **ev}

    def finish(self, extra: Optional[Dict[str, Optional[float]]] = None) -> Dict[str, Optional[float]]:
        """Log the run's own figures once, at the last epoch's step, under keys no epoch logs
        (perf/examples_per_sec is the run's rate, perf/epoch_examples_per_sec each epoch's): every
        MLflow series has one point per step. The final train/eval figures are the last epoch's,
        already logged, and time to accuracy was logged when reached: neither is logged again.
        `extra`: figures measured after training (FLOPs, peak FLOP/s, MFU, memory).
        Returns every final figure (result.json), logged or not."""
        perf = self.meter.final_figures()
        run_level = {**perf, **(extra or {})}
        self.logger.log_metrics(run_level, step=self.epoch)
        final = {**self.final, **run_level,
                 perf_keys.TIME_TO_ACCURACY_S: self.time_to_accuracy}  # None if not reached
        if self._csv:
            self._csv.close()
        for line in log_lines(final, self.meter.global_batch, self.meter.warmup_steps):
            self.detail(line)
        self._not_measured(final)
        return final

    def _not_measured(self, final: Dict[str, Optional[float]]) -> None:
        """The timing figures this process could not measure (a job resumed from a checkpoint at
        its last step trains no step): not logged as metrics, named in the tag
        distexp.not_measured and said in one line."""
        missing = [k for k in NOT_MEASURED_IF_NONE if k in final and final[k] is None]
        if not missing:
            return
        self.logger.set_tags({tag.NOT_MEASURED: ", ".join(missing)})
        why = ("no step was trained in this process" if not self.meter.step
               else "every step was a warm-up step")
        self.print(f"not measured: {', '.join(missing)}: {why} (not logged; tag "
                   f"{tag.NOT_MEASURED})")

    def close(self) -> None:
        """On failure: keep what was written."""
        if self._csv and not self._csv.closed:
            self._csv.close()


# the expected duration is said after this many timed steps, or this many seconds of them
EXPECT_AFTER_STEPS, EXPECT_AFTER_S = 10, 10.0
EXPECT_FROM_S = 60.0  # ... where the steps left take at least this long


def expected_line(steps_left: int, step_s: float, epochs: int) -> Optional[str]:
    """"expected: ~12 min more of training (2,990 steps left at 0.240 s each; evaluation not
    counted)" where the steps left take EXPECT_FROM_S or more at `step_s` each, else None."""
    left_s = steps_left * step_s
    if steps_left <= 0 or left_s < EXPECT_FROM_S:
        return None
    evals = f"; the {epochs} evaluations not counted" if epochs > 1 else "; evaluation not counted"
    return (f"expected: {progress_feed.duration(left_s)} more of training ({steps_left:,} steps left at "
            f"{step_s:.3f} s each{evals})")


def log_lines(final: Dict[str, Optional[float]], global_batch: int, warmup_steps: int) -> List[str]:
    """The run's figures for the log: the job's summary lines (each figure by its one formatter,
    distexp.figures.text), with what only the log shows (step-time percentiles, the input wait,
    FLOPs per example)."""
    figures = {**final, "global_batch_size": global_batch}
    out = [text.throughput(figures)]
    if final.get(perf_keys.EXAMPLES_PER_SEC):
        out.append(f"step time p50 {final[perf_keys.STEP_TIME_MS_P50]:.2f} ms, p90 "
                   f"{final[perf_keys.STEP_TIME_MS_P90]:.2f} ms ({warmup_steps} warm-up steps "
                   "excluded)")
    share = final.get(perf_keys.INPUT_WAIT_SHARE)
    if share is not None:
        out.append(f"input: {100 * share:.1f}% of the timed step time was spent waiting for batches")
    out += [text.step_split(figures), text.mfu(figures)]
    if final.get(perf_keys.FLOPS_PER_EXAMPLE) is not None:
        out.append(f"FLOPs per example: {final[perf_keys.FLOPS_PER_EXAMPLE]:.3g} (the peak's source: "
                   "tag distexp.peak_source)")
    return [ln for ln in out + [text.final(figures)] if ln]


# The run's timing figures: when one is None the process could not measure it (tag NOT_MEASURED)
NOT_MEASURED_IF_NONE = (perf_keys.TIME_TO_FIRST_STEP_S, perf_keys.EXAMPLES_PER_SEC,
                        perf_keys.STEP_TIME_MS_P50, perf_keys.STEP_TIME_MS_P90,
                        perf_keys.EXAMPLES_PER_SEC_END_TO_END)


def _short(name: str) -> str:
    """train/loss -> loss, eval/accuracy -> eval_accuracy (the console's compact names)."""
    kind, _, metric = name.partition("/")
    return metric if kind == "train" else f"{kind}_{metric}"


def write_result(job_dir: Path, final: Dict[str, Optional[float]]) -> None:
    (job_dir / "result.json").write_text(json.dumps(final, indent=1))
