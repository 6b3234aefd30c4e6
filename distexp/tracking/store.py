"""The tracking store and its URI, from the job process: open it, check it, never leak it.

- ``probe``: before any training process starts, a check that costs milliseconds: a sqlite store's
  directory can be created; an http(s) server or a database accepts a TCP connection; a database
  URI's driver is installed. Otherwise one line (UserError).
- ``client``: an MlflowClient; a new SQLite store is opened under a file lock (concurrent sweeps
  into a fresh store raced in MLflow's schema migration).
- ``HTTP_ENV`` / ``PROBE_ENV``: MLflow's HTTP retries bounded (its defaults wait minutes).
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
from pathlib import Path
from typing import Iterator, Mapping, Optional
from urllib.parse import urlsplit

from distexp.tracking import tags as tag
from distexp.tracking.redaction import redact, redact_text

# MLflow's HTTP client retries 7 times with a backoff factor of 2 and a 120 s timeout per request
# by default: minutes of waiting on a dead server. distexp's bounds (a user's own env wins):
HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
# ... and for the start-up probe: one try, a short timeout, so a wrong URI fails in seconds.
PROBE_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
# MLflow's database stores (SQLAlchemy dialects) and their default ports, for the TCP probe.
DB_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
# The schemes MLflow 3 has tracking stores for without plugins ("" = a local path); another one is
# checked against MLflow's registry by `probe`.
KNOWN_SCHEMES = {"", "file", "sqlite", "http", "https", "databricks", "databricks-uc", "uc", *DB_PORTS}
POSTGRES_EXTRA = 'pip install "distexp[postgres]"'


def http_env() -> dict:
    """distexp's HTTP retry/timeout bounds for MLflow, minus those the user set."""
    return {k: v for k, v in HTTP_ENV.items() if k not in os.environ}


@contextlib.contextmanager
def env(values: Mapping[str, str]) -> Iterator[None]:
    """Set env vars (MLflow reads its HTTP settings per request) unless the user set them."""
    mine = {k: v for k, v in values.items() if k not in os.environ or os.environ[k] == HTTP_ENV.get(k)}
    old = {k: os.environ.get(k) for k in mine}
    os.environ.update(mine)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def reason(ex: BaseException) -> str:
    """A short, credential-free reason for a failed MLflow call: a store's fault in words
    (distexp.tracking.faults), else the error's own."""
    from distexp.tracking import faults

    said = faults.fault(ex)
    if said:
        return said
    text = redact_text(str(ex))
    m = re.search(r"\[Errno -?\d+\] [^\"')]+", text)
    if m:
        return m.group(0).strip()
    for pattern in (r"Read timed out[^\"')]*", r"unsupported URI '[^']*'", r"Name or service not known"):
        m = re.search(pattern, text)
        if m:
            return m.group(0)
    first = text.strip().splitlines()[0] if text.strip() else type(ex).__name__
    return first[:200]


def sqlite_dir(uri: str) -> Optional[Path]:
    if not uri.startswith("sqlite:///"):
        return None
    return sqlite_path(uri).parent


def make_store_dir(uri: str) -> Optional[Path]:
    """For a sqlite URI, create the database's directory (one-line UserError when it cannot be)
    and return it; None for any other URI. An existing file that is not a SQLite database is a
    UserError too (MLflow would fail on it with a traceback, after the trainer started)."""
    from distexp.errors import UserError

    store_dir = sqlite_dir(uri)
    if store_dir is not None:
        try:
            store_dir.mkdir(parents=True, exist_ok=True)
        except OSError as ex:
            raise UserError(f"tracking.uri: received {uri!r}; cannot create {store_dir} "
                            f"({ex.strerror}); valid: a writable place, or "
                            "tracking.enabled=false") from None
        bad = not_a_database(sqlite_path(uri))
        if bad:
            raise UserError(f"tracking.uri: received {uri!r}; {bad}; valid: an MLflow SQLite store "
                            "(a new path is created), a tracking server, or tracking.enabled=false")
        from distexp.tracking import faults

        found = faults.check_sqlite(sqlite_path(uri))
        if found:
            raise UserError(f"tracking.uri: received {uri!r}; {found[0]}; valid: {found[1]}, or "
                            "tracking.enabled=false")
    return store_dir


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file


def sqlite_path(uri: str) -> Path:
    path = uri[len("sqlite:///"):]
    return Path(path if path.startswith("/") else os.path.abspath(path))


def not_a_database(path: Path) -> Optional[str]:
    """Why the SQLite store `path` cannot be opened, read without opening it as a database (which
    would leave a lock file or a journal behind), or None: it does not exist yet (MLflow creates
    it), is empty, or starts with SQLite's header."""
    if path.is_dir():
        return f"{path} is a directory, not a database file"
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return None
    except OSError as ex:
        return f"{path} cannot be read ({ex.strerror})"
    if head and head != SQLITE_HEADER:
        return f"{path} is not a database (file is not a database: no SQLite header)"
    return None


