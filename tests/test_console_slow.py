"""The console end to end: a job in a pseudo-terminal shows a bar that moves within an epoch; the
same job through a pipe prints plain lines (no carriage return, no escape sequence) and ends with
a summary whose numbers are the run's logged figures; a sweep's job says "job k of N". Tier: slow.
The display's parts in this process: tests/test_console.py."""
from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import child_env
from helpers.store import empty_store, mlflow_runs

pytestmark = pytest.mark.slow

JOB = ["epochs=2", "steps_per_epoch=60", "dataset=synthetic", "dataset.size=512"]


def _in_a_terminal(args, cwd: Path, timeout: float = 400) -> str:
    """`python -m distexp ARGS` with a pseudo-terminal as its stdin, stdout and stderr."""
    empty_store(cwd / "outputs" / "mlflow.db")
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "distexp", *args], cwd=cwd, stdin=slave,
                         stdout=slave, stderr=slave, env=child_env(TERM="xterm"),
                         start_new_session=True)
    os.close(slave)
    out, end = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            if select.select([master], [], [], 1)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal's other side closed: the job is over
                    break
                if not chunk:
                    break
                out += chunk
            elif p.poll() is not None:
                break
        assert p.wait(timeout=60) == 0, out.decode()[-3000:]
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
    return out.decode("utf-8", "replace")


@pytest.mark.extended
def test_a_terminal_gets_a_bar_that_moves_within_an_epoch(tmp_path):
    out = _in_a_terminal(JOB, tmp_path)
    first_epoch = out[:out.index("epoch 1/2  loss")]  # before the first epoch's line
    steps = [int(s) for s in re.findall(r"\repoch 1/2 +\d+%\|[^\r\n]*\| (\d+)/60 steps", first_epoch)]
    assert len({s for s in steps if 0 < s < 60}) >= 2, out[:3000]  # moved within the epoch
    assert re.search(r"\d[\d,]* ex/s", first_epoch)
    tail = out[out.index("throughput: "):]
    assert len([ln for ln in tail.splitlines() if ln.strip()]) <= 6, tail


def test_a_pipe_gets_plain_lines_and_a_summary_of_the_logged_figures(cli):
    r = cli(*JOB, "hydra.run.dir=job")
    assert r.returncode == 0, r
    assert "\r" not in r.stdout and "\x1b" not in r.stdout, r.stdout
    tail = r.stdout[r.stdout.index("throughput: "):].splitlines()
    assert len(tail) <= 6 and tail[-2].startswith("Job directory: "), tail
    _, runs = mlflow_runs(cli.uri)
    m = runs[0].data.metrics
    assert runs[0].info.run_id in tail[-1]
    rate = re.search(r"^throughput: ([\d,]+) examples/s \[([\d,]+), ([\d,]+)\]", tail[0])
    rate, lo, hi = (float(x.replace(",", "")) for x in rate.groups())
    ci = m["perf/examples_per_sec_ci95"]
    assert rate == round(m["perf/examples_per_sec"]) and lo == round(m["perf/examples_per_sec"] - ci)
    e2e = float(re.search(r"end to end ([\d,]+) examples/s", tail[0]).group(1).replace(",", ""))
    assert e2e == round(m["perf/examples_per_sec_end_to_end"])
    parts = re.match(r"step (\S+) ms = input (\S+) \+ compute (\S+) \+ sync (\S+) \+ other (\S+);",
                     tail[1])
    step, *shown = (float(x) for x in parts.groups())
    logged = [m[f"perf/step_{p}_ms"] for p in ("input", "compute", "sync", "other")]
    assert shown == [round(x, 2) for x in logged] and step == pytest.approx(sum(shown))
    assert step == pytest.approx(1000 * 64 / m["perf/examples_per_sec"], abs=0.02)
    final = dict(re.findall(r"eval_(\w+) ([\d.]+)", tail[-3]))
    assert float(final["accuracy"]) == round(m["eval/accuracy"], 4)
    assert float(final["loss"]) == round(m["eval/loss"], 4)
    if "perf/mfu" in m:
        assert f"MFU: {100 * m['perf/mfu']:.2f} %" in r.stdout


@pytest.mark.extended
def test_a_sweep_says_which_job_of_how_many(cli):
    r = cli("-m", "epochs=1", "steps_per_epoch=10", "measure_step_split=false",
            "strategy=one_device,mirrored", "repeats=2")
    assert r.returncode == 0, r
    said = re.findall(r"^sweep: job (\d) of 4 \(round (\d) of 2\); (.*)$", r.stdout, re.M)
    assert [(k, rnd) for k, rnd, _ in said] == [("1", "1"), ("2", "1"), ("3", "2"), ("4", "2")]
    assert said[0][2] == "ETA after the first job"
    assert all(re.match(r"~\d+ (s|min) left \(from the \d jobs? done\)", eta) for *_, eta in said[1:])
