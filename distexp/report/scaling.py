"""A sweep's runs as scaling rows: one row per job config over its repeats, its baseline, the
speed-up with its interval and verdict (docs/report.md). No MLflow calls, no
TensorFlow: distexp.report reads the runs and writes what this computes.

- `row_from_run`: one MLflow run -> a Row (a failed or diverged run keeps no throughput).
- `aggregate`: the measured runs of one set-up (its runs' tag ``distexp.setup_key``, which the
  sweeper gives each job; a run without it, of a sweep older than the tag: the job config, its
  overrides without those that differ between runs of it, `Row.config_key`) -> one Row with the
  median examples/s and every run's figure; other runs stay rows of their own.
- `add_scaling`: for each row two equal-work comparisons, each a `Comparison` (speed-up, its 95 %
  interval: between runs, distexp.figures.stats; one run a side: within-run only; its verdict):
  *weak* over the 1-replica runs at the same per-replica batch, *strong* over the 1-replica runs
  at the same global batch (the controls `sweep.controls=true` adds); and their split for an
  N-replica row: batch effect (1 replica at the global batch / at the per-replica batch) x
  replica effect (= the strong speed-up) = the weak speed-up. A row's `main` comparison (its
  `speedup*`, `significance`) is the weak one when there is a weak baseline, else the strong one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Dict, List, Optional, Sequence, Tuple

from distexp.figures import perf_keys, stats
from distexp.tracking import tags as tag

NO_BASELINE = "no 1-replica baseline"


class Significance(str, Enum):
    """How significant a comparison is: the word report.csv's `verdict` column holds (a str: it compares,
    hashes, prints and is written as its word)."""
    SIGNIFICANT = "significant"        # the 95 % interval of the ratio excludes 1
    NOT_SIGNIFICANT = "~"              # benchstat's mark: the interval includes 1
    BASELINE = "baseline"              # the row is its comparison's baseline
    WITHIN_RUN = "within-run only"     # one run on a side: no between-run spread, no significance
    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__


# Override keys that make a run the scaling variant of a job rather than another job.
SCALING_KEYS = ("strategy", "cpu_replicas", "gpus", "workers", "ps", "cluster",
                "batch_size_per_replica", "global_batch_size")
# The scaling keys that set up devices and processes (a baseline with the same is preferred).
DEVICE_KEYS = ("cpu_replicas", "gpus", "workers", "ps", "cluster")
# Override keys that differ between runs of one job config (repeats, a resumed re-run, a
# continued sweep's bigger budget).
RUN_KEYS = ("repeat", "resume", "sweep.resume", "sweep.max_repeats", "checkpoint.dir")
E2E = perf_keys.EXAMPLES_PER_SEC_END_TO_END
# The step-time split (perf/step_<part>_ms); "other" is the unattributed rest.
PARTS = ("input", "compute", "sync", "other")


@dataclass
class Curves:
    """A row's histories (its first run's), read from MLflow after the rows are built."""
    loss: List[Tuple[int, float]] = field(default_factory=list)  # (step or epoch, loss)
    loss_x: str = "epoch"
    epoch_times: List[float] = field(default_factory=list)  # perf/epoch_time_s history
    steps_to_target: Optional[int] = None    # optimizer steps at the evaluation that reached it


@dataclass
class Row:
    """One job config over its runs: what MLflow says of them (row_from_run; `aggregate`: the
    median over repeats), then its comparisons (add_scaling), then its curves."""
    run_id: str
    run_name: str
    status: str
    strategy: str
    model: str
    dataset: str
    loop: str
    workers: Optional[int]
    replicas: Optional[int]
    global_batch: Optional[int]
    rate: Optional[float]            # perf/examples_per_sec
    ci95: Optional[float]            # perf/examples_per_sec_ci95
    eval_accuracy: Optional[float]   # the task's eval figure (eval_metric), accuracy by default
    time_to_first_step: Optional[float]
    job_num: Optional[int] = None
    setup_key: Optional[str] = None    # tag distexp.setup_key (distexp.sweeps.setups), if any
    setup_index: Optional[int] = None  # tag distexp.setup_index: its place in the sweep's list
    efficiency: Optional[float] = None
    baseline: str = ""
    overrides: str = ""
    diverged: bool = False
    eval_metric: str = "eval/accuracy"
    mfu: Optional[float] = None
    peak_source: Optional[str] = None
    rates: List[float] = field(default_factory=list)      # examples/s of each repeat
    run_ids: List[str] = field(default_factory=list)
    epochs: Optional[int] = None
    steps_per_epoch: Optional[int] = None    # param steps_per_epoch_resolved
    rate_end_to_end: Optional[float] = None  # perf/examples_per_sec_end_to_end (when logged)
    breakdown: Dict[str, float] = field(default_factory=dict)  # input/compute/sync/other -> ms
    warmup_steps: Optional[int] = None
    checkpoint_every: Optional[str] = None   # param checkpoint.every_steps ("null" = each epoch)
    target: Optional[float] = None           # param target_accuracy
    time_to_target: Optional[float] = None   # perf/time_to_accuracy_s
    # --- the comparisons (add_scaling): None until then, or when there is no baseline
    weak: Optional["Comparison"] = None      # over 1 replica at the same per-replica batch
    strong: Optional["Comparison"] = None    # over 1 replica at the same global batch
    main: Optional["Comparison"] = None      # the speed-up shown: weak if there is one, else strong
    batch_effect: Optional[float] = None     # weak.value / strong.value (N-replica rows)
    replica_effect: Optional[float] = None   # = strong.value (N-replica rows)
    # --- the histories the plots and notes read (distexp.report.cli.build, for the first run)
    curves: "Curves" = field(default_factory=lambda: Curves())
    # --- the sweep's decision these comparisons come from (distexp.report.decided), if any
    decision: Optional[object] = None

    # The speed-up shown and its interval: the main comparison's (none for its own baseline).
    @property
    def speedup(self) -> Optional[float]:
        return self.main.value if self.main is not None else None

    @property
    def significance(self) -> str:
        """significant | ~ | within-run only | baseline ("" without a comparison)."""
        return self.main.significance if self.main is not None else ""

    @property
    def significant(self) -> bool:
        return bool(self.main is not None and self.main.significant)

    @property
    def speedup_low(self) -> Optional[float]:
        return self.main.low if self.main is not None else None

    @property
    def speedup_high(self) -> Optional[float]:
        return self.main.high if self.main is not None else None

    @property
    def speedup_ci95(self) -> Optional[float]:
        """Within-run: the first-order half-width (one run a side)."""
        return self.main.ci95 if self.main is not None else None

    @property
    def repeats_needed(self) -> Optional[int]:
        return self.main.repeats_needed if self.main is not None else None

    @property
    def optimizer_steps(self) -> Optional[int]:
        if self.epochs is None or self.steps_per_epoch is None:
            return None
        return self.epochs * self.steps_per_epoch

    @property
    def key(self) -> tuple:
        """The set-up: its tag (distexp.setup_key); a run without one, its job config."""
        return ("set-up", self.setup_key) if self.setup_key else self.config_key

    @property
    def config_key(self) -> tuple:
        """The job config: runs with the same key differ only in `repeat` (or were resumed)."""
        return (self.strategy, self.model, self.dataset, self.loop, self.workers, self.replicas,
                self.global_batch, self.job_overrides)

    @property
    def job_overrides(self) -> str:
        """The job's overrides, sorted, without those that differ between its runs (RUN_KEYS)."""
        return _without(self.overrides, RUN_KEYS)

    @property
    def device_setup(self) -> str:
        """The overrides that set up devices and processes (cpu_replicas, gpus, workers, ...)."""
        return " ".join(sorted(o for o in self.overrides.split()
                               if _key(o).split(".", 1)[0] in DEVICE_KEYS))

    @property
    def base_key(self) -> tuple:
        """What a baseline must share: the job without its scaling keys."""
        return (self.group, _without(self.overrides, RUN_KEYS + SCALING_KEYS))

    @property
    def group(self) -> Tuple[str, str, str]:
        return (self.model, self.dataset, self.loop)

    @property
    def per_replica(self) -> Optional[float]:
        if self.global_batch is None or not self.replicas:
            return None
        return self.global_batch / self.replicas

    @property
    def measured(self) -> bool:
        return (self.status == "FINISHED" and not self.diverged and self.rate is not None
                and self.rate > 0)

    @property
    def shown_status(self) -> str:
        return "DIVERGED" if self.diverged else self.status


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _without(overrides: str, keys: Sequence[str]) -> str:
    """The overrides (a run's distexp.overrides tag), sorted, without `keys` (and their subkeys)."""
    def dropped(o: str) -> bool:
        return _key(o) in keys or _key(o).split(".", 1)[0] in keys

    return " ".join(sorted(o for o in overrides.split() if not dropped(o)))


