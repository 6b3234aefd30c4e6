"""The console a person reads, in this process: which form `progress` takes, the bar and the plain
lines a display draws, the trainer's feed of progress records (throttled, on a fake clock), the
pump that hands them to the display and keeps them out of the log, a sweep's "job k of N" and its
ETA, and the job's summary from its figures. Tier: unit. Through a real terminal (pty) and a pipe,
a sweep included: tests/test_console_slow.py."""
from __future__ import annotations

import io
import json
import re

import pytest

from distexp.job import console, summary


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


@pytest.mark.parametrize("setting,tty,term,mode", [
    ("auto", True, "xterm", "bar"), ("auto", False, "xterm", "lines"),
    ("auto", True, "dumb", "lines"), ("bar", False, "xterm", "bar"),
    ("lines", True, "xterm", "lines"), ("quiet", True, "xterm", "quiet")])
def test_auto_is_a_bar_on_a_terminal_only(monkeypatch, setting, tty, term, mode):
    monkeypatch.setenv("TERM", term)
    assert console.resolve(setting, _Stream(tty)) == mode


def test_sweep_eta_is_the_mean_job_time_for_each_job_left():
    # 3 of 9 jobs done in 300 s (100 s each); this one (the 4th) has run 40 s
    pos = console.SweepPosition(k=4, n=9, round=2, rounds=3, started=1000.0,
                                done=[1100.0, 1200.0, 1300.0])
    assert pos.eta_s(now=1340.0) == pytest.approx(60 + 5 * 100)
    assert pos.title() == "sweep: job 4 of 9 (round 2 of 3)"
    assert pos.eta_text(now=1340.0) == "~9 min left (from the 3 jobs done)"
    assert pos.eta_s(now=1500.0) == pytest.approx(500)  # over its mean: the others' still left
    first = console.SweepPosition(k=1, n=9, started=1000.0)
    assert first.eta_s() is None and first.line() == "sweep: job 1 of 9; ETA after the first job"


def test_sweep_position_reads_the_plan_and_the_records(tmp_path):
    from distexp.sweeps import records

    (tmp_path / records.SWEEP_FILE).write_text(json.dumps({"sweep_id": "s"}))
    records.write_plan(tmp_path, [2, 5, 7])
    records.write_record(tmp_path, {"num": 2, "status": "COMPLETED"})
    pos = console.sweep_position(tmp_path, 5, repeat=1, repeats=2)
    assert (pos.k, pos.n, pos.round, pos.rounds, len(pos.done)) == (2, 3, 2, 2, 1)
    assert json.loads((tmp_path / records.SWEEP_FILE).read_text())["sweep_id"] == "s"  # kept
    assert console.sweep_position(tmp_path, 3) is None  # not launched by this sweep


def _records():
    return [{"epoch": 1, "epochs": 2, "step": s, "steps": 60, "rate": 20000.0, "loss": 0.5}
            for s in (6, 30, 60)]


def test_the_bar_moves_with_carriage_returns_and_writes_lines_above_it():
    out = _Stream(True)
    bar = console.Bar(console.SweepPosition(k=2, n=9, started=0.0, done=[10.0]), stream=out)
    for i, rec in enumerate(_records()):
        bar.progress(rec)
        if i == 1:
            bar.write("epoch 1/2  loss 0.5\n")
    bar.close()
    text = out.getvalue()
    draws = re.findall(r"\repoch 1/2 +\d+%\|[^\r\n]*\| (\d+)/60 steps", text)
    assert ["0", "6", "30", "60"] == sorted(set(draws), key=int), text
    assert "20,000 ex/s, loss 0.5000" in text
    assert "sweep: job 2 of 9" in text and "1/9 jobs done" in text
    assert "epoch 1/2  loss 0.5\n" in text


def test_plain_lines_have_no_control_characters(capsys):
    d = console.open_display("lines", console.SweepPosition(k=1, n=2, started=0.0))
    for rec in _records():
        d.progress(rec)
    d.write("epoch 1/2  loss 0.5\n")
    d.close()
    out = capsys.readouterr().out
    assert out == "sweep: job 1 of 2; ETA after the first job\nepoch 1/2  loss 0.5\n"
    console.open_display("quiet", console.SweepPosition(k=1, n=2, started=0.0)).close()
    assert capsys.readouterr().out == ""  # quiet: no progress, the sweep's line included


def test_the_feed_prints_at_most_ten_records_a_second_and_each_epochs_last_step(clock, capsys):
    from distexp.train.live import Feed

    feed = Feed(epochs=1, steps_per_epoch=100, global_batch=64)
    for step in range(1, 101):
        clock.t += 0.01  # a 10 ms step: 100 steps in 1 s
        feed.update(1, step, step, 0.5)
    recs = [json.loads(ln[len(console.PREFIX):]) for ln in capsys.readouterr().out.splitlines()]
    assert 9 <= len(recs) <= 11 and recs[-1]["step"] == 100
    assert recs[1]["rate"] == pytest.approx(6400, rel=1e-6)  # 64 x 10 steps / 0.1 s


