"""`python -m distexp`: compose the config, validate it, launch the training process(es).

This process never imports TensorFlow (so `--help`, `--cfg job` and a bad input answer in well
under a second); training happens in child processes (see distexp.job.launch), forked from the
warm trainer (distexp.job.warm_client), which this module starts first of all for a command that will
train and stops on every way out.
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # first: TensorFlow's import (seconds) runs while Hydra composes
    from distexp import console_lines, errors, extras

    if (_refused := extras.refused(sys.argv[1:])) is not None:  # no trainer for a refused command
        print(console_lines.error(_refused), file=sys.stderr)
        sys.exit(errors.BAD_INPUT)
    from distexp.job import startup

    startup.begin()  # collect seldom until the start-up is over (distexp.job.startup)
    from distexp import library_logs

    library_logs.quiet_env()  # before MLflow's import, here and in the warm trainer
    from distexp import stops

    stops.install()  # SIGINT, SIGTERM, SIGHUP: one orderly stop, however many come
    from distexp.job import warm_client

    warm_client.start_early(sys.argv[1:])

import hydra
from omegaconf import DictConfig

from distexp import console_lines, errors
from distexp.config import mode, schema
from distexp.sweeps import ending

schema.register()  # the schema Hydra composes onto, and the distexp.* resolvers


class Jobs:
    """The single jobs of one command: those whose run was opened (`executing`), those that
    ended normally here. What the task function is bound to (`task`): two numbers, so that a
    launcher that pickles the task function to its workers (joblib, Ray) carries nothing else."""

    def __init__(self):
        self.single, self.executed = 0, 0

    def executing(self) -> None:
        self.executed += 1


class Ran:
    """What one command ran, for its exit path (`_main`): its jobs (`Jobs`, counted by the task
    function) and its sweeps (distexp.sweeps.ending.Sweeps: the open one, how many ended). `cli`
    makes one per command and hands it down; nothing of it is kept between commands."""

    def __init__(self, sweeps: ending.Sweeps):
        self.sweeps, self.jobs = sweeps, Jobs()

    def anything(self) -> bool:
        """A job or a sweep ran to its end (runs closed, lines printed)."""
        return self.jobs.single > 0 or self.sweeps.ended > 0

    def through_teardown(self) -> bool:
        """A sweep's launcher declared that the command ends through the interpreter's teardown
        (distexp.sweeps.launchers: joblib's workers, a Ray the sweep started)."""
        return self.sweeps.torn_down > 0


def task(jobs: Jobs):
    """Hydra's main for one command, its task function counting the command's single jobs in
    `jobs` (handed, not a module global: an in-process caller's commands keep nothing)."""

    @hydra.main(version_base="1.3", config_path="conf", config_name="config")
    def main(cfg: DictConfig) -> float | None:
        return _job(cfg, jobs)

    return main


def _job(cfg: DictConfig, jobs: Jobs) -> float | None:
    from distexp.job.lifecycle import JobError, exit_code, run_job

    try:
        out = run_job(cfg, executing=jobs.executing)
        code = exit_code(out)  # its line is printed (lifecycle.conclude)
        if mode.in_multirun() and out.said is not None:  # a failed job (1 or 2) said why
            raise JobError(out.said, code)  # Hydra records the job as failed; the sweep goes on
        if code != errors.OK:
            sys.exit(code)
        if not mode.in_multirun():
            jobs.single += 1
        return out.value
    except errors.UserError as ex:  # one line, not Hydra's "Error executing job" report
        print(console_lines.error(str(ex)), file=sys.stderr, flush=True)
        if mode.in_multirun():  # the other jobs of the sweep still run
            raise JobError(str(ex), errors.BAD_INPUT) from None
        _remove_refused_run_dir()
        sys.exit(errors.BAD_INPUT)


def _remove_refused_run_dir() -> None:
    """A single run refused by a check leaves nothing behind: Hydra made its directory and .hydra/
    before the checks ran. Removed with the empty directories above it, up to the working
    directory; a directory holding anything else is left as it is."""
    import shutil
    from pathlib import Path

    from hydra.core.hydra_config import HydraConfig

    out, top = Path(HydraConfig.get().runtime.output_dir).resolve(), Path.cwd().resolve()
    if top not in out.parents or any(p.name != ".hydra" for p in out.iterdir()):
        return
    shutil.rmtree(out)
    for parent in out.parents:
        if parent == top:
            break
        try:
            parent.rmdir()  # only when empty
        except OSError:
            break


def cli() -> None:
    from distexp import extras
    from distexp.tracking.redaction import RedactingStream

    if (refused := extras.refused(sys.argv[1:])) is not None:
        print(console_lines.error(refused), file=sys.stderr)
        sys.exit(errors.BAD_INPUT)

    # no console line shows a URI's credentials, whoever prints it (distexp.tracking.store)
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    from distexp import library_logs, stops

    library_logs.absl_follows_stderr()
    stops.install()  # also when called in-process (not `python -m distexp`)
    library_logs.quiet_env()
    user_wants_trace = "HYDRA_FULL_ERROR" in os.environ
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let errors reach us, to print them as one line
    ran = Ran(ending.Sweeps())  # this command's: the callback finds it as ending.current()
    try:
        with ending.command(ran.sweeps):
            _main(user_wants_trace, ran)
    finally:
        from distexp.job import warm_client

        warm_client.stop()  # nothing more to fork; a bad input stops it at once
        stops.done()


def _sweep_stopped(sweep) -> None:
    """A stopped sweep's one line (not an error: the user asked for it): what was kept and the
    command that continues it (distexp.sweeps.interrupted)."""
    from distexp import stops
    from distexp.sweeps import interrupted

    print(f"distexp: {interrupted.stopped_line(sweep.sweep_id, sweep.sweep_dir, sys.argv[1:], stops.name())}",
          file=sys.stderr, flush=True)


def _main(user_wants_trace: bool, ran: Ran) -> None:
    sweeps = ran.sweeps
    try:
        task(ran.jobs)()
    except SystemExit as ex:  # a single job's exit code, or Ctrl-C inside a sweep's job
        if sweeps.active():
            sweep = sweeps.open
            sweeps.finish(interrupted=ex.code == errors.INTERRUPTED, error=ex if ex.code else None)
            if ex.code == errors.INTERRUPTED:
                _sweep_stopped(sweep)
        raise
    except KeyboardInterrupt:
        from distexp import stops

        if sweeps.active():
            sweep = sweeps.open
            sweeps.finish(interrupted=True)
            _sweep_stopped(sweep)
        else:  # before the job's run was opened, or after it was closed: nothing left to close
            when = ("after the job ended (its run was closed: kept as it ended)"
                    if ran.jobs.executed else
                    "before training started (no run was opened, nothing to keep; run the same "
                    "command again)")
            print(f"distexp: interrupted by {stops.name()} {when}", file=sys.stderr, flush=True)
        sys.exit(errors.INTERRUPTED)
    except Exception as ex:
        from distexp.errors import one_line
        from distexp.job.lifecycle import JobError

        if sweeps.active() or isinstance(ex, JobError):
            # Hydra's sweeper re-raised a failed job after running the others (distexp.sweeps)
            code = sweeps.finish(error=ex)
            if isinstance(ex, JobError) and not user_wants_trace:
                sys.exit(code or errors.FAILED)
        msg = one_line(ex)
        if msg is None or user_wants_trace:
            raise
        print(console_lines.error(msg), file=sys.stderr)
        sys.exit(errors.BAD_INPUT)
    code = sweeps.finish()  # Hydra's on_multirun_end has normally ended it already
    from distexp.job import warm_client

    # the command's end: the warm trainer gets SIGKILL; its teardown is not waited for (0.3 s)
    warm_client.stop(wait=False)
    if not ran.anything() or ran.through_teardown():
        # --cfg, --help, --info: nothing ran; the launcher's workers (joblib) or Ray are wound
        # down at exit
        sys.exit(code)
    # A job or basic sweep that is over (runs closed, lines printed): exit without the
    # interpreter's teardown of MLflow's, Hydra's and matplotlib's state (~2 s after a sweep's
    # last line).
    errors.exit_now(code)


if __name__ == "__main__":
    cli()
