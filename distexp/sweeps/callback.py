"""A Hydra multirun as one thing in MLflow: a parent run for the sweep, a child run per job.

Driven by Hydra's Callback API (``hydra.callbacks.sweep`` in conf/config.yaml), so it works with
any sweeper (basic, Optuna) and launcher (basic, joblib, submitit):

- ``on_multirun_start`` (the sweep process): opens the parent run (tags ``distexp.sweep_id``,
  ``distexp.run_kind=sweep``, ``distexp.sweep_dir``; params: the overrides, sweeper, launcher)
  and writes ``<sweep dir>/sweep.json``. Jobs find their parent there: a file on the sweep dir
  reaches joblib workers and Slurm nodes alike, an environment variable would not. The parent
  run itself (opened, reopened, its children's tags) is distexp.sweeps.parent's.
- each job (distexp.job.lifecycle) reads sweep.json and opens its run as a child (``mlflow.parentRunId``,
  ``distexp.sweep_id``, ``distexp.job_num``, ``distexp.repeat``: distexp.sweeps.parent.child_tags).
- ``sweep.resume=<id>``: ``on_multirun_start`` reopens that sweep's parent run (RUNNING again)
  and writes its id and run to the new sweep.json; distexp.sweeps.planning decides which jobs run.
- ``on_job_end`` (wherever the job ran): writes ``<sweep dir>/sweep_jobs/<num>.json`` (status,
  returned value, error) through distexp.sweeps.records, which owns the records and what they
  make of the sweep's outcome and exit code.
- ``on_multirun_end`` (the sweep process): ends the parent FINISHED, or FAILED if any job failed,
  with the job counts (params ``job_count``; metrics ``sweep/jobs``, ``sweep/failed_jobs``) and,
  for Optuna, the best trial.

A failed job does not stop the sweep: in a multirun distexp.job.lifecycle raises instead of exiting, Hydra
records the job as failed and the launcher runs the remaining jobs. Hydra's BasicSweeper then
re-raises the first failure after its batch (skipping ``on_multirun_end``), so ``distexp.__main__``
calls `finish` itself: the parent is always ended, and the command exits 1 if any job failed
(130 if interrupted; Ctrl-C stops the whole sweep). This module-level `_OPEN` is the one piece of
state Hydra's API could not carry: callbacks cannot set the exit code.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from distexp import errors
from distexp.config import mode
from distexp import stops
from distexp.sweeps import parent
from distexp.sweeps.records import (JOBS_DIR, SWEEP_FILE, outcome, records,
                                    swept_keys, write_record)
from distexp.tracking import tags as tag


_OPEN: Optional["_Sweep"] = None  # the sweep this process opened and has not ended yet
_LAST_CODE = 0  # the exit code of the last sweep this process ended
_ENDED = 0  # sweeps this process ended (on_multirun_end, or distexp.__main__ after a failure)


class _Sweep:
    def __init__(self, sweep_dir: Path, sweep_id: str, run=None,
                 resumed_status: Optional[str] = None):
        self.sweep_dir, self.sweep_id, self.run = sweep_dir, sweep_id, run
        self.exit_code: Optional[int] = None
        self.resumed_status = resumed_status  # the reopened parent's status before this resume
        self.preloaded = False  # what its end needs was imported early (using_the_wait)


class SweepCallback(Callback):
    """Hydra callback: see the module docstring."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Open the sweep's parent run (or reopen it: sweep.resume) and write sweep.json."""
        global _OPEN
        _refuse_before_any_job(config)
        sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        sweep_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        info: Dict[str, Any] = {"sweep_id": sweep_id, "sweep_dir": str(sweep_dir),
                                "swept": swept_keys(config)}
        run, resumed_status = None, None
        resume = OmegaConf.select(config, "sweep.resume")
        if resume:  # the same sweep id and parent run: reopened, not a second parent
            sweep_id, run, resumed_status = parent.reopen_parent(config, str(resume), sweep_dir, info)
        elif config.tracking.enabled:
            run = parent.open_parent(config, sweep_id, sweep_dir, info)
        (sweep_dir / SWEEP_FILE).write_text(json.dumps(info, indent=1))
        _OPEN = _Sweep(sweep_dir, sweep_id, run, resumed_status)
        atexit.register(_at_exit)
        # SIGTERM (scancel of a sweep running in a batch job, kill) and SIGHUP end the sweep as
        # Ctrl-C does, parent run KILLED, instead of killing the process with the parent RUNNING
        stops.install()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra has just written the job's .hydra/{config,hydra,overrides}.yaml with the command
        line as typed: rewrite them without credentials (single jobs and sweep jobs alike)."""
        from distexp.tracking.redaction import redact_file

        subdir = OmegaConf.select(config, "hydra.output_subdir")
        out = OmegaConf.select(config, "hydra.runtime.output_dir")
        if subdir is not None and out:
            for name in ("config.yaml", "hydra.yaml", "overrides.yaml"):
                redact_file(Path(str(out)) / str(subdir) / name)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.types import RunMode

        if config.hydra.mode != RunMode.MULTIRUN:
            return
        sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
        if not (sweep_dir / SWEEP_FILE).exists():
            return  # not a distexp sweep (e.g. a single run)
        if not _first_task(config):
            return  # one record per job: its first task (the chief) writes it, the others do not
        from distexp.tracking.redaction import redact_text

        value = job_return._return_value  # .return_value would re-raise a failure here
        failed = job_return.status.name != "COMPLETED"
        record = {"num": int(config.hydra.job.num),
                  "overrides": [redact_text(o) for o in config.hydra.overrides.task],
                  "status": "FAILED" if failed else "COMPLETED",
                  "value": None if failed else _number(value),
                  "error": redact_text(errors.first_line(value, 500)) if failed else None,
                  "job_dir": str(config.hydra.runtime.output_dir)}
        write_record(sweep_dir, record)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        finish()


def _first_task(config: DictConfig) -> bool:
    """Whether this process is the task of its job that writes the job's record (the cluster
    kind's answer: under Slurm task 0; a job whose cluster is unknown failed before any task
    started: its one process writes the record)."""
    from distexp.cluster import kinds
    from distexp.errors import UserError

    try:
        return kinds.of(config).first_task(os.environ)
    except UserError:
        return True


def _refuse_before_any_job(config: DictConfig) -> None:
    """Exit 2 with one line if the sweep cannot run (sweeper options, resume, tracking store)."""
    from distexp.errors import UserError

    try:  # Hydra turns a callback's exception into a warning: refuse here, in one line
        _check_sweeper(config)
        if OmegaConf.select(config, "sweep.resume"):
            from distexp.sweeps import planning as sweeper

            sweeper.find_parent(config, str(config.sweep.resume))
        if config.tracking.enabled:  # milliseconds: a store that is plainly not there
            from distexp import tracking

            tracking.probe(config.tracking.uri)
    except UserError as ex:  # before any job: the sweep stops once, not once per job
        print(f"distexp: error: {ex}", file=sys.stderr, flush=True)
        raise SystemExit(errors.BAD_INPUT) from None


def _check_sweeper(config: DictConfig) -> None:
    """repeats, sweep.resume and sweep.controls are distexp's sweeper's (hydra/sweeper=basic, the default)."""
    target = str(OmegaConf.select(config, "hydra.sweeper._target_") or "")
    if target.endswith(".DistexpSweeper"):
        return
    from distexp.errors import UserError

    name = target.rsplit(".", 1)[-1] or "?"
    repeats = OmegaConf.select(config, "repeats") or 1
    if str(repeats).strip().lower() == "auto":
        raise UserError(f"repeats: received auto with the {name}; rounds until every comparison "
                        "is settled are distexp's sweeper's (hydra/sweeper=distexp, the default; "
                        "not with hparams_search): drop repeats=auto")
    if repeats > 1:
        raise UserError(f"repeats: received {config.repeats} with the {name}; repeats are run by "
                        "distexp's sweeper (hydra/sweeper=distexp, the default): drop repeats")
    if OmegaConf.select(config, "sweep.resume"):
        raise UserError(f"sweep.resume: received {config.sweep.resume!r} with the {name}; only "
                        "distexp's sweeper (hydra/sweeper=distexp, the default) resumes a sweep")
    if OmegaConf.select(config, "sweep.controls"):
        raise UserError(f"sweep.controls: received true with the {name}; control jobs are added "
                        "by distexp's sweeper (hydra/sweeper=distexp, the default): drop "
                        "sweep.controls")


def _number(v) -> Optional[float]:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def active() -> bool:
    return _OPEN is not None


def open_run():
    """The open sweep's parent run (a JobRun), or None (no sweep, or tracking off)."""
    return _OPEN.run if _OPEN is not None else None


