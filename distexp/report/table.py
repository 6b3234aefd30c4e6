"""The report as a terminal reads it: one table that fits 120 columns, with what a decision needs.

Takes the report's rows (distexp.report.scaling.Row) and returns text; report.md and report.csv
keep every column. Shown: the parts of the job that vary across the sweep (strategy, replicas,
global batch, the workload when there are several, and the device set-up overrides such as
cpu_replicas when two rows would otherwise read the same), examples/s with its interval, the
speed-up with its interval, the task's accuracy and the verdict, in short words.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence

from distexp.figures.outcomes import short_word
from distexp.report import wording

WIDTH = 120


def _num(v: Optional[float], spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def headline(rows: Sequence) -> str:
    """One line for the places that show one (the console's last line, the first line of the
    sweep's description in MLflow): the first line of the report's verdict
    (distexp.report.significance: the equal-work comparison), and how many more lines it has."""
    from distexp.report.conclusions import verdict_lines

    lines = verdict_lines(rows)
    if not lines:
        return "Verdict: no comparison (the sweep has no multi-replica job with a baseline)"
    more = f" (+{len(lines) - 1} more in the report)" if len(lines) > 1 else ""
    return f"Verdict: {lines[0]}{more}"


def _decided_cells(r, acc: Optional[str], works: bool) -> List[str]:
    """A decided row's cells from examples/s on: the speed-up over the baseline with its word,
    the accuracy difference (`acc`, None: no column), at equal work (`works`), the accuracy."""
    base = (f"{wording.speedup(r, short=True)} {short_word(r.main.outcome)}"
            if r.main is not None and not r.main.is_base
            else wording.speedup(r, short=True) if r.measured
            else wording.significance(r, short=True))
    return ([wording.rate(r, short=True), base] + ([acc] if acc is not None else [])
            + ([wording.equal_work(r, short=True)] if works else [])
            + [_num(r.eval_accuracy, ".3f")])


def table(rows: Sequence, width: int = WIDTH, acc: str = "full") -> str:
    """The console table within `width`; a decided sweep's accuracy column (`acc`) in full
    ("-9.1 pt [-16.6, -1.5] less"), else without its interval ("short"), else left out ("none")
    where the table would not fit (the outcome section above it has every interval)."""
    several = len({r.group for r in rows}) > 1
    setups = {r.device_setup for r in rows}
    decided = any(getattr(r, "decision", None) is not None for r in rows)
    # with a decision two speed-ups with their words need the room: "batch" (the global batch,
    # as the set-ups' names say it)
    head = (["workload"] if several else []) + ["strategy", "replicas",
                                                "batch" if decided else "global batch"]
    head += ["set-up"] if len(setups) > 1 else []
    # a decided sweep: its accuracy differences beside the speed-ups; its equal-work column
    # where it has an equal-work comparison
    accs = [wording.accuracy_vs_baseline(r, short=acc == "short") for r in rows] if (
        decided and acc != "none") else []
    works = decided and any(wording.equal_work(r, short=True) != "-" for r in rows)
    if decided:  # the sweep's decision: each speed-up with its interval and outcome word
        head += ["examples/s", "vs baseline"] + (["acc. vs baseline"] * any(
            a != "-" for a in accs)) + ["at equal work"] * works + ["accuracy"]
    else:
        head += ["examples/s", "speed-up [95% CI]", "accuracy", "verdict"]
    # the N-replica set-ups against one replica at their global batch, where measured
    work = not decided and any(r.strong is not None and (r.replicas or 0) > 1
                               for r in rows if r.measured)
    head += ["equal work"] if work else []
    body: List[List[str]] = []
    for r in rows:
        line = ([f"{r.model}/{r.dataset}"] if several else []) + [
            r.strategy, _num(r.replicas, "d"), _num(r.global_batch, "d")]
        line += [r.device_setup or "-"] if len(setups) > 1 else []
        if decided:
            line += _decided_cells(r, accs[len(body)] if "acc. vs baseline" in head else None,
                                   works)
        else:
            line += [wording.rate(r, short=True), wording.speedup(r, short=True),
                     _num(r.eval_accuracy, ".3f"), wording.significance(r, short=True)]
            line += [wording.equal_work(r, short=True)] if work else []
        body.append(line)
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    # numbers right-aligned, words left; the widest column gives way if the line is too long
    right = {"replicas", "global batch", "batch", "examples/s", "accuracy"}
    over = sum(widths) + 2 * (len(widths) - 1) - width
    # the words give way first (each down to its heading), then the widest column
    if over > 0 and accs and acc != "none":  # the accuracy column shorter, else left out
        return table(rows, width, "short" if acc == "full" else "none")
    for h in (*[h for h in ("verdict", "equal work", "at equal work") if h in head],
              *sorted(head, key=lambda h: -widths[head.index(h)])):
        i = head.index(h)
        cut = max(0, min(over, widths[i] - len(h)))
        widths[i], over = widths[i] - cut, over - cut
    return _laid_out(head, body, widths, right)


def _laid_out(head: List[str], body: List[List[str]], widths: List[int], right: set) -> str:
    """The table's text: each cell in its column's width (cut with "…" where longer), numbers
    (`right`) right-aligned."""
    def fmt(cells):
        out = []
        for h, c, w in zip(head, cells, widths):
            c = c if len(c) <= w else c[: w - 1] + "…"
            out.append(c.rjust(w) if h in right else c.ljust(w))
        return "  ".join(out).rstrip()

    lines = [fmt(head), "  ".join("-" * w for w in widths)] + [fmt(b) for b in body]
    return "\n".join(lines)
