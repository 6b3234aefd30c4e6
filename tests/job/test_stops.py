"""A job stopped at every phase by every stop signal (distexp.stops): exit 130, one
`interrupted` line and no traceback, the MLflow run KILLED (none at all when the stop came before
it was created), no process left, every checkpoint on disk whole. Signals go to the job's process
group, as a terminal's Ctrl-C (twice: 0.3 s apart) and a closed terminal's SIGHUP do.

A process holds at a phase through the test hook distexp.stops.HOLD_ENV. CI runs `CI`: Ctrl-C
twice at three phases, SIGTERM and SIGHUP at one each (a short job each, ~13 s on 2 busy cores);
DISTEXP_STOP_MATRIX=full runs the whole product (4 signals x 7 phases)."""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distexp.parity import losses
from helpers import child_env, processes_mentioning, wait_until
from helpers.sessions import in_session, run_reaped

pytestmark = pytest.mark.slow

SIGNALS = {"INT": [signal.SIGINT], "INTx2": [signal.SIGINT, signal.SIGINT],
           "TERM": [signal.SIGTERM], "HUP": [signal.SIGHUP]}
PHASES = ("start-up", "fork", "training", "evaluation", "checkpoint", "probe", "close")
SHORT = ["epochs=2", "steps_per_epoch=4", "warmup_steps=0", "steps_per_execution=1",
         "measure_peak_flops=false", "checkpoint.every_steps=2", "strategy=one_device"]
# The cells run by default; CI's gate runs the first (Ctrl-C twice while training), the others
# are `extended` (docs/testing.md); DISTEXP_STOP_MATRIX=full runs every cell.
CI = {("INTx2", "training"): (), ("INTx2", "start-up"): pytest.mark.extended,
      ("INTx2", "close"): pytest.mark.extended, ("TERM", "checkpoint"): pytest.mark.extended,
      ("HUP", "probe"): pytest.mark.extended}


def _cases():
    full = os.environ.get("DISTEXP_STOP_MATRIX") == "full"
    for sig in SIGNALS:
        for phase in PHASES:
            if full or (sig, phase) in CI:
                yield pytest.param(sig, phase, id=f"{sig}-{phase}",
                                   marks=CI.get((sig, phase), pytest.mark.extended))


