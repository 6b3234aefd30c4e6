"""report.csv: every column and the value of each row, in one place (COLUMNS: name, getter), so
the header and the rows cannot drift apart. No MLflow, no TensorFlow."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Optional, Sequence

from distexp.figures import meaning
from distexp.report.diagnosis import bottleneck, end_to_end_gap
from distexp.report.scaling import PARTS, Row


def shown_mfu(r: Row) -> Optional[float]:
    """MFU only over a peak that can be vouched for: one the trainer tagged with its source (a
    processor's theoretical peak, a GPU datasheet). Older runs divided by a matmul benchmark
    measured under whatever load there was: not shown."""
    return r.mfu if r.mfu is not None and r.peak_source else None


def _runs(r: Row) -> str:
    return " ".join(f"{x:.6g}" for x in r.rates)


def _cmp(which: str, attr: str):
    """A getter of one field of a row's weak/strong Comparison (None without one)."""
    def get(r: Row):
        c = getattr(r, which)
        if c is None:
            return None
        if attr == "significant":
            return c.significant if not c.is_base else False
        return None if c.is_base and attr in ("low", "high") else getattr(c, attr)
    return get


def _accuracy(attr: str):
    """A decided row's accuracy difference from its baseline (points), its interval or outcome:
    the decision's record (distexp.figures.outcomes; None without one)."""
    def get(r: Row):
        from distexp.figures import outcomes
        from distexp.report.decided import setup_of

        d = r.decision
        i = setup_of(r, d) if d is not None and r.measured else None
        rec = d.of(i, outcomes.BASELINE) if i is not None else None
        return getattr(rec, attr) if rec is not None else None
    return get


def bottleneck_text(r: Row) -> Optional[str]:
    b = bottleneck(r)
    return None if b is None else f"{b[0]} {100 * b[1]:.0f} %"


def _e2e_flag(r: Row) -> Optional[str]:
    gap = end_to_end_gap(r) if r.measured else None
    return None if gap is None else f"{gap[0]:.2f}x steady state: {gap[1]}"


# report.csv: every column and the value of each row, in one place (name, getter).
COLUMNS = [
    ("run_id", lambda r: r.run_id), ("run_name", lambda r: r.run_name),
    ("job_num", lambda r: r.job_num), ("status", lambda r: r.shown_status),
    ("model", lambda r: r.model), ("dataset", lambda r: r.dataset), ("loop", lambda r: r.loop),
    ("strategy", lambda r: r.strategy), ("workers", lambda r: r.workers),
    ("replicas", lambda r: r.replicas), ("global_batch", lambda r: r.global_batch),
    ("runs", lambda r: len(r.run_ids)), ("run_ids", lambda r: " ".join(r.run_ids)),
    ("examples_per_sec", lambda r: r.rate), ("examples_per_sec_runs", _runs),
    ("examples_per_sec_ci95", lambda r: r.ci95),
    # speedup*: the weak speed-up where there is a weak baseline, else the strong one
    ("speedup", lambda r: r.speedup), ("speedup_low", lambda r: r.speedup_low),
    ("speedup_high", lambda r: r.speedup_high), ("significant", lambda r: r.significant),
    ("verdict", lambda r: r.significance), ("repeats_needed", lambda r: r.repeats_needed),
    ("speedup_ci95", lambda r: r.speedup_ci95), ("efficiency", lambda r: r.efficiency),
    ("baseline", lambda r: r.baseline),
    # both equal-work comparisons and the split weak = batch effect x replica effect
    ("speedup_weak", _cmp("weak", "value")), ("speedup_weak_low", _cmp("weak", "low")),
    ("speedup_weak_high", _cmp("weak", "high")),
    ("speedup_weak_significant", _cmp("weak", "significant")),
    ("speedup_strong", _cmp("strong", "value")), ("speedup_strong_low", _cmp("strong", "low")),
    ("speedup_strong_high", _cmp("strong", "high")),
    ("speedup_strong_significant", _cmp("strong", "significant")),
    ("batch_effect", lambda r: r.batch_effect), ("replica_effect", lambda r: r.replica_effect),
    ("eval_accuracy", lambda r: r.eval_accuracy), ("eval_metric", lambda r: r.eval_metric),
    # a decided sweep's accuracy half against the baseline, points (its record)
    ("accuracy_vs_baseline_pt", _accuracy("accuracy")),
    ("accuracy_vs_baseline_low", _accuracy("accuracy_low")),
    ("accuracy_vs_baseline_high", _accuracy("accuracy_high")),
    ("accuracy_vs_baseline_outcome", _accuracy("accuracy_outcome")),
    ("accuracy_meaningful", lambda r: meaning.accuracy_meaningful(r.dataset)),
    ("optimizer_steps", lambda r: r.optimizer_steps),
    ("steps_to_target", lambda r: r.curves.steps_to_target),
    ("time_to_target_s", lambda r: r.time_to_target),
    ("mfu", lambda r: shown_mfu(r)),
    ("peak_source", lambda r: meaning.peak_source(r.peak_source) if shown_mfu(r) is not None else None),
    ("time_to_first_step_s", lambda r: r.time_to_first_step),
    ("examples_per_sec_end_to_end", lambda r: r.rate_end_to_end),
    ("end_to_end_flag", _e2e_flag),
    *[(f"step_{part}_ms", (lambda p: lambda r: r.breakdown.get(p))(part)) for part in PARTS],
    ("bottleneck", bottleneck_text),
]
CSV_FIELDS = [n for n, _ in COLUMNS]


def write_csv(rows: Sequence[Row], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow([get(r) for _, get in COLUMNS])
