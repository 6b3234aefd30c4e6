"""What a person reads while a job trains, drawn by the job process (no TensorFlow here).

`progress` (conf/config.yaml) picks the form; `resolve` turns `auto` into `bar` when this process's
stdout is a terminal, else `lines`:
- ``bar``: tqdm's progress bar (tqdm: a small, dependency-free library that is installed with
  distexp's other dependencies already; rich would add a package and its own console for one bar):
  the epoch, steps done of the epoch, examples/s, the loss and tqdm's ETA for the epoch; while the
  probes run after training it says "measuring the step split". In a sweep a bar above it,
  "sweep: job k of N (round r of R)" ("of at most" under repeats=auto) with the sweep's ETA from
  the jobs done. The trainer's own lines are written above the bar (tqdm.write); the bars vanish
  at the end.
- ``lines``: the trainer's lines as they come (no carriage return, no escape sequence): what a
  pipe, CI or Slurm's output file gets.
- ``quiet``: no progress (the trainer keeps its epoch lines for the log); the summary still ends
  the job (distexp.job.summary).

A sweep reads in one screen: its jobs' displays show none of the trainer's lines (they are in
each job's chief.log), the job process's own lines go to its distexp.log (`say`), and each job
ends with one line (distexp.job.summary.job_line), on a terminal below the live bars.

The chief trainer feeds the bar: with progress=bar it prints, at the points its loop already
returns to the host and at most every MIN_INTERVAL_S, a record PREFIX + JSON (epoch, epochs, step,
steps, rate, loss; or the phase after training; distexp.train.live). distexp.job.launch hands
those to `progress` and keeps them out of the log; every other line goes to the log and, unless
it is marked for the log only (distexp.library_logs.LOG_ONLY_PREFIX), through `write` to the
console.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from distexp.figures import text
from distexp.library_logs import LOG_ONLY_LOGGER
from distexp.progress_feed import MIN_INTERVAL_S, PREFIX, duration

# the trainer's lines a sweep's console still shows (the rest is in the job's chief.log)
IN_A_SWEEP = ("distexp: warning",)


def resolve(setting: str, stream=None) -> str:
    """`progress` as the job runs it: auto -> bar on a terminal (not TERM=dumb), else lines."""
    if setting != "auto":
        return setting
    stream = stream if stream is not None else sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return "bar" if tty and os.environ.get("TERM", "") != "dumb" else "lines"


@dataclass
class SweepPosition:
    """Where a job stands in its sweep: job k of n (launch order), round r of `rounds` (repeats),
    the end times of the sweep's jobs done so far (their records' times) and the job's set-up.
    `at_most`: repeats=auto, whose n and rounds are bounds (the rounds may end sooner). k and n
    are None where the sweeper wrote no plan (Optuna's, Hydra's basic): `num` is Hydra's number."""
    k: Optional[int]
    n: Optional[int]
    round: int = 1
    rounds: int = 1
    started: float = 0.0
    done: List[float] = field(default_factory=list)
    at_most: bool = False
    name: str = ""
    num: int = 0

    def _of(self, x: int, short: bool = False) -> str:
        return (("≤" if short else "at most ") if self.at_most else "") + str(x)

    def _where(self, short: bool) -> str:
        if self.k is None:
            return f"job {self.num}"
        rounds = f" (round {self.round} of {self._of(self.rounds, short)})" if self.rounds > 1 else ""
        return f"job {self.k} of {self._of(self.n, short)}{rounds}"

    def title(self) -> str:
        """sweep: job 4 of 9 (round 2 of 3) | sweep: job 4 of at most 12 (round 2 of at most 6)"""
        return f"sweep: {self._where(False)}"

    def short(self) -> str:
        """The job line's head: job 4 of 9 (round 2 of 3) | job 4 of ≤12 (round 2 of ≤6)"""
        return self._where(True)

    def eta_s(self, now: Optional[float] = None) -> Optional[float]:
        """While this job runs, the sweep's time left: the mean time of a job done so far (from the
        sweep's start) for each job not started, and for this one that mean less the time it has
        run (at least 0)."""
        if not self.done or self.k is None:
            return None
        now = time.time() if now is None else now
        last = max(self.done)
        mean = (last - self.started) / len(self.done)
        left_after = max(0, self.n - len(self.done) - 1)
        return max(0.0, mean - (now - last)) + mean * left_after

    def eta_text(self, now: Optional[float] = None) -> str:
        """~9 min left / ~9 min left at most (repeats=auto) / ETA after the first job"""
        eta = self.eta_s(now)
        if eta is None:
            return "ETA after the first job"
        return f"{duration(eta)} left{' at most' if self.at_most else ''}"

    def left_text(self, now: Optional[float] = None) -> str:
        """Once this job has ended: the sweep's time left, the mean time of a job so far (this one
        included) for each job left (at most that under repeats=auto: the job line's "≤N" says
        so); "" for the last job or without a plan."""
        if self.k is None or self.n - self.k <= 0:
            return ""
        now = time.time() if now is None else now
        mean = (now - self.started) / (len(self.done) + 1)
        return f"{duration(mean * (self.n - self.k))} left"