@contextlib.contextmanager
def using_the_wait():
    """Around the first job's wait for the warm trainer's import (seconds in which this process
    has nothing to do): an open sweep imports what its end needs (summary.preload) in a thread,
    which has finished when the block does, so it never runs beside a training process."""
    preloading = None
    if (_OPEN is not None and _OPEN.run is not None and _OPEN.run.offline is None
            and not _OPEN.preloaded):  # an offline sweep makes no summary
        from distexp.sweeps import summary

        _OPEN.preloaded = True
        preloading = threading.Thread(target=summary.preload, name="distexp-preload", daemon=True)
        preloading.start()
    try:
        yield
    finally:
        if preloading is not None:
            preloading.join()


def ended() -> int:
    """How many sweeps this process ended (their parent runs closed, their lines printed)."""
    return _ENDED


def tracking_uri() -> Optional[str]:
    """The open sweep's tracking URI, credentials included (sweep.json keeps it redacted)."""
    return getattr(getattr(_OPEN, "run", None), "uri", None)


def finish(error: Optional[BaseException] = None, interrupted: bool = False) -> int:
    """End the open sweep's parent run (idempotent) and return the command's exit code:
    0 every job finished, 1 a job failed (or the sweep itself failed), 130 interrupted."""
    global _OPEN, _LAST_CODE, _ENDED
    sweep = _OPEN
    if sweep is None:
        return _LAST_CODE
    with stops.closing():  # a stop signal now is recorded, not raised: the parent run is closed
        code = _finish(sweep, error, interrupted or stops.requested() is not None)
    if stops.requested() is not None:
        _LAST_CODE = sweep.exit_code = code = errors.INTERRUPTED
    return code