def _int(v) -> Optional[int]:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def _float(v) -> Optional[float]:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _is_baseline(strategy: str) -> bool:
    """A reference run's strategy (its record says so: one_device)."""
    from distexp import strategies

    rec = strategies.REGISTRY.get(strategy)
    return bool(rec and rec.baseline)


def row_from_run(run) -> Row:
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    diverged = str(t.get(tag.DIVERGED, "")).lower() == "true"
    finished = run.info.status == "FINISHED" and not diverged
    rate = m.get(perf_keys.EXAMPLES_PER_SEC) if finished else None  # a failed run has no throughput
    return Row(run_id=run.info.run_id, run_name=run.info.run_name or run.info.run_id[:8],
               status=run.info.status, strategy=p.get("strategy.name", "?"),
               model=p.get("model.name", "?"), dataset=p.get("dataset.name", "?"),
               loop=p.get("loop.name", "?"), workers=_int(p.get("num_workers")),
               replicas=_int(p.get("num_replicas")), global_batch=_int(p.get("global_batch_size")),
               rate=rate, ci95=m.get(perf_keys.EXAMPLES_PER_SEC_CI95) if finished else None,
               eval_accuracy=m.get(p.get("task.eval_metric") or "eval/accuracy"),
               eval_metric=p.get("task.eval_metric") or "eval/accuracy",
               time_to_first_step=m.get(perf_keys.TIME_TO_FIRST_STEP_S),
               job_num=_int(t.get(tag.JOB_NUM)), setup_key=t.get(tag.SETUP_KEY) or None,
               setup_index=_int(t.get(tag.SETUP_INDEX)),
               overrides=t.get(tag.OVERRIDES, ""), diverged=diverged,
               mfu=m.get(perf_keys.MFU) if finished else None,
               peak_source=t.get(tag.PEAK_SOURCE),
               rates=[rate] if rate is not None and rate > 0 else [], run_ids=[run.info.run_id],
               epochs=_int(p.get("epochs")), steps_per_epoch=_int(p.get("steps_per_epoch_resolved")),
               rate_end_to_end=m.get(E2E) if finished else None,
               breakdown={part: m[perf_keys.step_part_ms(part)] for part in PARTS
                          if finished and m.get(perf_keys.step_part_ms(part)) is not None},
               warmup_steps=_int(p.get("warmup_steps")),
               checkpoint_every=p.get("checkpoint.every_steps"),
               target=_float(p.get("target_accuracy")),
               time_to_target=m.get(perf_keys.TIME_TO_ACCURACY_S))


