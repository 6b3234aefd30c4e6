"""The report's figures: throughput.png, efficiency.png, speedup.png (weak and strong speed-up
against replicas, the ideal line) and loss.png (matplotlib, Agg). Every point that is not a
significant difference (benchstat's "~", or one run a side: within-run only) is drawn open, and
labelled "~" / "1 run"; bars are 95 % intervals (docs/report.md)."""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Dict, List, Sequence

from distexp.report.scaling import NO_BASELINE, Row, Significance


def _mark(significance: str) -> str:
    return "1 run" if significance == Significance.WITHIN_RUN else Significance.NOT_SIGNIFICANT.value


def _open(c) -> bool:
    """A comparison drawn open: not significant, one run a side, or a decision that is not
    faster/slower (equal, not settled)."""
    if c.outcome:
        return not c.significant and not c.is_base
    return c.significance in (Significance.NOT_SIGNIFICANT, Significance.WITHIN_RUN)


def _open_mark(c) -> str:
    return c.outcome if c.outcome else _mark(c.significance)


# speedup.png's panels: (the Row's comparison, title, what it is over, the text where none is)
UNDECIDED = (("weak", "weak speed-up (same per-replica batch)",
              "not measured: no 1-replica job at the same per-replica batch"),
             ("strong", "strong speed-up (same global batch)",
              "not measured: no 1-replica job at the same global batch\n"
              "(sweep.controls=true adds them)"))
# a decided sweep's: the table's two columns, its decision's records (distexp.report.decided)
DECIDED = (("main", "vs baseline (paired by round)",
            "no comparison with the baseline in the sweep's decision"),
           ("strong", "at equal work (vs its 1-replica control)",
            "no equal-work control in the sweep's decision\n(sweep.controls=true adds them)"))


def _panel(ax, series, label, colors, attr: str) -> tuple:
    """One panel's lines: each series' comparison `attr` against replicas; (drawn, top, values)."""
    drawn, top, values = False, 1, []
    for key, rs in sorted(series.items()):
        pts = sorted(((r, getattr(r, attr)) for r in rs if getattr(r, attr) is not None
                      and getattr(r, attr).value == getattr(r, attr).value),
                     key=lambda p: p[0].replicas or 0)
        if not pts:
            continue
        xs, ys = [r.replicas for r, _ in pts], [c.value for _, c in pts]
        lo = [c.value - c.low if c.low is not None else 0 for _, c in pts]
        hi = [c.high - c.value if c.high is not None else 0 for _, c in pts]
        color = colors[key]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label(key), color=color)
        for (r, c), x, y in zip(pts, xs, ys):
            if _open(c):
                ax.scatter([x], [y], s=60, facecolors="white", edgecolors=color, zorder=3)
                ax.annotate(_open_mark(c), (x, y), textcoords="offset points", xytext=(6, 4),
                            fontsize=7, color=color)
        top, values, drawn = max(top, *xs), values + ys, True
    return drawn, top, values


def _accuracy_record(r: Row):
    """A decided row's record against its baseline with an accuracy half (None: none)."""
    from distexp.figures import outcomes
    from distexp.report.decided import setup_of

    d = r.decision
    i = setup_of(r, d) if d is not None and r.measured else None
    rec = d.of(i, outcomes.BASELINE) if i is not None else None
    return rec if rec is not None and rec.accuracy is not None else None


def _accuracy_panel(ax, series, label, colors) -> None:
    """speedup.png's third panel (a decided sweep): each set-up's accuracy difference from the
    baseline in points with its interval (the decision's records, the table's "acc. vs
    baseline"), against replicas; open: not settled; an unbounded end drawn to the view's edge."""
    from distexp.figures.sequential import ACCURACY_SETTLED

    drawn = False
    for key, rs in sorted(series.items()):
        pts = sorted(((r, c) for r, c in ((r, _accuracy_record(r)) for r in rs) if c is not None),
                     key=lambda p: p[0].replicas or 0)
        if not pts:
            continue
        xs, ys = [r.replicas for r, _ in pts], [c.accuracy for _, c in pts]
        lo = [c.accuracy - c.accuracy_low if c.accuracy_low is not None else 0 for _, c in pts]
        hi = [c.accuracy_high - c.accuracy if c.accuracy_high is not None else 0 for _, c in pts]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label(key),
                    color=colors[key], linestyle="none")
        for (r, c), x, y in zip(pts, xs, ys):
            if c.accuracy_outcome not in ACCURACY_SETTLED:
                ax.scatter([x], [y], s=60, facecolors="white", edgecolors=colors[key], zorder=3)
                ax.annotate("open", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=7,
                            color=colors[key])
        drawn = True
    ax.axhline(0, color="grey", linestyle=":", linewidth=1)
    if not drawn:
        ax.text(0.5, 0.5, "no accuracy half in the sweep's decision", ha="center", va="center",
                transform=ax.transAxes, fontsize=8)
    else:
        ax.legend(fontsize=7)
    ax.set_xlabel("replicas")
    ax.set_xticks(sorted({r.replicas for rs in series.values() for r in rs if r.replicas}))
    ax.set_ylabel("accuracy - baseline's (points)")
    ax.set_title("accuracy vs baseline (paired by round)", fontsize=10)
    ax.grid(alpha=0.3)


