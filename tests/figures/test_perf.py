"""The throughput arithmetic, with a fake clock: warm-up excluded, rates and percentiles exact."""
from __future__ import annotations

import pytest

from distexp.figures import meter as perf


def test_warmup_steps_are_not_timed(clock):
    m = perf.Meter(global_batch=64, replicas=2, warmup_steps=3, job_start=1000.0)
    m.start_epoch()
    durations = [5.0, 1.0, 1.0, 0.5, 0.5, 0.25]  # 3 slow warm-up steps, then 3 timed
    for d in durations:
        clock.t += d
        m.end_step()
    e = m.epoch_figures()
    assert m.step == 6 and m.timed == [0.5, 0.5, 0.25]
    assert e["perf/epoch_examples_per_sec"] == pytest.approx(64 * 3 / 1.25)
    assert e["perf/epoch_examples_per_sec_per_replica"] == pytest.approx(64 * 3 / 1.25 / 2)
    assert e["perf/epoch_time_s"] == pytest.approx(sum(durations))
    f = m.final_figures()
    assert f["perf/time_to_first_step_s"] == pytest.approx(100.0 + 5.0)
    assert f["perf/step_time_ms_p50"] == pytest.approx(500.0)
    assert f["perf/step_time_ms_p90"] == pytest.approx(500.0)  # sorted .25, .5, .5


def test_epoch_made_only_of_warmup_has_no_rate(clock):
    m = perf.Meter(global_batch=10, replicas=1, warmup_steps=5, job_start=0.0)
    m.start_epoch()
    for _ in range(3):
        clock.t += 1
        m.end_step()
    assert m.epoch_figures()["perf/epoch_examples_per_sec"] is None
    assert m.final_figures()["perf/examples_per_sec"] is None


def test_eval_between_epochs_is_not_timed(clock):
    m = perf.Meter(global_batch=10, replicas=1, warmup_steps=0, job_start=0.0)
    m.start_epoch()
    clock.t += 1
    m.end_step()
    clock.t += 50  # evaluation, checkpointing, logging
    m.start_epoch()
    clock.t += 1
    m.end_step()
    assert m.final_figures()["perf/examples_per_sec"] == pytest.approx(10.0)


def test_steps_per_call_share_the_interval(clock):
    m = perf.Meter(global_batch=8, replicas=1, warmup_steps=2, job_start=0.0)
    m.start_epoch()
    clock.t += 40  # the first call traces: it holds warm-up steps, so none of it is timed
    m.end_step(steps=4)
    clock.t += 4
    m.end_step(steps=4)
    assert m.step == 8 and m.timed == [1.0] * 4
    assert m.final_figures()["perf/examples_per_sec"] == pytest.approx(8.0)


def test_spread_over_windows(clock):
    m = perf.Meter(global_batch=1, replicas=1, warmup_steps=0, job_start=0.0)
    m.start_epoch()
    for i in range(40):
        clock.t += 0.5 if i < 20 else 0.25  # two windows at 2/s, two at 4/s
        m.end_step()
    mean, ci = m.spread()
    assert mean == pytest.approx(3.0)
    assert ci == pytest.approx(1.96 * (4 / 3) ** 0.5 / 2)  # sample stdev of [2,2,4,4] / sqrt(4)


def test_percentile_matches_numpy():
    import numpy as np

    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    for q in (0, 10, 50, 90, 100):
        assert perf.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