def adopt(rows: Sequence[Row]) -> None:
    """A run without a set-up tag (an older sweep's, continued since by `sweep.resume`) takes the
    tag of the tagged runs of its job config, where that config has exactly one."""
    found: Dict[tuple, set] = {}
    for r in rows:
        if r.setup_key:
            found.setdefault(r.config_key, set()).add((r.setup_key, r.setup_index))
    for r in rows:
        if not r.setup_key and len(found.get(r.config_key, ())) == 1:
            r.setup_key, r.setup_index = next(iter(found[r.config_key]))


def aggregate(rows: Sequence[Row]) -> List[Row]:
    """One row per set-up (Row.key; `adopt` first) for the measured runs (median over repeats);
    every other run (failed, killed, diverged, no throughput) stays a row of its own."""
    adopt(rows)
    groups: Dict[tuple, List[Row]] = {}
    out: List[Row] = []
    for r in rows:
        if r.measured:
            groups.setdefault(r.key, []).append(r)
        else:
            out.append(r)
    for rs in groups.values():
        rs.sort(key=lambda r: r.job_num if r.job_num is not None else 0)
        first = rs[0]
        if len(rs) == 1:
            out.append(first)
            continue
        med = lambda vals: stats.median(vals) if vals else None  # noqa: E731
        agg = Row(**{**first.__dict__,
                     "rate": stats.median([r.rate for r in rs]), "ci95": None,
                     "eval_accuracy": med([r.eval_accuracy for r in rs if r.eval_accuracy is not None]),
                     "time_to_first_step": med([r.time_to_first_step for r in rs
                                                if r.time_to_first_step is not None]),
                     "mfu": med([r.mfu for r in rs if r.mfu is not None]),
                     "rate_end_to_end": med([r.rate_end_to_end for r in rs
                                             if r.rate_end_to_end is not None]),
                     "breakdown": {part: stats.median([r.breakdown[part] for r in rs])
                                   for part in PARTS if all(part in r.breakdown for r in rs)},
                     "time_to_target": med([r.time_to_target for r in rs
                                            if r.time_to_target is not None]),
                     "rates": [r.rate for r in rs], "run_ids": [r.run_id for r in rs],
                     "curves": Curves()})
        out.append(agg)
    return out


