"""The console a person reads, in this process: which form `progress` takes, the bar and the plain
lines a display draws, the trainer's feed of progress records (throttled, on a fake clock), the
pump that hands them to the display and keeps them out of the log, a sweep's "job k of N" and its
ETA, and the job's summary from its figures. Tier: unit. Through a real terminal (pty) and a pipe,
a sweep included: tests/job/test_console_slow.py."""
from __future__ import annotations

import io
import json
import re

import pytest

from distexp.job import console, summary
from distexp.library_logs import LOG_ONLY_PREFIX


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
    assert pos.eta_text(now=1340.0) == "~9 min left"
    assert pos.eta_s(now=1500.0) == pytest.approx(500)  # over its mean: the others' still left
    first = console.SweepPosition(k=1, n=9, started=1000.0)
    assert first.eta_s() is None and first.eta_text() == "ETA after the first job"


def test_an_auto_sweep_says_at_most_and_its_eta_is_a_bound():
    """repeats=auto: n and the rounds are bounds (its rounds may end sooner), and so is the ETA;
    once a job has ended, the time left counts it (the mean over the 4 jobs done, for 8 left)."""
    pos = console.SweepPosition(k=4, n=12, round=2, rounds=6, started=1000.0,
                                done=[1100.0, 1200.0, 1300.0], at_most=True, name="mirrored x2")
    assert pos.title() == "sweep: job 4 of at most 12 (round 2 of at most 6)"
    assert pos.short() == "job 4 of ≤12 (round 2 of ≤6)"
    assert pos.eta_text(now=1340.0) == "~14 min left at most"  # 60 + 8 x 100 s
    assert pos.left_text(now=1400.0) == "~13 min left"  # 100 s x 8
    last = console.SweepPosition(k=12, n=12, started=1000.0, done=[1100.0] * 11, at_most=True)
    assert last.left_text(now=2200.0) == ""
    assert console.SweepPosition(k=None, n=None, num=7).short() == "job 7"  # no plan (Optuna)


def test_sweep_position_reads_the_plan_and_the_records(tmp_path):
    from distexp.sweeps import records

    (tmp_path / records.SWEEP_FILE).write_text(json.dumps({"sweep_id": "s"}))
    records.write_plan(tmp_path, [2, 5, 7])
    records.write_record(tmp_path, {"num": 2, "status": "COMPLETED"})
    pos = console.sweep_position(tmp_path, 5, repeat=1, repeats=2, name="mirrored x2 batch 128")
    assert (pos.k, pos.n, pos.round, pos.rounds, len(pos.done)) == (2, 3, 2, 2, 1)
    assert (pos.at_most, pos.name) == (False, "mirrored x2 batch 128")
    assert json.loads((tmp_path / records.SWEEP_FILE).read_text())["sweep_id"] == "s"  # kept
    other = console.sweep_position(tmp_path, 3)  # not launched by this sweep: no place in it
    assert (other.k, other.n, other.short()) == (None, None, "job 3")


def test_an_auto_sweeps_plan_grows_by_round_and_keeps_its_start(tmp_path):
    """repeats=auto writes the plan before each round: the jobs launched so far, the bound on the
    jobs in all, the set-ups' names (the round lines'); the start stays the first round's."""
    from distexp.sweeps import records

    (tmp_path / records.SWEEP_FILE).write_text(json.dumps({"sweep_id": "s"}))
    records.write_plan(tmp_path, [0, 1], at_most=6, names={0: "one_device x1", 1: "mirrored x2"})
    started = json.loads((tmp_path / records.SWEEP_FILE).read_text())["started"]
    records.write_plan(tmp_path, [0, 1, 2, 3], at_most=6, names={2: "one_device x1",
                                                                  3: "mirrored x2"})
    info = json.loads((tmp_path / records.SWEEP_FILE).read_text())
    assert info["started"] == started and info["launch"] == [0, 1, 2, 3]
    pos = console.sweep_position(tmp_path, 3, repeat=1, repeats=3, name="mirrored x2 batch 128")
    assert (pos.k, pos.n, pos.at_most, pos.name) == (4, 6, True, "mirrored x2")
    assert pos.title() == "sweep: job 4 of at most 6 (round 2 of at most 3)"


def _records():
    return [{"epoch": 1, "epochs": 2, "step": s, "steps": 60, "rate": 20000.0, "loss": 0.5}
            for s in (6, 30, 60)]


