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

The **primary** comparisons are the sweep's question: a set-up's equal-work comparison where it
has one, else its comparison with the baseline (a control added by `sweep.controls` is never
asked about). Each comparison has two halves: speed, and the final eval accuracy's difference in
points (sequential.difference; it holds the sweep open only where the set-ups train different
mathematics, `_maths`; `sweep.seed_by_round`: round r runs every set-up with seed + r). The
family's error rate is `sweep.alpha`, split equally over both halves of every comparison that
gets an interval (Bonferroni over 2 x comparisons: `Rounds.alpha_each`), primary or not.
`repeats=auto`: repeated confidence intervals over the planned `sweep.max_repeats` rounds
(sequential.planned); a comparison keeps its outcome from the round it settles (*at the margin*
included); a set-up leaves the rounds when every comparison it is part of is settled; the sweep
stops when no primary comparison is open or after `sweep.max_repeats` rounds, the others reported
as they stand. A **disturbed** run (`disturbed`) is left out of the pairs, and in repeats=auto its
round runs once more. `sweep.resume` replays the original sweep's rounds from its
runs (identity as in distexp.sweeps.planning), keeps its plan (distexp.sweeps.sweep.planned_horizon) and continues
where it stopped. `repeats=N`: the same comparisons, one fixed-sample look after the N rounds
(sequential.Fixed). No TensorFlow here.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from distexp import console_lines
from distexp.figures import outcomes, sequential
from distexp.sweeps import planning
from distexp.sweeps.records import AUTO_FILE
from distexp.sweeps.setups import key_of

AUTO = "auto"
EQUAL_WORK, BASELINE = outcomes.EQUAL_WORK, outcomes.BASELINE
TAG_MAX = 8000  # MLflow's limit on a run tag's value
STARVED = 0.6  # a run's CPU/wall under this x the median of its set-up's other runs: disturbed


@dataclass
class Comparison:
    a: int      # set-up index
    b: int      # the set-up it is compared with
    kind: str   # EQUAL_WORK | BASELINE
    outcome: Optional[sequential.Outcome] = None
    primary: bool = True  # the sweep's question (module docstring)
    accuracy: Optional[sequential.Difference] = None  # the accuracy half (None: no paired round)
    same_maths: bool = True  # the two train the same mathematics: accuracy as it stands
    time: Optional[sequential.TimeToTarget] = None  # time to target_accuracy (as it stands)

    @property
    def speed_settled(self) -> bool:
        return self.outcome is not None and self.outcome.settled

    @property
    def settled(self) -> bool:
        """The speed half settled, and the accuracy half too where the set-ups train different
        mathematics (and an accuracy was measured)."""
        return self.speed_settled and (self.same_maths or self.accuracy is None
                                       or self.accuracy.settled)


def _family(s: planning.Setup) -> tuple:
    """What two set-ups must share to be each other's equal-work pair: everything but the
    strategy, its options and the device/batch facts."""
    return tuple((k, v) for k, v in s.key if not k.startswith(("strategy.", "resolved."))
                 and k not in planning.FACT_INPUTS and k != "strategy")


def _maths(s: planning.Setup) -> tuple:
    """What fixes the mathematics a set-up trains (`_family`: model, data, precision, optimizer,
    XLA, every knob) with its global batch and learning rate: two set-ups with the same train
    the same steps whatever their strategy (equal work)."""
    return _family(s) + (s.global_batch, dict(s.key).get("resolved.learning_rate"))


