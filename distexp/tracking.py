"""MLflow, from both sides of a job, without TensorFlow.

The job process (distexp.job) owns the run's life: it creates the run, logs the resolved config
and artifacts, and always ends the run FINISHED, FAILED or KILLED, whatever the training processes
did (even a SIGKILLed trainer cannot leave it RUNNING).

Off the critical path (``Forwarder``): the job process starts the trainer first and creates the
run in a thread while the trainer imports TensorFlow; the chief's ``RunLogger`` then only appends
JSON lines to a file (no MLflow import in the trainer), which the job process forwards to the run,
together with MLflow's own system metrics. The trainer waits at a gate (``RunLogger.wait_ready``)
before training starts, so an unreachable server is still one line before any training step.
Other workers never get the file, so they cannot log. ``RunLogger(run_id=...)`` still logs
directly by run id (for a chief that has no job process of its own).
"""
from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional
from urllib.parse import urlsplit, urlunsplit

RUN_ID_ENV = "DISTEXP_RUN_ID"
URI_ENV = "DISTEXP_TRACKING_URI"
SINK_ENV = "DISTEXP_METRICS_SINK"    # the chief appends its metrics/params here (JSON lines)
GATE_ENV = "DISTEXP_TRACKING_GATE"   # the job writes "ok <run_id>" or "error <line>" here
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

    def log_record(self, record: dict) -> None:
        """One record from the chief's sink (see RunLogger)."""
        from mlflow.entities import Metric

        if "params" in record:
            self.log_params(record["params"])
        if "metrics" in record:
            ts, step = int(record["ts"]), int(record["step"])
            self.client.log_batch(self.run_id, metrics=[
                Metric(k, float(v), ts, step) for k, v in record["metrics"].items()])

    def system_metrics(self, interval: float):
        """MLflow's own system-metrics monitor (psutil; GPUs via NVML when present) on this run."""
        import logging

        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=interval,
                                       tracking_uri=self.uri)
        monitor.start()
        return monitor

    def metrics(self) -> dict:
        return dict(self.client.get_run(self.run_id).data.metrics)


def _clip(value) -> str:
    s = str(value)
    return s if len(s) <= MAX_PARAM_LEN else s[: MAX_PARAM_LEN - 3] + "..."


