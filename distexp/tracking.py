"""MLflow, from both sides of a job, without TensorFlow.

The job process (distexp.job) owns the run's life: it creates the run, logs the resolved config
and artifacts, and always ends the run FINISHED, FAILED or KILLED, whatever the training processes
did (even a SIGKILLed trainer cannot leave it RUNNING). Only the chief training process adds to
that run (``RunLogger``, normally through the job process: see ``Forwarder`` below); other
workers never receive a sink or a run id, so they cannot log.

A tracking server that is down or dies (``Offline``):
- at start: the job process checks it (``probe``: a TCP connect with a short timeout) and stops
  with one line before any training process starts; the run is then created with no retries and
  a short timeout (MLflow's HTTP client otherwise retries for minutes);
- during the job: the first failed call switches that side to offline mode; every later metric,
  param, artifact and the run's final status are appended to ``<job_dir>/mlflow-offline.jsonl``
  and ``python -m distexp.tracking import <job_dir>`` replays them into the run once the server is
  back. Training is never stopped or slowed by a dead server beyond one bounded retry.

Off the trainer's critical path (``Forwarder``, issue 5): the job process checks the server
cheaply (``probe``: a TCP connect, no MLflow import), starts the trainer, and creates the run in a
thread while the trainer imports TensorFlow; the chief's ``RunLogger`` then only appends JSON
lines to ``<job_dir>/metrics.jsonl`` (no MLflow in the trainer at all), which the job process
forwards to the run, with MLflow's own system metrics. The chief waits at a gate
(``RunLogger.wait_ready``) before building the model, so a run that could not be created still
stops the job with one line before any user code or training step. A server that dies later
sends the forwarded records to the offline file, as above.

Credentials in a tracking URI are never printed or logged: ``redact`` / ``redact_text``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Mapping, Optional
from urllib.parse import urlsplit, urlunsplit

RUN_ID_ENV = "DISTEXP_RUN_ID"
URI_ENV = "DISTEXP_TRACKING_URI"
SINK_ENV = "DISTEXP_METRICS_SINK"    # the chief appends its metrics/params here (JSON lines)
GATE_ENV = "DISTEXP_TRACKING_GATE"   # the job writes "ok <run_id>" or "error <line>" here
MAX_PARAM_LEN = 6000  # MLflow 3 limit on a param value
OFFLINE_FILE = "mlflow-offline.jsonl"

# MLflow's HTTP client retries 7 times with a backoff factor of 2 and a 120 s timeout per request
# by default: minutes of waiting on a dead server. distexp's bounds (a user's own env wins):
HTTP_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
            "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
# ... and for the start-up probe: one try, a short timeout, so a wrong URI fails in seconds.
PROBE_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


def redact(uri: str) -> str:
    """The URI with any password (and user) removed, for printing and logging."""
    parts = urlsplit(uri)
    if parts.password is None and parts.username is None:
        return uri
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


_USERINFO = re.compile(r"(?<=//)[^/@\s'\"]+@")


def redact_text(text: str) -> str:
    """`text` with the user:password@ part of every URL in it replaced by ***@."""
    return _USERINFO.sub("***@", str(text))


def http_env() -> dict:
    """distexp's HTTP retry/timeout bounds for MLflow, minus those the user set."""
    return {k: v for k, v in HTTP_ENV.items() if k not in os.environ}


