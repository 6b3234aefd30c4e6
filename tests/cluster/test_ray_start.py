"""distexp on Ray as users start it: a cluster from the `ray start` CLI (bound to 127.0.0.1, token
authentication on, as Ray 2.60 turns it on when a token is in ~/.ray/auth_token) joined by a job
with no Ray variable set; a refused token in one line; and `cluster.address=auto` (a Ray the job
starts itself) end to end, with no process of it or its trainers left after.

The `ray start` cluster is this module's own: its own temporary directory (short, under /tmp: Ray's
AF_UNIX sockets live in it, and a path there is at most 107 bytes, which pytest's own tmp_path in
CI, /tmp/pytest-of-root/pytest-284/popen-gw0/..., exceeds) and HOME (the token),
a free port, no dashboard (its fixed port could clash with another Ray here); it is stopped by
killing its own processes (those naming its directory, and every process below them), never with
`ray stop`, which stops every Ray of the machine."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from helpers import (
    FAST,
    cli_env,
    descendants,
    distexp_cmd,
    mlflow_runs,
    processes_mentioning,
    still_running,
    wait_until,
)
from helpers.processes import free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

RAY = [sys.executable, "-m", "ray.scripts.scripts"]
JOB = ["strategy=multiworker", "workers=2", "tracking.enabled=false", *FAST]


def _user_env(home: Path, **extra) -> dict:
    """A user's environment: their HOME, no Ray variable (and Ray's usage statistics off for this
    machine's tests, which reach no network)."""
    env = {k: v for k, v in cli_env().items() if not k.startswith("RAY_")}
    return {**env, "HOME": str(home), **extra}



def _stop(tmp: Path) -> list:
    """SIGKILL every process of the cluster in `tmp` and below them; what is left after."""
    pids = {q for p in processes_mentioning(str(tmp)) for q in descendants(p)}
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return still_running(pids)


