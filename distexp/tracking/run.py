"""The MLflow run of one job, owned by the job process (``JobRun``).

It creates the run (params: the resolved config flattened), takes the chief's records as the
Forwarder reads them, attaches artifacts and always sets the final status (``close``). Once a call fails
(the server died) ``go_offline`` sends every later call to the job's offline file
(distexp.tracking.offline) instead.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

from distexp.tracking import store
from distexp.tracking import tags as tag
from distexp.tracking.offline import Offline, offline_summary
from distexp.tracking.redaction import redact_text
from distexp.tracking.sink import Kind, clip

# How a swept key shows in a run name (others: their last component, e.g. optimizer.lr -> lr).
# JobRun.describe's default: read the run's metrics back from the store (distexp.job passes the
# chief's result.json instead once the job's side calls close(..., figures=)).
READ_BACK = object()

_SHORT = {"cpu_replicas": "cpu", "gpus": "gpu", "global_batch_size": "gb",
          "batch_size_per_replica": "bpr", "steps_per_execution": "spe", "workers": "w"}
# Shown already: by the name's own parts, or (replica counts) by r<replicas> when equal to it.
_IN_NAME = ("strategy", "model", "dataset", "repeat")


def run_name(strategy: str, model: str, dataset: str, replicas: int, in_sweep: bool = False,
             swept: Optional[Mapping[str, str]] = None) -> str:
    """`<strategy>-<model>-<dataset>-r<replicas>`; in a sweep, what varies comes first,
    `<strategy>-r<replicas>[-<key><value>...]-<model>-<dataset>`, so that the part the UI's name
    column shows (~16 characters) tells the jobs apart. `swept`: this job's values of the keys the
    sweep varies; each one the name does not show yet is added (`one_device-r1-cpu2-cnn-digits`
    for one_device with cpu_replicas=2: one replica on a machine split into two devices)."""
    if not in_sweep:
        return f"{strategy}-{model}-{dataset}-r{replicas}"
    parts = [strategy, f"r{replicas}"]
    for key, value in (swept or {}).items():
        if key in _IN_NAME or (key in ("cpu_replicas", "gpus") and value == str(replicas)):
            continue
        short = _SHORT.get(key, key.rsplit(".", 1)[-1])
        parts.append(f"{short}{value}" if short in _SHORT.values() else f"{short}={value}")
    return "-".join(parts + [model, dataset])


class JobRun:
    """The MLflow run of one job (or of a sweep's parent), owned by the job process."""

    def __init__(self, uri: str, experiment: str, run_name: str, tags: Mapping[str, str],
                 params: Mapping[str, str]):
        from distexp.errors import UserError

        store.make_store_dir(uri)
        self.uri = uri
        self.offline: Optional[Offline] = None
        try:
            with store.env(store.PROBE_ENV):  # fails in seconds, before anything starts
                self.client = store.client(uri)
                exp_id = store.experiment_id(self.client, experiment, uri)
                run = self.client.create_run(exp_id, run_name=run_name, tags=dict(tags))
        except Exception as ex:  # noqa: BLE001
            if "Invalid experiment name" in str(ex):  # MLflow's own rule, not the store's fault
                raise UserError(f"tracking.experiment: received {experiment!r}; MLflow refuses it "
                                f"({store.reason(ex)}); expected an MLflow experiment name, e.g. "
                                "distexp") from None
            raise UserError(store.unreachable(uri, ex)) from None
        self.run_id = run.info.run_id
        self.experiment_id = exp_id
        self.params: Dict[str, str] = {}  # every param logged (the job's and the chief's)
        self.log_params(params)

    @classmethod
    def reopen(cls, uri: str, run_id: str) -> "JobRun":
        """An existing run (a resumed sweep's parent), owned by this process and RUNNING again."""
        from distexp.tracking.owner import owner_tags

        run = cls.__new__(cls)
        run.uri, run.offline, run.run_id, run.params = uri, None, run_id, {}
        run.client = store.client(uri)
        run.experiment_id = run.client.get_run(run_id).info.experiment_id
        for k, v in owner_tags().items():  # this process owns it now
            run.client.set_tag(run_id, k, v)
        run.client.update_run(run_id, status="RUNNING")
        return run

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

    def log_params(self, params: Mapping[str, object]) -> None:
        from mlflow.entities import Param

        items = [Param(k, clip(v)) for k, v in params.items()]
        self.params.update((p.key, p.value) for p in items)
        for i in range(0, len(items), 100):
            self._call({"kind": Kind.PARAMS, "params": {p.key: p.value for p in items[i:i + 100]}},
                       lambda b=items[i:i + 100]: self.client.log_batch(self.run_id, params=b))

    def log_artifacts(self, paths: Iterable[Path], artifact_path: Optional[str] = None,
                      keep_empty: bool = False) -> None:
        for p in paths:
            if p.is_file() and (keep_empty or p.stat().st_size > 0):
                self._call({"kind": Kind.ARTIFACT, "path": str(p), "artifact_path": artifact_path},
                           lambda p=p: self.client.log_artifact(self.run_id, str(p), artifact_path))

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Values measured here, now (a sweep's own figures)."""
        ts = int(time.time() * 1000)
        self.log_metric_items([[k, float(v), ts, step] for k, v in metrics.items()])

    def log_metric_items(self, items: List[list]) -> None:
        """[[key, value, timestamp_ms, step], ...] as the chief measured them."""
        from mlflow.entities import Metric

        self._call({"kind": Kind.METRICS, "metrics": items}, lambda: self.client.log_batch(
            self.run_id, metrics=[Metric(k, float(v), int(ts), int(step))
                                  for k, v, ts, step in items]))

    def log_record(self, record: dict) -> None:
        """One record of the chief's sink (distexp.tracking.sink.RunLogger)."""
        kind = record["kind"]
        if kind == Kind.PARAMS:
            self.log_params(record["params"])
        elif kind == Kind.METRICS:
            self.log_metric_items(record["metrics"])
        elif kind == Kind.TAGS:
            for k, v in record["tags"].items():
                self.set_tag(k, str(v))
        elif kind == Kind.ARTIFACT:  # a file the chief wrote (e.g. profile=true's trace)
            self.log_artifacts([Path(record["path"])], record.get("artifact_path"))

    def system_metrics(self, interval: float, node_id: Optional[str] = None,
                       gpus: Optional[Sequence[str]] = None):
        """MLflow's own system-metrics monitor (psutil; GPUs via NVML when present) on this run;
        with `node_id` its metrics are system/<node_id>/... (MLflow's way to tell nodes apart).
        `gpus`: the GPU ids the run's processes use here: only those are sampled
        (distexp.tracking.gpu_metrics)."""
        import logging

        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        from distexp.tracking.gpu_metrics import restrict

        # best effort: a dead server must not print MLflow's warnings on every sample
        logging.getLogger("mlflow.system_metrics").setLevel(logging.CRITICAL)
        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=interval,
                                       tracking_uri=self.uri, node_id=node_id)
        restrict(monitor, gpus)
        monitor.start()
        return monitor

    def set_tag(self, key: str, value: str) -> None:
        self._call({"kind": Kind.TAG, "key": key, "value": value},
                   lambda: self.client.set_tag(self.run_id, key, value))

    def close(self, status: str, job_dir: Path, files: Iterable[Path], logs: Iterable[Path],
              figures: Union[Mapping[str, Optional[float]], None, object] = READ_BACK,
              error: Optional[str] = None) -> None:
        """Artifacts (the job's files, its logs under logs/, distexp.log, steps.csv), the display
        tags of `figures` (describe; with `error`, the line the job ended with, also as the tag
        distexp.error), then the terminal status; a failure here must not leave the run RUNNING.

        If the trainer already found the server dead, or a call here fails, the rest goes to the
        job's offline file (one bounded retry per call, never a hang on a dead server)."""
        if offline_summary(job_dir):
            self.go_offline(job_dir, RuntimeError("the chief trainer found the server unreachable"))
        steps = [lambda: self.log_artifacts(files),
                 # a process that died before printing a word: its empty log says so
                 lambda: self.log_artifacts(logs, artifact_path="logs", keep_empty=True),
                 lambda: self.log_artifacts([job_dir / "distexp.log", job_dir / "steps.csv"]),
                 lambda: self.describe(figures, error),
                 lambda: self.end(status)]
        i = 0
        while i < len(steps):
            try:
                steps[i]()
                i += 1
            except Exception as ex:  # the server died: keep the rest offline
                if self.offline is not None:
                    raise
                self.go_offline(job_dir, ex)

    def describe(self, figures: Union[Mapping[str, Optional[float]], None, object] = READ_BACK,
                 error: Optional[str] = None) -> None:
        """The rounded figures and the description the UI shows (distexp.tracking.display).

        `figures`: the chief's final figures (its result.json), shown with the params this run
        logged, without reading the run back; None: the job left no result (the description
        only). READ_BACK (the default): the run's metrics and params as the store has them.
        `error`: a failed job's line, which leads the description and is the tag distexp.error."""
        if error:
            self.set_tag(tag.ERROR, clip(redact_text(error)))
        if self.offline is not None:
            return
        from distexp.tracking.display import job_tags
        from distexp.tracking.tags import NOTE

        if figures is READ_BACK:
            data = self.client.get_run(self.run_id).data
            metrics, params = data.metrics, data.params
        else:
            metrics = {k: v for k, v in (figures or {}).items() if isinstance(v, (int, float))}
            params = self.params
        tags = job_tags(metrics, params)
        if error:
            tags[NOTE] = f"**Failed:** {clip(redact_text(error))}\n\n{tags[NOTE]}"
        for k, v in tags.items():
            self.set_tag(k, v)

    def end(self, status: str) -> None:
        self._call({"kind": Kind.END, "status": status},
                   lambda: self.client.set_terminated(self.run_id, status=status))
