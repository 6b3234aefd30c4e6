"""A Hydra multirun as one thing in MLflow: a parent run for the sweep, a child run per job.

Driven by Hydra's Callback API (``hydra.callbacks.sweep`` in conf/config.yaml), so it works with
any sweeper (basic, Optuna) and launcher (basic, joblib, submitit):

- ``on_multirun_start`` (the sweep process; with distexp's sweeper, that sweeper once every
  job has passed its checks: `open_sweep`): opens the parent run (tags ``distexp.sweep_id``,
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
- ``on_multirun_end`` (the sweep process): ends the sweep (distexp.sweeps.ending): the parent
  FINISHED, or FAILED if any job failed, with the job counts (params ``job_count``; metrics
  ``sweep/jobs``, ``sweep/failed_jobs``) and, for Optuna, the best trial.

A failed job does not stop the sweep: in a multirun distexp.job.lifecycle raises instead of exiting, Hydra
records the job as failed and the launcher runs the remaining jobs. Hydra's BasicSweeper then
re-raises the first failure after its batch (skipping ``on_multirun_end``), so ``distexp.__main__``
ends the sweep itself (the command's distexp.sweeps.ending.Sweeps, the one piece of state Hydra's
API could not carry: callbacks cannot set the exit code): the parent is always ended, and the command exits 1
if any job failed (130 if interrupted; Ctrl-C stops the whole sweep).
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from distexp import errors, stops
from distexp.config import schema
from distexp.console_lines import ERROR
from distexp.sweeps import ending, interrupted, parent
from distexp.sweeps.records import SWEEP_FILE, swept_keys, write_record


class SweepCallback(Callback):
    """Hydra callback: see the module docstring."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse a sweep that cannot run; open it (`open_sweep`), unless the sweeper opens it
        itself (its class says `opens_sweep = True`: distexp's, once every job has passed its
        checks, so that a refused sweep leaves no parent run and no sweep folder)."""
        _refuse_before_any_job(config)
        # the sweep dir's ${now:...} resolved once, here: Hydra copies this resolver cache into
        # each job's config as it is composed, so that every job lands in this one folder
        str(config.hydra.sweep.dir)
        if not sweeper_opens(config):
            open_sweep(config)

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
        ending.current().finish()


def open_sweep(config: DictConfig) -> ending.OpenSweep:
    """Open the sweep's parent run (or reopen it: sweep.resume) and write sweep.json; the command's
    sweeps (distexp.sweeps.ending.current) hold it until it ends."""
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
        interrupted.announce(config)  # the same sweep was interrupted: its id, in one line
        run = parent.open_parent(config, sweep_id, sweep_dir, info)
    (sweep_dir / SWEEP_FILE).write_text(json.dumps(info, indent=1))
    from distexp.sweeps import launchers

    teardown = launchers.exits_through_teardown(str(OmegaConf.select(config, "hydra.launcher._target_") or ""))
    opened = ending.OpenSweep(sweep_dir, sweep_id, run, resumed_status, teardown=teardown)
    ending.current().opened(opened)
    # SIGTERM (scancel of a sweep running in a batch job, kill) and SIGHUP end the sweep as
    # Ctrl-C does, parent run KILLED, instead of killing the process with the parent RUNNING
    stops.install()
    return opened


def sweeper_opens(config: DictConfig) -> bool:
    """Whether the sweep's sweeper opens the sweep itself (its class: `opens_sweep = True`,
    distexp's sweeper) and runs distexp's keys (repeats, sweep.resume, sweep.controls)."""
    from hydra.utils import get_class

    target = str(OmegaConf.select(config, "hydra.sweeper._target_") or "")
    try:
        cls = get_class(target) if target else None
    except (ImportError, ValueError, AttributeError):
        return False
    return bool(getattr(cls, "opens_sweep", False))


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
            from distexp.sweeps import planning

            planning.find_parent(config, str(config.sweep.resume))
        if not sweeper_opens(config):  # distexp's: after every job's checks (open_sweep)
            probe_store(config)
    except UserError as ex:  # before any job: the sweep stops once, not once per job
        print(f"{ERROR}{ex}", file=sys.stderr, flush=True)
        raise SystemExit(errors.BAD_INPUT) from None


def probe_store(config: DictConfig) -> None:
    """Milliseconds: a store that is plainly not there is one line (UserError). It creates a
    sqlite store's folder, so distexp's sweeper calls it once every job has passed its checks:
    a sweep refused on a job's value leaves nothing (no `outputs/`)."""
    if config.tracking.enabled:
        from distexp import tracking

        tracking.probe(config.tracking.uri)


def _check_sweeper(config: DictConfig) -> None:
    """repeats, sweep.resume and sweep.controls are distexp's sweeper's (hydra/sweeper=basic, the default)."""
    if sweeper_opens(config):
        return
    target = str(OmegaConf.select(config, "hydra.sweeper._target_") or "")
    from distexp.errors import UserError

    name = target.rsplit(".", 1)[-1] or "?"
    repeats = OmegaConf.select(config, "repeats") or 1
    if schema.is_auto(repeats):
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


