"""Inside one training process (`python -m distexp.train.trainer --config <job_dir>/config.yaml`).

The order is the one TensorFlow needs, kept in one place: devices (before the runtime starts),
the strategy, the data, then model and optimizer inside ``strategy.scope()``, then the loop.
Figures about the hardware after training are distexp.train.hardware's; the parity probe
(`python -m distexp.parity`) is distexp.train.parity_probe's.
A user error prints one line and exits 2; anything else is a traceback and exit 1.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from distexp import console_lines, errors, stops, strategies
from distexp.errors import PORT_IN_USE_EXIT, UserError, UserFailure
from distexp.figures import perf_keys
from distexp.train.loops.custom import Diverged


def train(cfg, job_dir: Optional[Path] = None) -> dict:
    """Train `cfg` in this process and return its final figures (what result.json holds).

    A plain function (lightning-hydra-template's `train(cfg)`): the CLI's training processes call
    it with the config the job process wrote, and a test may call it in-process with any config
    that has a `resolved:` node (distexp.config.resolved.resolve): the facts (GPUs, workers,
    replicas, global batch, objective) come from there, never from the environment. A composed
    config of a one-process strategy without one is resolved here as the job would resolve it."""
    from distexp.cluster import kinds
    from distexp.config import resolved

    record = strategies.of(cfg)
    if cfg.get("resolved") is None and not record.cluster_jobs:
        # A composed config of a one-process strategy: resolved here exactly as the job would.
        gpus = resolved.check_gpus(cfg.gpus, resolved.visible_gpus(), record)
        resolved.attach(cfg, resolved.resolve(cfg, gpus, job_dir=job_dir))
    facts = resolved.facts_of(cfg)  # a cluster's facts need the job's plan: its config.yaml
    job_dir = Path(job_dir if job_dir is not None else facts.job_dir or ".")
    # before devices: it may set the GPUs; a strategy with a cluster asks the cluster kind
    resolver = record.resolver(cfg, facts.gpus, kinds.of(cfg))
    if resolver is not None and resolver.task_type in record.server_roles:
        strategies.serve(resolver)  # blocks until the job process (or the engine) stops it
        return {}
    try:
        ctx, logger, replica_devices = _build(cfg, facts, record, resolver, job_dir)
        return _run(ctx, record, logger, replica_devices, facts, job_dir)
    except (UserError, UserFailure, strategies.PortInUse):
        raise
    except Exception as ex:  # one line that says it: distexp.train.diagnose
        from distexp.train import diagnose

        raise diagnose.explain(ex, cfg) from ex


def _build(cfg, facts, record, resolver, job_dir: Path):
    """Devices, strategy, data, then model and optimizer inside the strategy's scope (the order
    TensorFlow needs), and the loop's Context."""
    import keras

    from distexp import tasks
    from distexp.config import resolved
    from distexp.config.resolved import learning_rate
    from distexp.data import loaders
    from distexp.figures.meter import Meter
    from distexp.tracking import RunLogger
    from distexp.train import optimizer as optimizers
    from distexp.train import step
    from distexp.train.loops.context import Context
    from distexp.train.loops.evaluate import make_evaluate
    from distexp.train.progress import Reporter

    configured, strategy = _strategy(cfg, facts, resolver)
    G = int(facts.global_batch)
    keras.utils.set_random_seed(int(cfg.seed))
    keras.mixed_precision.set_global_policy(cfg.precision)  # before any layer is built
    task = tasks.get(cfg)
    resolved.complete_objective(facts, task)  # a user's task: known from here on
    data = loaders.load(cfg)
    data = getattr(task, "check_data", lambda c, d: d)(cfg, data)  # seconds, not a failed step
    steps = loaders.steps_per_epoch(cfg, data.n_train, G)
    train_ds, eval_ds = loaders.pipelines(cfg, data, G)
    # The job process creates the MLflow run while this process starts (tracking.Forwarder);
    # wait for it before any user code or training runs: an unreachable server stops us here.
    logger = RunLogger()  # the chief's sink (the job forwards it); a no-op on the other tasks
    logger.wait_ready()
    with strategy.scope():
        model = task.build_model(cfg, data)
        note = getattr(task, "check_model", lambda *a: None)(cfg, model, data)
        optimizer = optimizers.build(cfg, model, learning_rate(cfg, int(facts.global_batch)))
    chief = strategies.is_chief(strategy, record)
    replica_devices = record.replica_devices(strategy, configured)
    _describe(cfg, facts, strategy, task, model, data, steps, replica_devices, logger, chief,
              note)
    meter = Meter(global_batch=G, replicas=int(facts.replicas), warmup_steps=int(cfg.warmup_steps),
                  job_start=facts.job_start or time.time(),
                  units_name=getattr(task, "units", None))
    dispatcher = step.dispatcher(record)  # ps: steps scheduled onto remote workers
    evaluate = make_evaluate(task, model, eval_ds, strategy if dispatcher.local_replicas else None,
                             distributed_input_only=record.distributed_input_only)
    reporter = Reporter(meter=meter, logger=logger, chief=chief, job_dir=job_dir,
                        epochs=int(cfg.epochs), steps_per_epoch=steps,
                        log_every=int(cfg.log_every_steps), evaluate=evaluate,
                        target_accuracy=cfg.target_accuracy,
                        target_metric=getattr(task, "target_metric", None))
    ctx = Context(cfg=cfg, strategy=strategy, task=task, model=model, optimizer=optimizer,
                  data=data, train_ds=train_ds, eval_ds=eval_ds, global_batch=G,
                  steps_per_epoch=steps, epochs=int(cfg.epochs), reporter=reporter,
                  dispatch_cls=dispatcher,
                  workers=int(facts.workers))
    return ctx, logger, replica_devices


