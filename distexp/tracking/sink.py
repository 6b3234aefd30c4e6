"""The chief trainer's side of tracking: records appended to a file, no MLflow here.

``RunLogger`` appends the chief's params, metrics and tags as JSON lines to the sink file the job
process named (env.METRICS_SINK: ``<job_dir>/metrics.jsonl``); the job process forwards them to the run
(distexp.tracking.forward). Before building the model the chief waits at the gate file
(env.TRACKING_GATE) until the job process has created the run: "ok <run_id>", or "error <line>", which
stops the trainer with that one line. A process given no sink (every other worker, a test) logs
nothing.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Mapping, Optional

from distexp import env

MAX_PARAM_LEN = 6000  # MLflow 3 limit on a param value
# The longest the chief waits at the gate: the run's creation is bounded by MLflow's HTTP retries
# (store.HTTP_ENV: ~1 min a request) and a new SQLite store's migration (seconds); past this bound
# something hangs, and the job ends FAILED naming the gate instead of waiting for good.
READY_S = 300.0


class Kind:
    """The `kind` of a JSON line of the sink file (written here) and of the job's offline file
    (distexp.tracking.run, .offline): what the line carries."""
    PARAMS = "params"
    METRICS = "metrics"
    TAGS = "tags"          # several tags at once (the chief's)
    TAG = "tag"            # one tag (the job process's)
    ARTIFACT = "artifact"
    END = "end"            # the run's end: its status
    OFFLINE = "offline"    # the offline file's first line: the store and why it was not reached


def clip(value) -> str:
    """A param value MLflow accepts (cut to MAX_PARAM_LEN characters)."""
    s = str(value)
    return s if len(s) <= MAX_PARAM_LEN else s[: MAX_PARAM_LEN - 3] + "..."


class RunLogger:
    """Appends metrics, params and tags to the job's run from the chief trainer; a no-op elsewhere.

    `sink` / `gate` default to the paths the job process put in the environment (only the chief's);
    ``RunLogger(sink="", gate="")`` is a logger that logs nothing. The offline file is kept by the
    job process.
    """

    def __init__(self, sink: Optional[str] = None, gate: Optional[str] = None):
        self.sink = sink if sink is not None else os.environ.get(env.METRICS_SINK)
        self.gate = gate if gate is not None else os.environ.get(env.TRACKING_GATE)
        self._file = open(self.sink, "a") if self.sink else None
        self._last_ts = 0

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def wait_ready(self, poll: float = 0.02, timeout: float = READY_S) -> None:
        """Block until the job process has created the run; raise UserError if it could not, and
        UserFailure (the job FAILED, the line naming the gate) after `timeout` seconds."""
        if not self.gate:
            return
        from distexp.errors import UserError, UserFailure

        gate = Path(self.gate)
        deadline = time.monotonic() + timeout
        while not gate.exists():
            if time.monotonic() > deadline:
                raise UserFailure(
                    f"tracking: waited {timeout:g} s for the job process to create the MLflow run "
                    f"(its gate file {gate} never appeared); the job process's output says why")
            time.sleep(poll)
        word, _, rest = gate.read_text().partition(" ")
        if word != "ok":
            raise UserError(rest.strip())

    def _send(self, record: dict) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def log_params(self, params: Mapping[str, object]) -> None:
        self._send({"kind": Kind.PARAMS, "params": {k: clip(v) for k, v in params.items()}})

    def set_tags(self, tags: Mapping[str, object]) -> None:
        self._send({"kind": Kind.TAGS, "tags": {k: str(v) for k, v in tags.items()}})

    def log_artifact_dir(self, root: Path, artifact_path: str) -> None:
        """Every file under `root`, as artifacts under `artifact_path` (sub-directories kept)."""
        for f in sorted(Path(root).rglob("*")):
            if f.is_file():
                sub = f.parent.relative_to(root).as_posix()
                self._send({"kind": Kind.ARTIFACT, "path": str(f),
                            "artifact_path": artifact_path if sub == "." else f"{artifact_path}/{sub}"})

    def log_metrics(self, metrics: Mapping[str, Optional[float]], step: int) -> None:
        """Log finite values at `step`; each call gets a strictly later timestamp, so a final value
        logged at the last epoch's step is MLflow's "latest" value of that metric."""
        if not self.enabled:
            return
        ts = max(int(time.time() * 1000), self._last_ts + 1)
        self._last_ts = ts
        items = [[k, float(v), ts, step] for k, v in metrics.items()
                 if v is not None and math.isfinite(v)]
        if items:
            self._send({"kind": Kind.METRICS, "metrics": items})

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
