"""`repeats=auto`: a sweep that runs rounds until every comparison is settled.

A round runs every open set-up once, interleaved as `repeats=N` does (its jobs get
``repeat=<round>``; job number = round x set-ups + set-up, as with `repeats=N`). After each
round every comparison gets the confidence sequence of distexp.figures.sequential on its runs'
steady-state examples/s (perf/examples_per_sec), paired by round:

- each set-up against the baseline (the sweep's first 1-replica set-up, else its first set-up);
- each N-replica set-up against its equal-work control (the 1-replica set-up at its global batch,
  the same model, data and knobs: `sweep.controls=true` adds it).

The family's error rate is `sweep.alpha`, split equally over the comparisons (Bonferroni). A
comparison keeps its outcome from the round it settles; a set-up leaves the rounds when every
comparison it is part of is settled; the sweep stops when none is open or after
`sweep.max_repeats` rounds. `sweep.resume` replays the original sweep's rounds from its runs
(identity as in distexp.sweeps.planning) and continues where it stopped. No TensorFlow here.
"""
from __future__ import annotations

from distexp.figures import perf_keys
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from distexp.figures import sequential
from distexp.sweeps import planning

AUTO = "auto"
RATE = perf_keys.EXAMPLES_PER_SEC
EQUAL_WORK, BASELINE = "equal work", "baseline"


@dataclass
class Comparison:
    a: int      # set-up index
    b: int      # the set-up it is compared with
    kind: str   # EQUAL_WORK | BASELINE
    outcome: Optional[sequential.Outcome] = None

    @property
    def settled(self) -> bool:
        return self.outcome is not None and self.outcome.settled


def _family(s: planning.Setup) -> tuple:
    """What two set-ups must share to be each other's equal-work pair: everything but the
    strategy, its options and the device/batch facts."""
    return tuple((k, v) for k, v in s.key if not k.startswith(("strategy.", "resolved."))
                 and k not in planning.FACT_INPUTS and k != "strategy")


def comparisons(setups: Sequence[Optional[planning.Setup]]) -> List[Comparison]:
    """The comparisons of a sweep of these set-ups (module docstring); a set-up that failed its
    checks (None) is compared with nothing."""
    known = [i for i, s in enumerate(setups) if s is not None]
    if len(known) < 2:
        return []
    ones = [i for i in known if setups[i].replicas == 1]
    base = ones[0] if ones else known[0]
    out = []
    for i in known:
        s = setups[i]
        if s.replicas > 1:
            control = next((j for j in ones if setups[j].global_batch == s.global_batch
                            and _family(setups[j]) == _family(s)), None)
            if control is not None and control != base:
                out.append(Comparison(i, control, EQUAL_WORK))
        if i != base:
            out.append(Comparison(i, base, BASELINE))
    return out


def names(jobs: Sequence[Sequence[str]], cfgs: Sequence[Optional[DictConfig]],
          setups: Sequence[Optional[planning.Setup]]) -> List[str]:
    """Short, distinct names: 'mirrored x2', then the global batch, then the overrides that
    differ, as far as needed to tell the set-ups apart."""
    def first(i):
        strategy = cfgs[i].strategy.name if cfgs[i] is not None else "?"
        return f"{strategy} x{setups[i].replicas if setups[i] else '?'}"

    out = [first(i) for i in range(len(jobs))]
    if len(set(out)) < len(out):
        out = [f"{n} batch {s.global_batch}" if s else n for n, s in zip(out, setups)]
    if len(set(out)) < len(out):
        common = set.intersection(*(set(j) for j in jobs))
        out = [f"{n} [{' '.join(o for o in j if o not in common)}]" for n, j in zip(out, jobs)]
    return out


