"""Job side, while the trainer runs: create the run off the trainer's critical path, open the gate,
forward the chief's records, sample system metrics (``Forwarder``).

The job process starts the trainer and creates the run in a thread while the trainer imports
TensorFlow; the outcome goes to the gate file the chief waits at before building the model
(distexp.tracking.sink). Records the chief appends to the sink are logged as they come (every
POLL_S) and drained completely by ``close``. A server that dies sends the rest to the offline file.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional

from distexp import env
from distexp.console_lines import WARNING
from distexp.tracking import owner
from distexp.tracking import tags as tag
from distexp.tracking.redaction import redact
from distexp.tracking.run import JobRun
from distexp.tracking.sink import READY_S
from distexp.tracking.store import reason


class Forwarder:
    """`create` builds the JobRun (it may raise UserError: unreachable server, unwritable store,
    missing driver); its outcome is written to the gate file the chief waits at."""

    POLL_S = 0.5

    def __init__(self, create: Callable[[], JobRun], job_dir: Path, *,
                 on_ready: Callable[[JobRun], None] = lambda run: None,
                 system_metrics_interval: Optional[float] = None,
                 system_metrics_node: Optional[str] = None,
                 system_metrics_gpus: Optional[List[str]] = None):
        self.job_dir = job_dir
        self.sink = job_dir / "metrics.jsonl"
        self.gate = job_dir / "tracking.gate"
        for p in (self.sink, self.gate):
            p.unlink(missing_ok=True)
        self.sink.touch()
        self._create, self._on_ready = create, on_ready
        self._interval = system_metrics_interval
        self._node = system_metrics_node  # MLflow's node_id: system/<node>/... on a several-host job
        self._gpus = system_metrics_gpus  # the GPUs the run's processes use here (None: unknown)
        self.run: Optional[JobRun] = None
        self.error: Optional[str] = None
        self._monitor = None
        self._pos = 0
        self._t0 = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._creating = self._abandoned = False
        self._thread = threading.Thread(target=self._main, name="distexp-mlflow", daemon=True)

    def env(self) -> dict:
        """What the chief trainer needs (the other workers get nothing)."""
        return {env.METRICS_SINK: str(self.sink), env.TRACKING_GATE: str(self.gate)}

    def start(self) -> "Forwarder":
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            import mlflow.tracking  # noqa: F401  (seconds on a loaded host: before `_creating`)

            with self._lock:
                if self._abandoned:  # the job was stopped first: no run at all, nothing RUNNING
                    return
                self._creating = True
            self.run = self._create()
        except Exception as ex:  # noqa: BLE001  (UserError: the one line the user sees)
            from distexp.errors import one_line

            self.error = one_line(ex) or f"tracking: {type(ex).__name__}: {ex}"
            self._open_gate(f"error {self.error}")
            return
        try:
            self._on_ready(self.run)  # the run's console line
        except Exception:  # noqa: BLE001  (never keeps the chief waiting at the gate)
            pass
        self._open_gate(f"ok {self.run.run_id}")
        if self._interval:
            try:
                self._monitor = self.run.system_metrics(self._interval, self._node,
                                                        self._gpus)
            except Exception as ex:  # noqa: BLE001  (best effort: e.g. psutil missing)
                print(f"{WARNING}no system metrics ({type(ex).__name__}: {ex})",
                      file=sys.stderr, flush=True)
        beat = time.monotonic()
        while not self._stop.wait(self.POLL_S):
            self._forward_or_offline()
            if time.monotonic() - beat >= owner.BEAT_S and self.run.offline is None:
                beat = time.monotonic()
                try:  # the job lives: its run is not ended from another host (tracking.owner)
                    self.run.client.set_tag(self.run.run_id, tag.HEARTBEAT, str(int(time.time())))
                except Exception:  # noqa: BLE001  (the next forward finds a dead server)
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

    def _forward_or_offline(self) -> None:
        """Forward; if the server fails, say so once and keep the rest in the offline file."""
        try:
            self._forward()
        except Exception as ex:
            if self.run.offline is not None:
                raise
            self.run.go_offline(self.job_dir, ex)
            print(f"{WARNING}MLflow at {redact(self.run.uri)} failed ({reason(ex)}); "
                  f"training goes on, metrics are kept in {self.run.offline.path}", flush=True)
            self._forward()  # the failed line and the rest, offline

    def close(self, stopped: bool = False) -> Optional[JobRun]:
        """Wait for the run's creation, forward what is left, stop system metrics; the run or None.
        `stopped` (a stop signal): a run whose creation has not begun is never created."""
        self._stop.set()
        with self._lock:
            if stopped and not self._creating:
                self._abandoned = True
                return None
        if self.run is None:  # maybe still being created: no longer than the chief waits for it
            self._thread.join(timeout=max(0.0, self._t0 + READY_S - time.monotonic()) + 1.0)
            if self.run is None and self._thread.is_alive():
                print(f"{WARNING}the MLflow run was still being created after "
                      f"{READY_S:g} s; the job ends without it", file=sys.stderr, flush=True)
                return None
        self._thread.join()  # forwarding: each MLflow call is bounded (store.HTTP_ENV)
        if self.run is not None:
            try:
                self._forward_or_offline()
            except Exception as ex:  # noqa: BLE001  (the run must still be ended by the caller)
                print(f"{WARNING}some metrics could not be logged to MLflow "
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
