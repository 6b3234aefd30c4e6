"""A row's throughput, speed-up and verdict as text: one formatter each, for every place that shows
them (the console's table with ``short=True``, report.md's table, the verdict's lines, a job run's
``speed-up`` tag in MLflow). No MLflow, no TensorFlow. Definitions: docs/report.md.
"""
from __future__ import annotations

from typing import Optional

from distexp.figures import text as figures_text
from distexp.figures.outcomes import short_word
from distexp.report.scaling import NO_BASELINE, Significance

# The verdict in the console's short words (report.md and report.csv keep Significance's own).
WORDS = {Significance.SIGNIFICANT: "significant", Significance.NOT_SIGNIFICANT: "not significant",
         Significance.BASELINE: "baseline", Significance.WITHIN_RUN: "one run a side"}


def ratio(value: float, low: Optional[float] = None, high: Optional[float] = None, *,
          ci95: Optional[float] = None, of: str = "") -> str:
    """A speed-up and its interval: "1.62x [1.40, 1.85]" (between runs), "1.62x ± 0.05" (`ci95`:
    the within-run half-width), "1.62x" (neither); `of` names the baseline after the ratio."""
    head = f"{value:.2f}x" + (f" {of}" if of else "")
    if ci95 is not None:
        return f"{head} ± {ci95:.2f}"
    if low is not None and high is not None:
        return f"{head} [{low:.2f}, {high:.2f}]"
    return head


def rate(r, short: bool = False) -> str:
    """examples/s: the median over a row's runs with their range, or one run's figure with its 95 %
    interval (distexp.figures.text.rate: the same text as the job's summary and the runs' tags);
    `short` is kept for the callers: the console and report.md read the same."""
    if r.rate is None:
        return "-"
    if len(r.rates) > 1:
        return f"{figures_text.number(r.rate)} ({figures_text.number(min(r.rates))}-" \
               f"{figures_text.number(max(r.rates))})"
    return figures_text.rate(r.rate, r.ci95)


def speedup(r, short: bool = False) -> str:
    """A row's speed-up over its baseline with its interval; report.md's (not `short`) marks "~"
    (benchstat's: no significant difference) and a within-run interval."""
    if r.speedup is None:
        return NO_BASELINE if r.baseline == NO_BASELINE and not short else "-"
    if r.significance == Significance.BASELINE:
        return "1.00x" if short else "1.00x (baseline)"
    if short or r.main.outcome:  # a sweep's decision: its interval, no fixed-sample mark
        return ratio(r.speedup, r.speedup_low, r.speedup_high)
    mark = "" if r.significant else "~ "
    if r.significance == Significance.WITHIN_RUN:
        return f"{mark}{ratio(r.speedup, ci95=r.speedup_ci95)} (within run)"
    return mark + ratio(r.speedup, r.speedup_low, r.speedup_high)


def equal_work(r, short: bool = False) -> str:
    """A row's speed-up over one replica at the same global batch (its equal-work control) with
    its interval and verdict word: "0.72x [0.45, 1.14] not settled" (`short`, the console: the
    word of a sweep's decision only); "1.00x (itself)" for a 1-replica row; "-" without one."""
    c = r.strong if r.measured else None
    if c is None:
        return "-"
    if c.is_base:
        return "1.00x" if short else "1.00x (itself)"
    if c.significance == Significance.WITHIN_RUN:
        shown = ratio(c.value, ci95=None if short else c.ci95)
    else:
        shown = ratio(c.value, c.low, c.high)
    word = (short_word(c.outcome) if short else c.outcome) if c.outcome else (
        "" if short else WORDS.get(c.significance, c.significance))
    return f"{shown} {word}".strip()


ACCURACY_SHORT = {"less accurate": "less", "more accurate": "more", "as accurate": "as accurate"}