def stop_at(tmp: Path, phase: str, sig: str, *args: str) -> dict:
    """Run a short job held at `phase`, send `sig` to its process group there; what came of it."""
    marker = tmp / "held"
    marker.unlink(missing_ok=True)  # a second stop in the same directory
    job = tmp / "job"
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    env = child_env(DISTEXP_TEST_HOLD=f"{phase}:{marker}")
    p = subprocess.Popen([sys.executable, "-m", "distexp", *args, f"hydra.run.dir={job}",
                          f"tracking.uri={uri}", f"checkpoint.dir={tmp / 'ck'}", *SHORT],
                         cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        wait_until(lambda: marker.exists() or p.poll() is not None, 400,
                   f"the job to reach {phase}", every=0.02)
        assert p.poll() is None, p.communicate()
        for i, s in enumerate(SIGNALS[sig]):
            if i:
                time.sleep(0.3)
            os.killpg(p.pid, s)
        t_last = time.monotonic()
        out, err = p.communicate(timeout=120)
        after = time.monotonic() - t_last
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    runs = []
    if (tmp / "mlflow.db").exists():
        with sqlite3.connect(tmp / "mlflow.db") as db:
            try:
                runs = [r[0] for r in db.execute("select status from runs")]
            except sqlite3.OperationalError:  # the store was being created: no table yet
                runs = []
    left = processes_mentioning(str(job)) + _warm_trainers_of(p.pid) + in_session(p.pid)
    return {"code": p.returncode, "out": out, "err": err, "runs": runs, "left": left,
            "after_s": after, "broken": _broken_checkpoints(tmp / "ck")}


def _warm_trainers_of(pid: int):
    return [q for q in processes_mentioning("distexp.train.warm_server")
            if f"--for {pid}" in Path(f"/proc/{q}/cmdline").read_bytes().replace(b"\0", b" ").decode()]


def _broken_checkpoints(ck: Path):
    """Checkpoint files a stop left half-written: an index without its data, SaveV2's temporary
    directory, or a state file naming a checkpoint that is not there."""
    if not ck.is_dir():
        return []
    bad = [str(i) for i in ck.glob("ckpt-*.index")
           if not list(ck.glob(i.name[: -len(".index")] + ".data-*"))]
    bad += [str(t) for t in ck.glob("*_temp*")]
    state = ck / "checkpoint"
    if state.exists():
        for line in state.read_text().splitlines():
            key, _, value = line.partition(":")
            name = value.strip().strip('"')
            if key.endswith("checkpoint_path") and name and not (ck / f"{name}.index").exists():
                bad.append(f"{state} names {name}")
    return bad


@pytest.mark.parametrize("sig,phase", list(_cases()))
def test_a_stop_at_any_phase_is_one_line_and_a_closed_run(tmp_path, sig, phase):
    r = stop_at(tmp_path, phase, sig)
    said = f"{sig}@{phase}: {r}"
    assert r["code"] == 130, said
    assert "distexp: error:" not in r["err"], said  # asked for: not an error
    lines = [ln for ln in r["err"].splitlines() if ln.startswith("distexp: interrupted by ")]
    assert len(lines) == 1, said
    if phase in ("evaluation", "probe", "close"):  # a checkpoint is kept by then
        assert re.search(r"; checkpoint kept: .*/ck/ckpt-\d+ \(step \d+\); continue with: "
                         r"python -m distexp .* resume=true$", lines[0]), said
    else:  # what to do next, all the same
        assert lines[0].endswith("run the same command again to start over") or \
            re.search(r"continue with: python -m distexp .* resume=true$", lines[0]) or \
            lines[0].endswith("run the same command again)"), said
    assert "Traceback" not in r["out"] + r["err"], said
    assert r["runs"] == ([] if phase == "start-up" else ["KILLED"]), said
    assert r["left"] == [], said
    assert r["broken"] == [], said
    assert r["after_s"] < 20, said
    print(f"MATRIX {sig} {phase} exit={r['code']} runs={r['runs']} left={len(r['left'])} "
          f"after={r['after_s']:.1f}s line={lines[0][:90]!r}")


@pytest.mark.extended
def test_a_sweep_stopped_twice_in_a_job_closes_every_run_killed(tmp_path):
    """Ctrl-C twice while the sweep's first job trains: exit 130, the parent and the child run
    KILLED, nothing left."""
    r = stop_at(tmp_path, "training", "INTx2", "-m", "seed=1,2")  # -m before the overrides
    said = str(r)
    assert r["code"] == 130, said
    assert "Traceback" not in r["out"] + r["err"], said
    assert sorted(r["runs"]) == ["KILLED", "KILLED"], said
    assert r["left"] == [], said
    assert _sweep_stopped_line(r["err"]), said


def _sweep_stopped_line(err: str):
    """The stopped sweep's one line (no error line): (sweep id, the command that continues it)."""
    assert "distexp: error:" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("distexp: interrupted by ")]
    assert len(lines) == 1, err
    said = err[err.index(lines[0]):]  # the directory and the command on lines of their own
    m = re.match(r"distexp: interrupted by SIG\w+: sweep (\S+) stopped\nkept: \d+ finished "
                 r"jobs? \(skipped when resumed\) and each job's checkpoints, in\n  \S+\n"
                 r"continue with:\n((?:  .*\\\n)*  .*sweep\.resume=\1)$", said, re.M)
    assert m, said
    return m.group(1), _joined(m.group(2))


def _joined(lines: str) -> str:
    """A command printed on several lines (distexp.console_lines.command_lines), as one."""
    return " ".join(ln.strip().removesuffix(" \\").strip() for ln in lines.splitlines())


