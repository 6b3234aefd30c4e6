"""The console end to end: a job in a pseudo-terminal shows a bar that moves within an epoch; the
same job through a pipe prints plain lines (no carriage return, no escape sequence) and ends with
a summary whose numbers are the run's logged figures; a sweep reads in one screen (a line per
job: "job k of N", at most N under repeats=auto, with the time left). Tier: slow.
The display's parts in this process: tests/job/test_console.py."""
from __future__ import annotations

import json
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
    _, runs = mlflow_runs(cli.uri)
    m = runs[0].data.metrics
    # the summary's lines, exactly (distexp.job.summary), each within 120 columns: throughput, the
    # step split (on two lines where it is longer than one), MFU where the processor has a peak,
    # final; then the job directory and the browse command
    split = 2 if tail[2].startswith("  ") else 1
    heads = ["throughput: ", "step ", *["  "] * (split - 1), *["MFU: "] * ("perf/mfu" in m),
             "final: ", "Job directory: ", "Browse it: "]
    assert len(tail) == len(heads) and all(ln.startswith(h) for ln, h in zip(tail, heads)), tail
    assert all(len(ln) <= 120 for ln in tail[:-2]), tail
    assert tail[-2] == f"Job directory: {cli.cwd / 'job'}" and runs[0].info.run_id in tail[-1]
    # throughput, its interval, and the measurement window it rests on: >= 200 timed steps, >= 2 s
    # (measure_min_steps, measure_min_seconds), the seconds being 64 x timed steps / examples/s
    said = re.fullmatch(r"throughput: ([\d,]+) examples/s \[([\d,]+), ([\d,]+)\] \(95 %, ([\d,]+) "
                        r"timed steps, ([\d.]+) s\); end to end ([\d,]+) examples/s", tail[0])
    assert said, tail[0]
    rate, lo, hi, steps, secs, e2e = (float(x.replace(",", "")) for x in said.groups())
    ci = m["perf/examples_per_sec_ci95"]
    assert rate == round(m["perf/examples_per_sec"]) and lo == round(m["perf/examples_per_sec"] - ci)
    assert hi == round(m["perf/examples_per_sec"] + ci)
    assert steps == m["perf/timed_steps"] and steps >= 200 and secs >= 2.0
    assert secs == pytest.approx(64 * steps / m["perf/examples_per_sec"], abs=0.051)
    assert e2e == round(m["perf/examples_per_sec_end_to_end"])
    step_text = " ".join(ln.strip() for ln in tail[1:1 + split])
    assert (split == 2) == (len(step_text) > 120), tail
    parts = re.fullmatch(r"step (\S+) ms = input (\S+) \+ compute (\S+) \+ sync (\S+) \+ other (\S+)"
                         r"(?:; input, compute and sync x [\d.]+: they overlap in training)?"
                         r"; bottleneck: (?:input|compute|sync|other), \d+ % \(.+\)", step_text)
    assert parts, step_text
    step, *shown = (float(x) for x in parts.groups())
    logged = [m[f"perf/step_{p}_ms"] for p in ("input", "compute", "sync", "other")]
    assert shown == [round(x, 2) for x in logged] and step == pytest.approx(sum(shown))
    assert step == pytest.approx(1000 * 64 / m["perf/examples_per_sec"], abs=0.02)
    final = re.fullmatch(r"final: ((?:eval_\w+ [\d.]+  )+)time to first step ([\d.]+) s", tail[-3])
    assert final, tail[-3]
    evals = {k: float(v) for k, v in re.findall(r"eval_(\w+) ([\d.]+)", final[1])}
    assert evals == {"accuracy": round(m["eval/accuracy"], 4), "loss": round(m["eval/loss"], 4)}
    assert float(final[2]) == round(m["perf/time_to_first_step_s"], 2)
    # MFU wherever the processor has a theoretical peak (distexp.figures.cpu_peak), and shown
    from distexp.figures.cpu_peak import machine_cpu_peak

    assert ("perf/mfu" in m) == (machine_cpu_peak() is not None), sorted(m)
    if "perf/mfu" in m:
        assert f"MFU: {100 * m['perf/mfu']:.2f} %" in r.stdout