def test_the_bar_moves_with_carriage_returns_and_writes_lines_above_it():
    out = _Stream(True)
    bar = console.Bar(stream=out)
    for i, rec in enumerate(_records()):
        bar.progress(rec)
        if i == 1:
            bar.write("epoch 1/2  loss 0.5\n")
    bar.close()
    text = out.getvalue()
    draws = re.findall(r"\repoch 1/2 +\d+%\|[^\r\n]*\| (\d+)/60 steps", text)
    assert ["0", "6", "30", "60"] == sorted(set(draws), key=int), text
    assert "20,000 ex/s, loss 0.5000" in text
    assert "epoch 1/2  loss 0.5\n" in text


def test_a_sweeps_bar_shows_where_the_sweep_stands_and_only_the_trainers_warnings():
    out = _Stream(True)
    bar = console.Bar(console.SweepPosition(k=2, n=9, started=0.0, done=[10.0], at_most=True),
                      stream=out)
    for rec in _records():
        bar.progress(rec)
    bar.write("epoch 1/2  loss 0.5\n")
    bar.write("distexp: warning: training diverged\n")
    bar.close()
    text = out.getvalue()
    assert "sweep: job 2 of at most 9" in text and "1/≤9 jobs done" in text, text
    assert "epoch 1/2  loss" not in text  # in the job's chief.log
    assert "distexp: warning: training diverged\n" in text


def test_the_bar_says_when_the_probes_run_after_training():
    """After the last step the trainer sends a phase record (distexp.train.live.Feed.phase): the
    bar, at 100 %, says what the process does instead of sitting there mute."""
    from distexp.train import live

    out = _Stream(True)
    bar = console.Bar(stream=out)
    for rec in _records():
        bar.progress(rec)
    bar.progress({"phase": live.PROBES})
    bar.close()
    draws = [d for d in out.getvalue().split("\r") if d.strip()]
    assert draws[-1].startswith("measuring the step split 100%|"), draws
    assert "60/60 steps" in draws[-1] and "ex/s" not in draws[-1]


def test_plain_lines_have_no_control_characters(capsys):
    d = console.open_display("lines", console.SweepPosition(k=1, n=2, started=0.0))
    for rec in _records():
        d.progress(rec)
    d.write("epoch 1/2  loss 0.5\n")
    d.close()
    assert capsys.readouterr().out == ""  # a sweep's job: its lines are in its chief.log
    d = console.open_display("lines")
    for rec in _records():
        d.progress(rec)
    d.write("epoch 1/2  loss 0.5\n")
    assert capsys.readouterr().out == "epoch 1/2  loss 0.5\n"  # a single job: as they come


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
    detail = LOG_ONLY_PREFIX + "throughput: 1 examples/s\n"
    src = io.BytesIO(("Number of devices: 1\n" + rec + detail + "epoch 1/2  loss 0.5\n").encode())
    log, d = io.BytesIO(), Display()
    _pump(src, log, d, [])
    assert d.records == [_records()[0]]
    assert d.lines == ["Number of devices: 1\n", "epoch 1/2  loss 0.5\n"]  # detail: log only
    assert log.getvalue().decode() == "Number of devices: 1\n" + detail + "epoch 1/2  loss 0.5\n"


RESULT = {"perf/examples_per_sec": 20586.4, "perf/examples_per_sec_ci95": 712.2,
          "perf/timed_steps": 140.0, "perf/examples_per_sec_end_to_end": 15210.2,
          "global_batch_size": 128, "perf/step_input_ms": 0.813, "perf/step_compute_ms": 5.104,
          "perf/step_sync_ms": 0.0, "perf/mfu": 0.0231, "perf/peak_flops": 1.2345e12,
          "eval/loss": 0.21893, "eval/accuracy": 0.94167, "perf/time_to_first_step_s": 3.214}


def test_the_summary_is_four_lines_whose_step_adds_up():
    step = 1000 * 128 / 20586.4
    result = {**RESULT, "perf/step_other_ms": step - 0.813 - 5.104 - 0.0}
    lines = summary.lines(result)
    # 140 steps of 128 examples at 20,586.4/s: 0.870 s
    assert lines[0] == ("throughput: 20,586 examples/s [19,874, 21,299] (95 %, 140 timed steps, "
                        "0.9 s); end to end 15,210 examples/s")
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
    assert lines[0].startswith("throughput: 20,586 examples/s (15 timed steps, 0.1 s: too few for "
                               "an interval, 10,000 tokens/s); end to end")
    many = summary.lines({**RESULT, "perf/timed_steps": 1312.0, "perf/examples_per_sec": 41986.6,
                          "global_batch_size": 64})[0]
    assert "(95 %, 1,312 timed steps, 2.0 s)" in many  # 1312 x 64 / 41986.6 = 1.9999
    assert lines[1] == "step 6.22 ms (mean of the timed steps; its split was not measured)"
    assert not any(ln.startswith("MFU") for ln in lines)
    assert summary.lines({}) == []
    assert summary.lines({"perf/examples_per_sec": None})[0].startswith("throughput: not measured")


