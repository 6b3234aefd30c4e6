"""A tracking store's failure, in words: read-only, locked, full, corrupt, a newer MLflow's schema
(no MLflow import here).

MLflow and SQLAlchemy raise the same few exception types for very different causes (an
OperationalError is a read-only file as well as a locked database); the line a user reads names
the cause (`fault`) and what to do about it (`remedy`), whether the store fails before training
(the run's creation) or during it (the offline file then keeps the run's metrics).
"""
from __future__ import annotations

import errno
import importlib.util
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Iterator, Optional, Tuple

# (what the exception's text says, the cause in words, what to do)
_KNOWN: Tuple[Tuple[str, str, str], ...] = (
    (r"readonly database|read-only file system|Errno 30\b|Errno 13\b|Permission denied|"
     r"unable to open database file",
     "the store is read-only (its file or directory cannot be written)",
     "a writable place for the store"),
    (r"database is locked|database table is locked",
     "the store is locked (another process held a write transaction on it past the timeout)",
     "wait for the other writer, or a store of its own per job"),
    (r"database or disk is full|No space left on device|Errno 28\b|Disk quota exceeded|Errno 122\b",
     "the disk under the store is full",
     "free space there, or a store on another disk"),
    (r"file is not a database|database disk image is malformed|malformed database schema|"
     r"file is encrypted",
     "the store's file is corrupt (not a readable SQLite database)",
     "a new store path (keep the corrupt file for what it held)"),
    (r"Can't locate revision identified by '([^']*)'|No such revision or branch '([^']*)'",
     "the store was made by a newer MLflow (its schema revision {rev} is unknown to this MLflow)",
     "the MLflow version that made it (pip install -U mlflow), or a new store path"),
)
_ERRNO = {errno.EROFS: 0, errno.EACCES: 0, errno.EPERM: 0, errno.ENOSPC: 2, errno.EDQUOT: 2}


def _chain(ex: BaseException) -> Iterator[BaseException]:
    seen = set()
    while ex is not None and id(ex) not in seen:
        seen.add(id(ex))
        yield ex
        ex = ex.__cause__ or ex.__context__


def find(ex: BaseException) -> Optional[Tuple[str, str]]:
    """(the cause in words, the remedy) of a store failure, or None when it is not one of these."""
    for e in _chain(ex):
        if isinstance(e, OSError) and e.errno in _ERRNO:
            _, words, remedy = _KNOWN[_ERRNO[e.errno]]
            return words, remedy
    text = " | ".join(str(e) for e in _chain(ex))
    for pattern, words, remedy in _KNOWN:
        m = re.search(pattern, text)
        if m:
            rev = next((g for g in m.groups() if g), "?") if m.groups() else "?"
            return words.format(rev=rev), remedy
    return None


def fault(ex: BaseException) -> Optional[str]:
    """The cause in words, or None."""
    found = find(ex)
    return found[0] if found else None


def said(reason: str) -> bool:
    """Whether a reason (store.reason's text, as the offline file keeps it) is one of these."""
    return any(reason.startswith(words.split("{")[0]) for _, words, _ in _KNOWN)


MIN_FREE_BYTES = 1 << 20  # a new run's rows and a few metrics fit in far less


def check_sqlite(path: Path) -> Optional[Tuple[str, str]]:
    """Before training, in milliseconds and without MLflow's import: (the cause, the remedy) of a
    SQLite store at `path` that cannot take a run (read-only, full, a newer MLflow's schema), or
    None. A locked or corrupt store shows when the run is created (`find`)."""
    where = path if path.exists() else path.parent
    if not os.access(where, os.W_OK) or (path.exists() and not os.access(path.parent, os.W_OK)):
        return _KNOWN[0][1], _KNOWN[0][2]  # SQLite writes its journal beside the file
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = MIN_FREE_BYTES
    if free < MIN_FREE_BYTES:
        return f"{_KNOWN[2][1]} ({free:,} bytes free)", _KNOWN[2][2]
    rev = _revision(path)
    if rev and rev not in _mlflow_revisions(rev):
        return _KNOWN[4][1].format(rev=rev), _KNOWN[4][2]
    return None


def _revision(path: Path) -> Optional[str]:
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            row = db.execute("select version_num from alembic_version").fetchone()
        finally:
            db.close()
    except sqlite3.Error:  # no table yet, locked, corrupt: the run's creation says which
        return None
    return row[0] if row else None


def _mlflow_revisions(rev: str) -> set:
    """The schema revisions this MLflow knows (its migration files are named after them); {rev}
    when they cannot be listed (nothing to compare with)."""
    spec = importlib.util.find_spec("mlflow")
    if spec is None or not spec.submodule_search_locations:
        return {rev}
    versions = Path(list(spec.submodule_search_locations)[0]) / "store" / "db_migrations" / "versions"
    known = {p.name.split("_", 1)[0] for p in versions.glob("*.py")}
    return known or {rev}
