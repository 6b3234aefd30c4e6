"""MLflow, from both sides of a job, without TensorFlow.

The job process (distexp.job) owns the run's life: it creates the run, logs the resolved config
and artifacts, and always ends the run FINISHED, FAILED or KILLED, whatever the training processes
did (even a SIGKILLed trainer cannot leave it RUNNING). The chief training process only appends to
that run, by id (``RunLogger``); other workers never receive the id, so they cannot log.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional
from urllib.parse import urlsplit, urlunsplit

RUN_ID_ENV = "DISTEXP_RUN_ID"
URI_ENV = "DISTEXP_TRACKING_URI"
MAX_PARAM_LEN = 6000  # MLflow 3 limit on a param value


def redact(uri: str) -> str:
    """The URI with any password (and user) removed, for printing and logging."""
    parts = urlsplit(uri)
    if parts.password is None and parts.username is None:
        return uri
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


def _sqlite_dir(uri: str) -> Optional[Path]:
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///"):]
    return Path(path if path.startswith("/") else os.path.abspath(path)).parent


def _client(uri: str):
    import logging

    from mlflow.tracking import MlflowClient

    for name in ("mlflow.store.db.utils", "alembic"):  # schema set-up chatter on every new store
        logging.getLogger(name).setLevel(logging.WARNING)

    return MlflowClient(tracking_uri=uri)


def _experiment_id(client, name: str, uri: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    store_dir = _sqlite_dir(uri)
    location = (store_dir / "mlartifacts").as_uri() if store_dir else None
    try:
        return client.create_experiment(name, artifact_location=location)
    except Exception:  # another job created it first (concurrent sweeps)
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


class JobRun:
    """The MLflow run of one job, owned by the job process."""

    def __init__(self, uri: str, experiment: str, run_name: str, tags: Mapping[str, str],
                 params: Mapping[str, str]):
        from distexp.config import UserError

        store_dir = _sqlite_dir(uri)
        if store_dir is not None:
            try:
                store_dir.mkdir(parents=True, exist_ok=True)
            except OSError as ex:
                raise UserError(f"tracking.uri: cannot create {store_dir} ({ex.strerror}); choose a "
                                "writable place or tracking.enabled=false") from None
        self.uri = uri
        self.client = _client(uri)
        try:
            exp_id = _experiment_id(self.client, experiment, uri)
            run = self.client.create_run(exp_id, run_name=run_name, tags=dict(tags))
        except Exception as ex:  # noqa: BLE001
            first = str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__
            raise UserError(f"tracking.uri: cannot reach MLflow at {redact(uri)} ({first[:200]}); "
                            "check the URI or the server, or run with tracking.enabled=false") from None
        self.run_id = run.info.run_id
        self.experiment_id = exp_id
        self.log_params(params)

    def log_params(self, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, _clip(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def log_artifacts(self, paths: Iterable[Path], artifact_path: Optional[str] = None) -> None:
        for p in paths:
            if p.is_file() and p.stat().st_size > 0:
                self.client.log_artifact(self.run_id, str(p), artifact_path)

    def set_tag(self, key: str, value: str) -> None:
        self.client.set_tag(self.run_id, key, value)

    def end(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)

    def metrics(self) -> dict:
        return dict(self.client.get_run(self.run_id).data.metrics)


def _clip(value) -> str:
    s = str(value)
    return s if len(s) <= MAX_PARAM_LEN else s[: MAX_PARAM_LEN - 3] + "..."


class RunLogger:
    """Appends metrics and params to the job's run from the chief trainer; a no-op elsewhere."""

    def __init__(self, run_id: Optional[str] = None, uri: Optional[str] = None):
        self.run_id = run_id if run_id is not None else os.environ.get(RUN_ID_ENV)
        self.uri = uri if uri is not None else os.environ.get(URI_ENV)
        self.client = _client(self.uri) if self.run_id else None
        self._last_ts = 0

    @property
    def enabled(self) -> bool:
        return self.client is not None

    def log_params(self, params: Mapping[str, object]) -> None:
        if self.client is None:
            return
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, _clip(v)) for k, v in params.items()])

    def set_tags(self, tags: Mapping[str, object]) -> None:
        if self.client is None:
            return
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: Mapping[str, Optional[float]], step: int) -> None:
        """Log finite values at `step`; each call gets a strictly later timestamp, so a final value
        logged at the last epoch's step is MLflow's "latest" value of that metric."""
        if self.client is None:
            return
        from mlflow.entities import Metric

        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        items = [Metric(k, float(v), ts, step) for k, v in metrics.items()
                 if v is not None and v == v and abs(v) != float("inf")]
        if items:
            self.client.log_batch(self.run_id, metrics=items)


def run_name(strategy: str, model: str, dataset: str, replicas: int) -> str:
    return f"{strategy}-{model}-{dataset}-r{replicas}"


_SAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")


def safe_key(key: str) -> str:
    return _SAFE.sub("_", key)
