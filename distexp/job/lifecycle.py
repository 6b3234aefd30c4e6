"""One Hydra job, from the job process (no TensorFlow here): prepare -> execute -> conclude.

Separation of concerns:
- distexp.config.checks   the checks that run before anything starts (on distexp.config.schema)
- distexp.job.lifecycle   (this) one job's life: check, open the MLflow run, launch, close the run;
                   its `Outcome` goes back to distexp.__main__, which exits with ``exit_code``
- distexp.job.launch   the training processes, their logs, their clean-up
- distexp.cluster.kinds  which processes a strategy/cluster needs and each one's TF_CONFIG
- distexp.train.trainer  inside a training process: devices, strategy, data, model, loop
- distexp.tracking MLflow: the store, the job's run, the chief's sink, the offline file
- distexp.sweeps    a multirun as a parent run with a child run per job (Hydra callback)
- distexp.errors   user errors as one line; the file a trainer leaves its user error in
"""
from __future__ import annotations

import functools
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

from omegaconf import DictConfig, OmegaConf

from distexp import console_lines, errors, progress_feed, stops, tracking
from distexp.config import checks, mode, resolved, schema
from distexp.job import console, launch, run_setup, startup, summary, warm_client
from distexp.sweeps import seat  # the job's one door into its sweep
from distexp.tracking.node_metrics import NodeMetrics


class JobError(Exception):
    """A job of a multirun failed. Raised (not sys.exit) by distexp.__main__ so that Hydra records
    the job as failed and runs the rest of the sweep; the command exits non-zero at the end
    (distexp.sweeps)."""

    def __init__(self, message: str, exit_code: int = errors.FAILED):
        super().__init__(message, exit_code)
        self.message, self.exit_code = message, exit_code

    def __str__(self) -> str:
        return self.message


@dataclass
class Job:
    """What `prepare` decided: everything `execute` needs to run the job."""
    cfg: DictConfig
    job_dir: Path
    plan: object                      # distexp.cluster.processes.Plan
    env: dict                         # the trainers' environment (on top of the job's own)
    config_path: Path
    overrides_path: Path
    forwarder: Optional[tracking.Forwarder]  # the job's run, once `execute` has built it
    multirun: bool
    t_start: float
    progress: str = "lines"           # the console's form (distexp.job.console.resolve)
    sweep_position: Optional[object] = None  # distexp.job.console.SweepPosition in a sweep
    # builds `forwarder` (distexp.job.run_setup.forwarder): None without a run (tracking off, or
    # a task of an external cluster that is not the chief)
    new_forwarder: Optional[Callable[[], tracking.Forwarder]] = None


@dataclass
class Outcome:
    """How a job ended, as `execute` saw it; `exit_code` maps it to the command's exit code."""
    status: str = "FAILED"            # the run's final status: FINISHED, FAILED or KILLED
    error: Optional[str] = None       # why it did not finish: one line, without "distexp: error: "
    user_error: bool = False          # `error` is the chief trainer's own user error (bad input)
    lost: Optional[dict] = None       # MLflow stopped answering (tracking.offline_summary)
    result: dict = field(default_factory=dict)   # the chief's result.json
    logs: List[Path] = field(default_factory=list)
    run_id: Optional[str] = None      # the job's MLflow run (where every figure is)
    stopped: bool = False             # a stop signal came once the run's status was written
    said: Optional[str] = None        # `conclude`'s error line for a failed job (exit 1 or 2; in a
    #                                   sweep: JobError's), without "distexp: error: "
    value: Optional[float] = None     # the objective's figure, on success (what Hydra is handed)


INTERRUPTED = "interrupted: every training process was stopped"


def run_job(cfg: DictConfig, executing: Callable[[], None] = lambda: None) -> Outcome:
    """Check `cfg`, train it in fresh processes, return its `Outcome`: `exit_code(out)` is the
    command's exit code, `out.value` the final `objective` figure (eval/accuracy by default), what
    Hydra hands to a sweeper such as Optuna. `executing` is called once the job's run is about to
    open (distexp.__main__ says when a stop came by it).

    A user error raises config.UserError (one line, exit 2). A failed or interrupted job ends its
    MLflow run FAILED / KILLED and is returned with its line printed: distexp.__main__ exits
    non-zero, or in a multirun raises JobError for a failed job, so the other jobs still run
    (Ctrl-C still stops the whole sweep).
    """
    found = checks.validate(cfg)  # the job's facts, once (the factories' modules too)
    # a sweep's parallel jobs: disjoint GPUs (CUDA_VISIBLE_DEVICES), as many as `found` needs
    with seat.gpu_lease(cfg, found) as held:
        job = prepare(cfg, found if held is None else found.leased(cfg, held))
        return conclude(job, execute(job, executing))