def setup_name(strategy: str, replicas: int, global_batch: int) -> str:
    """A job's set-up as a sweep names it where its sweeper gave no name: "mirrored x2 batch 128"
    (the UI's set-up rows read the same), then what else the sweep varies ("[seed=1]")."""
    return f"{strategy} x{replicas} batch {global_batch}"


# swept keys a set-up's name already says (the strategy, its replicas, the global batch)
_NAMED = ("strategy", "cpu_replicas", "gpus", "workers", "batch_size_per_replica",
          "global_batch_size", "repeat")


def sweep_position(sweep_dir: Path, num: int, repeat: int = 0, repeats: int = 1,
                   name: str = "") -> SweepPosition:
    """This job's place in its sweep, from sweep.json's plan (distexp's sweeper writes it: the jobs
    launched in order, the start, under repeats=auto the bound on the jobs and each job's set-up
    name) and the records of the jobs done; without a plan there (another sweeper), or for a job
    the plan does not list, k and n are None. `name`: the set-up's name (setup_name) where the
    plan has none; the swept values it does not say are added."""
    from distexp.sweeps.seat import JOBS_DIR, SWEEP_FILE, swept_values

    try:
        info = json.loads((sweep_dir / SWEEP_FILE).read_text())
    except (OSError, ValueError):
        info = {}
    names = info.get("names") or {}
    other = " ".join(f"{k}={v}" for k, v in swept_values(str(sweep_dir)).items()
                     if k.split(".")[0] not in _NAMED)
    name = names.get(str(num)) or (f"{name} [{other}]" if name and other else name or other)
    pos = SweepPosition(k=None, n=None, round=repeat + 1, rounds=max(1, repeats),
                        name=name or f"job {num}", num=num)
    try:
        launch, started = [int(n) for n in info["launch"]], float(info["started"])
    except (KeyError, TypeError, ValueError):
        return pos
    if num not in launch:
        return pos
    done = []
    for n in launch:
        try:
            t = (sweep_dir / JOBS_DIR / f"{n}.json").stat().st_mtime
        except OSError:
            continue
        if t >= started:  # a record of this run of the sweep (a resumed one keeps older ones)
            done.append(t)
    at_most = info.get("at_most")
    pos.k, pos.started, pos.done = launch.index(num) + 1, started, done
    pos.n, pos.at_most = (int(at_most), True) if at_most is not None else (len(launch), False)
    return pos


def say(line: str) -> None:
    """One of the job process's own lines (its MLflow run, ...): on the console for a single job;
    in a sweep in the job's distexp.log only, so that the sweep reads in one screen."""
    from distexp.config import mode

    if mode.in_multirun():
        logging.getLogger(LOG_ONLY_LOGGER).info(line)
    else:
        print(line, flush=True)


class Plain:
    """progress=lines (and quiet): the trainer's lines as they come; in a sweep (`sweep` given)
    none of them but its warnings (the job's chief.log has them all)."""

    def __init__(self, sweep: Optional[SweepPosition] = None):
        self.sweep = sweep

    def shown(self, text: str) -> bool:
        return self.sweep is None or text.startswith(IN_A_SWEEP)

    def write(self, text: str) -> None:
        if self.shown(text):
            sys.stdout.write(text)
            sys.stdout.flush()

    def progress(self, record: dict) -> None:
        pass

    def close(self) -> None:
        pass


