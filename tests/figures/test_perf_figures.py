"""The performance figures' arithmetic with a fake clock: input wait share, MFU, time to accuracy,
per-step losses in steps.csv with several steps per call."""
from __future__ import annotations

import csv

import pytest

from distexp.figures import meter as perf
from distexp.tracking import RunLogger
from distexp.train import progress


def test_input_wait_share_counts_only_timed_steps(clock):
    m = perf.Meter(global_batch=10, replicas=1, warmup_steps=2, job_start=0.0)
    m.start_epoch()
    for i in range(6):
        m.input_wait(5.0 if i < 2 else 0.25)  # warm-up steps wait long: not counted
        clock.t += 5.0 if i < 2 else 1.0
        m.end_step()
    assert m.final_figures()["perf/input_wait_share"] == pytest.approx(0.25)


def test_input_wait_share_is_none_when_not_measured(clock):
    m = perf.Meter(global_batch=10, replicas=1, warmup_steps=0, job_start=0.0)
    m.start_epoch()
    clock.t += 1
    m.end_step(steps=2)
    assert m.final_figures()["perf/input_wait_share"] is None


def test_mfu():
    assert perf.mfu(3e6, 1000.0, 1e11) == pytest.approx(0.03)
    assert perf.mfu(None, 1000.0, 1e11) is None and perf.mfu(3e6, None, 1e11) is None
    assert perf.mfu(3e6, 1000.0, None) is None


def _reporter(tmp_path, accs, target):
    meter = perf.Meter(global_batch=4, replicas=1, warmup_steps=0, job_start=0.0)
    it = iter(accs)
    return progress.Reporter(meter=meter, logger=RunLogger(sink="", gate=""), chief=True,
                             job_dir=tmp_path, epochs=len(accs), steps_per_epoch=2, log_every=0,
                             evaluate=lambda: {"eval/loss": 1.0, "eval/accuracy": next(it)},
                             target_accuracy=target, target_metric="eval/accuracy")


def test_time_to_accuracy_from_first_epoch_start(tmp_path, clock):
    rep = _reporter(tmp_path, [0.5, 0.8, 0.9], target=0.75)
    for epoch in (1, 2, 3):
        rep.start_epoch(epoch)
        clock.t += 10
        rep.end_step([1.0, 0.9], steps=2)
        rep.end_epoch({"train/loss": 1.0, "train/accuracy": 0.5})
    final = rep.finish()
    assert final["perf/time_to_accuracy_s"] == pytest.approx(20.0)


def test_time_to_accuracy_none_if_never_reached(tmp_path, clock):
    rep = _reporter(tmp_path, [0.5], target=0.99)
    rep.start_epoch(1)
    clock.t += 1
    rep.end_step(1.0)
    rep.end_epoch({"train/loss": 1.0, "train/accuracy": 0.5})
    assert rep.finish()["perf/time_to_accuracy_s"] is None


def test_steps_csv_keeps_each_step_of_a_call(tmp_path, clock):
    rep = _reporter(tmp_path, [0.5], target=None)
    rep.start_epoch(1)
    clock.t += 4
    rep.end_step([0.4, 0.3, 0.2, 0.1], steps=4)
    clock.t += 2
    rep.end_step([0.05], kind="running_mean", steps=2)  # fit: one value per execution
    rep.end_epoch({"train/loss": 1.0, "train/accuracy": 0.5})
    rep.finish()
    rows = list(csv.DictReader(open(tmp_path / "steps.csv")))
    assert [(r["step"], r["loss"]) for r in rows] == [
        ("1", "0.4"), ("2", "0.3"), ("3", "0.2"), ("4", "0.1"), ("6", "0.05")]
    assert float(rows[0]["step_time_ms"]) == pytest.approx(1000.0)


class _Recorder(RunLogger):
    """A RunLogger that keeps what would be logged."""

    def __init__(self):
        super().__init__(sink="", gate="")
        self.points = []

    def log_metrics(self, metrics, step=0):
        self.points += [(k, step) for k, v in metrics.items() if v is not None]


def test_every_series_has_one_point_per_step(tmp_path, clock):
    """The run's final figures and the per-epoch series never share a (key, step): no
    doubled last point in MLflow's charts; the run's examples/s is its own one-point key."""
    rep = _reporter(tmp_path, [0.5, 0.8, 0.9], target=0.75)
    rep.logger = rec = _Recorder()
    for epoch in (1, 2, 3):
        rep.start_epoch(epoch)
        clock.t += 10
        rep.end_step([1.0, 0.9], steps=2)
        rep.end_epoch({"train/loss": 1.0, "train/accuracy": 0.5})
    final = rep.finish({"perf/flops_per_example": 3.0})
    assert len(rec.points) == len(set(rec.points)), sorted(rec.points)
    steps = lambda key: [s for k, s in rec.points if k == key]  # noqa: E731
    assert steps("perf/examples_per_sec") == [3]
    assert steps("perf/epoch_examples_per_sec") == [1, 2, 3]
    assert steps("eval/accuracy") == [1, 2, 3] and steps("perf/time_to_accuracy_s") == [2]
    # result.json still holds every final figure, the last epoch's eval included
    assert final["eval/accuracy"] == 0.9 and final["perf/time_to_accuracy_s"] == pytest.approx(20)
