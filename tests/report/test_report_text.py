"""A speed-up, a rate and a verdict as every place shows them (distexp.report.wording, one formatter
each): the console (short), report.md, the verdict's lines and a job run's speed-up tag."""
from __future__ import annotations

import dataclasses

from distexp.report import wording
from distexp.report.scaling import Comparison, Row, Significance


def _row(speedup=None, speedup_low=None, speedup_high=None, speedup_ci95=None, significance="",
         significant=False, repeats_needed=None, **kw) -> Row:
    main = None if speedup is None else Comparison(
        mode="weak", value=speedup, baseline="b", base_rate=1.0, is_base=significance == Significance.BASELINE,
        low=speedup_low, high=speedup_high, ci95=speedup_ci95, significance=significance,
        significant=significant, repeats_needed=repeats_needed)
    base = dict(main=main, run_id="r", run_name="r", status="FINISHED", strategy="mirrored", model="mlp",
                dataset="synthetic", loop="custom", workers=1, replicas=2, global_batch=128,
                rate=20586.4, ci95=612.3, eval_accuracy=0.9, time_to_first_step=1.0)
    return Row(**{**base, **kw})


def test_one_speed_up_in_every_place_it_is_shown():
    r = _row(speedup=1.623, speedup_low=1.401, speedup_high=1.852, significant=True,
             significance=Significance.SIGNIFICANT, rates=[20586.4])
    assert wording.speedup(r, short=True) == "1.62x [1.40, 1.85]"
    assert wording.speedup(r) == "1.62x [1.40, 1.85]"
    assert wording.speed_tag(dataclasses.replace(r, strong=r.main)) == "1.62x [1.40, 1.85] significant"
    within = _row(speedup=0.953, speedup_low=0.9, speedup_high=1.006, speedup_ci95=0.053,
                  significance=Significance.WITHIN_RUN)
    assert wording.speedup(within) == "~ 0.95x ± 0.05 (within run)"
    assert wording.speedup(within, short=True) == "0.95x [0.90, 1.01]"
    assert wording.speed_tag(dataclasses.replace(within, strong=within.main)) == (
        "0.95x [0.90, 1.01] one run a side")
    base = _row(speedup=1.0, significance=Significance.BASELINE)
    assert (wording.speedup(base), wording.speedup(base, short=True),
            wording.speed_tag(dataclasses.replace(base, strong=base.main))) == (
        "1.00x (baseline)", "1.00x", "1.00x baseline")
    # the tag is the equal-work figure (strong), never the batch-confounded main one
    assert wording.speed_tag(r) == "not measured: no 1-replica run at global batch 128"
    assert wording.speed_tag(_row(replicas=1, rate=None)) is None
    c = Comparison(mode="strong", value=0.953, baseline="b", base_rate=1.0, is_base=False, low=0.8,
                   high=1.12, significance=Significance.NOT_SIGNIFICANT, repeats_needed=14)
    assert wording.comparison(c, "of one_device x1") == (
        "~ 0.95x of one_device x1 [0.80, 1.12], not significant; ~14 runs each would resolve it")


def test_the_rate_and_the_verdict_long_and_short():
    one = _row()
    # one run: the figure with its interval, as the job's summary and the runs' tags write it
    assert wording.rate(one) == wording.rate(one, short=True) == "20,586 [19,974, 21,199]"
    runs = _row(rates=[20000.0, 20586.4, 21300.0])
    assert wording.rate(runs, short=True) == "20,586 (20,000-21,300)"
    ns = _row(speedup=1.01, significance=Significance.NOT_SIGNIFICANT, repeats_needed=None)
    assert wording.significance(ns) == "~ no difference visible (not resolvable in 1000 runs)"
    assert wording.significance(ns, short=True) == "not significant"
    assert wording.significance(_row(status="FAILED"), short=True) == "failed"
    assert wording.significance(_row(), short=True) == "no baseline"


def _decided_rows():
    """The README sweep's three set-ups, 3 runs each, and a decision on them (as the sweeper
    stores it): the report's rows carry the records' speed-ups, nothing computed again."""
    from distexp.figures import outcomes as O
    from distexp.report import decided
    from distexp.report.scaling import Row, add_scaling, aggregate

    def run(strategy, replicas, batch, rate, job):
        return Row(run_id=f"id{job}", run_name="", status="FINISHED", strategy=strategy,
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=replicas,
                   global_batch=batch, rate=rate, ci95=None, eval_accuracy=0.9,
                   time_to_first_step=1.0, job_num=job, rates=[rate], run_ids=[f"id{job}"],
                   overrides=f"strategy={strategy} gbs={batch} repeat={job // 3}")

    rows = aggregate([run(s, n, b, rate * (1 + 0.01 * k), 3 * k + i)
                      for k in range(3)
                      for i, (s, n, b, rate) in enumerate([("one_device", 1, 64, 1000.0),
                                                           ("mirrored", 2, 128, 1100.0),
                                                           ("one_device", 1, 128, 1500.0)])])
    add_scaling(rows)
    names = ["one_device x1 batch 64", "mirrored x2", "one_device x1 batch 128 (control)"]
    m = "repeated confidence intervals"
    d = O.Decision("auto", m, 0.05, 0.05, 3, 10, names, [
        O.Record(1, 2, [names[1], names[2]], O.EQUAL_WORK, 0.72, 0.45, 1.14, "not settled", 3, m,
                 0.31, 21),
        O.Record(1, 0, [names[1], names[0]], O.BASELINE, 1.18, 0.81, 1.72, "not settled", 3, m,
                 0.3, None),
        O.Record(2, 0, [names[2], names[0]], O.BASELINE, 1.61, 1.32, 1.96, "faster", 3, m, 0.1,
                 None)], "python -m distexp -m x sweep.resume=s sweep.max_repeats=21", 21, [2])
    decided.apply(rows, d)
    return rows, d