def test_a_sweeps_job_ends_with_one_line_of_its_figures():
    pos = console.SweepPosition(k=4, n=12, round=2, rounds=6, started=1000.0,
                                done=[1100.0, 1200.0, 1300.0], at_most=True, name="mirrored x2")
    result = {**RESULT, "objective": "eval/accuracy"}
    [only] = summary.lines(result, pos)  # one line, not the single job's four
    assert only.startswith("job 4 of ≤12 (round 2 of ≤6) mirrored x2: 20,586 examples/s")
    line = summary.job_line(result, pos, now=1400.0)
    assert line == ("job 4 of ≤12 (round 2 of ≤6) mirrored x2: 20,586 examples/s [19,874, 21,299], "
                    "accuracy 0.942; ~13 min left")
    # the README's sweep, 30 runs: its longest line within 120 columns
    longest = summary.job_line(result, console.SweepPosition(
        k=12, n=30, round=4, rounds=10, started=1000.0, done=[1100.0] * 11, at_most=True,
        name="one_device x1 batch 128"), now=2200.0)
    assert longest.startswith("job 12 of ≤30 (round 4 of ≤10) one_device x1 batch 128: ")
    assert len(longest) <= 120, longest
    short = summary.job_line({"perf/examples_per_sec": None, "objective": "eval/token_accuracy",
                              "eval/token_accuracy": 0.52}, pos, now=1400.0)
    assert short.startswith("job 4 of ≤12 (round 2 of ≤6) mirrored x2: examples/s not measured, "
                            "token_accuracy 0.520;")


def test_the_feed_says_the_phase_after_training(capsys):
    from distexp.train.live import PROBES, Feed

    Feed(epochs=1, steps_per_epoch=10, global_batch=64).phase(PROBES)
    out = capsys.readouterr().out
    assert console.parse(out.strip()) == {"phase": "measuring the step split"}


def test_a_sweeps_job_says_its_own_lines_to_its_log_only(monkeypatch, capsys, caplog):
    """console.say: a single job prints; a sweep's job logs to LOG_ONLY_LOGGER, which the console
    handlers' filter drops (and distexp.log's handler keeps)."""
    import logging

    from distexp.config import mode
    from distexp.library_logs import LOG_ONLY_LOGGER, ConsoleFilter

    monkeypatch.setattr(mode, "in_multirun", lambda outside_hydra=False: False)
    console.say("MLflow run abc")
    assert capsys.readouterr().out == "MLflow run abc\n"
    monkeypatch.setattr(mode, "in_multirun", lambda outside_hydra=False: True)
    with caplog.at_level(logging.INFO, logger=LOG_ONLY_LOGGER):
        console.say("MLflow run def")
    assert capsys.readouterr().out == ""
    [record] = [r for r in caplog.records if r.getMessage() == "MLflow run def"]
    assert record.name == LOG_ONLY_LOGGER and not ConsoleFilter().filter(record)


def test_the_launchers_lines_go_to_the_sweep_log_not_the_console(tmp_path):
    """Hydra's "Launching 2 jobs locally" / "#0 : ..." (INFO of a launcher's logger): off the
    console handler, into <sweep dir>/sweep.log, made at the first one; a launcher's warning
    stays on the console; other records never reach the sweep's log."""
    import logging

    from distexp.library_logs import ConsoleFilter, LauncherLog

    def rec(name, level, msg):
        return logging.LogRecord(name, level, __file__, 1, msg, None, None)

    launching = rec("hydra._internal.core_plugins.basic_launcher", logging.INFO, "\t#0 : seed=1")
    warning = rec("hydra_plugins.hydra_joblib_launcher._core", logging.WARNING, "slow")
    other = rec("distexp.sweeps", logging.INFO, "round 1: ...")
    keep = ConsoleFilter()
    assert [keep.filter(r) for r in (launching, warning, other)] == [False, True, True]
    path = tmp_path / "sweep" / "sweep.log"
    handler = LauncherLog(str(path))
    handler.handle(other)
    assert not path.parent.exists()  # nothing launched: nothing written
    handler.handle(launching)
    handler.handle(warning)
    handler.close()
    assert path.read_text() == "\t#0 : seed=1\n"
