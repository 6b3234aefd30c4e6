"""Checkpoints that survive and resume exactly, through the CLI (slow): a resumed job with Dropout
trains to the uninterrupted job's per-step losses; a full disk at a checkpoint is one line and
the earlier checkpoint restores once there is room; a truncated checkpoint falls back to the
newest whole one (one line, a tag) or stops with one line; Ctrl-C names the checkpoint kept and
the command. Checkpoints are the custom loop's (loop=fit refuses resume=true before TensorFlow)."""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distexp.parity import losses
from helpers import child_env, finished_sweep, mlflow_runs, processes_mentioning

pytestmark = pytest.mark.slow

# A model whose Dropout draws a new mask every step; 5 steps an epoch, a checkpoint every 5.
DROPOUT = ["model=custom", "model.factory=factories:dropout_mlp", "steps_per_epoch=5",
           "warmup_steps=0", "measure_peak_flops=false", "checkpoint.every_steps=5"]
OFF = "tracking.enabled=false"


def _error_lines(r):
    return [ln for ln in r.stderr.splitlines() if ln.startswith("distexp: error:")]


def _run_of(cli, name):
    _, runs = mlflow_runs(cli.uri)
    found = [x for x in runs if x.data.tags.get("distexp.job_dir") == str(cli.cwd / name)]
    assert len(found) == 1, [x.data.tags.get("distexp.job_dir") for x in runs]
    return found[0]


def test_a_resumed_job_with_dropout_trains_to_the_uninterrupted_losses(cli):
    """Mirrored over 2 CPU replicas: 20 steps in one job vs 10 steps, then resume=true to 20.
    Steps 11-20 must be the same to the last digit (the Dropout masks come from a generator whose
    state is in the checkpoint; without it every one of them differed)."""
    ck = cli.cwd / "ck"
    job = ["strategy=mirrored", "cpu_replicas=2", *DROPOUT, f"checkpoint.dir={ck}"]
    # the whole job, then the first half (a fresh start in the same checkpoint.dir: it ends
    # holding ckpt-10), in this order: one sweep, one process
    jobs, _ = finished_sweep(cli.cwd, "sweep", *job, "epochs=4,2")
    r = cli(*job, "epochs=4", "resume=true", f"hydra.run.dir={cli.cwd / 'resumed'}")
    assert r.returncode == 0, r
    assert f"resume: restored {ck}/ckpt-10 (step 10)" in r.stdout, r
    whole = losses(jobs[("4",)])
    assert len(whole) == 20 and losses(jobs[("2",)]) == whole[:10]
    assert losses(cli.cwd / "resumed") == whole[10:]
    run = _run_of(cli, "resumed")
    assert run.info.status == "FINISHED"
    assert run.data.tags["distexp.resumed_from_step"] == "10"


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (needs root and mount(2)); unmounted whatever happens."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.extended
def test_a_full_disk_at_a_checkpoint_is_one_line_and_resume_continues_once_there_is_room(
        cli, small_disk):
    ck = small_disk / "ck"
    job = ["strategy=one_device", *DROPOUT, f"checkpoint.dir={ck}", "epochs=2"]
    r = cli(*job[:-1], "epochs=1", OFF, f"hydra.run.dir={cli.cwd / 'first'}")  # ckpt-5
    assert r.returncode == 0, r
    kept = {p.name: p.read_bytes() for p in ck.glob("ckpt-5.*")}
    assert sorted(kept) == ["ckpt-5.data-00000-of-00001", "ckpt-5.index"]
    filler = small_disk / "filler"
    room = os.statvfs(small_disk)
    filler.write_bytes(b"\0" * (room.f_bavail * room.f_frsize - 8192))  # 8 KiB left

    full = cli.cwd / "full"
    r = cli(*job, "resume=true", f"hydra.run.dir={full}")  # restores ckpt-5, fails at step 10
    assert r.returncode == 2, r
    assert "Traceback" not in r.out
    lines = _error_lines(r)
    assert len(lines) == 1, r
    m = re.fullmatch(
        rf"distexp: error: checkpoint\.dir: received '{re.escape(str(ck))}'; the checkpoint of "
        r"step 10 could not be written \(no space left on the device: ([\d,]+) bytes free, about "
        r"([\d,]+) needed\); the checkpoint of step 5 \(" + re.escape(f"{ck}/ckpt-5") + r"\) is "
        r"kept whole: make room \(or set checkpoint\.dir to a disk with room\), then run the same "
        r"command with resume=true", lines[0])
    assert m, lines[0]
    free, needed = (int(g.replace(",", "")) for g in m.groups())
    assert free < needed == sum(len(b) for b in kept.values())
    assert not list(ck.glob("*_temp*")) and not list(ck.glob("ckpt-10*")), sorted(os.listdir(ck))
    assert {p.name: p.read_bytes() for p in ck.glob("ckpt-5.*")} == kept  # intact
    assert _run_of(cli, "full").info.status == "FAILED"
    assert processes_mentioning(str(full)) == []

    filler.unlink()  # room again: the same command with resume=true finishes from ckpt-5
    r = cli(*job, "resume=true", OFF, f"hydra.run.dir={cli.cwd / 'again'}")
    assert r.returncode == 0, r
    assert f"resume: restored {ck}/ckpt-5 (step 5)" in r.stdout, r
    trained = losses(full)  # steps 6-10 before the save failed
    assert len(trained) == 5 and losses(cli.cwd / "again") == trained


