"""A job stopped at every phase by every stop signal (distexp.stops): exit 130, one
`interrupted` line and no traceback, the MLflow run KILLED (none at all when the stop came before
it was created), no process left, every checkpoint on disk whole. Signals go to the job's process
group, as a terminal's Ctrl-C (twice: 0.3 s apart) and a closed terminal's SIGHUP do.

A process holds at a phase through the test hook distexp.stops.HOLD_ENV. CI runs `CI`: Ctrl-C
twice at three phases, SIGTERM and SIGHUP at one each (a short job each, ~13 s on 2 busy cores);
DISTEXP_STOP_MATRIX=full runs the whole product (4 signals x 7 phases)."""
from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import child_env, processes_mentioning, wait_until

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
    left = processes_mentioning(str(job)) + _warm_trainers_of(p.pid)
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
    lines = [ln for ln in r["err"].splitlines() if ln.startswith("distexp: error:")]
    assert len(lines) == 1 and "interrupted" in lines[0], said
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