class Bar(Plain):
    """progress=bar: tqdm's bar for the chief's epoch (and one for the sweep above it)."""

    EPOCH_FORMAT = "{desc} {percentage:3.0f}%|{bar:24}| {n_fmt}/{total_fmt} steps [{elapsed}<{remaining}{postfix}]"

    def __init__(self, sweep: Optional[SweepPosition] = None, stream=None):
        from tqdm import tqdm

        self._tqdm, self.stream = tqdm, stream if stream is not None else sys.stdout
        # a terminal that reports no size (0 x 0: a pseudo-terminal nobody sized) gets 100 x 24:
        # tqdm draws nothing on 0 rows
        self.size = {"dynamic_ncols": True} if min(_size(self.stream)) > 0 else \
            {"ncols": 100, "nrows": 24}
        self.sweep, self.epoch, self.bar, self.top = sweep, None, None, None

    def _open(self, steps: int, desc: str) -> None:
        """The bars, at the first record: training has started, the job's own lines (the MLflow
        run, print()ed by this process) are out, so nothing else writes under a bar."""
        if self.sweep is not None and self.sweep.k is not None:  # a plan: job k of n
            of = "≤" if self.sweep.at_most else ""
            self.top = self._tqdm(total=self.sweep.n, initial=len(self.sweep.done), position=0,
                                  leave=False, file=self.stream, desc=self.sweep.title(),
                                  **self.size, bar_format="{desc} |{bar:24}| {n_fmt}/" + of +
                                  "{total_fmt} jobs done{postfix}")
        self.bar = self._tqdm(total=steps, position=1 if self.top else 0, leave=False,
                              file=self.stream, desc=desc, **self.size,
                              bar_format=self.EPOCH_FORMAT, mininterval=MIN_INTERVAL_S)

    def write(self, text: str) -> None:
        if self.shown(text):
            self._tqdm.write(text.rstrip("\n"), file=self.stream)

    def progress(self, record: dict) -> None:
        if "phase" in record:  # training is over: what the trainer does now (the probes)
            if self.bar is not None:
                self.bar.set_description_str(record["phase"], refresh=False)
                self.bar.set_postfix_str("", refresh=False)
                self.bar.refresh()
            return
        steps, step = int(record["steps"]), int(record["step"])
        desc = f"epoch {record['epoch']}/{record['epochs']}"
        if self.bar is None:
            self._open(steps, desc)
        elif record["epoch"] != self.epoch:
            self.bar.reset(total=steps)
            self.bar.set_description_str(desc, refresh=False)
        self.epoch = record["epoch"]
        shown = [text.rate(record["rate"], unit="ex/s")] if record.get("rate") else []
        if record.get("loss") is not None:
            shown.append(f"loss {record['loss']:.4f}")
        self.bar.set_postfix_str(", ".join(shown), refresh=False)  # before update draws it
        if step >= self.bar.n:
            self.bar.update(step - self.bar.n)
        else:
            self.bar.n = step
        if self.top is not None:
            self.top.set_postfix_str(self.sweep.eta_text(), refresh=False)
            self.top.refresh()
        self.bar.refresh()

    def close(self) -> None:
        for b in (self.bar, self.top):
            if b is not None:
                b.close()
        self.bar = self.top = None


def _size(stream) -> tuple:
    try:
        return tuple(os.get_terminal_size(stream.fileno()))
    except (AttributeError, OSError, ValueError):
        return (0, 0)


def open_display(mode: str, sweep: Optional[SweepPosition] = None) -> Plain:
    """The display for a job's chief output (`mode`: resolve's answer; `sweep`: the job's place
    in its sweep, None for a single job)."""
    if mode == "bar":
        return Bar(sweep)
    return Plain(sweep)


def parse(line: str) -> Optional[dict]:
    """A progress record's fields (None if the line is not a whole record)."""
    try:
        return json.loads(line[len(PREFIX):])
    except ValueError:
        return None