def test_the_pump_gives_records_to_the_display_and_keeps_them_out_of_the_log():
    from distexp.job.launch import _pump

    class Display:
        def __init__(self):
            self.records, self.lines = [], []

        def progress(self, rec):
            self.records.append(rec)

        def write(self, text):
            self.lines.append(text)

    rec = console.PREFIX + json.dumps(_records()[0]) + "\n"
    src = io.BytesIO(("Number of devices: 1\n" + rec + "throughput: 1 examples/s\n"
                      "epoch 1/2  loss 0.5\n").encode())
    log, d = io.BytesIO(), Display()
    _pump(src, log, d, [])
    assert d.records == [_records()[0]]
    assert d.lines == ["Number of devices: 1\n", "epoch 1/2  loss 0.5\n"]  # detail: log only
    assert log.getvalue().decode() == ("Number of devices: 1\nthroughput: 1 examples/s\n"
                                       "epoch 1/2  loss 0.5\n")


RESULT = {"perf/examples_per_sec": 20586.4, "perf/examples_per_sec_ci95": 712.2,
          "perf/timed_steps": 140.0, "perf/examples_per_sec_end_to_end": 15210.2,
          "global_batch_size": 128, "perf/step_input_ms": 0.813, "perf/step_compute_ms": 5.104,
          "perf/step_sync_ms": 0.0, "perf/mfu": 0.0231, "perf/peak_flops": 1.2345e12,
          "eval/loss": 0.21893, "eval/accuracy": 0.94167, "perf/time_to_first_step_s": 3.214}


def test_the_summary_is_four_lines_whose_step_adds_up():
    step = 1000 * 128 / 20586.4
    result = {**RESULT, "perf/step_other_ms": step - 0.813 - 5.104 - 0.0}
    lines = summary.lines(result)
    assert lines[0] == ("throughput: 20,586 examples/s [19,874, 21,299] (95 % interval over 140 "
                        "timed steps); end to end 15,210 examples/s")
    m = re.match(r"step (\S+) ms = input (\S+) \+ compute (\S+) \+ sync (\S+) \+ other (\S+); "
                 r"bottleneck: compute, (\d+) % \(", lines[1])
    assert m, lines[1]
    shown = [float(x) for x in m.groups()[:5]]
    assert shown[0] == pytest.approx(sum(shown[1:]), abs=1e-9)  # it sums as printed
    assert shown[0] == pytest.approx(step, abs=0.02) and shown[1:4] == [0.81, 5.10, 0.0]
    assert lines[2] == "MFU: 2.31 % of the devices' peak (1,234.5 GFLOP/s)"
    assert lines[3] == "final: eval_loss 0.2189  eval_accuracy 0.9417  time to first step 3.21 s"
    assert len(lines) == 4


def test_the_summary_says_when_the_split_was_scaled_to_the_step():
    """Parts that overlapped in training by more than the noise were scaled to the step
    (perf/step_split_scale < 1, other 0): the console's line says so; unscaled (1.0): nothing."""
    step = 1000 * 128 / 20586.4
    scaled = {**RESULT, "perf/step_input_ms": 0.8 * 0.9, "perf/step_compute_ms": step - 0.72,
              "perf/step_sync_ms": 0.0, "perf/step_other_ms": 0.0, "perf/step_split_scale": 0.9}
    line = summary.lines(scaled)[1]
    assert "; input, compute and sync x 0.90: they overlap in training; bottleneck: compute" in line
    assert "x 1.00" not in summary.lines({**scaled, "perf/step_split_scale": 1.0})[1]


def test_the_summary_says_what_was_not_measured():
    lines = summary.lines({**RESULT, "perf/examples_per_sec_ci95": None, "perf/timed_steps": 15.0,
                           "perf/step_input_ms": None, "perf/step_compute_ms": None,
                           "perf/step_sync_ms": None, "perf/mfu": None,
                           "perf/tokens_per_sec": 9999.6})
    assert lines[0].startswith("throughput: 20,586 examples/s (15 timed steps: too few for an "
                               "interval, 10,000 tokens/s); end to end")
    assert lines[1] == "step 6.22 ms (mean of the timed steps; its split was not measured)"
    assert not any(ln.startswith("MFU") for ln in lines)
    assert summary.lines({}) == []
    assert summary.lines({"perf/examples_per_sec": None})[0].startswith("throughput: not measured")
