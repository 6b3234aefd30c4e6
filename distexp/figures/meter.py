"""Throughput and step-time figures (pure Python: no TensorFlow).

Definitions (docs/tasks-and-figures.md repeats them):
- A step ends when its loss has been fetched to the host, i.e. the device finished it; a
  dispatched-but-unfinished step is never counted. A fetch may cover several steps (a call of k
  steps; on GPU/TPU replicas a window of queued calls): `end_step(steps=n)` shares its interval.
- step time: host wall time from the end of the previous step (or the start of the epoch's first
  step) to the end of this one. It includes input waiting and Python overhead between steps;
  it excludes evaluation, which runs between epochs, and checkpoint saving.
- The first `warmup_steps` steps of the run (tracing, graph optimisation, first allocations) are
  run but not timed; they still count for loss/accuracy and `perf/epoch_time_s`. With several
  steps per call, a call that ran any warm-up step is not timed at all.
- the measurement window (distexp.train.window): where training's timed steps are fewer than
  `measure_min_steps` or last less than `measure_min_seconds`, the same step runs on after
  training (the model and optimizer restored afterwards) until they are reached; those steps
  are timed as training's are (`window_call`) and count for the run's figures only, never for
  an epoch's, the step count, time to first step or end to end.
- examples/s = global batch x timed steps / their summed step time (per epoch and for the run:
  the run's over training's timed steps and the window's).
- units/s (tasks that count units, e.g. seq2seq's real target tokens: perf/tokens_per_sec) =
  units the timed steps trained on / their summed step time.
- spread: the timed steps are cut into windows of WINDOW consecutive steps; the 95 % interval is
  1.96 x the standard error of the per-window examples/s (Horovod's benchmark convention).
- time to first step: from the job's start (the `python -m distexp` job process starting it) to
  the end of the first training step: process start-up, TensorFlow import, data loading, model
  building and the first step's tracing included.
- CPU time: the trainer process's CPU seconds (all threads, `time.process_time`) over the timed
  steps, the same windows as step time (kept in result.json as `cpu_seconds_timed`; the benchmark
  uses it because it is far less sensitive than wall time to other load on the machine).
  CPU/wall (`cpu_per_wall`) = that over the timed steps' summed step time (`timed_seconds`):
  distexp.figures.disturbance judges a starved run from it.
- input wait share: of the timed steps' summed step time, the part spent in the host's
  `next(iterator)` (measured only where the loop takes each batch on the host; else None).
- time to accuracy: from the start of the first epoch to the end of the first evaluation whose
  accuracy reached the target (training and the evaluations before it included; start-up not).
- MFU: training FLOPs per example (3 x the forward pass's FLOPs, counted by TensorFlow's profiler
  on the traced forward graph) x examples/s / the devices' peak FLOP/s: a constant of the
  hardware (a GPU's datasheet, the CPU's theoretical peak: distexp.figures.cpu_peak).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from distexp.figures import disturbance, perf_keys

WINDOW = 10


def all_warmup_line(steps: int, warmup_steps: int, epochs: int) -> Optional[str]:
    """Said before training where every one of the `steps` steps is a warm-up step (nothing will
    be timed): how many steps a measurement with a 95 % interval (2 windows) needs; else None."""
    if steps <= 0 or steps > warmup_steps:
        return None
    per_epoch = -(-(warmup_steps + 2 * WINDOW) // epochs)
    return (f"Note: all {steps} steps are warm-up (warmup_steps={warmup_steps}): no examples/s; "
            f"for one with its interval: steps_per_epoch={per_epoch}"
            + (f" (epochs={epochs})" if epochs > 1 else ""))


def percentile(values: List[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method), q in [0, 100]."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class Meter:
    global_batch: int
    replicas: int
    warmup_steps: int
    job_start: float
    step: int = 0
    time_to_first_step: Optional[float] = None
    first_step_unix: Optional[float] = None
    timed: List[float] = field(default_factory=list)     # step times of timed steps, whole run
    _epoch_timed: List[float] = field(default_factory=list)
    _epoch_start: float = 0.0
    _last: float = 0.0
    train_start: Optional[float] = None
    input_time: float = 0.0   # host time in next(iterator) before timed steps
    input_steps: int = 0
    cpu_timed: float = 0.0    # this process's CPU time (all threads) over the timed steps
    _last_cpu: float = 0.0
    units_name: Optional[str] = None   # e.g. "tokens": perf/tokens_per_sec
    units_timed: float = 0.0
    _epoch_units: float = 0.0

    train_end: Optional[float] = None   # the last epoch's end (its evaluation and checkpoint done)
    window_steps: int = 0     # of the timed steps, those the measurement window ran after training
    machine_start: Optional[disturbance.Sample] = None  # the machine's counters at the first timed step

    def start_epoch(self) -> None:
        self._epoch_timed = []
        self._epoch_units = 0.0
        self._epoch_start = self._last = time.perf_counter()
        self._last_cpu = time.process_time()
        if self.train_start is None:
            self.train_start = self._epoch_start

    def input_wait(self, seconds: float) -> None:
        """The next step waited `seconds` for its batch (part of that step's time)."""
        if self.step + 1 > self.warmup_steps:
            self.input_time += seconds
            self.input_steps += 1

    def input_share(self) -> Optional[float]:
        total = sum(self.timed)
        if not self.timed or self.input_steps != len(self.timed) or total <= 0:
            return None
        return self.input_time / total

    def end_step(self, steps: int = 1, units: Optional[float] = None) -> float:
        """Call right after the step's result reached the host. `steps` > 1 when one call ran
        several steps (steps per execution): the interval is shared equally among them. `units`:
        what those steps trained on beyond examples (e.g. real tokens), counted when timed."""
        now, cpu = time.perf_counter(), time.process_time()
        dt = (now - self._last) / steps
        cpu_dt, self._last, self._last_cpu = cpu - self._last_cpu, now, cpu
        # A call that ran any warm-up step is warm-up as a whole (its time includes the tracing).
        timed = self.step >= self.warmup_steps
        if timed:
            self.cpu_timed += cpu_dt
            if units is not None:
                self.units_timed += units
                self._epoch_units += units
        for _ in range(steps):
            self.step += 1
            if self.step == 1:
                self.first_step_unix = time.time()
                self.time_to_first_step = self.first_step_unix - self.job_start
            if timed:
                self.timed.append(dt)
                self._epoch_timed.append(dt)
        if self.machine_start is None and self.step >= self.warmup_steps:  # timed steps begin
            self.machine_start = disturbance.sample()
        return dt

    def begin_window(self) -> None:
        """The measurement window after training starts: its first call is timed from here."""
        self._last, self._last_cpu = time.perf_counter(), time.process_time()
        if self.machine_start is None:
            self.machine_start = disturbance.sample()

    def window_call(self, steps: int, units: Optional[float] = None) -> float:
        """A call of the measurement window ran `steps` steps: timed as a training call is (the
        run's figures), but no step of training (step count, epochs, end to end)."""
        now, cpu = time.perf_counter(), time.process_time()
        dt = (now - self._last) / steps
        self.cpu_timed += cpu - self._last_cpu
        self._last, self._last_cpu = now, cpu
        if units is not None:
            self.units_timed += units
        self.timed.extend([dt] * steps)
        self.window_steps += steps
        return dt

    def timed_seconds(self) -> float:
        """The timed steps' summed step time: what the run's figures rest on."""
        return sum(self.timed)

    def cpu_per_wall(self) -> Optional[float]:
        """The trainer's CPU seconds over the timed steps per second of their wall time."""
        total = self.timed_seconds()
        return self.cpu_timed / total if self.timed and total > 0 else None

    def end_epoch(self) -> None:
        """The epoch is over, its evaluation and checkpoint included (end to end's clock)."""
        self.train_end = time.perf_counter()

    def end_to_end(self) -> Optional[float]:
        """Examples trained (warm-up included) over the wall time from the first step's start to
        the last epoch's end: input fill, evaluation, checkpoints and warm-up all included."""
        if self.train_start is None or self.train_end is None or self.step == 0:
            return None
        return self.global_batch * self.step / (self.train_end - self.train_start)

    def mean_step_ms(self) -> Optional[float]:
        """The timed steps' mean step time in ms (what distexp.figures.breakdown splits)."""
        return 1000.0 * sum(self.timed) / len(self.timed) if self.timed else None

    def exclude_since_last_step(self) -> None:
        """What ran since the last step ended (a checkpoint save) is not part of the next step
        (neither its wall time nor its CPU time)."""
        self._last, self._last_cpu = time.perf_counter(), time.process_time()

    def epoch_figures(self) -> Dict[str, Optional[float]]:
        """The epoch's own figures, under `perf/epoch_*` keys: the run's figures (final_figures)
        keep the plain keys, so no MLflow series holds both an epoch's rate and the run's."""
        elapsed = time.perf_counter() - self._epoch_start
        out = {
            perf_keys.EPOCH_EXAMPLES_PER_SEC: self._rate(self._epoch_timed),
            perf_keys.EPOCH_EXAMPLES_PER_SEC_PER_REPLICA: _div(self._rate(self._epoch_timed),
                                                            self.replicas),
            perf_keys.EPOCH_TIME_S: elapsed,
        }
        if self.units_name:
            out[perf_keys.epoch_units_per_sec(self.units_name)] = _per(self._epoch_units,
                                                                self._epoch_timed)
        return out

    def final_figures(self) -> Dict[str, Optional[float]]:
        rate = self._rate(self.timed)
        mean, ci = self.spread()
        ms = [t * 1000.0 for t in self.timed]
        return {
            perf_keys.EXAMPLES_PER_SEC: rate,
            perf_keys.EXAMPLES_PER_SEC_PER_REPLICA: _div(rate, self.replicas),
            perf_keys.EXAMPLES_PER_SEC_CI95: ci,
            perf_keys.STEP_TIME_MS_P50: percentile(ms, 50) if ms else None,
            perf_keys.STEP_TIME_MS_P90: percentile(ms, 90) if ms else None,
            perf_keys.TIME_TO_FIRST_STEP_S: self.time_to_first_step,
            perf_keys.TIMED_STEPS: float(len(self.timed)),
            perf_keys.INPUT_WAIT_SHARE: self.input_share(),
            perf_keys.EXAMPLES_PER_SEC_END_TO_END: self.end_to_end(),
            **({perf_keys.units_per_sec(self.units_name): _per(self.units_timed, self.timed)}
               if self.units_name else {}),
        }

    def spread(self):
        """(mean, 95 % half-width) of per-window examples/s; half-width None under 2 windows."""
        n = len(self.timed) // WINDOW
        rates = [self._rate(self.timed[i * WINDOW:(i + 1) * WINDOW]) for i in range(n)]
        if n < 2:
            return (rates[0] if rates else None), None
        return statistics.fmean(rates), 1.96 * statistics.stdev(rates) / math.sqrt(n)

    def _rate(self, times: List[float]) -> Optional[float]:
        total = sum(times)
        return self.global_batch * len(times) / total if times and total > 0 else None


def _per(units: float, times: List[float]) -> Optional[float]:
    total = sum(times)
    return units / total if times and total > 0 else None


def _div(a: Optional[float], b: float) -> Optional[float]:
    return None if a is None else a / b


def mfu(flops_per_example: Optional[float], examples_per_sec: Optional[float],
        peak_flops: Optional[float]) -> Optional[float]:
    """Model FLOPs utilisation: achieved model FLOP/s over the hardware's peak (None if unknown)."""
    if not flops_per_example or not examples_per_sec or not peak_flops:
        return None
    return flops_per_example * examples_per_sec / peak_flops
