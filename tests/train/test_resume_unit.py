"""A job resumed from a checkpoint at its last step trains no step: its run closes with the final
evaluation, and every timing figure it could not measure is said and tagged as not measured (never
logged, never a crash: it was `TypeError: unsupported format string passed to
NoneType.__format__` in Reporter.finish)."""
from __future__ import annotations

import json

from distexp.figures import meter as perf
from distexp.job import summary
from distexp.tracking import RunLogger
from distexp.tracking import tags as tag
from distexp.train import progress


class _Logger(RunLogger):
    def __init__(self):
        super().__init__(sink="", gate="")
        self.metrics, self.tags = {}, {}

    def log_metrics(self, metrics, step=0):
        self.metrics.update({k: v for k, v in metrics.items() if v is not None})

    def set_tags(self, tags):
        self.tags.update(tags)


def test_a_job_with_nothing_left_to_train_closes_with_its_figures_not_measured(tmp_path, capsys):
    meter = perf.Meter(global_batch=4, replicas=1, warmup_steps=0, job_start=0.0)
    logger = _Logger()
    rep = progress.Reporter(meter=meter, logger=logger, chief=True, job_dir=tmp_path, epochs=2,
                            steps_per_epoch=4, log_every=0,
                            evaluate=lambda: {"eval/loss": 2.15, "eval/accuracy": 0.425})
    rep.start_epoch(2)  # what the custom loop does when the checkpoint is at the last step
    rep.end_epoch({"train/loss": None})
    final = rep.finish()
    out = capsys.readouterr().out
    epoch = next(ln for ln in out.splitlines() if ln.startswith("epoch 2/2"))
    assert epoch.startswith("epoch 2/2  eval_loss 2.1500  eval_accuracy 0.4250  ")  # no "loss nan"
    timing = ["perf/time_to_first_step_s", "perf/examples_per_sec", "perf/step_time_ms_p50",
              "perf/step_time_ms_p90", "perf/examples_per_sec_end_to_end"]
    assert logger.tags == {tag.NOT_MEASURED: ", ".join(timing)}
    assert not set(timing) & set(logger.metrics)  # not logged
    assert f"not measured: {', '.join(timing)}: no step was trained in this process" in out
    assert "final: eval_loss 2.1500  eval_accuracy 0.4250  time to first step not measured" in out
    assert final["eval/accuracy"] == 0.425 and final["perf/time_to_first_step_s"] is None
    progress.write_result(tmp_path, final)
    assert json.loads((tmp_path / "result.json").read_text())["train/loss"] is None  # not NaN
    lines = summary.lines(json.loads((tmp_path / "result.json").read_text()))
    assert lines[0] == "throughput: not measured (no step was trained: resumed at the last step)"
    assert lines[-1] == "final: eval_loss 2.1500  eval_accuracy 0.4250  time to first step not measured"


def test_a_trained_job_tags_nothing_as_not_measured(tmp_path, clock):
    meter = perf.Meter(global_batch=4, replicas=1, warmup_steps=0, job_start=0.0)
    logger = _Logger()
    rep = progress.Reporter(meter=meter, logger=logger, chief=True, job_dir=tmp_path, epochs=1,
                            steps_per_epoch=2, log_every=0, evaluate=lambda: {"eval/loss": 1.0})
    rep.start_epoch(1)
    for _ in range(2):
        clock.t += 1.0
        rep.end_step(1.0)
    rep.end_epoch({"train/loss": 1.0})
    rep.finish()
    assert logger.tags == {}
    assert logger.metrics["perf/time_to_first_step_s"] > 0