@dataclass
class Comparison:
    """A row's throughput over its 1-replica baseline at equal work of one kind (`mode`)."""
    mode: str                          # weak | strong
    value: float                       # the row's median / the baseline's median
    baseline: str                      # which runs, e.g. "one_device r1 (strong, same cpu_replicas=2)"
    base_rate: float
    is_base: bool                      # the row is (one of) its own baseline
    low: Optional[float] = None
    high: Optional[float] = None
    significant: bool = False
    significance: str = ""             # significant | ~ | within-run only | baseline
    repeats_needed: Optional[int] = None
    ci95: Optional[float] = None       # within-run half-width (one run a side)
    base_global_batch: Optional[int] = None
    base_strategy: str = ""
    outcome: str = ""                  # the sweep's decision (distexp.report.decided): its word


def compare(r: Row, singles: Sequence[Row], mode: str) -> Optional[Comparison]:
    """`r` against the measured 1-replica rows of the same job (same model, dataset, loop and
    other overrides) at the same per-replica batch (weak) or global batch (strong); one_device
    preferred, then the same device set-up; several remaining candidates are pooled."""
    same = {"weak": lambda b: b.per_replica == r.per_replica,
            "strong": lambda b: b.global_batch == r.global_batch}[mode]
    cands = [b for b in singles if b.base_key == r.base_key and same(b)]
    if not cands:
        return None
    cands = [b for b in cands if _is_baseline(b.strategy)] or cands
    setup = [b for b in cands if b.device_setup == r.device_setup]
    cands = setup or cands
    base_rates = [x for b in cands for x in b.rates]
    base = stats.median(base_rates)
    who = "/".join(sorted({b.strategy for b in cands}))
    pooled = f", {len(cands)} configs pooled" if len(cands) > 1 else ""
    where = f", same {r.device_setup}" if setup and r.device_setup else ""
    c = Comparison(mode=mode, value=r.rate / base, baseline=f"{who} r1 ({mode}{where}{pooled})",
                   base_rate=base, is_base=any(r is b for b in cands),
                   base_global_batch=cands[0].global_batch, base_strategy=who)
    if c.is_base:
        c.significance = Significance.BASELINE
        return c
    between = stats.ratio_interval(r.rates, base_rates)
    if between is not None:
        c.low, c.high, _ = between
        c.significant = c.low > 1 or c.high < 1
        c.significance = Significance.SIGNIFICANT if c.significant else Significance.NOT_SIGNIFICANT
        if not c.significant:
            c.repeats_needed = stats.repeats_needed(r.rates, base_rates)
        return c
    c.significance = Significance.WITHIN_RUN
    base_cis = [b.ci95 for b in cands]
    if len(r.rates) == 1 and r.ci95 is not None and len(base_rates) == len(cands) and \
            all(x is not None for x in base_cis):
        base_mean = sum(base_rates) / len(base_rates)
        base_ci = math.sqrt(sum(x * x for x in base_cis)) / len(cands)
        c.ci95 = c.value * math.hypot(r.ci95 / r.rate, base_ci / base_mean)
        c.low, c.high = c.value - c.ci95, c.value + c.ci95
    return c


def add_scaling(rows: Sequence[Row]) -> None:
    """Fill both comparisons, their split, the main one (weak if there is a weak baseline, else
    strong), efficiency and the baseline's description."""
    singles = [r for r in rows if r.measured and r.replicas == 1]
    for r in rows:
        if not r.measured:
            what = ("diverged" if r.diverged else r.status.lower() if r.status != "FINISHED"
                    else "no throughput")
            r.baseline = f"n/a ({what})"
            continue
        r.weak, r.strong = compare(r, singles, "weak"), compare(r, singles, "strong")
        if r.replicas and r.replicas > 1 and r.weak and r.strong:
            r.replica_effect = r.strong.value
            r.batch_effect = r.weak.value / r.strong.value
        main = r.weak or r.strong
        if main is None:
            r.baseline = NO_BASELINE
            continue
        r.main, r.baseline = main, main.baseline
        r.efficiency = r.speedup / r.replicas
        if r.replicas == 1 and not main.is_base:  # the same work on one device: no scaling figure
            r.baseline += " [1 replica: overhead vs one_device, not scaling]"
            r.efficiency = None
