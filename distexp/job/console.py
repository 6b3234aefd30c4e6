"""What a person reads while a job trains, drawn by the job process (no TensorFlow here).

`progress` (conf/config.yaml) picks the form; `resolve` turns `auto` into `bar` when this process's
stdout is a terminal, else `lines`:
- ``bar``: tqdm's progress bar (tqdm: a small, dependency-free library that is installed with
  distexp's other dependencies already; rich would add a package and its own console for one bar):
  the epoch, steps done of the epoch, examples/s, the loss and tqdm's ETA for the epoch; in a sweep
  a line above it, "sweep: job k of N (round r of R)" with the sweep's ETA from the jobs done.
  The trainer's own lines are written above the bar (tqdm.write); the bar vanishes at the end.
- ``lines``: the trainer's lines as they come (no carriage return, no escape sequence): what a
  pipe, CI or Slurm's output file gets; a sweep's job starts with one line "sweep: job k of N ...".
- ``quiet``: no progress (the trainer keeps its epoch lines for the log); the summary still ends
  the job (distexp.job.summary).

The chief trainer feeds the bar: with progress=bar it prints, at the points its loop already
returns to the host and at most every MIN_INTERVAL_S, a record PREFIX + JSON (epoch, epochs, step,
steps, rate, loss; distexp.train.live). distexp.job.launch hands those to `progress` and keeps
them out of the log; every other line goes to the log and, unless it is one of DETAIL (figures
the run, the log and the summary hold), through `write` to the console.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from distexp.progress_feed import MIN_INTERVAL_S, PREFIX

# The trainer's lines whose content the summary, the log and the run hold: the log keeps them
DETAIL = ("Strategy: ", "Global batch: ", "Model: ", "steps_per_execution: ", "throughput: ",
          "end to end: ", "step time split", "input: ", "MFU: ", "final: ")


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


def duration(seconds: float) -> str:
    """~40 s, ~3 min, ~1.5 h."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


@dataclass
class SweepPosition:
    """Where a job stands in its sweep: job k of n (launch order), round r of `rounds` (repeats),
    and the end times of the sweep's jobs done so far (their records' times)."""
    k: int
    n: int
    round: int = 1
    rounds: int = 1
    started: float = 0.0
    done: List[float] = field(default_factory=list)

    def title(self) -> str:
        rounds = f" (round {self.round} of {self.rounds})" if self.rounds > 1 else ""
        return f"sweep: job {self.k} of {self.n}{rounds}"

    def eta_s(self, now: Optional[float] = None) -> Optional[float]:
        """The sweep's time left: the mean time of a job done so far (from the sweep's start) for
        each job not started, and for this one that mean less the time it has run (at least 0)."""
        if not self.done:
            return None
        now = time.time() if now is None else now
        last = max(self.done)
        mean = (last - self.started) / len(self.done)
        left_after = max(0, self.n - len(self.done) - 1)
        return max(0.0, mean - (now - last)) + mean * left_after

    def eta_text(self, now: Optional[float] = None) -> str:
        eta = self.eta_s(now)
        if eta is None:
            return "ETA after the first job"
        done = len(self.done)
        return f"{duration(eta)} left (from the {done} job{'s' if done > 1 else ''} done)"

    def line(self) -> str:
        return f"{self.title()}; {self.eta_text()}"


def sweep_position(sweep_dir: Path, num: int, repeat: int = 0, repeats: int = 1) \
        -> Optional[SweepPosition]:
    """This job's place in its sweep, from sweep.json's plan (distexp's sweeper writes it) and the
    records of the jobs done; None when the sweep has no plan there (another sweeper)."""
    from distexp.sweeps.seat import JOBS_DIR, SWEEP_FILE

    try:
        info = json.loads((sweep_dir / SWEEP_FILE).read_text())
        launch, started = [int(n) for n in info["launch"]], float(info["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if num not in launch:
        return None
    done = []
    for n in launch:
        try:
            t = (sweep_dir / JOBS_DIR / f"{n}.json").stat().st_mtime
        except OSError:
            continue
        if t >= started:  # a record of this run of the sweep (a resumed one keeps older ones)
            done.append(t)
    return SweepPosition(k=launch.index(num) + 1, n=len(launch), round=repeat + 1,
                         rounds=max(1, repeats), started=started, done=done)


class Plain:
    """progress=lines (and quiet): the trainer's lines as they come."""

    def __init__(self, sweep: Optional[SweepPosition] = None):
        self.sweep = sweep
        if sweep is not None:
            self.write(sweep.line() + "\n")

    def write(self, text: str) -> None:
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
        if self.sweep is not None:
            self.top = self._tqdm(total=self.sweep.n, initial=len(self.sweep.done), position=0,
                                  leave=False, file=self.stream, desc=self.sweep.title(),
                                  **self.size, bar_format="{desc} |{bar:24}| {n_fmt}/{total_fmt} "
                                                          "jobs done{postfix}")
        self.bar = self._tqdm(total=steps, position=1 if self.top else 0, leave=False,
                              file=self.stream, desc=desc, **self.size,
                              bar_format=self.EPOCH_FORMAT, mininterval=MIN_INTERVAL_S)

    def write(self, text: str) -> None:
        self._tqdm.write(text.rstrip("\n"), file=self.stream)

    def progress(self, record: dict) -> None:
        steps, step = int(record["steps"]), int(record["step"])
        desc = f"epoch {record['epoch']}/{record['epochs']}"
        if self.bar is None:
            self._open(steps, desc)
        elif record["epoch"] != self.epoch:
            self.bar.reset(total=steps)
            self.bar.set_description_str(desc, refresh=False)
        self.epoch = record["epoch"]
        shown = [f"{record['rate']:,.0f} ex/s"] if record.get("rate") else []
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
    """The display for a job's chief output (`mode`: resolve's answer)."""
    if mode == "bar":
        return Bar(sweep)
    return Plain(sweep if mode == "lines" else None)


def parse(line: str) -> Optional[dict]:
    """A progress record's fields (None if the line is not a whole record)."""
    try:
        return json.loads(line[len(PREFIX):])
    except ValueError:
        return None
