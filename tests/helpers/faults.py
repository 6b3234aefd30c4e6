"""A tracking store made to fail (tests/tracking/test_store_faults*.py): tmpfs mounts (root only; a test
is skipped elsewhere), a store made by this MLflow, a short job on it, the console's one line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import child_env


def _do_mount(where: Path, size: str = "4m") -> None:
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip()})")


@pytest.fixture
def mounts():
    made = []

    def mount(where: Path, size: str = "4m") -> Path:
        _do_mount(where, size)
        made.append(where)
        return where

    yield mount
    for m in made:
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


def store(path: Path) -> Path:
    """A real store made by this MLflow (its schema up to date), closed: made in a child process,
    so that no connection of this one keeps the file open (a read-only remount needs none)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", "import sys; from mlflow.tracking import MlflowClient; "
                    "MlflowClient(tracking_uri=sys.argv[1]).search_experiments()",
                    f"sqlite:///{path}"], check=True, capture_output=True, timeout=120)
    return path


def job(tmp: Path, db: Path, *args: str, env=None, timeout=240):
    cmd = [sys.executable, "-m", "distexp", f"hydra.run.dir={tmp / 'job'}",
           f"tracking.uri=sqlite:///{db}", "epochs=1", "steps_per_epoch=2", "strategy=one_device",
           f"checkpoint.dir={tmp / 'ck'}", *args]
    return subprocess.run(cmd, cwd=tmp, env=env or child_env(), capture_output=True, text=True,
                          timeout=timeout)


def one_line(r, cause: str) -> str:
    console = r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("distexp: error:")]
    assert len(errors) == 1 and cause in errors[0], console
    assert "Traceback" not in console, console
    foreign = [ln for ln in console.splitlines() if "ERROR" in ln and not ln.startswith("distexp:")]
    assert foreign == [], console
    return errors[0]


def fill(where: Path) -> None:
    with open(where / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
