"""What a sweep says, in a few lines a person can act on (no MLflow, no TensorFlow): the verdict
the report opens with, and the notes under its table. Functions return lines, so the console and
report.md show the same text.

- `verdict_lines(rows)`: per global batch, which set-up is fastest at equal work (the strong
  comparison against one replica at that global batch) and how the weak speed-up splits into
  batch effect x replica effect; without a 1-replica job at that global batch, that the replica
  effect was not measured (never implied).
- `accuracy_notes(rows)`: eval figures that compare different numbers of optimizer steps or
  global batches; steps and time to `target_accuracy`.
- `end_to_end_notes(rows)`: end-to-end examples/s outside the steady-state interval, and why.
Definitions: docs/report.md.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from distexp.figures import stats
from distexp.report import wording
from distexp.report.diagnosis import end_to_end_gap
from distexp.report.scaling import Row, Significance


def name(r: Row) -> str:
    return f"{r.strategy} x{r.replicas}"


def _equal_work(base: str, batch: int, rs: Sequence[Row]) -> str:
    """One line on one global batch: who is fastest at equal work, each row against one replica."""
    faster = [r for r in rs if r.strong.significant and r.strong.value > 1]
    slower = [r for r in rs if r.strong.significant and r.strong.value < 1]
    if faster:
        best = max(faster, key=lambda r: r.strong.value)
        head = f"{name(best)} fastest"
        for other in (r for r in faster if r is not best):
            # two set-ups both faster than one replica: the leader is "fastest" only when it
            # beats each other one by its own between-run interval
            iv = stats.ratio_interval(best.rates or [], other.rates or [])
            if iv is None or iv[0] <= 1:
                head = (f"{' and '.join(name(r) for r in faster)} significantly faster than "
                        f"{base} x1; no difference between them established")
                break
    elif len(slower) == len(rs):
        head = f"{base} x1 fastest"
    elif all(r.strong.significance == Significance.WITHIN_RUN for r in rs):
        head = "no winner can be claimed from one run each (use repeats>=2)"
    else:
        head = f"no set-up significantly faster than {base} x1"
    parts = [f"{name(r)} {wording.comparison(r.strong, f'of {base} x1')}" for r in rs]
    return f"At equal global batch {batch}: {head}; " + "; ".join(parts) + "."


def _split(r: Row) -> str:
    w = r.weak
    why = ("the gain is the bigger batch, not the replicas" if r.replica_effect < 1 <= w.value
           else "both effects add up" if r.replica_effect > 1 and r.batch_effect > 1
           else "")
    if not r.strong.significant:  # say nothing the intervals do not support
        why = (f"the replica effect is not significant ({r.strong.significance}: see above), so "
               f"the split is not established")
    return (f"{name(r)}: weak speed-up x{w.value:.2f} (over {w.base_strategy} x1 at batch "
            f"{w.base_global_batch}) = batch effect x{r.batch_effect:.2f} ({r.strong.base_strategy} "
            f"x1 at batch {r.global_batch} vs {w.base_global_batch}) x replica effect "
            f"x{r.replica_effect:.2f}" + (f": {why}." if why else "."))


def verdict_lines(rows: Sequence[Row]) -> List[str]:
    multi = [r for r in rows if r.measured and (r.replicas or 0) > 1]
    if not multi:
        return ["No multi-replica job was measured: the sweep gives no scaling verdict."]
    several = len({r.group for r in multi}) > 1
    out: List[str] = []
    by: Dict[Tuple[tuple, str, Optional[int]], List[Row]] = {}
    for r in multi:
        by.setdefault((r.group, r.base_key[1], r.global_batch), []).append(r)
    for (group, _, batch), rs in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                      kv[0][2] or 0)):
        prefix = f"[{'/'.join(group)}] " if several else ""
        measured = [r for r in rs if r.strong is not None]
        if measured:
            out.append(prefix + _equal_work(measured[0].strong.base_strategy, batch, measured))
            out += [prefix + _split(r) for r in measured if r.weak is not None
                    and r.batch_effect is not None]
        unmeasured = [r for r in rs if r.strong is None]
        if unmeasured:
            weak = [f"{name(r)} x{r.weak.value:.2f} over {r.weak.base_strategy} x1 at batch "
                    f"{r.weak.base_global_batch}" for r in unmeasured if r.weak is not None]
            out.append(prefix + f"Replica effect not measured at global batch {batch}: no "
                       f"1-replica job at that batch (sweep.controls=true adds one)."
                       + (" The weak speed-ups (" + "; ".join(weak) + ") mix a bigger global "
                          "batch with more replicas: they do not show that more replicas are "
                          "faster at equal work." if weak else ""))
    comparisons = [c for r in multi for c in (r.weak, r.strong) if c is not None]
    if comparisons and all(c.significance == Significance.WITHIN_RUN for c in comparisons):
        out.append("One run per job: every interval above is within-run only (it cannot see "
                   "the run-to-run variation of a shared machine), so no difference is claimed "
                   "significant; run the sweep with repeats>=2 (e.g. repeats=3).")
    return out


def accuracy_notes(rows: Sequence[Row]) -> List[str]:
    out: List[str] = []
    measured = [r for r in rows if r.measured and r.eval_accuracy is not None]
    groups: Dict[tuple, List[Row]] = {}
    for r in measured:
        groups.setdefault((r.group, r.base_key[1]), []).append(r)
    for rs in groups.values():
        kinds = {(r.optimizer_steps, r.global_batch) for r in rs}
        if len(kinds) > 1:
            parts = [f"{steps if steps is not None else '?'} steps at global batch {batch}"
                     for steps, batch in sorted(kinds, key=lambda k: (k[1] or 0, k[0] or 0))]
            out.append(f"Eval figures ({rs[0].eval_metric}) compare different training: "
                       + "; ".join(parts) + ". The same epochs at a bigger global batch take "
                       "fewer optimizer steps, so a lower accuracy there is not the replicas' "
                       "doing; compare rows with equal steps and batch (sweep.controls=true adds "
                       "1-replica jobs at each global batch).")
    targets = [r for r in measured if r.target is not None]
    for r in targets:
        if r.time_to_target is None:
            out.append(f"{name(r)} (batch {r.global_batch}): target {r.eval_metric} "
                       f"{r.target:g} not reached in {r.optimizer_steps} steps.")
        else:
            steps = f"{r.curves.steps_to_target} steps, " if r.curves.steps_to_target is not None else ""
            out.append(f"{name(r)} (batch {r.global_batch}): target {r.eval_metric} "
                       f"{r.target:g} reached after {steps}{r.time_to_target:.1f} s of training.")
    return out


def end_to_end_notes(rows: Sequence[Row]) -> List[str]:
    out = []
    for r in rows:
        gap = end_to_end_gap(r) if r.measured else None
        if gap is not None:
            out.append(f"{name(r)} (job {r.job_num}): end to end {r.rate_end_to_end:,.0f} "
                       f"examples/s is {gap[0]:.2f}x its steady state {r.rate:,.0f} (outside its "
                       f"interval); likely cause: {gap[1]}.")
    return out