def _finish(sweep: "_Sweep", error: Optional[BaseException], interrupted: bool) -> int:
    global _OPEN, _LAST_CODE, _ENDED
    _OPEN, _ENDED = None, _ENDED + 1
    jobs = records(sweep.sweep_dir)
    failed = [j for j in jobs if j["status"] != "COMPLETED"]
    status, code = outcome(jobs, error=error, interrupted=interrupted)
    if sweep.resumed_status and not jobs:  # the resume stopped before any job: as it was
        status = sweep.resumed_status
    best = _best_trial(sweep.sweep_dir, jobs)
    _print_outcome(sweep, jobs, failed, status, best)
    line = None
    if sweep.run is not None and sweep.resumed_status and not jobs:
        sweep.run.end(status)
    elif sweep.run is not None:
        try:
            line = _log_outcome(sweep, jobs, failed, best, error, interrupted)
        finally:
            sweep.run.end(status)
    if sweep.run is not None and not interrupted:
        from distexp.tracking import view

        if line:
            print(line, flush=True)
        print(f"Browse it: {view.command(sweep.run.uri)}", flush=True)
    _LAST_CODE = sweep.exit_code = code
    return code


def _print_outcome(sweep: _Sweep, jobs: List[dict], failed: List[dict], status: str,
                   best: Optional[dict]) -> None:
    """Print the sweep's outcome: the failed jobs' count and first error, or done; the best trial."""
    if failed:
        first = failed[0]
        print(f"distexp: error: sweep {sweep.sweep_id}: {len(failed)} of {len(jobs)} jobs failed "
              f"(the others ran to the end); first: job {first['num']} "
              f"[{' '.join(first['overrides'])}]: {first['error']}", file=sys.stderr, flush=True)
    elif status == "FINISHED":
        print(f"Sweep {sweep.sweep_id}: {len(jobs)} jobs finished. Report: python -m "
              f"distexp.report --sweep-id {sweep.sweep_id}", flush=True)
    if best:
        print(f"Best trial: job {best['num']} [{' '.join(best['overrides'])}] "
              f"objective {best['value']:.6g}", flush=True)