def test_a_decision_is_the_reports_one_answer(tmp_path):
    """report.md opens with the decision's lines (no Verdict computed beside them), its table and
    report.csv show the records' speed-ups (vs baseline, and at equal work), the console table
    both with their words, the run tag the equal-work one."""
    import csv

    from distexp.figures import outcomes as O
    from distexp.report.cli import markdown
    from distexp.report.columns import write_csv
    from distexp.report.table import table
    from distexp.report.wording import speed_tag

    rows, d = _decided_rows()
    md = markdown(rows, "Sweep s", d)
    assert "## Outcome (repeats=auto)" in md and "## Verdict" not in md
    assert all((f"  {line}" if line.startswith("  ") else f"- {line}") in md  # continued lines
               for line in O.closing_lines(d))
    mirrored = next(r for r in rows if r.strategy == "mirrored")
    assert "| 1.18x [0.81, 1.72] | not settled |" in md
    assert "| 0.72x [0.45, 1.14] not settled |" in md  # at equal global batch
    assert speed_tag(mirrored) == "0.72x [0.45, 1.14] not settled"
    write_csv(rows, tmp_path / "r.csv")
    got = {r["strategy"] + r["global_batch"]: r for r in csv.DictReader(open(tmp_path / "r.csv"))}
    m = got["mirrored128"]
    assert (m["speedup"], m["speedup_low"], m["speedup_high"], m["significant"]) == (
        "1.18", "0.81", "1.72", "False")
    assert (m["speedup_strong"], m["speedup_strong_low"], m["verdict"]) == (
        "0.72", "0.45", "not settled")
    assert m["speedup_weak"] == "" and m["batch_effect"] == ""  # no ratio of medians beside
    assert got["one_device128"]["significant"] == "True"
    lines = table(rows).splitlines()
    assert "vs baseline" in lines[0] and "at equal work" in lines[0]
    mline = next(ln for ln in lines if ln.startswith("mirrored"))
    assert "1.18x [0.81, 1.72] open" in mline and "0.72x [0.45, 1.14] open" in mline
    assert max(len(ln) for ln in lines) <= 120


def test_the_ui_names_each_set_up_with_its_answer():
    from distexp.sweeps.publish import setups

    rows, _ = _decided_rows()
    names = setups(rows)
    assert set(names.values()) == {
        "one_device x1 batch 64: baseline",
        "mirrored x2: 0.72x [0.45, 1.14] not settled vs control",
        "one_device x1 batch 128 (control): 1.61x [1.32, 1.96] faster"}


def test_speedup_png_draws_the_speed_ups_the_table_shows(tmp_path, monkeypatch):
    """speedup.png of a decided sweep: its left panel the records vs the baseline, its right one
    the equal-work records (the table's two columns; it said "not measured: no 1-replica job at
    the same per-replica batch" beside a table comparing exactly those), every label inside the
    figure (the y label was cut)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from distexp.report import plots

    rows, d = _decided_rows()
    for rec, acc in zip(d.comparisons[1:], [(-0.4, -1.6, 0.8, "not settled"),
                                            (-9.1, -16.6, -1.5, "less accurate")]):
        rec.accuracy, rec.accuracy_low, rec.accuracy_high, rec.accuracy_outcome = acc
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)  # the figures, not closed: read back
    plots.plots(rows, tmp_path, "Sweep s")
    fig = next(f for f in kept if len(f.axes) == 3)
    left, right, acc = fig.axes

    def points(ax):
        return sorted((float(x), round(float(y), 2)) for c in ax.containers
                      for x, y in c.lines[0].get_xydata())

    # the third panel: the accuracy half against the baseline, its intervals, open: not settled
    assert acc.get_title() == "accuracy vs baseline (paired by round)"
    assert points(acc) == [(1.0, -9.1), (2.0, -0.4)]  # the control, mirrored
    bars = sorted(tuple(round(float(v), 2) for v in seg[:, 1]) for c in acc.containers
                  for seg in c.lines[2][0].get_segments())
    assert bars == [(-16.6, -1.5), (-1.6, 0.8)]
    assert [t.get_text() for t in acc.texts] == ["open"]
    assert left.get_title() == "vs baseline (paired by round)"
    assert points(left) == [(1.0, 1.0), (1.0, 1.61), (2.0, 1.18)]  # baseline, control, mirrored
    assert right.get_title() == "at equal work (vs its 1-replica control)"
    assert points(right) == [(1.0, 1.0), (2.0, 0.72)]
    said = [t.get_text() for ax in (left, right) for t in ax.texts]
    assert said.count("not settled") == 2 and not [t for t in said if "not measured" in t]
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    for label in (left.yaxis.label, left.xaxis.label, right.xaxis.label, fig._suptitle):
        ext = label.get_window_extent(renderer)
        assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1, \
            (label.get_text(), ext, box)