def comparisons(setups: Sequence[Optional[planning.Setup]],
                controls: Sequence[int] = ()) -> List[Comparison]:
    """The comparisons of a sweep of these set-ups (module docstring), each marked primary or
    not; a set-up that failed its checks (None) is compared with nothing."""
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
    work = {c.a for c in out if c.kind == EQUAL_WORK}
    for c in out:
        c.primary = c.a not in controls and (c.kind == EQUAL_WORK or c.a not in work)
        c.same_maths = _maths(setups[c.a]) == _maths(setups[c.b])
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

    def __init__(self, jobs: Sequence[Sequence[str]], setup_of: Callable[[Sequence[str]], tuple],
                 alpha: float, margin: float, max_repeats: int, *, controls: Sequence[int] = (),
                 horizon: Optional[int] = None, repeats="auto", accuracy_margin: float = 0.5,
                 seed_by_round: bool = False):
        # (config, Setup) of each job (distexp.sweeps.sweep.Sweep.setup_of: found once)
        cfgs, setups = zip(*(setup_of(j) for j in jobs)) if jobs else ((), ())
        self.jobs = [list(j) for j in jobs]
        self.names = names(jobs, cfgs, setups, controls)
        self.keys = [key_of(s, j) for s, j in zip(setups, jobs)]  # the runs' set-up tags
        self.pairs = comparisons(setups, controls)
        self.alpha, self.margin, self.max_repeats = alpha, margin, max_repeats
        self.repeats = repeats
        # the set-ups' one target_accuracy: a third half, time to it (None: no such half)
        self.target = target_of(cfgs)
        # every half of every comparison: speed, accuracy and, with a target, time to it
        # (Bonferroni over 2 or 3 x comparisons)
        self.alpha_each = alpha / max((2 if self.target is None else 3) * len(self.pairs), 1)
        self.times: List[List[Optional[float]]] = [[] for _ in jobs]  # s to target, inf: missed
        self.accuracy_margin = accuracy_margin
        self.seeds = [int(c.seed) if seed_by_round and c is not None else None for c in cfgs]
        self.accuracies: List[List[Optional[float]]] = [[] for _ in jobs]  # points, by slot
        # the plan is the first sweep's (a continued sweep keeps its boundary: docs/sweeps.md)
        self.horizon = horizon or max_repeats
        self.rule = (sequential.planned(self.alpha_each, self.horizon) if repeats == AUTO
                     else sequential.Fixed(self.alpha_each))
        self.controls = list(controls)
        self.rates: List[List[Optional[float]]] = [[] for _ in jobs]
        self.windows: List[List[Optional[float]]] = [[] for _ in jobs]  # CPU/wall of each run
        self.nums: List[List[Optional[int]]] = [[] for _ in jobs]
        self.done = 0  # rounds run, re-runs included (a job's number and `repeat`)
        self.reruns: List[int] = []  # the rounds (0-based, of `done`) that re-ran the one before
        self.rerun_next = False
        self.disturbed: List[dict] = []  # outcomes.Decision.disturbed

    @property
    def rounds(self) -> int:
        """Rounds run, a re-run of a disturbed round not counted again."""
        return self.done - len(self.reruns)

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
        return [(r * len(self.jobs) + i, self.job(i, r)) for i in open_[k:] + open_[:k]]

    def job(self, i: int, r: int) -> List[str]:
        """Set-up i's overrides in slot r: ``repeat=r``, and with `sweep.seed_by_round`
        ``seed=<its seed + r>`` (every set-up of a round the same seed, a new one each round)."""
        job = [*self.jobs[i], f"repeat={r}"]
        if self.seeds[i] is None:
            return job
        return [o for o in job if o.split("=", 1)[0].lstrip("+~") != "seed"] + [
            f"seed={self.seeds[i] + r}"]

    def record(self, rates: dict, windows: Optional[Dict[int, tuple]] = None,
               nums: Optional[Dict[int, int]] = None,
               accuracies: Optional[Dict[int, Optional[float]]] = None,
               times: Optional[Dict[int, Optional[float]]] = None) -> List[str]:
        """One round done: {set-up index: examples/s or None (failed)}, `windows` {set-up index:
        (CPU/wall, the job's own disturbed reason): job_figures.window_of}, `nums` {set-up: job number},
        `accuracies` {set-up: points, `accuracy_of`: a disturbed run's stays, speed is what a
        disturbance moves}, `times` {set-up: seconds to the target, inf: missed, `time_of`};
        flag its disturbed runs (left out of the pairs), update the outcomes. The lines that say
        which runs were disturbed and whether the round runs again."""
        slot, windows, nums = self.done, windows or {}, nums or {}
        again = self.rerun_next
        if again:
            self.reruns.append(slot)
        for i, runs in enumerate(self.rates):
            runs.append(rates.get(i))
            self.windows[i].append((windows.get(i) or (None, None))[0])
            self.nums[i].append(nums.get(i))
            self.accuracies[i].append((accuracies or {}).get(i))
            self.times[i].append((times or {}).get(i))
        found = self._flag(slot, {i: w[1] for i, w in windows.items() if w and w[1]})
        self.done += 1
        self.rerun_next = self.repeats == AUTO and not again and any(
            f["slot"] == slot for f in found)
        for c in self.pairs:
            if not c.speed_settled or self.repeats != AUTO:  # repeats=N: one look, the last's
                c.outcome = sequential.outcome(self.rates[c.a], self.rates[c.b], self.margin,
                                               self.rule)
            if c.accuracy is None or not c.accuracy.settled or self.repeats != AUTO:
                c.accuracy = sequential.difference(self.accuracies[c.a], self.accuracies[c.b],
                                                   self.accuracy_margin, self.rule)
            if self.target is not None and (c.time is None or not c.time.settled
                                            or self.repeats != AUTO):
                c.time = sequential.time_to_target(self.times[c.a], self.times[c.b],
                                                   self.margin, self.rule)
        return [console_lines.fit(self._said(f, slot, again)) for f in found]  # 120 columns

    def _flag(self, slot: int, own: Dict[int, str]) -> List[dict]:
        """Flag this round's runs that say they were disturbed (`own`) and every run so far whose
        CPU/wall is under STARVED x the median of its set-up's other unflagged runs (2 at least):
        its rate leaves the pairs (None). The new flags."""
        found = []
        for i in range(len(self.rates)):
            for j in range(slot + 1):
                why = own.get(i) if j == slot else None
                why = why or self._starved(i, j)
                if why and self.rates[i][j] is not None:
                    self.rates[i][j] = None
                    if self.times[i][j] is not None and not math.isinf(self.times[i][j]):
                        self.times[i][j] = None  # a time is what a disturbance moves; a miss stays
                    found.append({"setup": i, "name": self.names[i], "slot": j,
                                  "round": j + 1 - sum(r <= j for r in self.reruns),
                                  "job": self.nums[i][j], "reason": why})
        self.disturbed += found
        return found

    def _starved(self, i: int, j: int) -> Optional[str]:
        x = self.windows[i][j]
        others = [w for k, w in enumerate(self.windows[i])
                  if k != j and w is not None and self.rates[i][k] is not None]
        if x is None or len(others) < 2:
            return None
        median = statistics.median(others)
        if x >= STARVED * median:
            return None
        return f"CPU/wall {x:.2f}, under {STARVED:g}x its set-up's median {median:.2f}"

    def _said(self, f: dict, slot: int, again: bool) -> str:
        """round 3: one_device x1 batch 64 (job 7) disturbed (CPU/wall 0.40, ...): left out of
        the pairs; round 3 runs again"""
        what = f"round {f['round']}: {f['name']} (job {f['job']}) disturbed ({f['reason']})"
        if f["slot"] != slot:
            return f"{what}: left out of the pairs (seen beside the later rounds)"
        if again:
            return f"{what} again: left out of the pairs"
        if self.repeats != AUTO:
            return f"{what}: left out of the pairs"
        return f"{what}: left out of the pairs; round {f['round']} runs again"

    def finished(self) -> bool:
        """After `sweep.max_repeats` rounds (a disturbed round's re-run done), or when no primary
        comparison is open (the others stand as they are)."""
        if self.done > 0 and not any(c.primary and not c.settled for c in self.pairs):
            return True
        return self.rounds >= self.max_repeats and not self.rerun_next

    def _need_accuracy(self, c: Comparison, o: sequential.Outcome,
                       need: Optional[int]) -> Optional[int]:
        """The rounds that would likely settle both halves of `c` (the speed half's `need`),
        on the speed half's count of rounds; None when either half likely would not."""
        acc = c.accuracy
        if not c.primary or c.same_maths or acc is None or acc.settled:
            return need
        more = sequential.rounds_to_settle_difference(acc.diff, acc.spread, self.accuracy_margin,
                                                      self.rule, acc.rounds + 1)
        if more is None or (need is None and not o.settled):
            return None
        return max(need or 0, more + o.rounds - acc.rounds)

    def decision(self, next_command: Optional[Callable[[int], str]] = None) -> outcomes.Decision:
        """The records of every comparison as it stands (distexp.figures.outcomes)."""
        recs = []
        for c in self.pairs:
            o = c.outcome or sequential.Outcome(sequential.OPEN, None, 0.0, math.inf, 0)
            need = None
            if c.primary and not o.settled and o.ratio is not None:
                need = sequential.rounds_to_settle(math.log(o.ratio), o.spread, self.margin,
                                                   self.rule, o.rounds + 1)
            need = self._need_accuracy(c, o, need)
            recs.append(outcomes.Record(
                c.a, c.b, [self.names[c.a], self.names[c.b]], c.kind, o.ratio,
                o.low or None, None if math.isinf(o.high) else o.high, o.kind, o.rounds,
                self.rule.method, o.spread, need, c.primary, **_accuracy_fields(c),
                **_time_fields(c, self.target)))
        likely = [r for r in recs if not r.settled and r.rounds_needed]
        # the next step: the rounds that would likely settle the first of them, within the cap
        n = min((r.rounds_needed + self.rounds - r.rounds for r in likely), default=None)
        n = n if n is not None and n <= outcomes.CONTINUE_CAP * self.horizon else None
        return outcomes.Decision(
            str(self.repeats), self.rule.method, self.alpha, self.margin, self.rounds,
            self.horizon, list(self.names), recs, next_command(n) if n and next_command else None,
            n, self.controls, disturbed=[dict(f) for f in self.disturbed],
            setup_keys=list(self.keys), accuracy_margin=self.accuracy_margin,
            target_accuracy=self.target)