@pytest.mark.extended
def test_a_stopped_sweep_continues_with_its_command_and_a_rerun_names_it(tmp_path):
    """SIGTERM while the sweep's first job trains: the line's command (sweep.resume=<id>) ends
    both jobs FINISHED; before that, the same command without it names the interrupted sweep in
    one line and starts a new one (stopped again at once: only the line is checked)."""
    r = stop_at(tmp_path, "training", "TERM", "-m", "seed=1,2")
    assert r["code"] == 130, r
    sweep_id, command = _sweep_stopped_line(r["err"])
    again = stop_at(tmp_path, "start-up", "INT", "-m", "seed=1,2")
    said = re.findall(r"^(.*was interrupted.*)\n((?:  .*\\\n)*  .*)$", again["out"], re.M)
    assert len(said) == 1 and f"sweep {sweep_id} with these overrides was interrupted" in said[0][0] \
        and _joined(said[0][1]) == command, again
    argv = shlex.split(command)
    p = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, env=child_env(),
                       capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        jobs = [r[0] for r in db.execute(
            "select status from runs join tags on runs.run_uuid = tags.run_uuid where "
            "tags.key = 'distexp.run_kind' and tags.value = 'job' order by start_time")]
    assert jobs == ["KILLED", "FINISHED", "FINISHED"], (jobs, p.stdout)