@pytest.fixture(scope="module")
def ray_start():
    """`ray start --head --node-ip-address=127.0.0.1 --port=P` with a token in HOME/.ray; its
    directory removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))
    # Ray's longest socket path (session_<date>_<time>_<us>_<pid>: a 7-digit pid at most)
    longest = tmp / "ray" / "session_2026-11-28_14-10-00_123456_4194304" / "sockets" / "plasma_store"
    assert len(str(longest).encode()) <= 96, longest  # AF_UNIX: 107 bytes at most
    home = tmp / "home"
    home.mkdir()
    env = _user_env(home, RAY_USAGE_STATS_ENABLED="0")
    subprocess.run([*RAY, "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=120)
    port = free_port()
    r = subprocess.run([*RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                        f"--temp-dir={tmp / 'ray'}", "--include-dashboard=false"],
                       env=env, capture_output=True, text=True, timeout=240, start_new_session=True)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Token authentication is enabled" in r.stdout + r.stderr, r.stdout + r.stderr
        yield f"127.0.0.1:{port}", home, tmp
    finally:
        left = _stop(tmp / "ray")
        shutil.rmtree(tmp, ignore_errors=True)
        assert left == []


def test_a_job_joins_a_cluster_ray_start_started_with_a_token(ray_start, tmp_path):
    """No RAY_AUTH_MODE, no RAY_ADDRESS: the token in ~/.ray/auth_token is found as Ray's CLI
    finds it; the job trains on the cluster and leaves no trainer behind."""
    address, home, _ = ray_start
    job = tmp_path / "job"
    r = subprocess.run(distexp_cmd(*JOB, "cluster=ray", f"cluster.address={address}",
                                   f"hydra.run.dir={job}"),
                       cwd=tmp_path, env=_user_env(home), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "epoch 2/2" in r.stdout and "InvalidAuthToken" not in r.stdout + r.stderr
    assert "Token authentication" not in r.stdout + r.stderr  # Ray's own notice: not on the console
    assert still_running(processes_mentioning(str(job))) == []


def test_a_refused_token_is_one_line(ray_start, tmp_path):
    address, home, _ = ray_start
    r = subprocess.run(distexp_cmd(*JOB, "cluster=ray", f"cluster.address={address}",
                                   f"hydra.run.dir={tmp_path / 'job'}"),
                       cwd=tmp_path, env=_user_env(home, RAY_AUTH_TOKEN="0" * 32),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        f"distexp: error: cluster.address: received '{address}'; the Ray cluster there refused the "
        "token in $RAY_AUTH_TOKEN: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to its token "
        "(`ray get-auth-token` on its head prints it)"], r.stderr
    assert "InvalidAuthToken" not in r.stdout


def test_address_auto_starts_a_ray_and_leaves_nothing(tmp_path):
    """cluster.address=auto without RAY_ADDRESS: the job starts a Ray (usage statistics off: the
    variable Ray reads is in its GCS's environment), trains, and once it has ended no process of
    that Ray or of its trainers is left (every process below the job process while it trained)."""
    marker, job = tmp_path / "held", tmp_path / "job"
    env = _user_env(tmp_path, DISTEXP_TEST_HOLD=f"training:{marker}")
    p = subprocess.Popen(distexp_cmd(*JOB, "cluster=ray", f"hydra.run.dir={job}"), cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        wait_until(lambda: marker.exists() or p.poll() is not None, 400, "the job to train", every=0.1)
        assert p.poll() is None, p.communicate()[0]
        below = descendants(p.pid)
        cmds = {q: Path(f"/proc/{q}/cmdline").read_bytes() for q in below
                if os.path.exists(f"/proc/{q}/cmdline")}
        gcs = [q for q, c in cmds.items() if b"gcs_server" in c]
        trainers = [q for q, c in cmds.items() if b"distexp.train.trainer" in c]
        assert len(gcs) == 1 and len(trainers) == 2, cmds
        assert b"RAY_USAGE_STATS_ENABLED=0" in Path(f"/proc/{gcs[0]}/environ").read_bytes().split(b"\0")
        marker.unlink()
        out = p.communicate(timeout=300)[0]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 0, out
    assert "epoch 2/2" in out and "Token authentication" not in out  # Ray's notice: not shown
    t0 = time.monotonic()
    assert still_running(below, within=30) == []
    print(f"the job's Ray and trainers gone {time.monotonic() - t0:.1f} s after its exit")


@pytest.mark.extended  # ~100 s; the gate keeps the line (tests/cluster/test_ray_unit.py)
def test_a_sweep_on_one_node_runs_its_jobs_one_after_another(ray_start, tmp_path):
    """hydra/launcher=ray on the 1-node cluster: the line says so, the jobs' runs do not overlap
    in time, and the piped console has no colour codes and each job's lines after its own
    `[ray] #i` line, before the next one's."""
    address, home, _ = ray_start
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    r = subprocess.run(distexp_cmd("-m", "strategy=one_device,mirrored", "cpu_replicas=2",
                                   "hydra/launcher=ray", f"tracking.uri={uri}", "epochs=1",
                                   "warmup_steps=2", "hydra.sweep.dir=sweep"),
                       cwd=tmp_path, env=_user_env(home, RAY_ADDRESS=address), capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout  # piped, as a CI log or `| tee` has it
    assert "\x1b[" not in out + r.stderr
    assert out.count("distexp: hydra/launcher=ray: the jobs run one after another (1 Ray node: "
                     "at once they would share it)") == 1, out
    lines = out.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("[ray] #")]
    assert len(starts) == 2, out
    assert [ln[:10] for ln in lines[starts[0] + 1:starts[1]]] == ["job 1 of 2"], out
    assert lines[starts[1] + 1].startswith("job 2 of 2"), out
    runs = sorted((x for x in mlflow_runs(uri)[1] if x.data.tags.get("distexp.run_kind") == "job"),
                  key=lambda x: x.info.start_time)
    assert len(runs) == 2 and runs[0].info.end_time <= runs[1].info.start_time, runs
