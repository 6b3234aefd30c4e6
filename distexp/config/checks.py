"""The checks Hydra's types cannot express, run in the job process before anything starts.

distexp.config.schema holds the schema (OmegaConf already refuses a wrong type, an unknown key, a
missing option); this module refuses what is well typed but makes no sense: out-of-range values,
combinations a strategy's record or a task refuses, what the GPU count rules out, and sizes this
machine cannot hold or places it cannot write (`validate`, which finds the facts once: the
strategy's record, the cluster kind, the GPUs, the resolved figures; the machine's limits are
distexp.config.limits). Each is one line, `key: received X; valid/expected Y`, and no TensorFlow is imported.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig, OmegaConf

from distexp import strategies
from distexp.cluster import kinds
from distexp.cluster.processes import split_gpus
from distexp.config import limits, trained_with, xla
from distexp.config.mode import in_multirun
from distexp.config.resolved import JobFacts, check_gpus, resolve, visible_gpus, worker_gpus
from distexp.config.schema import LR_SCALING, PERF_OBJECTIVES, PRECISIONS, PROGRESS, SweepConfig, is_auto
from distexp.errors import UserError, unknown_key
from distexp.options import datasets, loops, models, optimizers
from distexp.options import groups as option_groups
from distexp.options import tasks as task_options
from distexp.options.option import at_least as _at_least
from distexp.user_code import check_factory

# The options distexp itself registers, per group: a `<group>.record` names the module that
# registers an option of one's own, so with one of these it would do nothing (refused).
BUILTIN = {group: frozenset(module.REGISTRY) for group, module in option_groups.GROUPS.items()}


def _choice(key: str, value: Any, valid) -> None:
    if value not in valid:
        raise UserError(f"{key}: received {value!r}; valid: {', '.join(map(str, valid))}")


def _steps_per_execution(value: Any) -> None:
    ok = value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)
    if not ok:
        raise UserError(f"steps_per_execution: received {value!r}; valid: auto or an integer >= 1")


def _unknown_keys(node: DictConfig, prefix: str = "") -> None:
    """Keys added with `+key=value` that no schema declares (Hydra's `+` bypasses struct mode),
    and a key of another option of a group; in a sweep's job such a key is one a sweep over the
    group's options sets for the options that have it: ignored here (flatten leaves it out). A
    strategy's is refused by _validate_strategy, naming the strategies it applies to."""
    schema = OmegaConf.get_type(node)
    group = prefix.rstrip(".")
    if schema is not None and dataclasses.is_dataclass(schema):
        known = [f.name for f in dataclasses.fields(schema)]
        for key in node.keys():
            if key in known or (group in option_groups.GROUPS and option_groups.foreign(
                    group, str(key)) and (group == "strategy" or in_multirun())):
                continue
            valid = {k: OmegaConf.select(node, k, default=None) for k in known}  # its own
            raise UserError(unknown_key(f"{prefix}{key}", node[key], valid))
    for key in node.keys():
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            _unknown_keys(child, f"{prefix}{key}.")


def validate(cfg: DictConfig) -> JobFacts:
    """Raise UserError for values the schema's types accept but that make no sense (the first
    one found, in this order), else return the job's facts (`JobFacts`). They are found once,
    here: the strategy's record, the cluster kind, the GPUs it may use and what `gpus` resolves to
    against them (each worker's share: worker_gpus) and the job's resolved figures; the checks
    below read them, and the sweep's GPU pool and the job's preparation take them from here."""
    _unknown_keys(cfg)
    _validate_applicability(cfg)
    rec = strategies.of(cfg)
    kind = _validate_ranges(cfg)
    kind.check(cfg.cluster)
    visible = kind.visible_gpus(cfg, visible_gpus())  # cluster=ray: the nodes' (checked there)
    if cfg.gpus is not None and rec.cluster_jobs and kind.starts_processes:
        # N per worker on this machine: N x workers must be visible (the plan's own refusal)
        split_gpus(cfg.gpus, visible, rec.num_workers(cfg))
    gpus = check_gpus(cfg.gpus, visible, rec)
    per_worker = worker_gpus(cfg, gpus)
    _validate_knobs(cfg, rec, on_cpu=per_worker == 0 or visible == 0)
    datasets.of(cfg).check(cfg.dataset)  # the option's keys: its record checks them
    models.of(cfg).check(cfg.model)
    _validate_task(cfg)
    _validate_repeats(cfg)
    _validate_strategy(cfg, rec, per_worker)
    facts = resolve(cfg, gpus)
    replicas = facts["sync_replicas"]
    if cfg.global_batch_size is not None and cfg.global_batch_size % replicas:
        raise UserError(
            f"global_batch_size: received {cfg.global_batch_size}; it must divide evenly over "
            f"{replicas} replicas (try {max(replicas, cfg.global_batch_size // replicas * replicas)})")
    _validate_values(cfg, rec, kind, facts)
    trained_with.check(cfg, kind, rec, facts, in_sweep=in_multirun(outside_hydra=True))
    _check_factories(cfg)
    return JobFacts(rec=rec, kind=kind, visible=visible, gpus=gpus, layout=facts)


def _check_factories(cfg: DictConfig) -> None:
    """A user's factories: the spec's shape and that its module can be found, before TensorFlow
    (the trainer imports it and checks the function)."""
    if models.of(cfg).factory:
        check_factory("model.factory", cfg.model.factory)
    if datasets.of(cfg).factory:
        check_factory("dataset.factory", cfg.dataset.factory)
    if cfg.task.factory:
        check_factory("task.factory", cfg.task.factory)


def _validate_ranges(cfg: DictConfig):
    """Names from a fixed list, and numbers in their range; returns the cluster kind."""
    models.of(cfg)  # model: received 'x'; valid: mlp, cnn, ... (the records', in their order)
    loops.of(cfg)
    kind = kinds.of(cfg)  # cluster: received 'x'; valid: local, tf_config, slurm, or its record's
    optimizers.REGISTRY.find(cfg.model.optimizer)
    _choice("learning_rate_scaling", cfg.learning_rate_scaling, LR_SCALING)
    for option, valid in strategies.option_values().items():
        if cfg.strategy.get(option) is not None:
            _choice(f"strategy.{option}", cfg.strategy[option], valid)
    _at_least("epochs", cfg.epochs, 1)
    _at_least("steps_per_epoch", cfg.steps_per_epoch, 1, allow_none=True)
    _at_least("batch_size_per_replica", cfg.batch_size_per_replica, 1)
    _at_least("global_batch_size", cfg.global_batch_size, 1, allow_none=True)
    _at_least("cpu_replicas", cfg.cpu_replicas, 1)
    _at_least("gpu_replicas", cfg.gpu_replicas, 1)
    _at_least("gpus", cfg.gpus, 0, allow_none=True)
    _at_least("workers", cfg.workers, 1)
    _at_least("ps", cfg.ps, 0)
    _at_least("warmup_steps", cfg.warmup_steps, 0)
    _at_least("log_every_steps", cfg.log_every_steps, 0)
    _at_least("measure_min_steps", cfg.measure_min_steps, 0)
    _at_least("measure_min_seconds", cfg.measure_min_seconds, 0)
    _steps_per_execution(cfg.steps_per_execution)
    _choice("precision", cfg.precision, PRECISIONS)
    _choice("progress", cfg.progress, PROGRESS)
    _at_least("tracking.system_metrics_interval", cfg.tracking.system_metrics_interval, 0.1)
    if cfg.target_accuracy is not None and not 0 < cfg.target_accuracy <= 1:
        raise UserError(f"target_accuracy: received {cfg.target_accuracy}; expected 0 < x <= 1 "
                        "or null")
    return kind


def _validate_applicability(cfg: DictConfig) -> None:
    """A key set to something that does nothing for the chosen option or this kind of run: a
    `*.record` with a built-in option, a sweep's keys in a single run, repeats=auto's keys without
    it, task.kwargs without task.factory (one line each)."""
    for group in option_groups.GROUPS:
        node = cfg[group]
        record, name = node.get("record"), str(node.get("name"))
        builtin = name in BUILTIN[group] or (group == "dataset" and datasets.TFDS.claims(node))
        if record is not None and builtin:
            raise UserError(f"{group}.record: received {record!r} with {group}={name}, a built-in "
                            f"option that does not use it; valid: null, or {group}=<the name the "
                            "record's module registers>")
    single = not in_multirun(outside_hydra=True)
    defaults = SweepConfig()  # a key set: one that differs from the schema's default
    for key in ("resume", "controls", "share_gpus"):
        if single and cfg.sweep[key] != getattr(defaults, key):
            raise UserError(f"sweep.{key}: received {_shown(cfg.sweep[key])} for a single run; it "
                            "applies to a sweep only: add -m (python -m distexp -m ...) or leave "
                            "it out")
    if not is_auto(cfg.repeats):
        for key in ("alpha", "margin", "max_repeats"):
            if cfg.sweep[key] != getattr(defaults, key):
                raise UserError(f"sweep.{key}: received {cfg.sweep[key]} with repeats="
                                f"{cfg.repeats}; it applies to repeats=auto only: set repeats=auto "
                                "or leave it out")
        if not cfg.sweep.seed_by_round and int(cfg.repeats) < 2:  # rounds to vary: auto, N >= 2
            raise UserError(f"sweep.seed_by_round: received False with repeats={cfg.repeats}; it "
                            "applies to repeats=auto or repeats=N (N >= 2) only: set one or leave "
                            "it out")
    if cfg.task.kwargs and not cfg.task.factory:
        raise UserError(f"task.kwargs: received {dict(cfg.task.kwargs)} without task.factory; "
                        "they are the keyword arguments of a user's task: set "
                        "task.factory=package.module:function or leave them out")


def _shown(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def _validate_knobs(cfg: DictConfig, rec, on_cpu: bool) -> None:
    """Knobs that rule each other out (XLA, on-device data, resume, checkpoints, factories)."""
    if xla.value(cfg.jit_compile) not in xla.VALUES:
        raise UserError(f"jit_compile: received {cfg.jit_compile!r}; valid: auto, true or false")
    if xla.value(cfg.jit_compile) == "true" and rec.cpu_replicas and cfg.cpu_replicas > 1 and \
            on_cpu:
        raise UserError(f"jit_compile: received true with cpu_replicas={cfg.cpu_replicas}; XLA "
                        "cannot reach a variable on another logical CPU device (TensorFlow's XLA "
                        "known issues: tf.Variable on a different device): use cpu_replicas=1 or "
                        "jit_compile=false")
    xla.check_step(cfg, rec, 0 if on_cpu else 1)
    _xla_task_weight(cfg, rec, on_cpu)
    if cfg.gpu_replicas > 1 and not rec.gpu_replicas:
        able = " or ".join(n for n, r in strategies.REGISTRY.items() if r.gpu_replicas)
        raise UserError(f"gpu_replicas: received {cfg.gpu_replicas} with strategy={rec.name}; it "
                        f"splits each GPU into logical GPUs for strategy={able}: leave it at 1")
    if cfg.gpu_replicas > 1 and on_cpu:
        raise UserError(f"gpu_replicas: received {cfg.gpu_replicas}; this job trains on CPU (no "
                        f"GPU visible, or gpus=0): cpu_replicas={cfg.gpu_replicas} splits the CPU")
    loop = loops.of(cfg)
    if cfg.dataset.on_device and not loop.on_device:
        raise UserError(f"dataset.on_device: received true with loop={cfg.loop.name}; on-device "
                        f"data needs {loops.able('on_device')}")
    _at_least("checkpoint.every_steps", cfg.checkpoint.every_steps, 0, allow_none=True)
    _at_least("checkpoint.keep", cfg.checkpoint.keep, 1)
    if cfg.resume and not loop.checkpoints:
        able = loops.able("checkpoints")
        raise UserError(f"resume: received true with loop={cfg.loop.name}; checkpoints and resume "
                        f"are part of the {able.replace('loop=', '')} loop: use {able}")
    if cfg.timeout is not None and cfg.timeout <= 0:
        raise UserError(f"timeout: received {cfg.timeout}; expected seconds > 0 or null")
    if cfg.learning_rate is not None and cfg.learning_rate <= 0:
        raise UserError(f"learning_rate: received {cfg.learning_rate}; expected > 0")
    if models.of(cfg).factory and (OmegaConf.is_missing(cfg.model, "factory") or
                                   not cfg.model.factory):
        raise UserError(f"model.factory: received null; model={cfg.model.name} needs "
                        "model.factory=package.module:function")


def _xla_task_weight(cfg: DictConfig, rec, on_cpu: bool) -> None:
    """A task whose loss is weighted across replicas (seq2seq: by the global count of target
    tokens) sums that count inside the XLA function of the forward and backward pass; on CPU
    replicas TensorFlow refuses that merge_call there except under one_device (as it refuses the
    update's: xla_step=whole), and the job failed after TensorFlow started."""
    from distexp import tasks

    task = tasks.builtin(cfg)
    if task is None or task.unit_weight or not on_cpu or rec.xla_whole_on_cpu:
        return
    if xla.choose(cfg.jit_compile, rec, 0, loops.of(cfg))[0]:
        raise UserError(f"jit_compile: received {xla.value(cfg.jit_compile)} with the "
                        f"{tasks.name_of(cfg)} task and strategy={rec.name} on CPU replicas; its "
                        "loss sums the replicas' token counts, which TensorFlow refuses inside an "
                        "XLA function there: use strategy=one_device or jit_compile=false")


def _validate_repeats(cfg: DictConfig) -> None:
    sw = cfg.sweep
    auto = is_auto(cfg.repeats)
    for key in ("alpha", "margin"):  # checked whatever repeats is: the sweeper reads them
        if not 0 < sw[key] < 1:
            raise UserError(f"sweep.{key}: received {sw[key]}; expected 0 < x < 1, e.g. 0.05")
    if not sw.accuracy_margin > 0:
        raise UserError(f"sweep.accuracy_margin: received {sw.accuracy_margin}; expected points "
                        "> 0, e.g. 0.5")
    _at_least("sweep.max_repeats", sw.max_repeats, 2)
    if sw.max_repeats > MAX_REPEATS:
        raise UserError(f"sweep.max_repeats: received {sw.max_repeats}; expected 2..{MAX_REPEATS} "
                        "(runs per set-up)")
    if not auto and (isinstance(cfg.repeats, bool) or not isinstance(cfg.repeats, int)):
        raise UserError(f"repeats: received {cfg.repeats!r}; valid: auto or an integer >= 1")
    _at_least("repeats", 1 if auto else cfg.repeats, 1)
    most = sw.max_repeats if auto else max(cfg.repeats, 1)
    if most > 1 and not in_multirun(outside_hydra=True):
        raise UserError(f"repeats: received {cfg.repeats} for a single run; repeats are runs of "
                        "a sweep's jobs: add -m (python -m distexp -m ... repeats=N)")
    # repeats=auto: a disturbed round runs once more (distexp.sweeps.auto), and its re-run's
    # jobs take the next `repeat`: up to twice the rounds
    runs = 2 * most if auto else most
    if not 0 <= cfg.repeat < runs:
        raise UserError(f"repeat: received {cfg.repeat}; expected 0..{runs - 1} (repeats="
                        f"{cfg.repeats}); the sweeper sets it, set repeats=N instead")


def _validate_strategy(cfg: DictConfig, rec, gpus: int) -> None:
    """What the strategy's record says it cannot do: loops, knobs, options (one line each)."""
    why = rec.loops.get(cfg.loop.name)
    if why:
        raise UserError(f"loop: received {cfg.loop.name!r} with strategy={rec.name}; {why}: use "
                        f"{' or '.join(f'loop={lp}' for lp, w in rec.loops.items() if w is None)}")
    for knob, why in rec.refuses.items():
        key, _, value = knob.partition("=")
        current = OmegaConf.select(cfg, key)
        if (str(current) == value) if value else bool(current) and \
                str(current).lower() not in ("auto", "false"):
            shown = repr(current) if isinstance(current, str) else str(current).lower()
            hint = "" if value else f": use {key}=false"
            raise UserError(f"{key}: received {shown} with strategy={rec.name}; {why}{hint}")
    for option in () if in_multirun() else cfg.strategy:  # a sweep's job ignores another's
        users = option_groups.owners("strategy", str(option))
        value, default = cfg.strategy[option], next(iter(users.values()), None)
        if option not in option_groups.keys_of("strategy", cfg.strategy) and value != default:
            raise UserError(f"strategy.{option}: received {value!r} with strategy={rec.name}; it "
                            f"applies to strategy={' or '.join(users)} only: leave it at "
                            f"{'null' if default is None else default}")
    rec.check(cfg)
    rec.check_devices(cfg, gpus)  # the one call: the GPUs each worker gets (worker_gpus)


MAX_REPEATS = 1000  # runs per set-up: a budget beyond it is a typo, not a plan


def _validate_task(cfg: DictConfig) -> None:
    """The task, its model and loop, its objective and target (no TensorFlow: built-in tasks
    are plain classes; a user's task is checked in the trainer)."""
    from distexp import tasks

    ds = cfg.dataset
    _choice("dataset.task", ds.task, task_options.built_in())
    name = tasks.name_of(cfg)
    rec = tasks.REGISTRY.find(name)
    if rec.factory and not cfg.task.factory:
        raise UserError(f"task.factory: received null; task.name={name} needs "
                        "task.factory=package.module:function")
    model_task = models.of(cfg).task  # the task whose data the model reads
    if not rec.factory and model_task != name:
        if task_options.REGISTRY[model_task].data:  # only some datasets have it: the odd one
            raise UserError(f"dataset: received {ds.name!r} with model={cfg.model.name}, which "
                            f"needs {task_options.REGISTRY[model_task].data}; valid: "
                            f"{', '.join(datasets.for_task(model_task))}")
        raise UserError(f"model: received {cfg.model.name!r} with a {name} task (dataset="
                        f"{ds.name}); valid: {', '.join(models.for_task(name))}")
    task = tasks.builtin(cfg)
    if not loops.of(cfg).task_loss and (task is None or not task.fit_ok):
        why = task.fit_refusal if task is not None else (
            "Keras fit computes losses with Keras loss objects, not the task's")
        raise UserError(f"loop: received {cfg.loop.name!r} with the {name} task; {why}: use "
                        f"{loops.able('task_loss')}")
    if cfg.objective is not None and task is not None:
        _choice("objective", cfg.objective, task.figures() + PERF_OBJECTIVES)
    if cfg.target_accuracy is not None and task is not None and task.target_metric is None:
        raise UserError(f"target_accuracy: received {cfg.target_accuracy}; the {name} task has "
                        "no accuracy to reach: set it to null")


SEED_MAX = 2 ** 32 - 1  # keras.utils.set_random_seed seeds NumPy: np.random.seed takes 0..2**32-1


def _validate_values(cfg: DictConfig, rec, kind, facts: dict) -> None:
    """Raise UserError for a value no process could run with (one line, before TensorFlow), then
    for what this machine cannot hold (distexp.config.limits). `rec`, `kind`, `facts`: the
    strategy's record, the cluster kind, the resolved facts."""
    if not 0 <= cfg.seed <= SEED_MAX:
        raise UserError(f"seed: received {cfg.seed}; expected 0..{SEED_MAX} (2**32-1: the range "
                        "NumPy's and TensorFlow's seeding accept)")
    for key in ("learning_rate", "timeout", "target_accuracy", "measure_min_seconds"):
        value = OmegaConf.select(cfg, key)
        if value is not None and not math.isfinite(value):
            raise UserError(f"{key}: received {value}; expected a finite number")
    for key in ("tracking.uri", "tracking.experiment") if cfg.tracking.enabled else ():
        if not str(OmegaConf.select(cfg, key)).strip():
            raise UserError(f"{key}: received {OmegaConf.select(cfg, key)!r}; expected a non-empty "
                            + ("MLflow tracking URI, e.g. sqlite:///outputs/mlflow.db or "
                               "http://host:5000" if key == "tracking.uri" else
                               "MLflow experiment name, e.g. distexp"))
    processes = kind.local_processes(cfg, rec)
    if cfg.cluster.get("port") is not None and not 1024 <= cfg.cluster.port <= 65536 - processes:
        raise UserError(f"cluster.port: received {cfg.cluster.port}; expected "
                        f"1024..{65536 - processes} (the {processes} task(s) take port, port+1, ...; "
                        "at most 65535), or null for free ports")
    limits.check(cfg, rec, kind, facts, processes)
