"""`repeats=auto` (and the decision of `repeats=N`): rounds of set-ups, their comparisons, and
the records of what they decided (distexp.figures.outcomes).

A round runs every open set-up once, interleaved as `repeats=N` does (its jobs get
``repeat=<round>``; job number = round x set-ups + set-up, as with `repeats=N`), in an order
rotated by one place each round (counterbalanced). After each round every comparison gets an
interval for its speed ratio from its runs' steady-state examples/s (perf/examples_per_sec),
paired by round (distexp.figures.sequential):

- each set-up against the baseline (the sweep's first 1-replica set-up, else its first set-up);
- each N-replica set-up against its equal-work control (the 1-replica set-up at its global batch,
  the same model, data and knobs: `sweep.controls=true` adds it).

The family's error rate is `sweep.alpha`, split equally over the comparisons (Bonferroni).
`repeats=auto`: repeated confidence intervals over the planned `sweep.max_repeats` rounds
(sequential.planned); a comparison keeps its outcome from the round it settles; a set-up leaves
the rounds when every comparison it is part of is settled; the sweep stops when none is open or
after `sweep.max_repeats` rounds. `sweep.resume` replays the original sweep's rounds from its
runs (identity as in distexp.sweeps.planning), keeps its plan (`planned_horizon`) and continues
where it stopped. `repeats=N`: the same comparisons, one fixed-sample look after the N rounds
(sequential.Fixed). No TensorFlow here.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from distexp.figures import outcomes, perf_keys, sequential
from distexp.sweeps import planning
from distexp.sweeps.records import AUTO_FILE
from distexp.sweeps.setups import key_of

AUTO = "auto"
RATE = perf_keys.EXAMPLES_PER_SEC
EQUAL_WORK, BASELINE = outcomes.EQUAL_WORK, outcomes.BASELINE
TAG_MAX = 8000  # MLflow's limit on a run tag's value


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
          setups: Sequence[Optional[planning.Setup]], controls: Sequence[int] = ()) -> List[str]:
    """Short, distinct names (distexp.figures.outcomes.setup_names: 'mirrored x2', 'one_device x1
    batch 128 (control)'), then the overrides that differ, as far as needed to tell them apart."""
    strategies = [c.strategy.name if c is not None else "?" for c in cfgs]
    out = outcomes.setup_names(setups, strategies, controls)
    if len(set(out)) < len(out):
        common = set.intersection(*(set(j) for j in jobs))
        out = [f"{n} [{' '.join(o for o in j if o not in common)}]" if out.count(n) > 1 else n
               for n, j in zip(out, jobs)]
    return out


class Rounds:
    """The sweep's set-ups, their rates round by round, its comparisons and their decision."""

    def __init__(self, jobs: Sequence[Sequence[str]], compose: Callable[[List[str]], DictConfig],
                 alpha: float, margin: float, max_repeats: int, *, controls: Sequence[int] = (),
                 horizon: Optional[int] = None, repeats="auto"):
        cfgs, setups = zip(*(planning.setup_of(j, compose) for j in jobs)) if jobs else ((), ())
        self.jobs = [list(j) for j in jobs]
        self.names = names(jobs, cfgs, setups, controls)
        self.keys = [key_of(s, j) for s, j in zip(setups, jobs)]  # the runs' set-up tags
        self.pairs = comparisons(setups)
        self.alpha, self.margin, self.max_repeats = alpha, margin, max_repeats
        self.repeats = repeats
        self.alpha_each = alpha / max(len(self.pairs), 1)
        # the plan is the first sweep's (a continued sweep keeps its boundary: docs/sweeps.md)
        self.horizon = horizon or max_repeats
        self.rule = (sequential.planned(self.alpha_each, self.horizon) if repeats == AUTO
                     else sequential.Fixed(self.alpha_each))
        self.controls = list(controls)
        self.rates: List[List[Optional[float]]] = [[] for _ in jobs]
        self.done = 0  # rounds run

    def open_setups(self) -> List[int]:
        """Set-ups in at least one open comparison (every set-up in round 0, and when the sweep
        has nothing to compare: one round)."""
        if self.done == 0:
            return list(range(len(self.jobs)))
        return sorted({i for c in self.pairs if not c.settled for i in (c.a, c.b)})

    def round_jobs(self) -> List[tuple]:
        """(job number, overrides) of the next round's runs, in the order they run: the open
        set-ups rotated by one place a round (counterbalanced: over k rounds each of k set-ups
        runs once in each place, so an effect of the place cancels in the paired ratios)."""
        r, open_ = self.done, self.open_setups()
        k = r % len(open_) if open_ else 0
        return [(r * len(self.jobs) + i, [*self.jobs[i], f"repeat={r}"])
                for i in open_[k:] + open_[:k]]

    def record(self, rates: dict) -> None:
        """One round done: {set-up index: examples/s or None (failed)}; update the outcomes."""
        for i, runs in enumerate(self.rates):
            runs.append(rates.get(i))
        self.done += 1
        for c in self.pairs:
            if not c.settled or self.repeats != AUTO:  # repeats=N: one look, the last round's
                c.outcome = sequential.outcome(self.rates[c.a], self.rates[c.b], self.margin,
                                               self.rule)

    def finished(self) -> bool:
        return self.done >= self.max_repeats or (self.done > 0 and not self.open_setups())

    def decision(self, next_command: Optional[Callable[[int], str]] = None) -> outcomes.Decision:
        """The records of every comparison as it stands (distexp.figures.outcomes)."""
        recs = []
        for c in self.pairs:
            o = c.outcome or sequential.Outcome(sequential.OPEN, None, 0.0, math.inf, 0)
            need = None
            if not o.settled and o.ratio is not None:
                need = sequential.rounds_to_settle(math.log(o.ratio), o.spread, self.margin,
                                                   self.rule, o.rounds + 1)
            recs.append(outcomes.Record(
                c.a, c.b, [self.names[c.a], self.names[c.b]], c.kind, o.ratio,
                o.low or None, None if math.isinf(o.high) else o.high, o.kind, o.rounds,
                self.rule.method, o.spread, need))
        likely = [r for r in recs if not r.settled and r.rounds_needed]
        # the next step: the rounds that would likely settle the first of them
        n = min((r.rounds_needed + self.done - r.rounds for r in likely), default=None)
        n = n if n is not None and n <= outcomes.MOST_ROUNDS else None
        return outcomes.Decision(
            str(self.repeats), self.rule.method, self.alpha, self.margin, self.done, self.horizon,
            list(self.names), recs, next_command(n) if n and next_command else None, n,
            self.controls, setup_keys=list(self.keys))


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


def publish(decision: outcomes.Decision, sweep_dir: Path) -> None:
    """The decision beside the sweep (auto.json) and on its parent run (tag distexp.outcomes):
    the records every surface renders (distexp.figures.outcomes)."""
    from distexp.sweeps.ending import SWEEPS
    from distexp.tracking import tags as tag

    text = decision.to_json()
    (sweep_dir / AUTO_FILE).write_text(text)
    run = SWEEPS.open_run()
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    if run is not None and len(compact) <= TAG_MAX:
        run.set_tag(tag.OUTCOMES, compact)
    elif run is not None and decision.rounds <= 1:  # said once
        print(f"distexp: the sweep's decision ({len(decision.comparisons)} comparisons) is over "
              f"MLflow's tag limit: it is in {sweep_dir / AUTO_FILE} only", flush=True)


def planned_horizon(config: DictConfig) -> Optional[int]:
    """A resumed auto sweep's planned rounds (its first sweep's, from its parent's decision):
    the boundary a continuation keeps."""
    sweep_id = OmegaConf.select(config, "sweep.resume")
    if not sweep_id:
        return None
    from distexp.tracking import tags as tag

    try:
        parent = planning.find_parent(config, str(sweep_id))
    except Exception:  # noqa: BLE001  (the callback has refused a missing one already)
        return None
    found = outcomes.from_json(parent.data.tags.get(tag.OUTCOMES))
    return found.horizon if found is not None and not found.fixed else None


def continue_command(config: DictConfig, sweep_id: Optional[str], rounds: int) -> Optional[str]:
    """python -m distexp -m <the sweep's overrides> sweep.resume=<id> sweep.max_repeats=<n>"""
    if not sweep_id:
        return None
    from distexp.tracking.redaction import redact_text

    kept = [o for o in config.hydra.overrides.task
            if o.split("=", 1)[0].lstrip("+~") not in ("sweep.resume", "sweep.max_repeats")]
    return redact_text(" ".join(["python -m distexp -m", *kept, f"sweep.resume={sweep_id}",
                                 f"sweep.max_repeats={rounds}"]))


def resume_runs(config: DictConfig) -> Optional[List[dict]]:
    sweep_id = OmegaConf.select(config, "sweep.resume")
    return planning.sweep_runs(config, str(sweep_id)) if sweep_id else None
