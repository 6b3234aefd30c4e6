"""Config schema (structured configs) and what is derived from a config without TensorFlow.

Everything here runs in the Hydra job process, which never imports TensorFlow: a typo, an unknown
option or a wrong type is reported in one line before any training process starts. The schema is
registered once as ``base_config``, first in ``conf/config.yaml``'s defaults list (the yaml sets no
key: each key's default and description are here, tests/config/test_conf_defaults.py), so every group option
(``conf/<group>/<option>.yaml``) is merged onto a typed node and checked by OmegaConf: a model's
or dataset's onto its own dataclass (its record's `schema`, stored as ``<group>/base_<option>``
and named first in its yaml), so a key of another option is refused at composition. The checks
that types cannot express are in distexp.config.checks, the figures derived from a config (replicas,
global batch, objective) in distexp.config.resolved; `flatten` here gives the run's params.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from distexp.cluster.kinds import ClusterConfig
from distexp.config.resolved import ResolvedConfig  # the facts' type lives with the facts
from distexp.fields import key
from distexp.figures import perf_keys
from distexp.options import groups
from distexp.options.datasets import DatasetConfig
from distexp.options.models import ModelConfig
from distexp.strategies.record import StrategyConfig

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
PROGRESS = ("auto", "bar", "lines", "quiet")
LR_SCALING = ("none", "linear", "sqrt")
AUTO = "auto"  # repeats=auto (distexp.sweeps.auto)


def is_auto(repeats: Any) -> bool:
    """Whether a `repeats` value (the config's, or an override's text) asks for repeats=auto: the
    one reading, in any case and spacing, for the checks, the sweep's plan and the job's console."""
    return str(repeats).strip().lower() == AUTO


# What a job can return to a sweeper (`objective`): the task's figures (tasks.Task.figures)
# and these performance figures, all final values in result.json.
PERF_OBJECTIVES = (perf_keys.EXAMPLES_PER_SEC, perf_keys.EXAMPLES_PER_SEC_PER_REPLICA,
                   perf_keys.STEP_TIME_MS_P50, perf_keys.TIME_TO_FIRST_STEP_S)


@dataclass
class TaskConfig:
    name: Optional[str] = key(None, "null = the dataset's task (dataset.task); classification, "
                              "seq2seq, or custom")
    factory: Optional[str] = key(None, 'a user\'s task: "package.module:function" returning a '
                                 "distexp.tasks.Task (implies name=custom)")
    kwargs: Dict[str, Any] = key(help="keyword arguments for task.factory", factory=dict)


@dataclass
class LoopConfig:
    name: str = key(MISSING, "the chosen option (loop=...)")
    record: Optional[str] = key(None, "a loop of one's own: the module that registers its record "
                                "(distexp.options.loops); null for the built-ins")


@dataclass
class CheckpointConfig:
    every_steps: Optional[int] = key(None, "save every N training steps; null = at the end of "
                                     "every epoch; 0 = never")
    # Stable across invocations, so `resume=true` finds what a crashed job wrote: not under the
    # Hydra run dir. In a sweep, each job's own `<job dir>/checkpoints` (a re-run of a failed job
    # must restore its own state, not the one another job of the sweep saved last).
    # A user's model or data by its factory's function, as the run's name calls it.
    dir: str = key("${distexp.checkpoint_dir:${strategy.name}-${distexp.workload:model}-"
                   "${distexp.workload:dataset}}",
                   "where the chief writes (stable across runs, so resume=true finds it)")
    keep: int = key(3, "checkpoints kept: the newest N (tf.train.CheckpointManager max_to_keep)")
    keep_in_sweeps: bool = key(False, "in a sweep (-m): keep a job's checkpoints once it FINISHED "
                               "(false: its <job dir>/checkpoints is removed; a sweep never "
                               "resumes a finished job)")


@dataclass
class TrackingConfig:
    enabled: bool = key(True, "false = no MLflow at all")
    uri: str = key("sqlite:///${distexp.cwd:}/outputs/mlflow.db",
                   "MLflow tracking URI (a store or an http(s) server)")
    experiment: str = key("distexp", "MLflow experiment name")
    system_metrics: bool = key(True, "MLflow's system metrics (psutil; GPUs via NVML), from the "
                               "job process")
    system_metrics_interval: float = key(5.0, "seconds between samples of the system metrics "
                                         "(>= 0.1)")


@dataclass
class SweepConfig:
    resume: Optional[str] = key(None, "a sweep id: re-run it, skipping jobs that FINISHED there "
                                "(FAILED/KILLED ones resume)")
    controls: bool = key(False, "add, for each N-replica job, the 1-replica job at the same "
                         "global batch (equal work; distexp's sweeper)")
    share_gpus: bool = key(False, "jobs running at once (joblib) share GPUs; false: each holds its "
                           "own from the sweep's pool")
    alpha: float = key(0.05, "repeats=auto: the error rate of all the sweep's comparisons together "
                       "(split equally over them)")
    margin: float = key(0.05, "repeats=auto: equivalence margin on the speed ratio (0.05: equal "
                        "when its interval lies within [1/1.05, 1.05])")
    max_repeats: int = key(10, "repeats=auto: most rounds (runs per set-up) before a comparison is "
                           "'not settled'")
    accuracy_margin: float = key(0.5, "repeats=auto/N: the accuracy half's equivalence margin, in "
                                 "points of the final eval metric (as accurate: its interval "
                                 "within +-0.5)")
    seed_by_round: bool = key(True, "repeats=auto/N: round r runs every set-up with seed + r (the "
                              "rounds sample seed noise); false: one seed, a pure speed question")


@dataclass
class Config:
    strategy: StrategyConfig = MISSING
    model: ModelConfig = MISSING
    dataset: DatasetConfig = MISSING
    loop: LoopConfig = MISSING
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    resume: bool = key(False, "continue from the latest checkpoint in checkpoint.dir (fresh when "
                       "none)")
    gpus: Optional[int] = key(None, "GPUs per worker: null = all visible (cluster=ray: none), N = "
                              "first N, 0 = CPU only")
    cpu_replicas: int = key(1, "on CPU: logical devices (replicas) per worker")
    gpu_replicas: int = key(1, "on GPUs: logical GPUs (replicas) per physical GPU, each with an "
                            "equal share of its memory (mirrored, central, multiworker)")
    workers: int = key(2, "worker processes (multiworker, ps)")
    ps: int = key(1, "parameter-server processes (ps)")
    epochs: int = key(5, "passes over the training data")
    steps_per_epoch: Optional[int] = key(None, "null = a full pass over the training data")
    batch_size_per_replica: int = key(64, "per-replica batch; global batch = this x replicas")
    global_batch_size: Optional[int] = key(None, "set to fix the global batch instead (must "
                                           "divide by replicas)")
    learning_rate: Optional[float] = key(None, "null = the model's default (model.learning_rate)")
    # The reference batch is batch_size_per_replica (the rate is taken to be right for one
    # replica at that batch). The rate used is the param learning_rate_effective.
    learning_rate_scaling: str = key("none", "none, linear or sqrt: x (global batch / "
                                     "batch_size_per_replica)")
    seed: int = key(0, "seeds Python, NumPy and TensorFlow")
    warmup_steps: int = key(5, "steps run but not timed at the start of training")
    log_every_steps: int = key(0, "progress line every N steps within an epoch; 0 = per epoch "
                               "only")
    progress: str = key("auto", "what the console shows while training: bar (live: epoch, steps, "
                        "examples/s, ETA; a sweep's job k of N), lines (plain), quiet (the summary "
                        "only); auto = bar on a terminal, else lines")
    timeout: Optional[float] = key(None, "seconds; a job running longer is stopped and marked "
                                   "FAILED")
    # distexp.job.warm_client: started before Hydra composes, kept across a sweep's jobs.
    warm_start: bool = key(True, "fork training processes from a process that imported "
                           "TensorFlow already; false: fresh interpreters")
    # fit: compile's steps_per_execution; custom: a loop of this many steps inside one call, as
    # Orbit does. "auto" (str) or an int >= 1 (Any: OmegaConf has no union of str and int;
    # checked in distexp.config.checks).
    steps_per_execution: Any = key("auto", "steps per tf.function call: auto (measured, see "
                                   "docs/configuration.md) or an int >= 1")
    # "auto" (str) or a bool (Any, as steps_per_execution; checked in distexp.config.checks);
    # what it resolves to is the job's facts' (distexp.config.xla)
    jit_compile: Any = key("auto", "XLA-compile the training step: auto (on GPU replicas where "
                           "the step compiles, off on CPU), true or false")
    # distexp.config.xla.check_step; the device run compares both (benchmarks/gpu.sh)
    xla_step: str = key("split", "what jit_compile XLA-compiles (custom loop): split (forward and "
                        "backward; the optimizer's update outside) or whole (the whole replica "
                        "step, update included: GPU replicas, or strategy=one_device)")
    precision: str = key("float32", "float32, mixed_float16 (with loss scaling), mixed_bfloat16")
    target_accuracy: Optional[float] = key(None, "eval accuracy for perf/time_to_accuracy_s; "
                                           "null = not measured")
    # Informational only: MFU divides by the hardware's constant peak (distexp.figures.cpu_peak,
    # GPU datasheets), never by this figure, which moves with the machine's load.
    measure_peak_flops: bool = key(False, "true: also log a ~1 s matmul benchmark "
                                   "(perf/matmul_flops); never MFU's denominator")
    # distexp.train.probe_phase: ~1 s for the default job, several s for models that trace slowly.
    measure_step_split: bool = key(True, "the probe phase after training: where a step's time "
                                   "goes (perf/step_*_ms); false skips it")
    # distexp.train.window: measured on after training where the timed steps fall short (the
    # model and optimizer restored: what is trained is unchanged)
    measure_min_seconds: float = key(2.0, "the run's figures rest on at least this many seconds of "
                                     "timed steps (measured on after training; 0: training's only)")
    measure_min_steps: int = key(200, "and on at least this many timed steps (the window after "
                                 "training stays within about measure_min_seconds)")
    profile: bool = key(False, "a TensorFlow profiler trace of a few steps after training, as the "
                        "artifact profile/")
    objective: Optional[str] = key(None, "the final figure a job returns to Hydra (what Optuna "
                                   "optimises); null = the task's")
    terminate_on_nan: bool = key(True, "stop (FAILED, tagged distexp.diverged) when the training "
                                 "loss is NaN/inf")
    # repeats: an int or "auto" (Any: OmegaConf has no union of str and int; checked in
    # distexp.config.checks).
    repeats: Any = key(1, "runs per sweep job, interleaved round-robin over the sweep's jobs; auto: "
                       "rounds until every comparison is settled (sweep.alpha/margin/max_repeats)")
    repeat: int = key(0, "which of them a run is (the sweeper sets it; tag distexp.repeat)")
    sweep: SweepConfig = field(default_factory=SweepConfig)
    # Written by the job process (distexp.config.resolved), read by the trainers; null here (not a
    # key to set: no description, so --help leaves it out).
    resolved: Optional[ResolvedConfig] = None


def _cwd() -> str:
    return os.getcwd()


def _checkpoint_dir(name: str) -> str:
    """`outputs/checkpoints/<name>` under the cwd; a sweep job's own `<job dir>/checkpoints`."""
    try:
        from hydra.core.hydra_config import HydraConfig

        from distexp.config.mode import in_multirun

        if in_multirun():
            job_dir = HydraConfig.get().runtime.output_dir
            if job_dir:
                return f"{os.path.abspath(job_dir)}/checkpoints"
    except Exception:  # noqa: BLE001  (the sweep process composing a job: no job dir yet)
        pass
    return f"{_cwd()}/outputs/checkpoints/{name}"


