"""Config schema (structured configs) and what is derived from a config without TensorFlow.

Everything here runs in the Hydra job process, which never imports TensorFlow: a typo, an unknown
option or a wrong type is reported in one line before any training process starts. The schema is
registered once as ``base_config``; ``conf/config.yaml`` extends it, so every group option
(``conf/<group>/<option>.yaml``) is merged onto a typed node and checked by OmegaConf. The checks
that types cannot express are in distexp.config.checks; the figures derived here (replicas, global batch,
objective, flattened params) ask the strategy's record and the task.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from distexp.cluster.liveness import STARTUP_S
from distexp.config.resolved import ResolvedConfig  # the facts' type lives with the facts

MODELS = ("mlp", "cnn", "resnet50", "mobilenet_v2", "gru_seq2seq", "custom")
TOKENS = ("word", "char", "auto")
LOOPS = ("custom", "fit")
CROSS_DEVICE_OPS = ("nccl", "hierarchical_copy", "reduction_to_one_device")
COMMUNICATIONS = ("auto", "ring", "nccl")
OPTIMIZERS = ("adam", "sgd", "rmsprop")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
PREPROCESSING = ("scale", "standardize", "none")
LR_SCALING = ("none", "linear", "sqrt")
# What a job can return to a sweeper (`objective`): the task's figures (tasks.Task.figures)
# and these performance figures, all final values in result.json.
PERF_OBJECTIVES = ("perf/examples_per_sec", "perf/examples_per_sec_per_replica",
                   "perf/step_time_ms_p50", "perf/time_to_first_step_s")


@dataclass
class StrategyConfig:
    name: str = MISSING
    # mirrored / central: how gradients are all-reduced; null = TensorFlow's choice.
    cross_device_ops: Optional[str] = None
    # multiworker: collective implementation.
    communication: str = "auto"
    # tpu: the TPU's name or grpc://host:8470 (null = $TPU_NAME or this TPU VM's own) and its
    # cores (replicas; checked against the TPU's own count).
    tpu: Optional[str] = None
    tpu_cores: int = 8
    # A strategy defined outside distexp: the module that registers its record
    # (distexp.strategies.register), imported before `name` is looked up. null for the built-ins.
    record: Optional[str] = None


@dataclass
class ModelConfig:
    name: str = MISSING
    optimizer: str = "adam"  # a Keras optimizer name
    learning_rate: float = 1e-3  # used when the top-level learning_rate is null
    # Smallest spatial size the architecture accepts; smaller inputs are resized up to it
    # (resize=true) or refused (resize=false). 0 = no minimum.
    min_size: int = 0
    resize: bool = True
    # model=custom: "package.module:function" called inside strategy.scope() as
    # fn(input_shape=(h, w, c), num_classes=k) -> keras.Model returning logits.
    factory: Optional[str] = None
    # gru_seq2seq: embedding size and GRU units (encoder and decoder).
    embedding_dim: int = 256
    units: int = 1024


@dataclass
class DatasetConfig:
    name: str = MISSING
    # The task this dataset implies (distexp.tasks): classification, seq2seq, ...
    task: str = "classification"
    # digits: fraction held out for evaluation (split fixed by `seed`).
    test_fraction: float = 0.2
    # synthetic: image shape, classes and number of examples (train; eval gets size // 4).
    shape: List[int] = field(default_factory=lambda: [32, 32, 3])
    num_classes: int = 10
    size: int = 2048
    # tf.data knobs.
    shuffle_buffer: int = 10000
    prefetch: int = -1  # -1 = tf.data.AUTOTUNE
    # tf.data private thread pool for this pipeline (threads); 0 = TensorFlow's shared pool.
    threadpool: int = 0
    # loop=custom: take one batch, keep it on the replicas' devices and train on it every step
    # (tf_cnn_benchmarks' synthetic mode): measures the model and strategy with no input cost.
    on_device: bool = False
    # TensorFlow Datasets (dataset=tfds and the named options mnist, cifar10, ...): the builder's
    # name, its splits (TFDS slicing syntax, e.g. "train[:80%]"), where the prepared data lives
    # (null = TFDS's default: $TFDS_DATA_DIR or ~/tensorflow_datasets), whether to download it.
    tfds_name: Optional[str] = None
    train_split: str = "train"
    eval_split: str = "test"
    data_dir: Optional[str] = None
    download: bool = False
    # [h, w] to resize images to (needed for datasets whose images vary in size); null = as stored.
    image_size: Optional[List[int]] = None
    # scale: x / 255; standardize: per image zero mean, unit variance; none: as stored (float32).
    preprocessing: str = "scale"
    # Keep the decoded, preprocessed examples in memory after the first pass.
    cache: bool = True
    # dataset=custom: "package.module:function" called in the trainer as function(seed=..., **kwargs).
    factory: Optional[str] = None
    kwargs: Dict[str, Any] = field(default_factory=dict)
    # text_pairs: the sentence-pair file (source<TAB>target[<TAB>...] per line); both: how each
    # side is split into tokens (word, char, or auto = char for text without spaces), pairs
    # longer than max_length tokens on either side dropped, vocabulary capped at vocab_size
    # (most frequent first; null = no cap).
    path: Optional[str] = None
    source_tokens: str = "auto"
    target_tokens: str = "auto"
    max_length: Optional[int] = None
    vocab_size: Optional[int] = None


@dataclass
class TaskConfig:
    # null = the dataset's task (dataset.task); classification, seq2seq, or custom.
    name: Optional[str] = None
    # A user's task: "package.module:function" called in the trainer as function(**kwargs),
    # returning a distexp.tasks.Task (setting it implies name=custom).
    factory: Optional[str] = None
    kwargs: Dict[str, Any] = field(default_factory=dict)


@dataclass
class LoopConfig:
    name: str = MISSING


@dataclass
class ClusterConfig:
    name: str = "local"
    host: str = "127.0.0.1"
    # local: first port of the cluster's tasks (task i gets port + i); null = free ports picked by
    # the OS. A port that turns out to be taken is replaced by a free one and the job retried.
    # slurm: the resolver's port_base (tasks on one node get port, port + 1, ...); null = 8888.
    port: Optional[int] = None
    # A cluster kind defined outside distexp: the module that registers its record
    # (distexp.cluster.kind.register), imported before the name is looked up.
    record: Optional[str] = None
    # tf_config / slurm: seconds a task waits, once its own TensorFlow server listens, for a peer
    # that is not listening yet; past it the job fails naming that peer (its task stopped before
    # TensorFlow started). TensorFlow's own wait is 180 s (multiworker), 600 s (ps).
    peer_start_timeout: float = STARTUP_S


@dataclass
class CheckpointConfig:
    # Save every N training steps; null = at the end of every epoch; 0 = never.
    every_steps: Optional[int] = None
    # Where the chief writes (other workers write a throwaway directory). Stable across
    # invocations, so `resume=true` finds what a crashed job wrote: not under the Hydra run dir.
    # In a sweep, each job's own `<job dir>/checkpoints` (a re-run of a failed job must restore
    # its own state, not the one another job of the sweep saved last; see distexp.sweeps.planning).
    dir: str = "${distexp.checkpoint_dir:${strategy.name}-${model.name}-${dataset.name}}"
    keep: int = 3  # checkpoints kept (tf.train.CheckpointManager max_to_keep)


@dataclass
class TrackingConfig:
    enabled: bool = True
    uri: str = "sqlite:///${distexp.cwd:}/outputs/mlflow.db"
    experiment: str = "distexp"
    # MLflow's own system metrics (CPU, memory, disk, network; GPUs via NVML), sampled by the job
    # process every `system_metrics_interval` seconds.
    system_metrics: bool = True
    system_metrics_interval: float = 5.0


@dataclass
class SweepConfig:
    # A sweep id (tag distexp.sweep_id, printed when a sweep starts): re-run that sweep; jobs with
    # a FINISHED run there are skipped, FAILED/KILLED ones re-run with resume=true (distexp.sweeps.planning).
    resume: Optional[str] = None
    # Add, for each N-replica job, the 1-replica job (one_device) at the same global batch: the
    # report's equal-work comparison (strong speed-up, replica effect). distexp's sweeper only.
    controls: bool = False
    # repeats=auto (distexp.sweeps.auto): the error rate of all the sweep's comparisons together
    # (split equally over them).
    alpha: float = 0.05
    # repeats=auto: the equivalence margin on the speed ratio (0.05: "equal" when its interval
    # lies within [1/1.05, 1.05]).
    margin: float = 0.05
    # repeats=auto: the most rounds (runs per set-up) before a comparison is "not settled".
    max_repeats: int = 10


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
    # Continue from the latest checkpoint in checkpoint.dir (a fresh start when there is none).
    resume: bool = False
    gpus: Optional[int] = None
    cpu_replicas: int = 1
    workers: int = 2
    ps: int = 1
    epochs: int = 5
    steps_per_epoch: Optional[int] = None
    batch_size_per_replica: int = 64
    global_batch_size: Optional[int] = None
    learning_rate: Optional[float] = None
    # Scale the learning rate with the global batch: none, linear (x global / reference batch)
    # or sqrt (x its square root); the reference batch is batch_size_per_replica (the rate is taken
    # to be right for one replica at that batch). The rate used is the param learning_rate_effective.
    learning_rate_scaling: str = "none"
    seed: int = 0
    # Steps at the start of training that are run but not timed (tracing, first allocations).
    warmup_steps: int = 5
    # Print a progress line this often within an epoch (steps); 0 = only per-epoch lines.
    log_every_steps: int = 0
    # Seconds before a job that has not finished is stopped and marked FAILED; null = no limit.
    timeout: Optional[float] = None
    # Start every training process of the job by forking it from a process that has already
    # imported TensorFlow (distexp.job.warm; started before Hydra composes, kept across a sweep's
    # jobs). false: a fresh interpreter per training process.
    warm_start: bool = True
    # Training steps per tf.function call (fit: compile's steps_per_execution; custom: a loop of
    # this many steps inside one call, as Orbit does). Small models are otherwise Python-bound.
    # "auto" (str) or an int >= 1 (Any: OmegaConf has no union of str and int; checked in
    # distexp.config.checks).
    steps_per_execution: Any = "auto"
    # XLA: compile the training step (fit: compile(jit_compile=...); custom: the replica step).
    jit_compile: bool = False
    # Keras mixed precision policy; mixed_float16 adds loss scaling (LossScaleOptimizer).
    precision: str = "float32"
    # Eval accuracy at which perf/time_to_accuracy_s is taken (DAWNBench); null = not measured.
    target_accuracy: Optional[float] = None
    # Also log what a ~1 s float32 matmul benchmark after training achieved (perf/matmul_flops).
    # Informational only: MFU divides by the hardware's constant peak (distexp.figures.cpu_peak,
    # GPU datasheets), never by this figure, which moves with the machine's load.
    measure_peak_flops: bool = False
    # Where a step's time goes (perf/step_{input,compute,sync,other}_ms): the probe phase after
    # training (distexp.train.breakdown), ~1 s for the default job, more for models that trace
    # slowly (seq2seq: several s). false skips it (no split logged), e.g. in a parity check.
    measure_step_split: bool = True
    # A TensorFlow profiler trace of a few training steps, taken after training (distexp.train.profile),
    # logged as the run's artifact directory profile/.
    profile: bool = False
    # The final figure a job returns to Hydra (what a sweeper such as Optuna optimises);
    # null = the task's (eval/accuracy for classification, eval/token_accuracy for seq2seq).
    objective: Optional[str] = None
    # Stop when the training loss becomes NaN or infinite (Keras' TerminateOnNaN): the run ends
    # FAILED, tagged distexp.diverged. false = train on (still tagged; figures not valid).
    terminate_on_nan: bool = True
    # Runs per sweep job, interleaved round-robin over the sweep's jobs (distexp.sweeps.planning);
    # auto: rounds until every comparison is settled (distexp.sweeps.auto, sweep.max_repeats).
    repeats: Any = 1
    # Which of those runs this is (set by the sweeper: 0..repeats-1); tag distexp.repeat.
    repeat: int = 0
    sweep: SweepConfig = field(default_factory=SweepConfig)
    # Written by the job process (distexp.config.resolved), read by the trainers; null here.
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


def register() -> None:
    """Register the schema and the ``distexp.cwd`` resolver (idempotent)."""
    if not OmegaConf.has_resolver("distexp.cwd"):
        OmegaConf.register_new_resolver("distexp.cwd", _cwd)
    if not OmegaConf.has_resolver("distexp.checkpoint_dir"):
        OmegaConf.register_new_resolver("distexp.checkpoint_dir", _checkpoint_dir)
    from distexp.config import help as config_help

    config_help.register()  # ${distexp.help:} in hydra.help.template
    ConfigStore.instance().store(name="base_config", node=Config)


# Keys of a group that apply to some of its options only (any other key applies to every option):
# a run's params carry them only where they apply (no model.units for a CNN, no dataset.shape for
# a user's dataset). "tfds" stands for every TFDS dataset (mnist, cifar10, ...); a strategy's own
# keys are its record's `options`; task.factory/kwargs apply to a user's task.
_PAIRS = ("text_pairs", "synthetic_pairs")
ONLY_FOR = {
    "model": {"factory": ("custom",), "embedding_dim": ("gru_seq2seq",), "units": ("gru_seq2seq",)},
    "dataset": {"test_fraction": ("digits", *_PAIRS), "shape": ("synthetic",),
                "num_classes": ("synthetic", "custom"), "size": ("synthetic", "synthetic_pairs"),
                "factory": ("custom",), "kwargs": ("custom",), "path": ("text_pairs",),
                **{k: _PAIRS for k in ("source_tokens", "target_tokens", "max_length", "vocab_size")},
                **{k: ("tfds",) for k in ("tfds_name", "train_split", "eval_split", "data_dir",
                                          "download", "image_size", "preprocessing", "cache")}},
}


def _option(group: str, node: dict) -> str:
    if group == "dataset" and (node.get("name") == "tfds" or node.get("tfds_name") is not None):
        return "tfds"
    return str(node.get("name"))


def _applies(tree: dict, group: str, key: str) -> bool:
    node = tree[group]
    if group == "strategy" and key not in ("name", "record"):
        from distexp import strategies

        rec = strategies.REGISTRY.get(str(node.get("name")))
        return rec is None or key in rec.options  # a user's strategy: keep all
    if group == "task" and key in ("factory", "kwargs"):
        return node.get("factory") is not None
    only = ONLY_FOR.get(group, {}).get(key)
    return only is None or _option(group, node) in only


def flatten(cfg: DictConfig) -> dict:
    """The resolved config as flat `a.b.c -> str` params (MLflow's param shape): the keys that
    apply to the chosen options (ONLY_FOR)."""
    out: dict = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = "null" if node is None else str(node)

    tree = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    tree.pop("resolved", None)  # the job logs those facts under their own names (num_replicas...)
    for group in ("model", "dataset", "strategy", "task"):
        if isinstance(tree.get(group), dict):
            tree[group] = {k: v for k, v in tree[group].items() if _applies(tree, group, k)}
    walk("", tree)
    return out


# --- Limits: values the schema's types accept but NumPy/TensorFlow, the data, the file system or
# this machine cannot hold. Checked in the job process, before any training process starts.