def _accuracy_fields(c: Comparison) -> dict:
    """The accuracy half of a comparison's record (outcomes.Record)."""
    acc = c.accuracy
    if acc is None:
        return {"same_maths": c.same_maths}
    return {"accuracy": acc.diff, "accuracy_low": None if math.isinf(acc.low) else acc.low,
            "accuracy_high": None if math.isinf(acc.high) else acc.high,
            "accuracy_outcome": acc.kind, "accuracy_rounds": acc.rounds,
            "accuracy_spread": acc.spread, "same_maths": c.same_maths}


def _time_fields(c: Comparison, target: Optional[float]) -> dict:
    """The time-to-target half of a comparison's record (outcomes.Record); {} without a target."""
    t = c.time
    if target is None:
        return {}
    if t is None:
        return {"target": target}
    return {"target": target, "time_ratio": t.ratio, "time_low": t.low or None,
            "time_high": None if math.isinf(t.high) else t.high, "time_outcome": t.kind,
            "time_rounds": t.rounds, "time_misses": list(t.misses)}


def target_of(cfgs: Sequence[Optional[DictConfig]]) -> Optional[float]:
    """The sweep's target_accuracy: the one every composed set-up has, else None (no set, or set-ups
    aiming at different targets: no time-to-target half)."""
    found = {OmegaConf.select(c, "target_accuracy") for c in cfgs if c is not None}
    one = found.pop() if len(found) == 1 else None
    return float(one) if one is not None else None


