"""A tracking store that cannot take the job's run: one line naming the cause in words (read-only,
locked, full, corrupt, a newer MLflow's schema), exit 2, and nothing foreign on the console (no
`Traceback`, no MLflow/SQLAlchemy `ERROR` record). Read-only and full file systems are tmpfs mounts
(root only; skipped elsewhere)."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from helpers.faults import fill, job, one_line, store

pytestmark = pytest.mark.integration


def test_a_read_only_store(tmp_path, mounts):
    ro = mounts(tmp_path / "ro")
    store(ro / "mlflow.db")
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    r = job(tmp_path, ro / "mlflow.db")
    assert r.returncode == 2, r
    one_line(r, "the store is read-only")


def test_a_full_disk_under_the_store(tmp_path, mounts):
    full = mounts(tmp_path / "full")
    store(full / "mlflow.db")
    fill(full)
    r = job(tmp_path, full / "mlflow.db")
    assert r.returncode == 2, r
    one_line(r, "the disk under the store is full")


def test_a_corrupt_store(tmp_path):
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 64)  # the header, then garbage
    r = job(tmp_path, db)
    assert r.returncode == 2, r
    one_line(r, "the store's file is corrupt")


def test_a_store_made_by_a_newer_mlflow(tmp_path):
    db = store(tmp_path / "store" / "mlflow.db")
    with sqlite3.connect(db) as c:
        c.execute("update alembic_version set version_num = 'fffffffffff0'")
    r = job(tmp_path, db)
    assert r.returncode == 2, r
    line = one_line(r, "the store was made by a newer MLflow")
    assert "fffffffffff0" in line


def test_a_locked_store(tmp_path):
    """Another process holds a write transaction for longer than the job waits for it."""
    db = store(tmp_path / "store" / "mlflow.db")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(600)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = job(tmp_path, db, timeout=400)
    finally:
        holder.kill()
        holder.wait()
    assert r.returncode == 2, r
    one_line(r, "the store is locked")