def _strategy(cfg, facts, resolver):
    """This process's devices (before TensorFlow's runtime starts), then the strategy over them,
    checked against the replicas the job resolved without TensorFlow."""
    from distexp.strategies.record import task_name
    from distexp.train import devices

    me = task_name(resolver.task_type, resolver.task_id) if resolver is not None and \
        resolver.task_type else "chief"
    configured = devices.configure(cfg, facts.task_gpus.get(me, facts.gpus))
    strategy = strategies.build(cfg, configured, resolver)
    in_sync = int(strategy.num_replicas_in_sync)
    if in_sync != facts.sync_replicas:
        raise UserFailure(f"replicas: the job resolved {facts.sync_replicas} replicas per global "
                          f"batch; TensorFlow's {type(strategy).__name__} has {in_sync} "
                          f"(devices: {', '.join(configured)})")
    return configured, strategy


def _describe(cfg, facts, strategy, task, model, data, steps, replica_devices, logger,
              chief, note=None) -> None:
    """The chief's opening lines (with the task's `note` on the model, if any) and the run's params
    only the training process knows."""
    import keras
    import tensorflow as tf

    from distexp.config import xla
    from distexp.config.resolved import learning_rate
    from distexp.figures import meaning
    from distexp.figures.meter import all_warmup_line
    from distexp.library_logs import LOG_ONLY_PREFIX as LOG_ONLY
    from distexp.tracking import tags as tag
    from distexp.train import devices

    say = print if chief else (lambda *a, **k: None)
    G = int(facts.global_batch)
    say(f"{LOG_ONLY}Strategy: {cfg.strategy.name} ({type(strategy).__name__})")
    say(f"Number of devices: {facts.replicas}  ({', '.join(replica_devices)}; workers: "
        f"{facts.workers})")
    say(f"{LOG_ONLY}Global batch: {G}  (per replica: {G // int(facts.sync_replicas)})  "
        f"steps per epoch: {steps}  "
        f"epochs: {cfg.epochs}  loop: {cfg.loop.name}")
    say(f"{LOG_ONLY}Model: {cfg.model.name} ({model.count_params():,} parameters)  dataset: "
        f"{cfg.dataset.name} ({data.describe()})  task: {task.describe()}")
    # jit_compile=auto leaving XLA off on CPU: no news there, in the log only (docs/gpus.md)
    shown = facts.jit_compile or xla.value(cfg.jit_compile) != "auto" or facts.gpus
    say(f"{'' if shown else LOG_ONLY}{xla.line(facts.jit_compile, facts.jit_compile_why)}")
    split = devices.split_line(cfg, int(facts.gpus))
    if split:
        say(split)
    if threads := devices.threads_line(cfg, int(facts.gpus)):
        say(f"{LOG_ONLY}{threads}")
    if note:
        say(note)
    if warm := all_warmup_line(steps * int(cfg.epochs), int(cfg.warmup_steps), int(cfg.epochs)):
        say(warm)
    if task.target_metric is not None and not meaning.accuracy_meaningful(cfg.dataset.name):
        say(f"Note: dataset={cfg.dataset.name} has random labels: accuracy is chance level and "
            "not meaningful here (throughput is)")
    logger.log_params({"devices": ",".join(replica_devices), "tf_version": tf.__version__,
                       "keras_version": keras.__version__, "steps_per_epoch_resolved": steps,
                       "warmup_steps_resolved": min(cfg.warmup_steps, steps * cfg.epochs),
                       "task": task.name, **data.params(),
                       "learning_rate_effective": learning_rate(cfg, G),
                       **task_params(facts, task), "jit_compile_resolved": facts.jit_compile})
    logger.set_tags({tag.JIT_COMPILE: xla.line(facts.jit_compile, facts.jit_compile_why)})