@pytest.mark.extended
def test_a_sweep_says_which_job_of_how_many(cli):
    r = cli("-m", "epochs=1", "steps_per_epoch=10", "measure_step_split=false",
            "strategy=one_device,mirrored", "repeats=2")
    assert r.returncode == 0, r
    said = re.findall(r"^job (\d) of 4 \(round (\d) of 2\) (\w+) x1 batch 64: .*examples/s.*$",
                      r.stdout, re.M)
    assert said == [("1", "1", "one_device"), ("2", "1", "mirrored"), ("3", "2", "one_device"),
                    ("4", "2", "mirrored")], r.stdout
    left = re.findall(r"; (~\d+ (?:s|min) left)$", r.stdout, re.M)
    assert len(left) == 3, r.stdout  # every job's line but the last


TINY = ["model=mlp", "epochs=1", "steps_per_epoch=5", "warmup_steps=1",
        "measure_peak_flops=false", "measure_step_split=false"]
JOB_LINE = re.compile(r"^job (\d+) of ≤(\d+) \(round (\d+) of ≤2\) (.+?): (.+ examples/s.*), "
                      r"accuracy \d\.\d{3}(?:; ~\d+ (?:s|min) left)?$")


def test_an_auto_sweep_reads_in_one_screen_piped(cli):
    """The README's sweep, scaled down (3 set-ups, 2 rounds of tiny jobs), through a pipe: one
    line per finished job (where it stands: job k of at most N, round r of at most R; its set-up,
    examples/s as the run logged it, accuracy, the time left), a line per round and a few at the
    ends; no trainer line, no MLflow line, no Hydra launcher line (they are in the logs). A
    30-run sweep of 10 rounds prints at most 30 + 10 + the same ends: ~50 lines."""
    r = cli("-m", "strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
            "repeats=auto", "sweep.max_repeats=2", *TINY, "hydra.sweep.dir=sweep", timeout=900)
    assert r.returncode == 0, r
    assert all(len(ln) <= 120 for ln in r.stdout.splitlines()), r.stdout
    lines = []  # each line with its continuations (indented two columns: distexp.console_lines)
    for ln in r.stdout.splitlines():
        if ln.startswith("  ") and lines:
            lines[-1] += " " + ln.strip()
        else:
            lines.append(ln)
    jobs = [JOB_LINE.match(ln) for ln in lines if ln.startswith("job ")]
    assert all(jobs) and len(jobs) == 6, r.stdout
    assert [int(m[1]) for m in jobs] == list(range(1, 7)) and jobs[0][2] == "6"
    assert [int(m[3]) for m in jobs] == [1, 1, 1, 2, 2, 2]
    assert len({m[4] for m in jobs}) == 3 and "mirrored x2" in jobs[1][4]  # the set-ups' names
    assert all(m[0].endswith(" left") for m in jobs[:-1]) and "left" not in jobs[-1][0]
    rounds = [ln for ln in lines if ln.startswith("round ")]
    assert len(rounds) == 2
    ends = len(lines) - len(jobs) - len(rounds)
    assert ends <= 10, r.stdout  # 30 runs in 10 rounds: <= 50 lines
    for hidden in ("MLflow run ", "Number of devices", "epoch 1/1", "[HYDRA]", "#0 : "):
        assert hidden not in r.stdout, (hidden, r.stdout)
    # the job's figure as its run logged it (result.json), by the one formatter
    from distexp.figures import text

    result = json.loads((cli.cwd / "sweep" / "0" / "result.json").read_text())
    assert jobs[0][5].startswith(text.rate(result["perf/examples_per_sec"],
                                           result["perf/examples_per_sec_ci95"], "examples/s"))
    # what the console left out is in the logs: the launcher's lines, each job's MLflow line
    assert "#5 : strategy=" in (cli.cwd / "sweep" / "sweep.log").read_text()
    assert "MLflow run " in (cli.cwd / "sweep" / "0" / "distexp.log").read_text()
    assert "Number of devices" in (cli.cwd / "sweep" / "0" / "chief.log").read_text()