def accuracy_vs_baseline(r, short: bool = False) -> str:
    """A decided row's accuracy difference from its baseline with its interval, the record's
    (distexp.figures.outcomes): "-9.1 pt [-16.6, -1.5] less" (more, as accurate, open; "as it
    stands" where both train the same mathematics and it is not settled); `short`: without the
    interval, "-9.1 pt less"; "-" without one."""
    from distexp.figures import outcomes
    from distexp.report.decided import setup_of

    d = getattr(r, "decision", None)
    i = setup_of(r, d) if d is not None and r.measured else None
    rec = d.of(i, outcomes.BASELINE) if i is not None else None
    if rec is None or rec.accuracy is None:
        return "-"
    lo = "-inf" if rec.accuracy_low is None else f"{rec.accuracy_low:.1f}"
    hi = "inf" if rec.accuracy_high is None else f"{rec.accuracy_high:.1f}"
    kind = rec.accuracy_outcome or outcomes.OPEN_WORD
    word = ACCURACY_SHORT.get(kind) or ("as it stands" if rec.same_maths else short_word(kind))
    return f"{rec.accuracy:+.1f} pt {word}" if short else f"{rec.accuracy:+.1f} pt [{lo}, {hi}] {word}"


def speed_tag(r) -> Optional[str]:
    """A job run's ``speed-up`` tag: its set-up's speed-up over one replica at the same global batch
    (equal work: the `strong` comparison), number first (MLflow's column shows ~13 characters; the
    rest on hover): "1.16x [1.05, 1.28] significant", "1.00x baseline", "not measured: no 1-replica
    run at global batch 128" (an N-replica row without its control); None without a throughput."""
    c = r.strong
    if c is None:
        return (f"not measured: no 1-replica run at global batch {r.global_batch}"
                if r.measured and (r.replicas or 0) > 1 else None)
    if c.is_base:
        return "1.00x baseline"
    if c.outcome:  # the sweep's decision: its outcome word
        return f"{ratio(c.value, c.low, c.high)} {c.outcome}"
    return f"{ratio(c.value, c.low, c.high)} {WORDS.get(c.significance, c.significance)}".strip()

def significance(r, short: bool = False) -> str:
    """A row's verdict: the console's short words (a failed run's status, "no baseline"), or
    report.md's with the runs that would resolve a difference."""
    if short:
        if r.status != "FINISHED" or r.diverged:
            return r.shown_status.lower()
        if r.speedup is None:
            return "no baseline"
        return WORDS.get(r.significance, r.significance or "-")
    if r.main is not None and r.main.outcome:  # the sweep's decision: its outcome word
        return r.main.outcome
    if r.significance == Significance.NOT_SIGNIFICANT:
        if r.repeats_needed is None:
            return "~ no difference visible (not resolvable in 1000 runs)"
        return f"~ not significant: ~{r.repeats_needed} runs each would resolve it"
    if r.significance == Significance.WITHIN_RUN:
        return f"{Significance.WITHIN_RUN.value}: no significance (use repeats>=2)"
    return r.significance or "-"


def comparison(c, of: str = "") -> str:
    """A Comparison as the verdict says it: 0.60x [0.55, 0.66], significant | ~ 0.95x [0.80, 1.12],
    not significant | 0.60x ± 0.05 (one run each: within-run only) | 0.72x [0.45, 1.14] not
    settled (a sweep's decision); `of` names the baseline."""
    if c.outcome:
        return f"{ratio(c.value, c.low, c.high, of=of)} {c.outcome}"
    if c.significance == Significance.WITHIN_RUN:
        return f"{ratio(c.value, ci95=c.ci95, of=of)} (one run each: within-run only, no significance)"
    if c.significance == Significance.NOT_SIGNIFICANT:
        more = f"; ~{c.repeats_needed} runs each would resolve it" if c.repeats_needed else ""
        return f"~ {ratio(c.value, c.low, c.high, of=of)}, not significant{more}"
    return f"{ratio(c.value, c.low, c.high, of=of)}, significant"