def task_params(facts, task) -> dict:
    """The params that name the task's figures: the report's eval column (the task's headline
    evaluation figure) and the job's objective, from the facts (complete_objective)."""
    from distexp.config.resolved import OBJECTIVE_PARAM

    return {"task.eval_metric": task.target_metric or task.objective,
            OBJECTIVE_PARAM: facts.objective}


def _run(ctx, record, logger, replica_devices, facts, job_dir: Path) -> dict:
    """The loop, then the figures measured after training, the result (chief: result.json)."""
    from distexp import env
    from distexp.train import hardware, loops, window
    from distexp.train.parity_probe import write_parity
    from distexp.train.progress import write_result

    cfg, reporter, chief = ctx.cfg, ctx.reporter, ctx.reporter.chief
    if os.environ.get(env.PARITY) and ctx.dispatch_cls.local_replicas:  # the norm is all-reduced
        write_parity(job_dir if chief else None, ctx)
    try:
        ran = loops.get(cfg)(ctx)  # the custom loop returns its dispatcher, the others nothing
    except Diverged:
        reporter.close()
        logger.close()
        raise UserFailure(reporter.diverged_line(stopped=True)) from None
    meter = reporter.meter
    # the measurement window: the same step run on until the figures rest on enough (state restored)
    window.extend(ctx, ran if isinstance(ran, ctx.dispatch_cls) else None)
    disturbed = _disturbance(ctx, record, facts)
    # The timed training is over and the process ends soon after (errors.exit_now): no cyclic
    # garbage collection from here, whose full pass over TensorFlow's object graph can land in
    # the job's tail.
    gc.disable()
    from distexp.train import live, probe_phase

    stops.hold("probe")  # tests (distexp.stops.HOLD_ENV)
    if cfg.measure_step_split:
        reporter.phase(live.PROBES)  # the bar says what the process does now
    try:  # after the timed steps; a probe that fails costs the split, never the trained run
        split = probe_phase.run(ctx, ran if isinstance(ran, ctx.dispatch_cls) else None, job_dir,
                                chief, meter.mean_step_ms()) \
            if cfg.measure_step_split or cfg.profile else {}
    except Exception as ex:  # noqa: BLE001
        reporter.detail(f"step time split not measured ({type(ex).__name__}: "
                       f"{str(ex).splitlines()[0][:200]})")
        split = {}
    final = reporter.finish({**split, **hardware.after_training(
        cfg, record, ctx.model, ctx.data.input_shape, replica_devices,
        meter.final_figures()[perf_keys.EXAMPLES_PER_SEC], chief, logger)})
    if reporter.diverged_at is not None:
        reporter.print(console_lines.warning(reporter.diverged_line(stopped=False)))
    logger.close()
    result = {**final, "first_step_unix": meter.first_step_unix,
              "cpu_seconds_timed": meter.cpu_timed, "diverged": reporter.diverged_at is not None,
              "timed_seconds": meter.timed_seconds(), "window_steps": meter.window_steps,
              **disturbed,
              "objective": facts.objective,
              "num_replicas": int(facts.replicas), "num_workers": int(facts.workers),
              "global_batch_size": ctx.global_batch}
    if chief:
        write_result(job_dir, result)
    _FINISHED.append((ctx, ran))  # freed by no one: see _FINISHED (the loop's dispatcher holds
    # its dataset iterator: freeing it at the return joined TensorFlow's input threads, 2.4 s of
    # one default job's tail, seen with benchmarks/tail.py)
    return result


