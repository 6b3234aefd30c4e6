"""A job that will train a minute or more says so once, early: after EXPECT_AFTER_STEPS timed steps
(or EXPECT_AFTER_S seconds of them), the steps left times their mean time (distexp.train.progress,
Reporter._expect / expected_line); a shorter job says nothing. With a fake clock."""
from __future__ import annotations

from distexp.figures import meter as perf
from distexp.tracking import RunLogger
from distexp.train import progress


def _job_reporter(tmp_path, epochs, steps_per_epoch, warmup=2):
    meter = perf.Meter(global_batch=4, replicas=1, warmup_steps=warmup, job_start=0.0)
    return progress.Reporter(meter=meter, logger=RunLogger(sink="", gate=""), chief=True,
                             job_dir=tmp_path, epochs=epochs, steps_per_epoch=steps_per_epoch,
                             log_every=0, evaluate=dict)


def _steps(rep, clock, n, seconds):
    for _ in range(n):
        clock.t += seconds
        rep.end_step(1.0)


def test_a_long_job_says_its_expected_duration_once_after_ten_timed_steps(tmp_path, clock, capsys):
    rep = _job_reporter(tmp_path, epochs=3, steps_per_epoch=100)
    rep.start_epoch(1)
    _steps(rep, clock, 11, 0.5)  # 2 warm-up + 9 timed: not yet
    assert "expected" not in capsys.readouterr().out
    _steps(rep, clock, 1, 0.5)  # the 10th timed step
    assert capsys.readouterr().out.splitlines() == [
        "expected: ~2 min more of training (288 steps left at 0.500 s each; the 3 evaluations "
        "not counted)"]
    _steps(rep, clock, 30, 0.5)
    assert "expected" not in capsys.readouterr().out  # said once


def test_slow_steps_are_said_after_ten_seconds_of_them(tmp_path, clock, capsys):
    rep = _job_reporter(tmp_path, epochs=1, steps_per_epoch=50, warmup=1)
    rep.start_epoch(1)
    _steps(rep, clock, 4, 4.0)  # 3 timed steps, 12 s
    assert capsys.readouterr().out.splitlines() == [
        "expected: ~3 min more of training (46 steps left at 4.000 s each; evaluation not counted)"]


def test_a_job_of_under_a_minute_says_nothing(tmp_path, clock, capsys):
    rep = _job_reporter(tmp_path, epochs=5, steps_per_epoch=22)
    rep.start_epoch(1)
    _steps(rep, clock, 22, 0.4)  # 98 steps left at 0.4 s: 39 s
    assert "expected" not in capsys.readouterr().out


def test_the_line_is_within_120_columns_for_a_long_job():
    line = progress.expected_line(1_234_567, 12.345, 1000)
    assert line == ("expected: ~4233.5 h more of training (1,234,567 steps left at 12.345 s each; "
                    "the 1000 evaluations not counted)")
    assert len(line) <= 120