@pytest.mark.extended
def test_sigusr1_saves_a_checkpoint_now_and_the_job_trains_on(tmp_path):
    """Slurm's time-limit warning (`--signal=USR1@60`) on the job process: the chief saves at its
    next step (not a regular save: checkpoint.every_steps is beyond the run), the job finishes."""
    marker = tmp_path / "held"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p = subprocess.Popen([sys.executable, "-m", "distexp", f"hydra.run.dir={tmp_path / 'job'}",
                          f"tracking.uri={uri}", f"checkpoint.dir={tmp_path / 'ck'}",
                          *[a for a in SHORT if not a.startswith("checkpoint.every_steps")],
                          "checkpoint.every_steps=1000"],
                         cwd=tmp_path, env=child_env(DISTEXP_TEST_HOLD=f"training:{marker}"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(marker.exists, 400, "the chief's first step", every=0.02)
    os.kill(p.pid, signal.SIGUSR1)
    time.sleep(0.5)
    marker.unlink()
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, out + err
    saved = re.findall(r"checkpoint: SIGUSR1 \(a time-limit warning\): step (\d+) saved now; "
                       r"training goes on", out)
    assert len(saved) == 1 and int(saved[0]) < 8, out  # at once, not at the run's end
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        assert [r[0] for r in db.execute("select status from runs")] == ["FINISHED"]
    assert (tmp_path / "ck" / "ckpt-8.index").exists()  # and the last step's, as always
    assert _broken_checkpoints(tmp_path / "ck") == []


# The same stops, then the same command with resume=true: FINISHED wherever the stop came. CI's gate
# runs the stop while the run closes (the checkpoint is at the last step: nothing left to train, the
# case that crashed); the others are `extended`.
RESUMED_IN_GATE = ("close",)
# The step each stop leaves a checkpoint of (SHORT: 2 epochs of 4 steps, a checkpoint every 2):
# none before the first save (start-up, fork, the first step, the first save itself held before it
# wrote); the first epoch's end (4: evaluation follows its save); the last step (probe, close).
RESTORED = {"start-up": 0, "fork": 0, "training": 0, "checkpoint": 0, "evaluation": 4,
            "probe": 8, "close": 8}
STEPS = 8


@pytest.mark.parametrize("phase", [pytest.param(p, marks=() if p in RESUMED_IN_GATE else
                                                pytest.mark.extended) for p in PHASES])
def test_a_job_stopped_at_any_phase_and_resumed_finishes(tmp_path, phase):
    """The resumed job restores the step its phase's stop kept (tag, line, and only the steps
    after it trained), ends FINISHED, and leaves no process: none of its session or process
    group, and no descendant, wherever it went (helpers.sessions)."""
    r = stop_at(tmp_path, phase, "INT")
    assert r["code"] == 130, r
    job, ck = tmp_path / "job2", tmp_path / "ck"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    p, left = run_reaped([sys.executable, "-m", "distexp", f"hydra.run.dir={job}",
                          f"tracking.uri={uri}", f"checkpoint.dir={ck}", *SHORT, "resume=true"],
                         tmp_path, cwd=tmp_path, env=child_env(), capture_output=True, text=True,
                         timeout=300)
    said = f"{phase}: {p.stdout}{p.stderr}"
    assert p.returncode == 0, said
    assert "Traceback" not in p.stdout + p.stderr, said
    with sqlite3.connect(tmp_path / "mlflow.db") as db:
        runs = [r[0] for r in db.execute("select status from runs order by start_time")]
        tags = dict(db.execute("select key, value from tags where run_uuid = (select run_uuid "
                               "from runs order by start_time desc limit 1)").fetchall())
    assert runs == ([] if phase == "start-up" else ["KILLED"]) + ["FINISHED"], said
    result = json.loads((job / "result.json").read_text())
    assert result["eval/accuracy"] is not None, said
    restored = RESTORED[phase]
    assert tags["distexp.resumed_from_step"] == str(restored), said
    if restored:
        assert tags["distexp.resume"] == "restored", said
        assert f"resume: restored {ck}/ckpt-{restored} (step {restored})" in p.stdout, said
    else:
        assert tags["distexp.resume"] == "no checkpoint: fresh start", said
        assert f"resume: no checkpoint in {ck}; starting fresh" in p.stdout, said
    trained = len(losses(job)) if (job / "steps.csv").exists() else 0
    assert trained == STEPS - restored, said  # the steps after the checkpoint, no more
    first = result["perf/time_to_first_step_s"]
    if restored == STEPS:  # the last step: nothing trained, the timings not measured
        assert first is None and "time to first step not measured" in p.stdout, said
        assert "loss nan" not in p.stdout and result["train/loss"] is None, said  # none trained
        assert "perf/time_to_first_step_s" in tags["distexp.not_measured"], said
    else:
        assert first is not None and first > 0, said
        assert "distexp.not_measured" not in tags, said
    assert r["left"] == [] and r["broken"] == [], said
    assert left == [], said  # the resumed run's processes: none left
    print(f"RESUMED {phase} -> runs={runs} resumed_from_step={restored} trained={trained} "
          f"eval/accuracy={result['eval/accuracy']:.4f} time_to_first_step={first} "
          f"examples_per_sec={result['perf/examples_per_sec']} "
          f"not_measured={tags.get('distexp.not_measured')!r}")


def test_the_leftover_check_finds_a_process_that_left_the_session(tmp_path):
    """helpers.sessions itself: a child left in the command's session and one that started its
    own (as the trainers do) are both named, and killed; a command that leaves none, none."""
    r, left = run_reaped(["sh", "-c", "setsid sleep 60 & sleep 61 & exit 3"], tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert r.returncode == 3
    assert sorted(ln.split(" ", 1)[1] for ln in left) == ["sleep 60", "sleep 61"], left
    assert all(not Path(f"/proc/{ln.split()[0]}").exists() or
               Path(f"/proc/{ln.split()[0]}/stat").read_text().split()[2] == "Z" for ln in left)
    assert run_reaped(["sh", "-c", "exit 0"], tmp_path, timeout=60)[1] == []
    p = subprocess.Popen(["sh", "-c", "sleep 62 & exec sleep 63"], start_new_session=True)
    try:
        wait_until(lambda: len(in_session(p.pid)) == 2, 10, "both sleeps", every=0.02)
        assert sorted(ln.split(" ", 1)[1] for ln in in_session(p.pid)) == ["sleep 62", "sleep 63"]
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
