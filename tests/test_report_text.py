"""A speed-up, a rate and a verdict as every place shows them (distexp.report.text, one formatter
each): the console (short), report.md, the verdict's lines and a job run's speed-up tag."""
from __future__ import annotations

import dataclasses

from distexp.report import text
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
    assert text.speedup(r, short=True) == "1.62x [1.40, 1.85]"
    assert text.speedup(r) == "1.62x [1.40, 1.85]"
    assert text.speed_tag(dataclasses.replace(r, strong=r.main)) == "1.62x [1.40, 1.85] significant"
    within = _row(speedup=0.953, speedup_low=0.9, speedup_high=1.006, speedup_ci95=0.053,
                  significance=Significance.WITHIN_RUN)
    assert text.speedup(within) == "~ 0.95x ± 0.05 (within run)"
    assert text.speedup(within, short=True) == "0.95x [0.90, 1.01]"
    assert text.speed_tag(dataclasses.replace(within, strong=within.main)) == (
        "0.95x [0.90, 1.01] one run a side")
    base = _row(speedup=1.0, significance=Significance.BASELINE)
    assert (text.speedup(base), text.speedup(base, short=True),
            text.speed_tag(dataclasses.replace(base, strong=base.main))) == (
        "1.00x (baseline)", "1.00x", "1.00x baseline")
    # the tag is the equal-work figure (strong), never the batch-confounded main one
    assert text.speed_tag(r) == "not measured: no 1-replica run at global batch 128"
    assert text.speed_tag(_row(replicas=1, rate=None)) is None
    c = Comparison(mode="strong", value=0.953, baseline="b", base_rate=1.0, is_base=False, low=0.8,
                   high=1.12, significance=Significance.NOT_SIGNIFICANT, repeats_needed=14)
    assert text.comparison(c, "of one_device x1") == (
        "~ 0.95x of one_device x1 [0.80, 1.12], not significant; ~14 runs each would resolve it")


def test_the_rate_and_the_verdict_long_and_short():
    one = _row()
    # one run: the figure with its interval, as the job's summary and the runs' tags write it
    assert text.rate(one) == text.rate(one, short=True) == "20,586 [19,974, 21,199]"
    runs = _row(rates=[20000.0, 20586.4, 21300.0])
    assert text.rate(runs, short=True) == "20,586 (20,000-21,300)"
    ns = _row(speedup=1.01, significance=Significance.NOT_SIGNIFICANT, repeats_needed=None)
    assert text.significance(ns) == "~ no difference visible (not resolvable in 1000 runs)"
    assert text.significance(ns, short=True) == "not significant"
    assert text.significance(_row(status="FAILED"), short=True) == "failed"
    assert text.significance(_row(), short=True) == "no baseline"
