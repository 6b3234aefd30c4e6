"""The end of a sweep, in the sweep process (no TensorFlow): its parent run ended FINISHED, FAILED
or KILLED with the job counts, Optuna's best trial and the sweep's files, the outcome printed,
the summary made (distexp.sweeps.publish), and the command's exit code.

Hydra's callbacks cannot set the exit code, and its BasicSweeper re-raises a failed job's error
after its batch (skipping ``on_multirun_end``): so a command's sweeps are one object, a `Sweeps`,
that ``distexp.__main__`` makes for each command and keeps for its exit path (`command`), and that
the callback opens a sweep in (distexp.sweeps.callback): `finish` ends the open sweep whichever way
the command ends (idempotent), `ended` says how many this command ended. Hydra instantiates the
callback from its config and hands it nothing of the command's, so the callback, a job's seat and
the Slurm launcher find the command's `Sweeps` through `current()` (a context variable the command
sets for as long as it runs, not a process global); distexp's sweeper hands its round loop the
`OpenSweep` it opened (distexp.sweeps.sweep).
"""
from __future__ import annotations

import atexit
import contextlib
import contextvars
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from omegaconf import OmegaConf

from distexp import errors, stops
from distexp.console_lines import ERROR
from distexp.figures.outcomes import closing_lines
from distexp.sweeps.records import AUTO_FILE, JOBS_DIR, SWEEP_FILE, outcome, records
from distexp.tracking import tags as tag


@dataclass
class OpenSweep:
    """A sweep this process opened (on_multirun_start) and has not ended yet."""
    sweep_dir: Path
    sweep_id: str
    run: Optional[object] = None            # its parent run (a JobRun); None: tracking off
    resumed_status: Optional[str] = None    # the reopened parent's status before this resume
    exit_code: Optional[int] = None
    preloaded: bool = False                 # what its end needs was imported early (using_the_wait)
    teardown: bool = False                  # its launcher exits through the teardown (launchers)


class Sweeps:
    """This process's sweeps: the open one, how many it ended, the last one's exit code."""

    def __init__(self):
        self.open: Optional[OpenSweep] = None
        self.ended = 0
        self.last_code = 0
        self.torn_down = 0      # sweeps opened whose launcher ends the command through the teardown
        self._at_exit = False

    def opened(self, sweep: OpenSweep) -> None:
        self.open = sweep
        self.torn_down += sweep.teardown
        if not self._at_exit:  # the process ends with the parent still open: never leave it RUNNING
            self._at_exit = True
            atexit.register(self._exiting)

    def active(self) -> bool:
        return self.open is not None

    def open_run(self):
        """The open sweep's parent run (a JobRun), or None (no sweep, or tracking off)."""
        return self.open.run if self.open is not None else None

    def tracking_uri(self) -> Optional[str]:
        """The open sweep's tracking URI, credentials included (sweep.json keeps it redacted)."""
        return getattr(self.open_run(), "uri", None)

    @contextlib.contextmanager
    def using_the_wait(self):
        """Around the first job's wait for the warm trainer's import (seconds in which this
        process has nothing to do): an open sweep imports what its end needs (publish.preload)
        in a thread, which has finished when the block does, so it never runs beside a training
        process."""
        sweep, preloading = self.open, None
        if (sweep is not None and sweep.run is not None and sweep.run.offline is None
                and not sweep.preloaded):  # an offline sweep makes no summary
            from distexp.sweeps import publish

            sweep.preloaded = True
            preloading = threading.Thread(target=publish.preload, name="distexp-preload",
                                          daemon=True)
            preloading.start()
        try:
            yield
        finally:
            if preloading is not None:
                preloading.join()

    def finish(self, error: Optional[BaseException] = None, interrupted: bool = False) -> int:
        """End the open sweep's parent run (idempotent) and return the command's exit code:
        0 every job finished, 1 a job failed (or the sweep itself failed), 130 interrupted."""
        sweep = self.open
        if sweep is None:
            return self.last_code
        self.open, self.ended = None, self.ended + 1
        with stops.closing():  # a stop signal now is recorded, not raised: the parent run is closed
            code = _finish(sweep, error, interrupted or stops.requested() is not None)
        if stops.requested() is not None:
            code = errors.INTERRUPTED
        self.last_code = sweep.exit_code = code
        return code

    def _exiting(self) -> None:
        if self.open is not None:
            self.finish(error=RuntimeError("the sweep process exited before the sweep ended"))


_COMMAND: contextvars.ContextVar[Optional[Sweeps]] = contextvars.ContextVar("distexp_sweeps",
                                                                          default=None)


def current() -> Sweeps:
    """The running command's sweeps (`command`); outside one (Hydra called another way), one for
    this context, made on first use."""
    found = _COMMAND.get()
    if found is None:
        found = Sweeps()
        _COMMAND.set(found)
    return found


@contextlib.contextmanager
def command(sweeps: Sweeps):
    """`current()` is `sweeps` inside the block (distexp.__main__: one per command)."""
    token = _COMMAND.set(sweeps)
    try:
        yield sweeps
    finally:
        _COMMAND.reset(token)


def _finish(sweep: OpenSweep, error: Optional[BaseException], interrupted: bool) -> int:
    jobs = records(sweep.sweep_dir)
    failed = [j for j in jobs if j["status"] != "COMPLETED"]
    status, code = outcome(jobs, error=error, interrupted=interrupted)
    if sweep.resumed_status and not jobs:  # the resume stopped before any job: as it was
        status = sweep.resumed_status
    best = _best_trial(sweep.sweep_dir, jobs)
    decision = _decision(sweep.sweep_dir) if jobs and not interrupted else None
    for text in closing_lines(decision) if decision is not None else ():
        print(text, flush=True)
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

        if line and decision is None:  # with a decision: its closing lines, printed above
            print(line, flush=True)
        print(f"Browse it: {view.command(sweep.run.uri)}", flush=True)
    return code


def _decision(sweep_dir: Path):
    """The sweep's decision (auto.json: distexp.figures.outcomes), or None."""
    from distexp.figures.outcomes import from_json

    try:
        return from_json((sweep_dir / AUTO_FILE).read_text())
    except OSError:
        return None


def _print_outcome(sweep: OpenSweep, jobs: List[dict], failed: List[dict], status: str,
                   best: Optional[dict]) -> None:
    """Print the sweep's outcome: the failed jobs' count and first error, or done; the best trial."""
    if failed:
        first = failed[0]
        print(f"{ERROR}sweep {sweep.sweep_id}: {len(failed)} of {len(jobs)} jobs failed "
              f"(the others ran to the end); first: job {first['num']} "
              f"[{' '.join(first['overrides'])}]: {first['error']}", file=sys.stderr, flush=True)
    elif status == "FINISHED":
        print(f"Sweep {sweep.sweep_id}: {len(jobs)} jobs finished. Report: python -m "
              f"distexp.report --sweep-id {sweep.sweep_id}", flush=True)
    if best:
        print(f"Best trial: job {best['num']} [{' '.join(best['overrides'])}] "
              f"objective {best['value']:.6g}", flush=True)


def _log_outcome(sweep: OpenSweep, jobs: List[dict], failed: List[dict], best: Optional[dict],
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
        from distexp.sweeps.publish import summarise

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
