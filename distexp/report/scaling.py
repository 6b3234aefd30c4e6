"""A sweep's runs as scaling rows: one row per job config over its repeats, its baseline, the
speed-up with its interval and verdict (README, "The scaling report"). No MLflow calls, no
TensorFlow: distexp.report reads the runs and writes what this computes.

- `row_from_run`: one MLflow run -> a Row (a failed or diverged run keeps no throughput).
- `aggregate`: the measured runs of one job config (differing only in `repeat`, or resumed)
  -> one Row with the median examples/s and every run's figure; other runs stay rows of their own.
- `add_scaling`: baseline, speed-up, its 95 % interval (between runs: distexp.figures.stats; one run a
  side: within-run only) and the `significant` verdict, efficiency.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from distexp.figures import stats

NO_BASELINE = "no 1-replica baseline"
WITHIN_RUN = "within-run only"
# Override keys that make a run the scaling variant of a job rather than another job.
SCALING_KEYS = ("strategy", "cpu_replicas", "gpus", "workers", "ps", "cluster",
                "batch_size_per_replica", "global_batch_size")
# The scaling keys that set up devices and processes (a baseline with the same is preferred).
DEVICE_KEYS = ("cpu_replicas", "gpus", "workers", "ps", "cluster")
# Override keys that differ between runs of one job config (repeats, a resumed re-run).
RUN_KEYS = ("repeat", "resume", "sweep.resume", "checkpoint.dir")


@dataclass
class Row:
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
    speedup: Optional[float] = None
    speedup_ci95: Optional[float] = None   # within-run: first-order half-width (one run a side)
    speedup_low: Optional[float] = None
    speedup_high: Optional[float] = None
    significant: bool = False
    verdict: str = ""                      # significant | ~ | within-run only | baseline
    repeats_needed: Optional[int] = None
    efficiency: Optional[float] = None
    baseline: str = ""
    loss: List[Tuple[int, float]] = field(default_factory=list)  # (step or epoch, loss)
    loss_x: str = "epoch"
    overrides: str = ""
    diverged: bool = False
    eval_metric: str = "eval/accuracy"
    mfu: Optional[float] = None
    peak_source: Optional[str] = None
    rates: List[float] = field(default_factory=list)      # examples/s of each repeat
    run_ids: List[str] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        """The job config: runs with the same key differ only in `repeat` (or were resumed)."""
        return (self.strategy, self.model, self.dataset, self.loop, self.workers, self.replicas,
                self.global_batch, _without(self.overrides, RUN_KEYS))

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


def _is_baseline(strategy: str) -> bool:
    """A reference run's strategy (its record says so: one_device)."""
    from distexp import strategies

    rec = strategies.REGISTRY.get(strategy)
    return bool(rec and rec.baseline)


def row_from_run(run) -> Row:
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    diverged = str(t.get("distexp.diverged", "")).lower() == "true"
    finished = run.info.status == "FINISHED" and not diverged
    rate = m.get("perf/examples_per_sec") if finished else None  # a failed run has no throughput
    return Row(run_id=run.info.run_id, run_name=run.info.run_name or run.info.run_id[:8],
               status=run.info.status, strategy=p.get("strategy.name", "?"),
               model=p.get("model.name", "?"), dataset=p.get("dataset.name", "?"),
               loop=p.get("loop.name", "?"), workers=_int(p.get("num_workers")),
               replicas=_int(p.get("num_replicas")), global_batch=_int(p.get("global_batch_size")),
               rate=rate, ci95=m.get("perf/examples_per_sec_ci95") if finished else None,
               eval_accuracy=m.get(p.get("task.eval_metric") or "eval/accuracy"),
               eval_metric=p.get("task.eval_metric") or "eval/accuracy",
               time_to_first_step=m.get("perf/time_to_first_step_s"),
               job_num=_int(t.get("distexp.job_num")),
               overrides=t.get("distexp.overrides", ""), diverged=diverged,
               mfu=m.get("perf/mfu") if finished else None,
               peak_source=t.get("distexp.peak_source"),
               rates=[rate] if rate is not None and rate > 0 else [], run_ids=[run.info.run_id])


def aggregate(rows: Sequence[Row]) -> List[Row]:
    """One row per job config for the measured runs (median over repeats); every other run
    (failed, killed, diverged, no throughput) stays a row of its own."""
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
                     "rates": [r.rate for r in rs], "run_ids": [r.run_id for r in rs]})
        out.append(agg)
    return out


def add_scaling(rows: Sequence[Row]) -> None:
    """Fill speed-up, its interval and verdict, efficiency and the baseline's description."""
    singles = [r for r in rows if r.measured and r.replicas == 1]
    for r in rows:
        if not r.measured:
            what = ("diverged" if r.diverged else r.status.lower() if r.status != "FINISHED"
                    else "no throughput")
            r.baseline = f"n/a ({what})"
            continue
        mode, cands = None, []
        for mode, same in (("weak", lambda b: b.per_replica == r.per_replica),
                           ("strong", lambda b: b.global_batch == r.global_batch)):
            cands = [b for b in singles if b.base_key == r.base_key and same(b)]
            if cands:
                break
        if not cands:
            r.baseline = NO_BASELINE
            continue
        one = [b for b in cands if _is_baseline(b.strategy)]
        cands = one or cands
        # the closest: the same device set-up (cpu_replicas, gpus, ...), differing in strategy only
        same = [b for b in cands if b.device_setup == r.device_setup]
        cands = same or cands
        base_rates = [x for b in cands for x in b.rates]
        base = stats.median(base_rates)
        r.speedup = r.rate / base
        r.efficiency = r.speedup / r.replicas
        who = "/".join(sorted({b.strategy for b in cands}))
        pooled = f", {len(cands)} configs pooled" if len(cands) > 1 else ""
        setup = f", same {r.device_setup}" if same and r.device_setup else ""
        r.baseline = f"{who} r1 ({mode}{setup}{pooled})"
        is_base = any(r is b for b in cands)
        if r.replicas == 1 and not is_base:  # the same work on one device: no scaling figure
            r.baseline += " [1 replica: overhead vs one_device, not scaling]"
            r.efficiency = None
        if is_base:
            r.speedup_low = r.speedup_high = None
            r.verdict = "baseline"
            continue
        between = stats.ratio_interval(r.rates, base_rates)
        if between is not None:
            r.speedup_low, r.speedup_high, _ = between
            r.significant = r.speedup_low > 1 or r.speedup_high < 1
            r.verdict = "significant" if r.significant else "~"
            if not r.significant:
                r.repeats_needed = stats.repeats_needed(r.rates, base_rates)
            continue
        r.verdict = WITHIN_RUN  # one run on a side: no between-run spread, no significance
        base_cis = [b.ci95 for b in cands]
        if len(r.rates) == 1 and r.ci95 is not None and len(base_rates) == len(cands) and \
                all(c is not None for c in base_cis):
            base_mean = sum(base_rates) / len(base_rates)
            base_ci = math.sqrt(sum(c * c for c in base_cis)) / len(cands)
            r.speedup_ci95 = r.speedup * math.hypot(r.ci95 / r.rate, base_ci / base_mean)
            r.speedup_low = r.speedup - r.speedup_ci95
            r.speedup_high = r.speedup + r.speedup_ci95