def client(uri: str):
    """An MlflowClient on `uri` (a new SQLite store is created under a file lock)."""
    import logging

    from mlflow.tracking import MlflowClient

    for name in ("mlflow.store.db.utils", "alembic"):  # schema set-up chatter on every new store
        logging.getLogger(name).setLevel(logging.WARNING)
    if redact(uri) != uri:  # MLflow prints "View run ... at: <URI with the password>" on end
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"

    store_dir = sqlite_dir(uri)
    if store_dir is None:
        return MlflowClient(tracking_uri=uri)
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        return MlflowClient(tracking_uri=uri)  # fails on first use; JobRun makes that one line
    # Two processes opening a new SQLite store at once both run MLflow's schema migrations and
    # one fails ("Online migration expected to match one row", "table runs already exists"):
    # concurrent sweeps into a fresh store hit it. MlflowClient() opens (creates, migrates) the
    # store, so construct it under an exclusive lock on the database's directory (flock on the
    # directory itself: no lock file is left behind in outputs/).
    import fcntl

    fd = os.open(store_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return MlflowClient(tracking_uri=uri)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def experiment_id(mlflow_client, name: str, uri: str) -> str:
    """The id of experiment `name`, created (with its artifacts beside a sqlite store) if new."""
    exp = mlflow_client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    store_dir = sqlite_dir(uri)
    if store_dir is None and urlsplit(uri).scheme.split("+")[0] in DB_PORTS:
        # MLflow's default for a database store is ./mlruns: keep to outputs/ as for sqlite
        store_dir = Path(os.getcwd()) / "outputs"
    location = (store_dir / "mlartifacts").as_uri() if store_dir else None
    try:
        # the MLflow 3 UI then opens it as a training experiment (runs table), not a GenAI one
        return mlflow_client.create_experiment(
            name, artifact_location=location, tags={tag.EXPERIMENT_KIND: "custom_model_development"})
    except Exception:  # another job created it first (concurrent sweeps)
        exp = mlflow_client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def unreachable(uri: str, ex: BaseException) -> str:
    """The one line for a store that could not be opened (a missing database driver included)."""
    from distexp.tracking import faults

    if isinstance(ex, ModuleNotFoundError) and ex.name:
        return missing_driver(uri, ex.name)
    found = faults.find(ex)
    if found:
        return (f"tracking.uri: received {redact(uri)!r}; {found[0]}; valid: {found[1]}, or "
                "tracking.enabled=false")
    return (f"tracking.uri: received {redact(uri)!r}; MLflow cannot be reached there "
            f"({reason(ex)}); valid: the URI of a running tracking server or store "
            "(check the URI and the server), or tracking.enabled=false")


def missing_driver(uri: str, module: str) -> str:
    fix = POSTGRES_EXTRA if urlsplit(uri).scheme.startswith("postgresql") else f"pip install {module}"
    return (f"tracking.uri: received {redact(uri)!r}; its database driver is not installed (no "
            f"module named {module!r}); valid: {fix}, or an http(s):// tracking server")


def probe(uri: str, timeout: float = 10.0) -> None:
    """A check that costs milliseconds and no MLflow import, before any process starts: the
    sqlite store's directory can be created; an http(s) server or a database accepts a TCP
    connection; a database URI's driver imports. Anything else is checked when the run is
    created (JobRun, in the Forwarder's thread)."""
    from distexp.errors import UserError

    if make_store_dir(uri) is not None:
        return
    parts = urlsplit(uri)
    dialect = parts.scheme.split("+")[0]
    if dialect not in KNOWN_SCHEMES:
        _check_scheme(uri)
    if dialect in DB_PORTS:
        _check_driver(uri)
    port = {"http": 80, "https": 443, **DB_PORTS}.get(dialect)
    if port and parts.hostname:
        try:
            socket.create_connection((parts.hostname, parts.port or port), timeout=timeout).close()
        except OSError as ex:
            raise UserError(unreachable(uri, ex)) from None


def _check_scheme(uri: str) -> None:
    """A scheme distexp does not know: ask MLflow's store registry (plugins included), which costs
    an MLflow import (seconds), so only here; a scheme it has no store for is one line now, before
    a training process starts, rather than when the run is created."""
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry

    from distexp.errors import UserError

    try:
        _tracking_store_registry.get_store_builder(uri)
    except Exception as ex:  # noqa: BLE001  (MLflow's "unsupported URI" exception types vary)
        raise UserError(unreachable(uri, ex)) from None


def _check_driver(uri: str) -> None:
    """The driver SQLAlchemy picks for this URI imports (SQLAlchemy 2.1 maps postgresql:// to
    psycopg 3, older ones to psycopg2; postgresql+psycopg2:// names it)."""
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    from distexp.errors import UserError

    try:
        make_url(uri).get_dialect().import_dbapi()
    except ModuleNotFoundError as ex:
        raise UserError(missing_driver(uri, ex.name or str(ex))) from None
    except (ArgumentError, NoSuchModuleError, ValueError) as ex:
        raise UserError(unreachable(uri, ex)) from None