def _log_outcome(sweep: _Sweep, jobs: List[dict], failed: List[dict], best: Optional[dict],
                 error: Optional[BaseException], interrupted: bool) -> Optional[str]:
    """Log the job counts, best trial, error and sweep files to the parent run (not ended
    here); the summary line to print, if any."""
    run = sweep.run
    try:
        run.log_params({"job_count": len(jobs)})
    except Exception:  # noqa: BLE001  (a resumed sweep that grew: params are immutable)
        run.set_tag(tag.JOB_COUNT, str(len(jobs)))
    run.log_metrics(
        {"sweep/jobs": len(jobs), "sweep/failed_jobs": len(failed),
         **({"sweep/best_value": best["value"]} if best else {})}, step=0)
    if best:
        run.set_tag(tag.BEST_JOB, str(best["num"]))
        run.set_tag(tag.BEST_OVERRIDES, " ".join(best["overrides"]))
    if error is not None and not failed:
        from distexp.tracking.redaction import redact_text

        run.set_tag(tag.ERROR, redact_text(errors.first_line(error, 500)))
    from distexp.tracking.redaction import redact_file

    files = [sweep.sweep_dir / SWEEP_FILE, sweep.sweep_dir / "multirun.yaml",
             sweep.sweep_dir / "optimization_results.yaml"]
    for f in files:  # Optuna's sweeper writes its multirun.yaml as typed
        redact_file(f)
    run.log_artifacts(files)
    run.log_artifacts(sorted((sweep.sweep_dir / JOBS_DIR).glob("*.json")),
                      artifact_path=JOBS_DIR)
    if not interrupted and len(failed) < len(jobs) and run.offline is None:
        from distexp.sweeps.summary import summarise

        return summarise(run, sweep.sweep_id, run.uri, _experiment(sweep.sweep_dir))
    return None


def _experiment(sweep_dir: Path) -> str:
    try:
        return json.loads((sweep_dir / SWEEP_FILE).read_text())["experiment"]
    except (OSError, ValueError, KeyError):
        return "distexp"


def _best_trial(sweep_dir: Path, jobs: List[dict]) -> Optional[dict]:
    """Optuna's best trial (its optimization_results.yaml), matched to the job that ran it."""
    path = sweep_dir / "optimization_results.yaml"
    if not path.exists():
        return None
    res = OmegaConf.to_container(OmegaConf.load(path))
    if "best_value" not in res:
        return None
    best = {f"{k}={v}" for k, v in (res.get("best_params") or {}).items()}
    for j in jobs:
        if j["status"] == "COMPLETED" and best <= set(j["overrides"]) and \
                j["value"] == res["best_value"]:
            return j
    return {"num": "?", "overrides": sorted(best), "value": float(res["best_value"])}


def _at_exit() -> None:  # the process ends with the parent still open: never leave it RUNNING
    if _OPEN is not None:
        finish(error=RuntimeError("the sweep process exited before the sweep ended"))


# distexp.job and distexp.__main__ ask it here (distexp.config.mode is its home)
in_multirun = mode.in_multirun