@contextlib.contextmanager
def _env(values: Mapping[str, str]) -> Iterator[None]:
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
    """A short, credential-free reason for a failed MLflow call."""
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
    if redact(uri) != uri:  # MLflow prints "View run ... at: <URI with the password>" on end
        os.environ["MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"] = "true"

    store_dir = _sqlite_dir(uri)
    if store_dir is None:
        return MlflowClient(tracking_uri=uri)
    try:
        store_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        return MlflowClient(tracking_uri=uri)  # fails on first use; JobRun makes that one line
    # Two processes opening a new SQLite store at once both run MLflow's schema migrations and
    # one fails ("Online migration expected to match one row", "table runs already exists"):
    # concurrent sweeps into a fresh store hit it. MlflowClient() opens (creates, migrates) the
    # store, so construct it under an exclusive file lock beside the database.
    import fcntl

    with open(store_dir / (Path(uri[len("sqlite:///"):]).name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return MlflowClient(tracking_uri=uri)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _experiment_id(client, name: str, uri: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    store_dir = _sqlite_dir(uri)
    location = (store_dir / "mlartifacts").as_uri() if store_dir else None
    try:
        # the MLflow 3 UI then opens it as a training experiment (runs table), not a GenAI one
        return client.create_experiment(name, artifact_location=location,
                                        tags={"mlflow.experimentKind": "custom_model_development"})
    except Exception:  # another job created it first (concurrent sweeps)
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def _unreachable(uri: str, ex: BaseException) -> str:
    return (f"tracking.uri: received {redact(uri)!r}; MLflow cannot be reached there "
            f"({reason(ex)}); valid: the URI of a running tracking server or store "
            "(check the URI and the server), or tracking.enabled=false")


def probe(uri: str, timeout: float = 10.0) -> None:
    """A check that costs milliseconds and no MLflow import, before any process starts: the
    sqlite store's directory can be created; an http(s) server accepts a TCP connection. Anything
    else is checked when the run is created (JobRun, in the Forwarder's thread)."""
    from distexp.config import UserError

    if _make_store_dir(uri) is not None:
        return
    parts = urlsplit(uri)
    if parts.scheme in ("http", "https") and parts.hostname:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            socket.create_connection((parts.hostname, port), timeout=timeout).close()
        except OSError as ex:
            raise UserError(_unreachable(uri, ex)) from None


def _make_store_dir(uri: str) -> Optional[Path]:
    """For a sqlite URI, create the database's directory (one-line UserError when it cannot be)
    and return it; None for any other URI."""
    from distexp.config import UserError

    store_dir = _sqlite_dir(uri)
    if store_dir is not None:
        try:
            store_dir.mkdir(parents=True, exist_ok=True)
        except OSError as ex:
            raise UserError(f"tracking.uri: received {uri!r}; cannot create {store_dir} "
                            f"({ex.strerror}); valid: a writable place, or "
                            "tracking.enabled=false") from None
    return store_dir


class JobRun:
    """The MLflow run of one job, owned by the job process."""

    def __init__(self, uri: str, experiment: str, run_name: str, tags: Mapping[str, str],
                 params: Mapping[str, str]):
        from distexp.config import UserError

        _make_store_dir(uri)
        self.uri = uri
        self.offline: Optional[Offline] = None
        try:
            with _env(PROBE_ENV):  # the probe: fails in seconds, before anything starts
                self.client = _client(uri)
                exp_id = _experiment_id(self.client, experiment, uri)
                run = self.client.create_run(exp_id, run_name=run_name, tags=dict(tags))
        except Exception as ex:  # noqa: BLE001
            raise UserError(_unreachable(uri, ex)) from None
        self.run_id = run.info.run_id
        self.experiment_id = exp_id
        self.log_params(params)

    def go_offline(self, job_dir: Path, ex: BaseException) -> None:
        """From now on, write to `job_dir`'s offline file instead of the (dead) server."""
        if self.offline is None:
            self.offline = Offline(job_dir, self.run_id, self.uri)
            self.offline.note(ex)

    def _call(self, record: dict, fn) -> None:
        if self.offline is not None:
            self.offline.append(record)
            return
        fn()

    def log_params(self, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, _clip(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self._call({"kind": "params", "params": {p.key: p.value for p in items[i:i + 100]}},
                       lambda b=items[i:i + 100]: self.client.log_batch(self.run_id, params=b))

    def log_artifacts(self, paths: Iterable[Path], artifact_path: Optional[str] = None) -> None:
        for p in paths:
            if p.is_file() and p.stat().st_size > 0:
                self._call({"kind": "artifact", "path": str(p), "artifact_path": artifact_path},
                           lambda p=p: self.client.log_artifact(self.run_id, str(p), artifact_path))

    def log_metrics(self, items: List[list]) -> None:
        """[[key, value, timestamp_ms, step], ...] as the chief measured them."""
        from mlflow.entities import Metric

        self._call({"kind": "metrics", "metrics": items}, lambda: self.client.log_batch(
            self.run_id, metrics=[Metric(k, float(v), int(ts), int(step))
                                  for k, v, ts, step in items]))

    def log_record(self, record: dict) -> None:
        """One record of the chief's sink (RunLogger in sink mode)."""
        kind = record["kind"]
        if kind == "params":
            self.log_params(record["params"])
        elif kind == "metrics":
            self.log_metrics(record["metrics"])
        elif kind == "tags":
            for k, v in record["tags"].items():
                self.set_tag(k, str(v))

    def system_metrics(self, interval: float):
        """MLflow's own system-metrics monitor (psutil; GPUs via NVML when present) on this run."""
        import logging

        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # best effort: a dead server must not print MLflow's warnings on every sample
        logging.getLogger("mlflow.system_metrics").setLevel(logging.CRITICAL)
        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=interval,
                                       tracking_uri=self.uri)
        monitor.start()
        return monitor

    def set_tag(self, key: str, value: str) -> None:
        self._call({"kind": "tag", "key": key, "value": value},
                   lambda: self.client.set_tag(self.run_id, key, value))

    def end(self, status: str) -> None:
        self._call({"kind": "end", "status": status},
                   lambda: self.client.set_terminated(self.run_id, status=status))

    def metrics(self) -> dict:
        return dict(self.client.get_run(self.run_id).data.metrics)


def _clip(value) -> str:
    s = str(value)
    return s if len(s) <= MAX_PARAM_LEN else s[: MAX_PARAM_LEN - 3] + "..."


class RunLogger:
    """Appends metrics, params and tags to the job's run from the chief trainer; a no-op elsewhere.

    With SINK_ENV set (the job process forwards: the usual case) records go to that file as JSON
    lines and MLflow is never imported here; with a run id they go straight to MLflow (and to the
    offline file in `fallback_dir` once the server fails); with neither, nowhere.
    """

    def __init__(self, run_id: Optional[str] = None, uri: Optional[str] = None,
                 fallback_dir: Optional[Path] = None, sink: Optional[str] = None):
        direct = run_id is not None
        self.sink = None if direct else (sink if sink is not None else os.environ.get(SINK_ENV))
        self.gate = None if direct else os.environ.get(GATE_ENV)
        self.run_id = run_id if direct else os.environ.get(RUN_ID_ENV)
        self.uri = uri if uri is not None else os.environ.get(URI_ENV)
        self.client = _client(self.uri) if (self.run_id and not self.sink) else None
        self._file = open(self.sink, "a") if self.sink else None
        self.fallback_dir = fallback_dir
        self.offline: Optional[Offline] = None
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

    def _send(self, record: dict, **batch) -> None:
        """To the sink; or log_batch, or - once the server has failed - the offline file (never
        raises for a dead server when there is a fallback dir: training goes on)."""
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()
            return
        if self.offline is None:
            try:
                self.client.log_batch(self.run_id, **batch)
                return
            except Exception as ex:  # noqa: BLE001
                if self.fallback_dir is None:
                    raise
                self.offline = Offline(self.fallback_dir, self.run_id, self.uri)
                self.offline.note(ex)
                print(f"distexp: warning: MLflow at {redact(self.uri)} failed ({reason(ex)}); "
                      f"training goes on, metrics are kept in {self.offline.path}", flush=True)
        self.offline.append(record)

    def log_params(self, params: Mapping[str, object]) -> None:
        if not self.enabled:
            return
        record = {"kind": "params", "params": {k: _clip(v) for k, v in params.items()}}
        if self._file is not None:
            return self._send(record)
        from mlflow.entities import Param

        self._send(record, params=[Param(k, v) for k, v in record["params"].items()])

    def set_tags(self, tags: Mapping[str, object]) -> None:
        if self._file is not None:
            return self._send({"kind": "tags", "tags": {k: str(v) for k, v in tags.items()}})
        if self.client is None:
            return
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: Mapping[str, Optional[float]], step: int) -> None:
        """Log finite values at `step`; each call gets a strictly later timestamp, so a final value
        logged at the last epoch's step is MLflow's "latest" value of that metric."""
        if not self.enabled:
            return
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        items = [[k, float(v), ts, step] for k, v in metrics.items()
                 if v is not None and v == v and abs(v) != float("inf")]
        if not items:
            return
        record = {"kind": "metrics", "metrics": items}
        if self._file is not None:
            return self._send(record)
        from mlflow.entities import Metric

        self._send(record, metrics=[Metric(*m) for m in items])

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
        self.job_dir = job_dir
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
            self._forward_or_offline()

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

    def _forward_or_offline(self) -> None:
        """Forward; if the server fails, say so once and keep the rest in the offline file."""
        try:
            self._forward()
        except Exception as ex:  # noqa: BLE001
            if self.run.offline is not None:
                raise
            self.run.go_offline(self.job_dir, ex)
            print(f"distexp: warning: MLflow at {redact(self.run.uri)} failed ({reason(ex)}); "
                  f"training goes on, metrics are kept in {self.run.offline.path}", flush=True)
            self._forward()  # the failed line and the rest, offline

    def close(self) -> Optional["JobRun"]:
        """Wait for the run's creation, forward what is left, stop system metrics; the run or None."""
        self._stop.set()
        self._thread.join()
        if self.run is not None:
            try:
                self._forward_or_offline()
            except Exception as ex:  # noqa: BLE001  (the run must still be ended by the caller)
                print(f"distexp: warning: some metrics could not be logged to MLflow "
                      f"({type(ex).__name__}: {str(ex)[:200]})", file=sys.stderr, flush=True)
            finally:
                if self._monitor is not None:
                    _finish_monitor(self._monitor, publish=self.run.offline is None)
        return self.run


def _finish_monitor(monitor, publish: bool = True) -> None:
    """Stop MLflow's monitor and publish the samples of the last, unfinished interval (MLflow drops
    them, so a job shorter than one interval would otherwise have no system metrics)."""
    monitor.finish()
    if not publish:
        return
    try:
        last = monitor.aggregate_metrics()
        if last:
            monitor.publish_metrics(last)
            monitor.mlflow_logger.flush()
    except Exception:  # noqa: BLE001  (system metrics are best effort, never fail the job)
        pass


class Offline:
    """What could not reach the server, as JSON lines in `<job_dir>/mlflow-offline.jsonl`.

    Both the chief trainer (metrics) and the job process (artifacts, final status) append to it, one
    after the other. ``import_dir`` replays it into the run, in order, once the server is back.
    """

    def __init__(self, job_dir: Path, run_id: str, uri: str):
        self.path = Path(job_dir) / OFFLINE_FILE
        self.run_id, self.uri = run_id, uri

    def note(self, ex: BaseException) -> None:
        self.append({"kind": "offline", "uri": redact(self.uri), "reason": reason(ex),
                     "time": time.time()})

    def append(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"run_id": self.run_id, **record}) + "\n")


def offline_summary(job_dir: Path) -> Optional[dict]:
    """What a job's offline file holds (None if there is none): counts and the first reason."""
    path = Path(job_dir) / OFFLINE_FILE
    if not path.exists():
        return None
    records = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return {"path": path, "reason": next((r["reason"] for r in records if r["kind"] == "offline"), ""),
            "metrics": sum(len(r["metrics"]) for r in records if r["kind"] == "metrics"),
            "artifacts": sum(r["kind"] == "artifact" for r in records),
            "status": next((r["status"] for r in records if r["kind"] == "end"), None)}


def import_dir(job_dir: Path, uri: Optional[str] = None) -> dict:
    """Replay `job_dir`'s offline file into its MLflow run; rename it to *.imported when done."""
    from mlflow.entities import Metric, Param

    path = Path(job_dir) / OFFLINE_FILE
    records = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    stored = next((r["uri"] for r in records if r["kind"] == "offline"), None)
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or stored
    if not uri or "***@" in uri:
        raise SystemExit("the offline file does not hold the tracking URI's credentials: pass "
                         "--uri <tracking URI> (or set MLFLOW_TRACKING_URI)")
    client = _client(uri)
    counts = {"metrics": 0, "params": 0, "artifacts": 0, "status": None}
    for r in records:
        run_id, kind = r["run_id"], r["kind"]
        if kind == "metrics":
            ms = [Metric(k, v, ts, step) for k, v, ts, step in r["metrics"]]
            client.log_batch(run_id, metrics=ms)
            counts["metrics"] += len(ms)
        elif kind == "params":
            client.log_batch(run_id, params=[Param(k, v) for k, v in r["params"].items()])
            counts["params"] += len(r["params"])
        elif kind == "artifact":
            client.log_artifact(run_id, r["path"], r["artifact_path"])
            counts["artifacts"] += 1
        elif kind == "tag":
            client.set_tag(run_id, r["key"], r["value"])
        elif kind == "end":
            client.set_terminated(run_id, status=r["status"])
            counts["status"] = r["status"]
    path.rename(path.with_name(path.name + ".imported"))
    return counts


def import_command(job_dir: Path, uri: str) -> str:
    cmd = f"python -m distexp.tracking import {job_dir}"
    return cmd if redact(uri) == uri else cmd + " --uri <tracking URI with credentials>"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distexp.tracking",
                                description="Replay what a job could not send to MLflow.")
    sub = p.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help=f"replay <job_dir>/{OFFLINE_FILE} into its run")
    imp.add_argument("job_dirs", nargs="+", type=Path)
    imp.add_argument("--uri", help="tracking URI (default: the job's, without credentials)")
    args = p.parse_args(argv)
    for d in args.job_dirs:
        c = import_dir(d, args.uri)
        print(f"{d}: imported {c['metrics']} metric values, {c['params']} params, "
              f"{c['artifacts']} artifacts; run status {c['status'] or 'unchanged'}")
    return 0


def run_name(strategy: str, model: str, dataset: str, replicas: int) -> str:
    return f"{strategy}-{model}-{dataset}-r{replicas}"


_SAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")


def safe_key(key: str) -> str:
    return _SAFE.sub("_", key)


if __name__ == "__main__":
    sys.exit(main())