class Rounds:
    """The sweep's set-ups, their rates round by round, and its comparisons."""

    def __init__(self, jobs: Sequence[Sequence[str]], compose: Callable[[List[str]], DictConfig],
                 alpha: float, margin: float, max_repeats: int):
        cfgs, setups = zip(*(planning.setup_of(j, compose) for j in jobs)) if jobs else ((), ())
        self.jobs = [list(j) for j in jobs]
        self.names = names(jobs, cfgs, setups)
        self.pairs = comparisons(setups)
        self.margin, self.max_repeats = margin, max_repeats
        self.alpha_each = alpha / max(len(self.pairs), 1)
        self.g = sequential.mixing_g(self.alpha_each, math.ceil(max_repeats / 2))
        self.rates: List[List[Optional[float]]] = [[] for _ in jobs]
        self.done = 0  # rounds run

    def open_setups(self) -> List[int]:
        """Set-ups in at least one open comparison (every set-up in round 0, and when the sweep
        has nothing to compare: one round)."""
        if self.done == 0:
            return list(range(len(self.jobs)))
        return sorted({i for c in self.pairs if not c.settled for i in (c.a, c.b)})

    def round_jobs(self) -> List[tuple]:
        """(job number, overrides) of the next round's runs."""
        r = self.done
        return [(r * len(self.jobs) + i, [*self.jobs[i], f"repeat={r}"])
                for i in self.open_setups()]

    def record(self, rates: dict) -> None:
        """One round done: {set-up index: examples/s or None (failed)}; update the outcomes."""
        for i, runs in enumerate(self.rates):
            runs.append(rates.get(i))
        self.done += 1
        for c in self.pairs:
            if not c.settled:
                c.outcome = sequential.outcome(self.rates[c.a], self.rates[c.b], self.alpha_each,
                                        self.margin, self.g)

    def finished(self) -> bool:
        return self.done >= self.max_repeats or (self.done > 0 and not self.open_setups())

    def text(self, c: Comparison) -> str:
        o = c.outcome
        what = o.text(self.margin) if o is not None else "no runs"
        return f"{self.names[c.a]} vs {self.names[c.b]} ({c.kind}): {what}"

    def line(self) -> str:
        """round 3: mirrored x2 vs one_device x1 (equal work): 1.18x [1.09, 1.27] faster,
        settled; ..."""
        if not self.pairs:
            return f"round {self.done}: one set-up, nothing to compare"
        parts = [f"{self.text(c)}, {'settled' if c.settled else 'open'}" for c in self.pairs]
        return f"round {self.done}: " + "; ".join(parts)

    def summary(self) -> List[str]:
        """The outcome of every comparison: the parent run's first lines, the report's."""
        head = (f"repeats=auto: {self.done} round(s), alpha {self.alpha_each * len(self.pairs):g} "
                f"over {len(self.pairs)} comparison(s) (Bonferroni), margin "
                f"+-{100 * self.margin:g}%, steady-state examples/s paired by round")
        return [head] + [self.text(c) for c in self.pairs]


def rate_of(record: dict) -> Optional[float]:
    """A job's steady-state examples/s: its record's (a resumed sweep's run), else its
    result.json (the trainer's final figures); None for a failed or diverged run."""
    if record.get("status") != "COMPLETED":
        return None
    if record.get("examples_per_sec") is not None:
        return float(record["examples_per_sec"])
    try:
        result = json.loads((Path(record["job_dir"]) / "result.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    value = result.get(RATE)
    return None if result.get("diverged") or value is None else float(value)


def settings(config: DictConfig):
    sw = config.sweep
    return float(sw.alpha), float(sw.margin), int(sw.max_repeats)


def publish(lines: Sequence[str], sweep_dir: Path) -> None:
    """The outcomes beside the sweep (auto.json) and on its parent run (tag distexp.outcomes)."""
    from distexp.sweeps.ending import SWEEPS
    from distexp.tracking import tags as tag

    (sweep_dir / "auto.json").write_text(json.dumps({"outcomes": list(lines)}, indent=1))
    run = SWEEPS.open_run()
    if run is not None:
        run.set_tag(tag.OUTCOMES, "\n".join(lines)[:8000])


def resume_runs(config: DictConfig) -> Optional[List[dict]]:
    sweep_id = OmegaConf.select(config, "sweep.resume")
    return planning.sweep_runs(config, str(sweep_id)) if sweep_id else None