def _disturbance(ctx, record, facts) -> dict:
    """Whether the machine starved the timed steps (distexp.figures.disturbance): result.json's
    keys; a disturbed run is tagged and said in one warning line."""
    from distexp.figures import disturbance
    from distexp.tracking import tags
    from distexp.train.step import accelerated

    meter, reporter = ctx.reporter.meter, ctx.reporter
    cpu_per_wall = meter.cpu_per_wall()
    steal = disturbance.steal_share(meter.machine_start, disturbance.sample())
    load = disturbance.load_average()
    # one process holding CPU replicas: its CPU/wall is judged (see distexp.figures.disturbance)
    judged = not record.coordinated and int(facts.workers) == 1 and not accelerated(ctx.strategy)
    why = disturbance.verdict(cpu_per_wall, judged, steal, load) if meter.timed else None
    if why is not None:
        reporter.logger.set_tags({tags.DISTURBED: why})
        reporter.print(console_lines.warning(f"disturbed: {why} (tag {tags.DISTURBED})"))
    return {"cpu_per_wall": cpu_per_wall, "disturbed": why, "steal_share": steal,
            "load_average": load}


# The trained job's objects, one (ctx, the loop's dispatcher) pair per job (strategy, datasets and
# their iterators, model): never freed in this process. Freeing them when train() returns joins
# TensorFlow's input threads and device state, seconds after the job's last line (seen: 5-8 s on a
# loaded 2-core machine); the process exits right after (errors.exit_now) or tears TensorFlow down
# as a whole.
_FINISHED: list = []


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distexp.train.trainer")
    p.add_argument("--config", required=True, type=Path)
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # SIGUSR1 (Slurm's time-limit warning, sent to every process of a job step): not the default
    # action (the end of the trainer), a checkpoint at the next step (distexp.train.checkpoints)
    from distexp import library_logs
    from distexp.train.checkpoints import listen_for_time_warning

    listen_for_time_warning()
    library_logs.to_log_only()  # MLflow's, TensorFlow's, absl's records: this process's log
    cfg = OmegaConf.load(args.config)
    try:
        train(cfg, args.config.parent)
        if not strategies.of(cfg).cluster_jobs:
            # One process, its result and logs written: exit without TensorFlow's teardown
            # (seconds, paid by every job). A cluster's processes exit normally: TensorFlow's
            # coordination service winds down with them.
            errors.exit_now(errors.OK)
    except UserError as ex:
        from distexp.errors import report_user_error

        if ex.__cause__ is not None:  # translated from an exception: its traceback, log only
            errors.log_traceback(ex.__cause__)
        print(console_lines.error(str(ex)), file=sys.stderr, flush=True)
        report_user_error(args.config.parent, str(ex))  # the job reads it there (exit 2)
        return errors.BAD_INPUT
    except UserFailure as ex:
        if ex.__cause__ is not None:
            errors.log_traceback(ex.__cause__)
        print(console_lines.error(str(ex)), file=sys.stderr, flush=True)
        return errors.FAILED
    except strategies.PortInUse as ex:
        print(console_lines.error(str(ex)), file=sys.stderr, flush=True)
        return PORT_IN_USE_EXIT
    return errors.OK


def entry(argv=None) -> int:
    """What `python -m distexp.train.trainer` runs, fresh or forked from the warm trainer
    (distexp.train.warm_server): the exit code; a failure that is not a user error is printed as Python
    would print it."""
    try:
        return main(argv)
    except Exception as ex:  # noqa: BLE001  (its traceback to the log, its own first line to the job)
        errors.log_traceback(ex)
        print(console_lines.error(f"{type(ex).__name__}: {errors.first_line(ex)}"), file=sys.stderr,
              flush=True)
        return errors.FAILED


if __name__ == "__main__":
    code = entry()
    if code != 0:
        # Without Python's and TensorFlow's exit handlers: after a failed multi-worker step they
        # wait on the coordination service of a peer that may be unreachable (a cut link kept the
        # task on the far node alive for good, seen on the two-node Slurm cluster).
        errors.exit_now(code)
    sys.exit(code)