def settings(config: DictConfig):
    sw = config.sweep
    return float(sw.alpha), float(sw.margin), int(sw.max_repeats)


def interleaved(jobs: Sequence[Sequence[str]], repeats: int,
                compose: Callable[[List[str]], DictConfig]) -> List[List[str]]:
    """`repeats=N`'s jobs (planning.interleave), with `sweep.seed_by_round` (the jobs' composed
    configs', as the jobs see it) each of round r
    with ``seed=<its job's seed + r>`` as `Rounds.job` gives repeats=auto's: every set-up of a
    round the same seed, a new one each round (the rounds sample seed noise)."""
    out = planning.interleave(jobs, repeats)
    cfgs = [compose(list(j)) for j in jobs] if repeats >= 2 else []
    if not cfgs or not all(accuracy_settings(c)["seed_by_round"] for c in cfgs):
        return out
    seeds = [int(c.seed) for c in cfgs]
    return [[o for o in job if o.split("=", 1)[0].lstrip("+~") != "seed"]
            + [f"seed={seeds[p % len(jobs)] + p // len(jobs)}"] for p, job in enumerate(out)]


def accuracy_settings(config: DictConfig) -> dict:
    """Rounds' accuracy_margin and seed_by_round from the sweep's config."""
    sw = config.sweep
    return {"accuracy_margin": float(OmegaConf.select(sw, "accuracy_margin", default=0.5)),
            "seed_by_round": bool(OmegaConf.select(sw, "seed_by_round", default=True))}


def publish(decision: outcomes.Decision, sweep_dir: Path, run=None) -> None:
    """The decision beside the sweep (auto.json) and on its parent run (`run`, the open sweep's;
    tag distexp.outcomes): the records every surface renders (distexp.figures.outcomes)."""
    from distexp.tracking import tags as tag

    text = decision.to_json()
    (sweep_dir / AUTO_FILE).write_text(text)
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    if run is not None and len(compact) <= TAG_MAX:
        run.set_tag(tag.OUTCOMES, compact)
    elif run is not None and decision.rounds <= 1:  # said once
        print(f"distexp: the sweep's decision ({len(decision.comparisons)} comparisons) is over "
              f"MLflow's tag limit: it is in {sweep_dir / AUTO_FILE} only", flush=True)