def _workload(group: str, *, _root_: DictConfig) -> str:
    """`${distexp.workload:model}`: the chosen model's name, a user's by its factory's function."""
    node = _root_[group]
    return groups.workload(group, str(node.name), node.get("factory"))


def register() -> None:
    """Register the schema, each option's schema (``<group>/base_<option>``, named by its yaml)
    and the ``distexp.*`` resolvers (idempotent)."""
    if not OmegaConf.has_resolver("distexp.cwd"):
        OmegaConf.register_new_resolver("distexp.cwd", _cwd)
    if not OmegaConf.has_resolver("distexp.checkpoint_dir"):
        OmegaConf.register_new_resolver("distexp.checkpoint_dir", _checkpoint_dir)
    if not OmegaConf.has_resolver("distexp.workload"):
        OmegaConf.register_new_resolver("distexp.workload", _workload)
    from distexp.config import help as config_help

    config_help.register(Config)  # ${distexp.help:} in hydra.help.template
    store = ConfigStore.instance()
    store.store(name="base_config", node=Config)
    # Open to keys outside the option's schema: a sweep over options (`-m dataset=mnist,cifar10
    # dataset.data_dir=/data`) is first composed with the group's default option (Hydra's sweep
    # config), which lacks them. checks.validate refuses, job by job, a key the job's own option
    # does not have, in the same line as Hydra's refusal (errors.unknown_key); types are checked.
    for group, records in groups.GROUPS.items():
        for rec in records.REGISTRY.values():
            if rec.schema is None:  # a loop: a name and a record only (LoopConfig)
                continue
            node = OmegaConf.structured(rec.schema)
            OmegaConf.set_struct(node, False)
            store.store(group=group, name=f"base_{rec.name}", node=node)


def flatten(cfg: DictConfig) -> dict:
    """The resolved config as flat `a.b.c -> str` params (MLflow's param shape): of an option
    group, the keys of its chosen option (distexp.options.groups.keys_of); task.factory/kwargs
    for a user's task only."""
    out: dict = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = "null" if node is None else str(node)

    tree = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    tree.pop("resolved", None)  # the job logs those facts under their own names (num_replicas...)
    for group in groups.GROUPS:
        if isinstance(tree.get(group), dict):
            tree[group] = {k: tree[group][k] for k in groups.keys_of(group, tree[group])}
    if isinstance(tree.get("task"), dict) and tree["task"].get("factory") is None:
        tree["task"] = {k: v for k, v in tree["task"].items() if k not in ("factory", "kwargs")}
    walk("", tree)
    return out
