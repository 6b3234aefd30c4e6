"""A sweep's decision (distexp.figures.outcomes: the records its sweeper stored on the parent run)
put on the report's rows, so that the table, report.csv, the verdict and the run tags show the
decision's speed-ups and nothing computed again (docs/report.md). No MLflow, no TensorFlow.

A row is the set-up its runs are tagged with (distexp.setup_key, listed in the decision's
`setup_keys`; distexp.sweeps.setups), whatever their job numbers. A run of a sweep older than
the tag (and not adopted by a tagged run of its config: scaling.adopt) falls back to what the
report did then, checked: set-up `job_num % len(setups)` (such a sweep numbered its jobs round x
set-ups + set-up) where that set-up's name agrees with the row.

A row's `main` comparison (speedup*, the verdict) becomes its record against the baseline, its
`strong` one (speedup_strong*, "at equal global batch") its record against its equal-work
control; `weak` and the split into batch and replica effects (ratios of medians) are dropped.
"""
from __future__ import annotations

from typing import Optional, Sequence

from distexp.figures import outcomes as O
from distexp.report.scaling import Comparison, Row, Significance


def _comparison(rec: O.Record, mode: str, rows_by_setup: dict) -> Comparison:
    base = rows_by_setup.get(rec.b)
    return Comparison(mode=mode, value=rec.ratio if rec.ratio is not None else float("nan"),
                      baseline=f"{rec.names[1]} ({rec.kind}, paired by round)",
                      base_rate=base.rate if base is not None else float("nan"), is_base=False,
                      low=rec.low, high=rec.high,
                      significant=rec.outcome in ("faster", "slower"),
                      significance=rec.outcome, outcome=rec.outcome,
                      base_global_batch=base.global_batch if base is not None else None,
                      base_strategy=base.strategy if base is not None else "")


def _itself(mode: str, r: Row) -> Comparison:
    return Comparison(mode=mode, value=1.0, baseline="itself", base_rate=r.rate or 0.0,
                      is_base=True, significance=Significance.BASELINE,
                      base_global_batch=r.global_batch, base_strategy=r.strategy)


def setup_of(r: Row, d: O.Decision) -> Optional[int]:
    """Row `r`'s set-up in decision `d` (module docstring), or None."""
    if r.setup_key:
        return d.setup_keys.index(r.setup_key) if r.setup_key in d.setup_keys else None
    return _untagged(r, d)


def _untagged(r: Row, d: O.Decision) -> Optional[int]:
    """A run from before the set-up tags: set-up `job_num % len(setups)`, where that set-up's name
    says the row's strategy and replicas (and its batch, where the name has one): a continued
    sweep whose list of set-ups changed gets no guess."""
    if r.job_num is None or not d.setups:
        return None
    i = r.job_num % len(d.setups)
    name = d.setups[i].split(" [", 1)[0].removesuffix(" (control)")
    mine = f"{r.strategy} x{r.replicas}"
    return i if name in (mine, f"{mine} batch {r.global_batch}") else None


def apply(rows: Sequence[Row], d: O.Decision) -> None:
    """Put decision `d` on `rows` (module docstring)."""
    by_setup = {setup_of(r, d): r for r in rows if r.measured}
    bases = {rec.b for rec in d.comparisons if rec.kind == O.BASELINE}
    controls = {rec.b for rec in d.comparisons if rec.kind == O.EQUAL_WORK}
    for r in rows:
        r.decision = d
        i = setup_of(r, d)
        if not r.measured or i is None:
            continue
        base, work = d.of(i, O.BASELINE), d.of(i, O.EQUAL_WORK)
        r.main = (_comparison(base, "baseline", by_setup) if base is not None
                  else _itself("baseline", r) if i in bases else None)
        r.strong = (_comparison(work, "strong", by_setup) if work is not None
                    else _itself("strong", r) if i in controls else None)
        r.weak, r.batch_effect, r.replica_effect = None, None, None
        r.baseline = r.main.baseline if r.main is not None else "-"
        r.efficiency = (r.main.value / r.replicas if r.main is not None and r.replicas
                        and r.replicas > 1 else None)


def of_rows(rows: Sequence[Row]) -> Optional[O.Decision]:
    """The decision `apply` put on these rows, or None."""
    return next((r.decision for r in rows if r.decision is not None), None)
