"""A job that fails, hangs or is interrupted: MLflow run FAILED/KILLED with its log, a non-zero
exit, and no training process left behind."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import (
    child_env,
    mlflow_runs,
    processes_mentioning,
    processes_with,  # noqa: F401  (tests/cluster/test_slurm.py imports both from here)
)

pytestmark = pytest.mark.slow


def _only_run(cli):
    client, runs = mlflow_runs(cli.uri)
    assert len(runs) == 1
    return client, runs[0]


def test_crashing_trainer_fails_the_run(cli):
    job = cli.cwd / "job"
    r = cli(f"hydra.run.dir={job}", "model=custom", "model.factory=factories:crash")
    assert r.returncode == 1, r
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("distexp: error:")]
    assert len(err) == 1 and "chief exited with code 3" in err[0], r
    client, run = _only_run(cli)
    assert run.info.status == "FAILED"
    assert "logs/chief.log" in {a.path for a in client.list_artifacts(run.info.run_id, "logs")}
    assert processes_mentioning(str(job)) == []


@pytest.mark.extended
def test_user_error_inside_the_trainer_is_one_line(cli):
    job = cli.cwd / "job"
    r = cli(f"hydra.run.dir={job}", "model=custom", "model.factory=factories:explode")
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines()[-1] == (
        "distexp: error: model.factory: factories:explode raised RuntimeError: factory exploded on "
        "purpose")
    assert "Traceback" not in r.stdout + r.stderr
    _, run = _only_run(cli)
    assert run.info.status == "FAILED"
    assert run.info.run_name == "mirrored-explode-digits-r1"  # the factory's name, not "custom"


@pytest.mark.extended
def test_timeout_stops_a_hung_job(cli):
    job = cli.cwd / "job"
    r = cli(f"hydra.run.dir={job}", "model=custom", "model.factory=factories:hang", "timeout=20")
    assert r.returncode == 1, r
    assert "timeout: the job ran longer than 20 s" in r.stderr
    _, run = _only_run(cli)
    assert run.info.status == "FAILED"
    assert processes_mentioning(str(job)) == []


@pytest.mark.parametrize("sig,status,code", [(signal.SIGINT, "KILLED", 130),
                                             pytest.param(signal.SIGTERM, "KILLED", 130,
                                                          marks=pytest.mark.extended)])
def test_interrupt_kills_the_run_and_its_processes(cli, sig, status, code):
    job = cli.cwd / "job"
    env = child_env()
    p = subprocess.Popen([sys.executable, "-m", "distexp", f"hydra.run.dir={job}", "model=custom",
                          "model.factory=factories:hang"], cwd=cli.cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not _trainer_started(job):  # trainer up (then hangs)
        time.sleep(0.5)
    time.sleep(2)
    p.send_signal(sig)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == code, out
    _, run = _only_run(cli)
    assert run.info.status == status
    assert processes_mentioning(str(job)) == []


def _trainer_started(job: Path) -> bool:
    return any("distexp.train.trainer" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
               for pid in processes_mentioning(str(job)))


@pytest.mark.extended
def test_resume_with_another_models_checkpoint_is_one_line(cli):
    """model=mlp resume=true on a cnn's checkpoint dir: one line naming both models, exit 2, no
    process left, the cnn's checkpoint untouched: before TensorFlow from the configuration the
    checkpoint records (no run at all), by the trainer from the model's identity for a checkpoint
    that records none (the run FAILED). Then without the identity file (a checkpoint written
    before it existed): still one line, not a traceback."""
    import json

    ck = cli.cwd / "ck"
    tiny = ["epochs=1", "steps_per_epoch=2", "warmup_steps=0", "steps_per_execution=1",
            "measure_peak_flops=false", f"checkpoint.dir={ck}", "strategy=one_device"]
    r = cli("model=cnn", "tracking.enabled=false", *tiny)
    assert r.returncode == 0, r
    written = sorted(p.name for p in ck.iterdir())
    assert "distexp-model.json" in written and "checkpoint" in written, written

    r = cli("model=mlp", "resume=true", f"hydra.run.dir={cli.cwd / 'early'}", *tiny)
    assert r.refused() == [
        f"distexp: error: model.name: received mlp with resume=true; the checkpoint {ck}/ckpt-2 "
        "was trained with model.name=cnn (a resume continues the same configuration: only epochs "
        "and steps_per_epoch may differ); valid: model=cnn, another checkpoint.dir, or "
        "resume=false (a fresh start, which replaces it)"], r
    assert mlflow_runs(cli.uri)[1] == []  # refused before the run was created
    assert sorted(p.name for p in ck.iterdir()) == written

    identity = ck / "distexp-model.json"
    older = json.loads(identity.read_text())
    del older["config"]  # as a distexp that did not record it wrote it
    identity.write_text(json.dumps(older))
    job = cli.cwd / "job"
    r = cli("model=mlp", "resume=true", f"hydra.run.dir={job}", *tiny)
    assert r.refused() == [
        f"distexp: error: checkpoint.dir: received '{ck}', which holds a checkpoint of model=cnn "
        "(19,466 parameters); this job's model is mlp (9,610 parameters); valid: resume with "
        "model=cnn, another checkpoint.dir, or resume=false (a fresh start)"], r
    _, run = _only_run(cli)
    assert run.info.status == "FAILED"
    assert processes_mentioning(str(job)) == []
    assert sorted(p.name for p in ck.iterdir()) == written  # nothing removed, nothing added

    identity.unlink()
    r = cli("model=mlp", "resume=true", "tracking.enabled=false", *tiny)
    lines = r.refused()
    assert len(lines) == 1 and lines[0].startswith(
        f"distexp: error: checkpoint.dir: received '{ck}', whose checkpoint does not fit this "
        "job's model=mlp ("), r
    assert "valid: resume with the model that wrote it" in lines[0] and "Traceback" not in r.out