@pytest.mark.extended
def test_a_truncated_checkpoint_falls_back_to_the_newest_whole_one_or_stops_in_one_line(cli):
    ck = cli.cwd / "ck"
    job = ["strategy=one_device", *DROPOUT, f"checkpoint.dir={ck}"]
    r = cli(*job, "epochs=2", OFF, f"hydra.run.dir={cli.cwd / 'first'}")  # ckpt-5, ckpt-10
    assert r.returncode == 0, r
    data = ck / "ckpt-10.data-00000-of-00001"
    os.truncate(data, data.stat().st_size // 2)

    r = cli(*job, "epochs=3", "resume=true", f"hydra.run.dir={cli.cwd / 'fallback'}")
    assert r.returncode == 0, r
    said = (f"resume: {data} cannot be read back (IndexError: Read less bytes than requested); "
            f"restored the newest checkpoint that reads back whole, {ck}/ckpt-5 (step 5)")
    assert said in r.stdout.splitlines(), r
    assert "Traceback" not in r.out
    tags = _run_of(cli, "fallback").data.tags
    assert tags["distexp.resume_fallback"] == (
        f"{data} cannot be read back (IndexError: Read less bytes than requested); restored "
        f"{ck}/ckpt-5")
    assert tags["distexp.resumed_from_step"] == "5"
    assert losses(cli.cwd / "fallback")[:5] == losses(cli.cwd / "first")[5:]  # steps 6-10, exact

    for index in ck.glob("ckpt-*.index"):  # now ckpt-5, -10, -15: none reads back whole
        os.truncate(index, 10)
    stop = cli.cwd / "stop"
    r = cli(*job, "epochs=3", "resume=true", f"hydra.run.dir={stop}")
    assert r.returncode == 2, r
    assert "Traceback" not in r.out
    assert _error_lines(r) == [
        f"distexp: error: checkpoint.dir: received '{ck}'; no checkpoint in it reads back whole: "
        f"{ck}/ckpt-15.index (OpError: file is too short to be an sstable), and 2 older; valid: "
        "restore those files from a copy, another checkpoint.dir, or resume=false (a fresh start, "
        "which deletes them)"], r
    assert _run_of(cli, "stop").info.status == "FAILED"
    assert processes_mentioning(str(stop)) == []


def _long_job(cli, ck: Path, job: Path):
    """A job of 100,000 epochs, returned once its first checkpoint is written."""
    args = ["strategy=one_device", *DROPOUT, f"checkpoint.dir={ck}", "epochs=100000"]
    env = child_env()
    p = subprocess.Popen([sys.executable, "-m", "distexp", *args, f"hydra.run.dir={job}"],
                         cwd=cli.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 180
    while time.time() < deadline and not (ck / "checkpoint").exists():
        time.sleep(0.5)
    time.sleep(1)
    return p, args


def _remount_read_only(path: Path, tries: int = 200) -> None:
    """Remount the bind mount at `path` read-only. mount(2) refuses (EBUSY, "mount point is
    busy") while a file on it is open for writing, i.e. while a save is under way (seen in CI):
    try again between two saves."""
    for _ in range(tries):
        r = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True,
                           text=True)
        if r.returncode == 0:
            return
        time.sleep(0.01)
    raise AssertionError(f"could not remount {path} read-only: {r.stderr.strip()}")


@pytest.mark.extended
def test_a_checkpoint_dir_turned_read_only_is_one_line_and_the_last_checkpoint_stays(
        cli, small_disk):
    """checkpoint.dir is made read-only under a running job (a read-only bind mount over it):
    the next save is one line, exit 2, the run FAILED; the checkpoint before it is still whole."""
    ck, job = small_disk / "ck", cli.cwd / "job"
    p, _ = _long_job(cli, ck, job)
    try:
        subprocess.run(["mount", "--bind", str(ck), str(ck)], check=True)
        _remount_read_only(ck)
        out, err = p.communicate(timeout=120)
        kept = {p.name: p.stat().st_size for p in ck.glob("ckpt-*")}
    finally:
        p.kill()
        subprocess.run(["umount", str(ck)], check=False)
    assert p.returncode == 2, out + err
    assert "Traceback" not in out + err
    lines = [ln for ln in err.splitlines() if ln.startswith("distexp: error:")]
    assert len(lines) == 1, err
    step = max(int(n[len("ckpt-"):-len(".index")]) for n in kept if n.endswith(".index"))
    head = rf"distexp: error: checkpoint\.dir: received '{re.escape(str(ck))}'; the checkpoint of "
    tail = (r"make it writable \(or set checkpoint\.dir to a writable directory\), then run the "
            r"same command with resume=true")
    where = rf"\({re.escape(str(ck))}/ckpt-{step}\)"
    # the remount lands between two saves (the usual case) or inside one, after its files and
    # state file were written, while the manager removes its oldest checkpoint (seen in CI)
    between = (rf"{head}step {step + 5} could not be written \(the file system is read-only: "
               rf"[\d,]+ bytes free, about [\d,]+ needed\); the checkpoint of step {step} {where} "
               rf"is kept whole: {tail}")
    inside = (rf"{head}step {step} {where} was written, then removing an older one failed \(the "
              rf"file system is read-only: [\d,]+ bytes free\); it is kept whole: {tail}")
    assert re.fullmatch(between, lines[0]) or re.fullmatch(inside, lines[0]), lines[0]
    assert not [n for n in kept if "_temp" in n or n.startswith(f"ckpt-{step + 5}")], kept
    assert kept[f"ckpt-{step}.data-00000-of-00001"] > 0
    assert _run_of(cli, "job").info.status == "FAILED"
    assert processes_mentioning(str(job)) == []


@pytest.mark.extended
def test_ctrl_c_names_the_checkpoint_kept_and_the_resume_command(cli):
    ck, job = cli.cwd / "ck", cli.cwd / "job"
    p, args = _long_job(cli, ck, job)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err
    assert "distexp: error:" not in err, err  # the user asked for the stop: not an error
    lines = [ln for ln in err.splitlines() if ln.startswith("distexp: interrupted")]
    assert len(lines) == 1, err
    m = re.fullmatch(r"distexp: interrupted by SIGINT: every training process was stopped \(logs: "
                     rf"{re.escape(str(job))}/chief\.log\); checkpoint kept: "
                     rf"({re.escape(str(ck))}/ckpt-(\d+)) \(step (\d+)\); continue with: (.*)",
                     lines[0])
    assert m, lines[0]
    path, n, step, command = m.groups()
    assert n == step and int(step) % 5 == 0 and Path(path + ".index").is_file()
    assert shlex.split(command) == ["python", "-m", "distexp", *args, "resume=true"]
    assert _run_of(cli, "job").info.status == "KILLED"
    assert processes_mentioning(str(job)) == []


TINY = ["strategy=one_device", "epochs=1", "steps_per_epoch=2", "warmup_steps=0",
        "steps_per_execution=1", "measure_peak_flops=false", "measure_step_split=false"]


def test_a_resume_of_another_configuration_is_one_line_and_a_fresh_start_says_what_it_removed(cli):
    """After a job, `learning_rate=0.1 resume=true` is one line naming learning_rate, the
    checkpoint's value and path, exit 2, before TensorFlow: no training process, no run, the
    checkpoint untouched. A longer resume of the same configuration continues it, keeping only
    checkpoint.keep checkpoints. A fresh start with another seed replaces the checkpoints and
    says so, naming what that job had."""
    ck = cli.cwd / "ck"
    job = [*TINY, f"checkpoint.dir={ck}"]
    assert cli(*job).returncode == 0
    written = {p.name: p.read_bytes() for p in ck.iterdir() if p.name.startswith("ckpt-")}
    assert sorted(written) == ["ckpt-2.data-00000-of-00001", "ckpt-2.index"]

    refused = cli.cwd / "refused"
    r = cli(*job, "learning_rate=0.1", "resume=true", f"hydra.run.dir={refused}")
    assert r.refused() == [
        f"distexp: error: learning_rate: received 0.1 with resume=true; the checkpoint {ck}/ckpt-2 "
        "was trained with learning_rate=0.003 (a resume continues the same configuration: only "
        "epochs and steps_per_epoch may differ); valid: learning_rate=0.003, another "
        "checkpoint.dir, or resume=false (a fresh start, which replaces it)"], r
    assert not list(refused.glob("*.log")), sorted(os.listdir(refused))  # no process trained
    assert len(mlflow_runs(cli.uri)[1]) == 1  # the first job's run only
    assert {p.name: p.read_bytes() for p in ck.iterdir() if p.name.startswith("ckpt-")} == written

    longer = cli.cwd / "longer"  # keeping 1 checkpoint (a key that trains nothing may differ)
    r = cli(*job, "epochs=2", "checkpoint.keep=1", "resume=true", f"hydra.run.dir={longer}")
    assert r.returncode == 0, r
    assert f"resume: restored {ck}/ckpt-2 (step 2)" in r.stdout, r
    assert len(losses(longer)) == 2  # steps 3-4
    # bounded across the resume: the earlier job's ckpt-2 went when ckpt-4 was saved
    assert sorted(p.name for p in ck.glob("ckpt-*.index")) == ["ckpt-4.index"]

    r = cli(*job, "seed=1", OFF)
    assert r.returncode == 0, r
    assert (f"checkpoint: a fresh start (resume=false) removed 1 checkpoint (step 4) of an "
            f"earlier job from {ck}; that job had another seed") in r.stdout.splitlines(), r
    assert sorted(p.name for p in ck.glob("ckpt-*.index")) == ["ckpt-2.index"]  # this job's


@pytest.mark.extended
def test_a_sweep_keeps_no_finished_jobs_checkpoints_and_its_trainer_refuses_another_configuration(cli):
    """A sweep's FINISHED jobs leave no `<job dir>/checkpoints` (checkpoint.keep_in_sweeps=false);
    in a sweep, where only the job knows its checkpoint.dir, the chief trainer refuses a resume of
    another configuration with the same line."""
    jobs, _ = finished_sweep(cli.cwd, "sweep", *TINY, "seed=1,2")
    assert len(jobs) == 2 and all((j / "result.json").is_file() for j in jobs.values())
    assert [j for j in jobs.values() if (j / "checkpoints").exists()] == []

    ck = cli.cwd / "ck"
    assert cli(*TINY, f"checkpoint.dir={ck}", OFF).returncode == 0
    r = cli("-m", f"hydra.sweep.dir={cli.cwd / 'resumed'}", OFF, *TINY, f"checkpoint.dir={ck}",
            "learning_rate=0.1", "resume=true")
    assert r.returncode != 0, r  # the sweep's own code for a failed job; the line is the point
    said = [ln for ln in r.stderr.splitlines() if "learning_rate: received 0.1" in ln]
    assert said and said[0].endswith(
        f"learning_rate: received 0.1 with resume=true; the checkpoint {ck}/ckpt-2 was trained "
        "with learning_rate=0.003 (a resume continues the same configuration: only epochs and "
        "steps_per_epoch may differ); valid: learning_rate=0.003, another checkpoint.dir, or "
        "resume=false (a fresh start, which replaces it)"), r
    assert sorted(p.name for p in ck.glob("ckpt-*.index")) == ["ckpt-2.index"]