class RunLogger:
    """Appends metrics and params to the job's run from the chief trainer; a no-op elsewhere.

    With SINK_ENV set (a job process forwards), records go to that file as JSON lines; with a run id
    they go straight to MLflow; with neither, nowhere.
    """

    def __init__(self, run_id: Optional[str] = None, uri: Optional[str] = None,
                 sink: Optional[str] = None):
        direct = run_id is not None
        self.sink = None if direct else (sink if sink is not None else os.environ.get(SINK_ENV))
        self.gate = None if direct else os.environ.get(GATE_ENV)
        self.run_id = run_id if direct else os.environ.get(RUN_ID_ENV)
        self.uri = uri if uri is not None else os.environ.get(URI_ENV)
        self.client = _client(self.uri) if (self.run_id and not self.sink) else None
        self._file = open(self.sink, "a") if self.sink else None
        self._last_ts = 0

    @property
    def enabled(self) -> bool:
        return self.client is not None or self._file is not None

    def wait_ready(self, poll: float = 0.02) -> None:
        """Block until the job process has created the run; raise UserError if it could not."""
        if not self.gate:
            return
        from distexp.config import UserError

        gate = Path(self.gate)
        while not gate.exists():
            time.sleep(poll)
        word, _, rest = gate.read_text().partition(" ")
        if word != "ok":
            raise UserError(rest.strip())

    def _write(self, record: dict) -> None:
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def log_params(self, params: Mapping[str, object]) -> None:
        if self._file is not None:
            self._write({"params": {k: _clip(v) for k, v in params.items()}})
            return
        if self.client is None:
            return
        from mlflow.entities import Param

        self.client.log_batch(self.run_id, params=[Param(k, _clip(v)) for k, v in params.items()])

    def log_metrics(self, metrics: Mapping[str, Optional[float]], step: int) -> None:
        """Log finite values at `step`; each call gets a strictly later timestamp, so a final value
        logged at the last epoch's step is MLflow's "latest" value of that metric."""
        if self.client is None and self._file is None:
            return
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        items = {k: float(v) for k, v in metrics.items()
                 if v is not None and v == v and abs(v) != float("inf")}
        if not items:
            return
        if self._file is not None:
            self._write({"metrics": items, "step": step, "ts": ts})
            return
        from mlflow.entities import Metric

        self.client.log_batch(self.run_id, metrics=[Metric(k, v, ts, step) for k, v in items.items()])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Forwarder:
    """Job side: create the run while the trainer starts, then forward the chief's records to it.

    `create` builds the JobRun (it may raise UserError: unreachable server, unwritable store); its
    outcome is written to the gate file the chief waits at. Records the chief appends to the sink
    are logged as they come (every POLL_S) and drained completely by `close`.
    """

    POLL_S = 0.5

    def __init__(self, create: Callable[[], "JobRun"], job_dir: Path, *,
                 on_ready: Callable[["JobRun"], None] = lambda run: None,
                 system_metrics_interval: Optional[float] = None):
        self.sink = job_dir / "metrics.jsonl"
        self.gate = job_dir / "tracking.gate"
        for p in (self.sink, self.gate):
            p.unlink(missing_ok=True)
        self.sink.touch()
        self._create, self._on_ready = create, on_ready
        self._interval = system_metrics_interval
        self.run: Optional[JobRun] = None
        self.error: Optional[str] = None
        self._monitor = None
        self._pos = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="distexp-mlflow", daemon=True)

    def env(self) -> dict:
        """What the chief trainer needs (the other workers get nothing)."""
        return {SINK_ENV: str(self.sink), GATE_ENV: str(self.gate)}

    def start(self) -> "Forwarder":
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            self.run = self._create()
        except Exception as ex:  # noqa: BLE001  (UserError: the one line the user sees)
            from distexp.errors import one_line

            self.error = one_line(ex) or f"tracking: {type(ex).__name__}: {ex}"
            self._open_gate(f"error {self.error}")
            return
        self._on_ready(self.run)
        self._open_gate(f"ok {self.run.run_id}")
        if self._interval:
            try:
                self._monitor = self.run.system_metrics(self._interval)
            except Exception as ex:  # noqa: BLE001  (best effort: e.g. psutil missing)
                print(f"distexp: warning: no system metrics ({type(ex).__name__}: {ex})",
                      file=sys.stderr, flush=True)
        while not self._stop.wait(self.POLL_S):
            try:
                self._forward()
            except Exception:  # noqa: BLE001  (server hiccup: the lines stay, retried later)
                pass

    def _open_gate(self, text: str) -> None:
        tmp = self.gate.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.gate)  # atomic: the trainer never reads half a line

    def _forward(self) -> None:
        with open(self.sink) as f:
            f.seek(self._pos)
            data = f.read()
        done = data.rfind("\n") + 1  # only whole lines; the rest is still being written
        for line in data[:done].splitlines(keepends=True):
            if line.strip():
                self.run.log_record(json.loads(line))
            self._pos += len(line.encode())  # after logging: a failed line is retried

    def close(self) -> Optional["JobRun"]:
        """Wait for the run's creation, forward what is left, stop system metrics; the run or None."""
        self._stop.set()
        self._thread.join()
        if self.run is not None:
            try:
                self._forward()
            except Exception as ex:  # noqa: BLE001  (the run must still be ended by the caller)
                print(f"distexp: warning: some metrics could not be logged to MLflow "
                      f"({type(ex).__name__}: {str(ex)[:200]})", file=sys.stderr, flush=True)
            finally:
                if self._monitor is not None:
                    _finish_monitor(self._monitor)
        return self.run


def _finish_monitor(monitor) -> None:
    """Stop MLflow's monitor and publish the samples of the last, unfinished interval (MLflow drops
    them, so a job shorter than one interval would otherwise have no system metrics)."""
    monitor.finish()
    try:
        last = monitor.aggregate_metrics()
        if last:
            monitor.publish_metrics(last)
            monitor.mlflow_logger.flush()
    except Exception:  # noqa: BLE001  (system metrics are best effort, never fail the job)
        pass


def run_name(strategy: str, model: str, dataset: str, replicas: int) -> str:
    return f"{strategy}-{model}-{dataset}-r{replicas}"


_SAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")


def safe_key(key: str) -> str:
    return _SAFE.sub("_", key)