def exit_code(out: Outcome) -> int:
    """The job's exit code: its run's status through errors.exit_code_of, the one mapping that a
    sweep's outcome goes through too (0 success, 1 failed job, 2 bad input, 3 trained but MLflow
    stopped answering, 130 interrupted)."""
    return errors.exit_code_of("KILLED" if out.stopped else out.status,
                               user_error=out.user_error, tracking_lost=bool(out.lost))


# --- prepare: everything that can be checked or written before a training process starts -------

def prepare(cfg: DictConfig, found: resolved.JobFacts) -> Job:
    """Plan the job from its checked facts (`found`: checks.validate's, after the GPU lease),
    store the config without credentials, probe the tracking store and set up the run's
    creation. Starts nothing, reaches no cluster (`execute` acquires the plan)."""
    from hydra.core.hydra_config import HydraConfig

    from distexp.cluster import kinds
    from distexp.data import loaders

    t_start = time.time()
    os.environ.update(tracking.http_env())  # bounded MLflow retries here and in the trainers
    if os.environ.get("TF_CONFIG") == "":  # means "unset"; TF's resolvers crash on it (json.loads(""))
        del os.environ["TF_CONFIG"]
    loaders.check_available(cfg)  # TFDS data not prepared: one line, before TensorFlow
    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    plan = kinds.plan(cfg, job_dir, found.gpus, found.visible)  # UserError: a bad cluster setting
    # The checks' facts refined with the plan; the trainers read them from config.yaml's `resolved:`.
    facts = resolved.resolve(cfg, found.gpus, plan, job_dir=job_dir,
                             job_start=startup.job_start(t_start))
    # What is stored and logged carries no credentials (trainers get the real URI by env).
    stored = OmegaConf.to_container(cfg, resolve=True)
    stored["tracking"]["uri"] = tracking.redact(cfg.tracking.uri)
    stored["resolved"] = facts
    # Every task of an external cluster (srun, TF_CONFIG) runs this in the same job dir: one writer
    # per file (a trainer read a config.yaml another task was rewriting; each task's job_start is
    # its own). The chief writes config.yaml and the run's overrides.yaml, the others their config.
    config_path = job_dir / ("config.yaml" if plan.logs_to_mlflow else
                             f"config.{plan.names[0]}.yaml")
    OmegaConf.save(OmegaConf.create(stored), config_path)
    overrides = [tracking.redact_text(o) for o in hc.overrides.task]
    overrides_path = job_dir / "overrides.yaml"
    if plan.logs_to_mlflow:
        OmegaConf.save(OmegaConf.create(overrides), overrides_path)

    multirun = mode.in_multirun()
    forwarder = None
    if cfg.tracking.enabled:
        # milliseconds: a store/server that is plainly not there. Every task of an external cluster
        # probes, not only the chief: a node that cannot reach the store stops with the one line,
        # instead of its peers waiting for a chief that stopped (tests/cluster/test_slurm_nodes.py)
        tracking.probe(cfg.tracking.uri)
    if cfg.tracking.enabled and plan.logs_to_mlflow:
        forwarder = functools.partial(run_setup.forwarder, cfg, facts, plan, job_dir, overrides,
                                      multirun, hc)
    progress = console.resolve(cfg.progress)
    env = {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
           progress_feed.ENV: progress,
           # CUDA numbers GPUs as the driver, nvidia-smi and NVML do (its default puts the fastest
           # first): the ids in CUDA_VISIBLE_DEVICES and the system metrics' gpu_<i> are the same
           "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}
    position = _position(cfg, hc, facts) if multirun else None
    stops.hold("start-up")
    return Job(cfg=cfg, job_dir=job_dir, plan=plan, env=env, config_path=config_path,
               overrides_path=overrides_path, forwarder=None, new_forwarder=forwarder,
               multirun=multirun,
               t_start=t_start, progress=progress, sweep_position=position)


def _rounds(cfg: DictConfig) -> int:
    """The sweep's rounds for the console: repeats, or with repeats=auto its budget (the rounds may
    end sooner)."""
    return int(cfg.sweep.max_repeats) if schema.is_auto(cfg.repeats) else int(cfg.repeats)


def _position(cfg: DictConfig, hc, facts: dict) -> "console.SweepPosition":
    """A sweep's job: its place in the sweep and its set-up's name, for the console."""
    return console.sweep_position(Path(str(hc.sweep.dir)).absolute(), int(hc.job.num),
                                  int(cfg.repeat), _rounds(cfg), console.setup_name(
                                      cfg.strategy.name, facts["replicas"], facts["global_batch"]))


# --- execute: the training processes and the run, whatever happens to them ---------------------


def execute(job: Job, executing: Callable[[], None] = lambda: None) -> Outcome:
    """Run the training processes (the cluster again on other ports after a port clash) while the
    run is created and fed; then close the run with the outcome's status, artifacts attached.
    First the plan is acquired (cluster=ray: connected and placed; a UserError line when it
    cannot, or a stop while it waits: nothing held, what `prepare` wrote removed, as if it had
    refused the job) and released at the end, whatever happens; then `executing()` (run_job's:
    the job's run is about to open)."""
    try:
        job.plan.acquire()
    except BaseException:
        for path in [job.config_path] + ([job.overrides_path] if job.plan.logs_to_mlflow else []):
            path.unlink(missing_ok=True)
        raise
    executing()
    out = Outcome()
    node = _begin(job)
    attempts: List[list] = []
    run = None
    display = console.open_display(job.progress, job.sweep_position)
    failed_first = False  # a failure seen before any stop signal: the outcome, whatever follows
    try:
        _launch(job, attempts, display)
        out.status = "FINISHED"
    except (launch.JobInterrupted, KeyboardInterrupt):  # distexp.stops: the first stop signal
        out.status, out.error = "KILLED", INTERRUPTED
    except launch.JobFailed as ex:
        failed_first = ex.before_stop
        out.error = str(ex)
        if out.error.startswith("timeout:"):  # the limit is the whole job's, across port retries
            out.error = f"timeout: the job ran longer than {job.cfg.timeout:g} s and was stopped"
        chief = attempts[-1][0]
        user = errors.read_user_error(job.job_dir, chief.name) if chief.returncode == errors.BAD_INPUT else None
        if user:  # the trainer's own one-line user error (where its traceback is, if it has one)
            out.error, out.user_error = user + errors.traceback_note(chief.log), True
    finally:
        display.close()
        with stops.closing():  # a stop signal now is recorded, not raised: the run is closed
            job.plan.release()  # cluster=ray: its actors and placement group
            if node is not None:
                node.stop()
            out.result = _read_result(job.job_dir)  # the chief's figures: the run is not read back
            stopped = stops.requested() is not None
            run = job.forwarder.close(stopped) if job.forwarder is not None else None
            if run is not None:
                stops.hold("close")  # tests (distexp.stops.HOLD_ENV)
            if stopped_by_signal(out, failed_first):  # it came once the processes ended
                out.status, out.error = "KILLED", INTERRUPTED
            if run is not None:
                logs = list(dict.fromkeys(p.log for ps in attempts for p in ps))  # retries reuse logs
                run.close(out.status, job.job_dir, [job.config_path, job.overrides_path], logs,
                          figures=out.result or None, error=out.error)
    out.logs = [p.log for p in attempts[-1]] if attempts else []
    out.run_id = getattr(run, "run_id", None)
    if stopped_by_signal(out, failed_first):  # it came while the run was being closed
        out.error = f"interrupted while the run was being closed; it ended {out.status}"
        out.stopped = True
    out.lost = tracking.offline_summary(job.job_dir) if run is not None else None
    return out


def _begin(job: Job) -> Optional[NodeMetrics]:
    """Start what runs beside the training processes: the warm trainer, the run's creation, a
    node's system metrics (that sampler, returned). Anything raised here releases the plan."""
    try:
        cfg = job.cfg
        if cfg.warm_start:  # TensorFlow's import runs while the MLflow run is created
            warm_client.start()  # (`python -m distexp` started it already, before Hydra composed)
        if not job.plan.logs_to_mlflow:
            print(f"distexp: task {job.plan.task} of an external cluster: training without MLflow "
                  "(the chief logs the run)", flush=True)
        if job.new_forwarder is not None:
            job.forwarder = job.new_forwarder().start()
        if job.plan.samples_node and cfg.tracking.enabled and cfg.tracking.system_metrics:
            return NodeMetrics(cfg.tracking.uri, cfg.tracking.experiment, job.plan.cluster_id,
                               socket.gethostname(), cfg.tracking.system_metrics_interval,
                               gpus=job.plan.gpu_ids()).start()
        return None
    except BaseException:
        job.plan.release()
        raise


def stopped_by_signal(out: Outcome, failed_first: bool) -> bool:
    """Whether a stop signal that came decides the outcome: not when the job had failed before it
    (a lost peer or node, a process's own error: Slurm's step kill follows such a failure)."""
    return stops.requested() is not None and out.status != "KILLED" and not failed_first


def _spawner(cfg: DictConfig) -> Optional[launch.Spawn]:
    """The warm trainer's spawn (distexp.job.warm_client), or None: fresh interpreters (warm_start=false,
    or a warm trainer that could not start: said in one line)."""
    server = warm_client.start() if cfg.warm_start else None
    if server is None:
        return None
    try:
        with seat.while_waiting():
            server.wait_ready()
    except warm_client.Unavailable as ex:
        print(f"distexp: warm trainer unavailable ({ex}); the training processes start fresh",
              flush=True)
        warm_client.stop()
        return None
    return server.spawn


def _launch(job: Job, attempts: List[list], display=True) -> None:
    from distexp.cluster.processes import PORT_ATTEMPTS

    cfg, plan = job.cfg, job.plan
    spawn = plan.spawner() or _spawner(cfg)  # cluster=ray: through each task's actor
    startup.over()  # the first training process is about to start
    for attempt in range(1, PORT_ATTEMPTS + 1):
        # cluster=local: the processes' network namespace (distexp.cluster.netns), or the line why not
        procs = plan.processes(job.config_path, {**job.env, **plan.isolation()})
        if job.forwarder is not None:
            procs[0].env = {**procs[0].env, **job.forwarder.env()}  # the chief only
        if procs[0].console:
            procs[0].console = display  # the chief's lines and progress (distexp.job.console)
        attempts.append(procs)
        try:
            left = None if cfg.timeout is None else max(1.0, cfg.timeout - (time.time() - job.t_start))
            launch.run(procs, timeout=left, until=plan.until, spawn=spawn)
            return
        except launch.JobFailed:
            clash = [p.name for p in procs if p.returncode == errors.PORT_IN_USE_EXIT]
            if not (clash and plan.retry_ports and attempt < PORT_ATTEMPTS):
                raise
            print(f"distexp: {', '.join(clash)} could not listen on its port (taken by another "
                  f"process); starting the cluster again on other ports", flush=True)
            plan.new_ports()


def _read_result(job_dir: Path) -> dict:
    try:
        return json.loads((job_dir / "result.json").read_text())
    except (OSError, ValueError):
        return {}


# --- conclude: what the user reads, and the exit ---------------------------------------------

def objective(result: dict) -> tuple:
    """(name, value) of the job's objective in the chief's result.json: the trainer names it from
    the job's facts (distexp.config.resolved.objective_name); ("", None) without a result."""
    name = result.get("objective") or ""
    return name, result.get(name)


def conclude(job: Job, out: Outcome) -> Outcome:
    """Print the outcome's line(s) and return it, with the objective's value on success: never
    exits nor raises (the command's end is distexp.__main__'s: `exit_code(out)`, or JobError for
    a sweep's failed job, so that the sweep goes on)."""
    cfg = job.cfg
    code = exit_code(out)
    if job.plan.logs_to_mlflow:  # the chief's job process: a finished sweep job's checkpoints
        from distexp.job import resume

        resume.tidy(cfg, out.status, job.job_dir, job.multirun)
    if out.lost:
        name, value = objective(out.result)
        what = f"training {out.status}" + (f" ({name} {value:.4f})" if value is not None else "")
        lost = out.lost
        fault = tracking.store_fault(lost["reason"])
        failed, back = ("failed", "once the store is fixed") if fault else \
            ("stopped answering", "when the server is back")
        print(f"{console_lines.ERROR}tracking: MLflow at {tracking.redact(cfg.tracking.uri)} {failed} "
              f"during the job ({lost['reason']}); {what}; {lost['metrics']} metric values, "
              f"{lost['artifacts']} artifacts and the run's final status are kept in {lost['path']}; "
              f"{back}: {tracking.import_command(job.job_dir, cfg.tracking.uri)}",
              file=sys.stderr, flush=True)
        if code in (errors.TRACKING_LOST, errors.BAD_INPUT):  # that line says it all
            return out
    if code == 0:
        for line in summary.lines(out.result, job.sweep_position):  # as the run logged them
            print(console_lines.fit(line), flush=True)  # within 120 columns
        if not job.multirun:  # a sweep prints its own ending (distexp.sweeps.ending)
            from distexp.tracking import view

            print(f"Job directory: {job.job_dir}", flush=True)
            if job.forwarder is not None:
                run = f" (MLflow run {out.run_id}: every figure)" if out.run_id else ""
                print(f"Browse it: {view.command(cfg.tracking.uri)}{run}", flush=True)
        out.value = objective(out.result)[1]
        return out
    line = out.error if code == errors.BAD_INPUT else f"{out.error} (logs: {', '.join(map(str, out.logs))})"
    if code == errors.INTERRUPTED:  # not an error: the user (or a time limit) asked for it
        if not job.multirun:  # the checkpoint kept, the command to go on; a sweep says its own
            from distexp.job import resume

            print(f"distexp: {resume.stopped_line(line, out.status, stops.name(), cfg)}",
                  file=sys.stderr, flush=True)
        return out
    print(f"{console_lines.ERROR}{line}", file=sys.stderr, flush=True)
    out.said = line
    return out