def speedups(plt, series, label, colors, out: Path, title: str, decided: bool = False) -> Path:
    """speedup.png: the speed-ups the table shows, against replicas. A decided sweep: over its
    baseline and at equal work (the decision's records, paired by round: the table's columns);
    else weak (same per-replica batch) and strong (same global batch) over one replica. The
    ideal (= replicas) where the comparison is at one per-replica or one global batch; open
    markers: not significant (not settled, equal)."""
    if decided:  # the accuracy differences beside the speed-ups, on their own scale
        fig, axes = plt.subplots(1, 3, figsize=(14, 4.4), dpi=100)
        axes[1].sharey(axes[0])
        _accuracy_panel(axes[2], series, label, colors)
    else:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), dpi=100, sharey=True)
    top, values = 1, [1.0]
    for ax, (attr, what, none) in zip(axes, DECIDED if decided else UNDECIDED):
        drawn, t, vs = _panel(ax, series, label, colors, attr)
        top, values = max(top, t), values + vs
        if attr != "main":  # the baseline may be at another batch: no ideal line there
            ax.plot([1, max(top, 2)], [1, max(top, 2)], color="grey", linestyle="--",
                    linewidth=1, label="ideal")
        ax.axhline(1, color="grey", linestyle=":", linewidth=1)
        if not drawn:
            ax.text(0.5, 0.5, none, ha="center", va="center", transform=ax.transAxes, fontsize=8)
        ax.set_xlabel("replicas")
        ax.set_xticks(sorted({r.replicas for rs in series.values() for r in rs if r.replicas}))
        ax.set_title(what, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    # ratios on a log scale (the intervals are symmetric in log); a bar wider than the view
    # (few runs on a noisy machine) runs off it rather than squashing every point
    axes[0].set_yscale("log")
    axes[0].set_ylim(min(values) / 2, 2 * max(top, *values))
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axes[0].yaxis.set_major_formatter(plain)
    axes[0].yaxis.set_minor_formatter(plain)
    axes[0].set_ylabel("speed-up (log scale)\n95 % interval; open: not significant")
    fig.suptitle(f"{title}: speed-up", fontsize=10)
    fig.tight_layout()
    path = out / "speedup.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def _labeller(rows: Sequence[Row]):
    """The legend label of a series key: strategy, plus the group and batch when they vary."""
    several = len({r.group for r in rows}) > 1
    # one line per strategy and per-replica batch (a control at another batch is its own line)
    batches = len({r.per_replica for r in rows if r.measured}) > 1

    def label(key):
        (model, dataset, loop), strategy, per_replica = key
        name = f"{strategy} ({model}/{dataset}/{loop})" if several else strategy
        return name + (f", {per_replica:g}/replica" if batches and per_replica else "")

    return label


def _series(rows: Sequence[Row]) -> Dict[tuple, List[Row]]:
    """The measured rows by (group, strategy, per-replica batch): one line each."""
    series: Dict[tuple, List[Row]] = {}
    for r in rows:
        if r.measured:
            series.setdefault((r.group, r.strategy, r.per_replica or 0), []).append(r)
    return series


def _draw_lines(ax, series, label, colors, value, band, hollow) -> bool:
    """One line per series against replicas, error bars from band(r), open markers where
    hollow(r); whether anything was drawn."""
    drawn = False
    for key, rs in sorted(series.items()):
        pts = sorted((r for r in rs if value(r) is not None), key=lambda r: r.replicas or 0)
        if not pts:
            continue
        xs, ys = [r.replicas for r in pts], [value(r) for r in pts]
        bands = [band(r) for r in pts]
        yerr = None
        if any(b is not None for b in bands):
            yerr = [[y - b[0] if b else 0 for y, b in zip(ys, bands)],
                    [b[1] - y if b else 0 for y, b in zip(ys, bands)]]
        line = ax.errorbar(xs, ys, yerr=yerr, marker="o", capsize=3, label=label(key),
                           color=colors[key])
        open_pts = [(x, y, r) for x, y, r in zip(xs, ys, pts) if hollow(r)]
        if open_pts:
            color = line.lines[0].get_color()
            ax.scatter([x for x, _, _ in open_pts], [y for _, y, _ in open_pts], s=60,
                       facecolors="white", edgecolors=color, zorder=3)
            for x, y, r in open_pts:
                ax.annotate(_mark(r.significance), (x, y), textcoords="offset points",
                            xytext=(6, 4), fontsize=7, color=color)
        drawn = True
    return drawn


def _figure(plt, series, label, colors, rows, out, title, name, ylabel, value, band,
            ideal=None, hollow=lambda r: False, note="") -> Path:
    """<name>.png: one line per strategy; error bars = band(r) -> (low, high) or None; hollow
    markers for the points `hollow` picks (not significant)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    drawn = _draw_lines(ax, series, label, colors, value, band, hollow)
    if ideal is not None and drawn:
        ax.axhline(ideal, color="grey", linestyle="--", linewidth=1, label="ideal")
    if not drawn:
        ax.text(0.5, 0.5, NO_BASELINE if name == "efficiency" else "no measured run",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("replicas")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}: {ylabel}{note}", fontsize=10)
    xs_all = sorted({r.replicas for r in rows if r.replicas})
    if xs_all:
        ax.set_xticks(xs_all)
    if drawn:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / f"{name}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def _rate_band(r):
    """The runs' range with repeats, the within-run 95 % interval with one."""
    if len(r.rates) > 1:
        return (min(r.rates), max(r.rates))
    return None if r.ci95 is None else (r.rate - r.ci95, r.rate + r.ci95)


def _eff_band(r):
    """The efficiency's interval (%) from the speed-up's, or None."""
    if r.speedup_low is None or r.speedup_high is None:
        return None
    return (100 * r.speedup_low / r.replicas, 100 * r.speedup_high / r.replicas)


def _loss_figure(plt, rows: Sequence[Row], out: Path, title: str) -> Path:
    """loss.png: every run's training-loss history."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    drawn = False
    xlabels = set()
    for r in rows:
        if r.curves.loss:
            xs, ys = zip(*r.curves.loss)
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, linewidth=1,
                    label=f"{r.run_name}" + (f" #{r.job_num}" if r.job_num is not None else ""))
            xlabels.add(r.curves.loss_x)
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no train/loss logged", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(fontsize=7)
    ax.set_xlabel(" / ".join(sorted(xlabels)) or "epoch")
    ax.set_ylabel("training loss")
    ax.set_title(f"{title}: training loss", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "loss.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def plots(rows: Sequence[Row], out: Path, title: str) -> List[Path]:
    """Draw throughput.png, efficiency.png, speedup.png and loss.png into out; their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    label = _labeller(rows)
    series = _series(rows)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {key: cycle[i % len(cycle)] for i, key in enumerate(sorted(series))}
    figure = partial(_figure, plt, series, label, colors, rows, out, title)

    unsure = lambda r: r.significance in (Significance.NOT_SIGNIFICANT, Significance.WITHIN_RUN)  # noqa: E731
    return [
        figure("throughput", "examples/s", lambda r: r.rate, _rate_band, hollow=unsure,
               note="\n(bars: runs' range or 1 run's 95 % CI; open: not significant)"),
        figure("efficiency", "scaling efficiency (%)",
               lambda r: None if r.efficiency is None else 100 * r.efficiency, _eff_band,
               ideal=100.0, hollow=lambda r: r.significance not in (Significance.SIGNIFICANT, Significance.BASELINE),
               note="\n(bars: speed-up's 95 % interval; open marker: not significant)"),
        speedups(plt, series, label, colors, out, title,
                 decided=any(r.decision is not None for r in rows)),
        _loss_figure(plt, rows, out, title),
    ]
