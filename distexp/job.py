"""One Hydra job, from the job process (no TensorFlow here).

Separation of concerns:
- distexp.config   the schema and the checks that run before anything starts
- distexp.job      (this) one job's life: check, open the MLflow run, launch, close the run
- distexp.launch   the training processes, their logs, their clean-up
- distexp.cluster  which processes a strategy/cluster needs and each one's TF_CONFIG
- distexp.trainer  inside a training process: devices, strategy, data, model, loop
- distexp.tracking MLflow: the run's life here, the chief's metrics there
- distexp.sweep    a multirun as a parent run with a child run per job (Hydra callback)
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig, OmegaConf

from distexp import config as C
from distexp import launch, sweep, tracking

STATUS_EXIT = {"FINISHED": 0, "FAILED": 1, "KILLED": 130}
# Training finished but MLflow stopped answering: what it missed is in the job's offline file.
TRACKING_LOST_EXIT = 3


class JobError(Exception):
    """A job of a multirun failed. Raised (not sys.exit) so that Hydra records the job as failed
    and runs the rest of the sweep; the command exits non-zero at the end (distexp.sweep)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message, exit_code)
        self.message, self.exit_code = message, exit_code

    def __str__(self) -> str:
        return self.message


def run_job(cfg: DictConfig) -> Optional[float]:
    """Check `cfg`, train it in fresh processes, return the final `objective` figure
    (eval/accuracy by default): what Hydra hands to a sweeper such as Optuna.

    A user error raises config.UserError (one line, exit 2). A failed or interrupted job ends its
    MLflow run FAILED / KILLED and exits non-zero; in a multirun a failed job raises JobError
    instead, so the other jobs still run (Ctrl-C still stops the whole sweep).
    """
    from hydra.core.hydra_config import HydraConfig

    from distexp import datasets

    t_start = time.time()
    C.validate(cfg)
    gpus = C.check_gpus(cfg.gpus, C.visible_gpus())
    C.validate_devices(cfg, gpus)
    if cfg.model.name == "custom":
        from distexp.models import check_factory

        check_factory("model.factory", cfg.model.factory)
    os.environ.update(tracking.http_env())  # bounded MLflow retries here and in the trainers
    if os.environ.get("TF_CONFIG") == "":  # means "unset"; TF's resolvers crash on it (json.loads(""))
        del os.environ["TF_CONFIG"]
    datasets.check_available(cfg)  # TFDS data not prepared: one line, before TensorFlow
    hc = HydraConfig.get()
    multirun = sweep.in_multirun()
    job_dir = Path(hc.runtime.output_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    from distexp import cluster

    plan = cluster.plan(cfg, job_dir, gpus)  # raises UserError for a bad cluster setting
    per_worker = C.replicas_per_worker(cfg, plan.gpus_per_worker)
    replicas = per_worker * plan.replica_workers
    batch = C.global_batch(cfg, per_worker * plan.sync_workers)
    config_path = job_dir / "config.yaml"
    # What is stored and logged carries no credentials (trainers get the real URI by env).
    stored = OmegaConf.to_container(cfg, resolve=True)
    stored["tracking"]["uri"] = tracking.redact(cfg.tracking.uri)
    OmegaConf.save(OmegaConf.create(stored), config_path)
    overrides = [tracking.redact_text(o) for o in hc.overrides.task]
    overrides_path = job_dir / "overrides.yaml"
    OmegaConf.save(OmegaConf.create(overrides), overrides_path)

    forwarder = None
    if cfg.tracking.enabled and plan.logs_to_mlflow:
        tracking.probe(cfg.tracking.uri)  # milliseconds: a store/server that is plainly not there
        tags = {"distexp.job_dir": str(job_dir), "distexp.overrides": " ".join(overrides)}
        if multirun:
            tags.update(sweep.child_tags(str(hc.sweep.dir), cfg.tracking.uri,
                                         cfg.tracking.experiment, int(hc.job.num)))
        if cfg.resume:  # the chief trainer adds distexp.resumed_from_step once it has looked
            tags["distexp.resume"] = "requested"
        params = C.flatten(cfg)
        params.update({"num_workers": plan.replica_workers, "global_batch_size": batch,
                       "num_replicas": replicas})
        if "tracking.uri" in params:
            params["tracking.uri"] = tracking.redact(params["tracking.uri"])
        name = tracking.run_name(cfg.strategy.name, cfg.model.name, cfg.dataset.name, replicas)

        def create_run():  # in a thread, while the trainer imports TensorFlow (tracking.Forwarder)
            return tracking.JobRun(cfg.tracking.uri, cfg.tracking.experiment, name, tags, params)

        def announce(run):
            print(f"MLflow run {run.run_id} ({tracking.redact(cfg.tracking.uri)}, experiment "
                  f"{cfg.tracking.experiment!r})", flush=True)

        interval = cfg.tracking.system_metrics_interval if cfg.tracking.system_metrics else None
        forwarder = tracking.Forwarder(create_run, job_dir, on_ready=announce,
                                       system_metrics_interval=interval)

    env = {"DISTEXP_JOB_START": repr(t_start), "DISTEXP_GPUS": str(gpus),
           "DISTEXP_NUM_WORKERS": str(plan.replica_workers),
           "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    if not plan.logs_to_mlflow:
        print(f"distexp: task {plan.task} of an external cluster: training without MLflow (the "
              "chief logs the run)", flush=True)
    if forwarder is not None:
        forwarder.start()
    status, error = "FAILED", None
    all_procs = []
    try:
        for attempt in range(1, cluster.PORT_ATTEMPTS + 1):
            procs = plan.processes(config_path, env, None, cfg.tracking.uri)
            if forwarder is not None:
                procs[0].env = {**procs[0].env, **forwarder.env()}  # the chief only
            all_procs += procs
            try:
                left = None if cfg.timeout is None else max(1.0, cfg.timeout - (time.time() - t_start))
                launch.run(procs, timeout=left, until=plan.until)
                break
            except launch.JobFailed:
                clash = [p.name for p in procs if p.returncode == cluster.PORT_IN_USE_EXIT]
                if not (clash and plan.retry_ports and attempt < cluster.PORT_ATTEMPTS):
                    raise
                print(f"distexp: {', '.join(clash)} could not listen on its port (taken by another "
                      f"process); starting the cluster again on other ports", flush=True)
                plan.new_ports()
        status = "FINISHED"
    except launch.JobInterrupted:
        status, error = "KILLED", "interrupted: every training process was stopped"
    except launch.JobFailed as ex:
        error = str(ex)
        if error.startswith("timeout:"):  # the limit is the whole job's, across port retries
            error = f"timeout: the job ran longer than {cfg.timeout:g} s and was stopped"
        chief = procs[0]
        if chief.returncode == 2:
            lines = [ln for ln in _tail(chief.log).splitlines() if ln.startswith("distexp: error:")]
            if lines:  # the trainer's own one-line user error
                error = "user:" + lines[-1]
    finally:
        run = forwarder.close() if forwarder is not None else None
        if run is not None:
            _close(run, status, job_dir, _unique_logs(all_procs), config_path, overrides_path)

    result = _read_result(job_dir)
    lost = tracking.offline_summary(job_dir) if run is not None else None
    if lost:
        what = f"training {status}" + (f" (eval/accuracy {result['eval/accuracy']:.4f})"
                                       if result.get("eval/accuracy") is not None else "")
        print(f"distexp: error: tracking: MLflow at {tracking.redact(cfg.tracking.uri)} stopped "
              f"answering during the job ({lost['reason']}); {what}; {lost['metrics']} metric values, "
              f"{lost['artifacts']} artifacts and the run's final status are kept in {lost['path']}; "
              f"when the server is back: {tracking.import_command(job_dir, cfg.tracking.uri)}",
              file=sys.stderr, flush=True)
        if status == "FINISHED" or (error or "").startswith("user:"):
            sys.exit(TRACKING_LOST_EXIT if status == "FINISHED" else 2)
    if status == "FINISHED":
        return result.get(cfg.objective)
    if error and error.startswith("user:"):
        line = error[len("user:"):]
        print(line, file=sys.stderr, flush=True)
        if multirun:
            raise JobError(line[len("distexp: error: "):], 2)
        sys.exit(2)
    line = f"{error} (logs: {', '.join(str(p.log) for p in procs)})"
    print(f"distexp: error: {line}", file=sys.stderr, flush=True)
    if multirun and status == "FAILED":
        raise JobError(line, 1)
    sys.exit(STATUS_EXIT[status])


def _unique_logs(procs) -> list:
    return list(dict.fromkeys(p.log for p in procs))  # a retried cluster reuses its log files


def _close(run: tracking.JobRun, status: str, job_dir: Path, logs, *files: Path) -> None:
    """Artifacts then the terminal status; a failure here must not leave the run RUNNING.

    If the trainer already found the server dead, or a call here fails, the rest goes to the job's
    offline file (one bounded retry per call, never a hang on a dead server)."""
    if tracking.offline_summary(job_dir):
        run.go_offline(job_dir, RuntimeError("the chief trainer found the server unreachable"))
    steps = [lambda: run.log_artifacts(files),
             lambda: run.log_artifacts(logs, artifact_path="logs"),
             lambda: run.log_artifacts([job_dir / "distexp.log", job_dir / "steps.csv"]),
             lambda: run.end(status)]
    i = 0
    while i < len(steps):
        try:
            steps[i]()
            i += 1
        except Exception as ex:  # noqa: BLE001  (the server died: keep the rest offline)
            if run.offline is not None:
                raise
            run.go_offline(job_dir, ex)


def _tail(path: Path, n: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _read_result(job_dir: Path) -> dict:
    try:
        return json.loads((job_dir / "result.json").read_text())
    except (OSError, ValueError):
        return {}
