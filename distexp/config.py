"""Config schema (structured configs) and the checks Hydra's types cannot express.

Everything here runs in the Hydra job process, which never imports TensorFlow: a typo, an unknown
option, a wrong type or an out-of-range value is reported in one line before any training process
starts. The schema is registered once as ``base_config``; ``conf/config.yaml`` extends it, so every
group option (``conf/<group>/<option>.yaml``) is merged onto a typed node and checked by OmegaConf.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

STRATEGIES = ("one_device", "mirrored", "central", "multiworker", "ps")
MODELS = ("mlp", "cnn", "resnet50", "mobilenet_v2", "gru_seq2seq", "custom")
TOKENS = ("word", "char", "auto")
LOOPS = ("custom", "fit")
CLUSTERS = ("local", "tf_config", "slurm")
CROSS_DEVICE_OPS = ("nccl", "hierarchical_copy", "reduction_to_one_device")
COMMUNICATIONS = ("auto", "ring", "nccl")
OPTIMIZERS = ("adam", "sgd", "rmsprop")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
PREPROCESSING = ("scale", "standardize", "none")
# What a job can return to a sweeper (`objective`): the task's figures (tasks.Task.figures)
# and these performance figures, all final values in result.json.
PERF_OBJECTIVES = ("perf/examples_per_sec", "perf/examples_per_sec_per_replica",
                   "perf/step_time_ms_p50", "perf/time_to_first_step_s")


class UserError(Exception):
    """A problem with what the user asked for: reported as one line, exit code 2, no traceback."""


@dataclass
class StrategyConfig:
    name: str = MISSING
    # mirrored / central: how gradients are all-reduced; null = TensorFlow's choice.
    cross_device_ops: Optional[str] = None
    # multiworker: collective implementation.
    communication: str = "auto"


@dataclass
class ModelConfig:
    name: str = MISSING
    optimizer: str = "adam"
    learning_rate: float = 1e-3
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


@dataclass
class CheckpointConfig:
    # Save every N training steps; null = at the end of every epoch; 0 = never.
    every_steps: Optional[int] = None
    # Where the chief writes (other workers write a throwaway directory). Stable across
    # invocations, so `resume=true` finds what a crashed job wrote: not under the Hydra run dir.
    dir: str = "${distexp.cwd:}/outputs/checkpoints/${strategy.name}-${model.name}-${dataset.name}"
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
    seed: int = 0
    # Steps at the start of training that are run but not timed (tracing, first allocations).
    warmup_steps: int = 5
    # Print a progress line this often within an epoch (steps); 0 = only per-epoch lines.
    log_every_steps: int = 0
    # Seconds before a job that has not finished is stopped and marked FAILED; null = no limit.
    timeout: Optional[float] = None
    # Training steps per tf.function call (fit: compile's steps_per_execution; custom: a loop of
    # this many steps inside one call, as Orbit does). Small models are otherwise Python-bound.
    # "auto" (str) or an int >= 1 (Any: OmegaConf has no union of str and int; checked below).
    steps_per_execution: Any = "auto"
    # XLA: compile the training step (fit: compile(jit_compile=...); custom: the replica step).
    jit_compile: bool = False
    # Keras mixed precision policy; mixed_float16 adds loss scaling (LossScaleOptimizer).
    precision: str = "float32"
    # Eval accuracy at which perf/time_to_accuracy_s is taken (DAWNBench); null = not measured.
    target_accuracy: Optional[float] = None
    # Measure the devices' peak FLOP/s (a ~1 s matmul benchmark after training) for perf/mfu.
    measure_peak_flops: bool = True
    # The final figure a job returns to Hydra (what a sweeper such as Optuna optimises);
    # null = the task's (eval/accuracy for classification, eval/token_accuracy for seq2seq).
    objective: Optional[str] = None
    # Stop when the training loss becomes NaN or infinite (Keras' TerminateOnNaN): the run ends
    # FAILED, tagged distexp.diverged. false = train on (still tagged; figures not valid).
    terminate_on_nan: bool = True


def _cwd() -> str:
    return os.getcwd()


def register() -> None:
    """Register the schema and the ``distexp.cwd`` resolver (idempotent)."""
    if not OmegaConf.has_resolver("distexp.cwd"):
        OmegaConf.register_new_resolver("distexp.cwd", _cwd)
    ConfigStore.instance().store(name="base_config", node=Config)


register()


def _choice(key: str, value: Any, valid) -> None:
    if value not in valid:
        raise UserError(f"{key}: received {value!r}; valid: {', '.join(map(str, valid))}")


def _at_least(key: str, value: Optional[float], low: float, *, allow_none: bool = False) -> None:
    if value is None:
        if allow_none:
            return
        raise UserError(f"{key}: received null; expected a number >= {low}")
    if value < low:
        raise UserError(f"{key}: received {value}; expected >= {low}")


def _steps_per_execution(value: Any) -> None:
    ok = value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)
    if not ok:
        raise UserError(f"steps_per_execution: received {value!r}; valid: auto or an integer >= 1")


def _unknown_keys(node: DictConfig, prefix: str = "") -> None:
    """Keys added with `+key=value` that no schema declares (Hydra's `+` bypasses struct mode)."""
    import dataclasses

    schema = OmegaConf.get_type(node)
    if schema is not None and dataclasses.is_dataclass(schema):
        known = {f.name for f in dataclasses.fields(schema)}
        for key in node.keys():
            if key not in known:
                raise UserError(f"{prefix}{key}: unknown key (not in the schema); check the spelling "
                                "or see --cfg job")
    for key in node.keys():
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            _unknown_keys(child, f"{prefix}{key}.")


def validate(cfg: DictConfig) -> None:
    """Raise UserError for values the schema's types accept but that make no sense."""
    _unknown_keys(cfg)
    _choice("strategy", cfg.strategy.name, STRATEGIES)
    _choice("model", cfg.model.name, MODELS)
    _choice("loop", cfg.loop.name, LOOPS)
    _choice("cluster", cfg.cluster.name, CLUSTERS)
    _choice("model.optimizer", cfg.model.optimizer, OPTIMIZERS)
    if cfg.strategy.cross_device_ops is not None:
        _choice("strategy.cross_device_ops", cfg.strategy.cross_device_ops, CROSS_DEVICE_OPS)
    _choice("strategy.communication", cfg.strategy.communication, COMMUNICATIONS)
    _at_least("epochs", cfg.epochs, 1)
    _at_least("steps_per_epoch", cfg.steps_per_epoch, 1, allow_none=True)
    _at_least("batch_size_per_replica", cfg.batch_size_per_replica, 1)
    _at_least("global_batch_size", cfg.global_batch_size, 1, allow_none=True)
    _at_least("cpu_replicas", cfg.cpu_replicas, 1)
    _at_least("gpus", cfg.gpus, 0, allow_none=True)
    _at_least("workers", cfg.workers, 1)
    _at_least("ps", cfg.ps, 0)
    _at_least("warmup_steps", cfg.warmup_steps, 0)
    _at_least("log_every_steps", cfg.log_every_steps, 0)
    _steps_per_execution(cfg.steps_per_execution)
    _choice("precision", cfg.precision, PRECISIONS)
    _at_least("dataset.threadpool", cfg.dataset.threadpool, 0)
    _at_least("tracking.system_metrics_interval", cfg.tracking.system_metrics_interval, 0.1)
    if cfg.target_accuracy is not None and not 0 < cfg.target_accuracy <= 1:
        raise UserError(f"target_accuracy: received {cfg.target_accuracy}; expected 0 < x <= 1 "
                        "or null")
    if (cfg.jit_compile and cfg.strategy.name in ("mirrored", "central") and cfg.cpu_replicas > 1
            and (cfg.gpus == 0 or visible_gpus() == 0)):
        raise UserError(f"jit_compile: received true with cpu_replicas={cfg.cpu_replicas}; XLA "
                        "cannot reach a variable on another logical CPU device (TensorFlow's XLA "
                        "known issues: tf.Variable on a different device): use cpu_replicas=1 or "
                        "jit_compile=false")
    if cfg.dataset.on_device and cfg.loop.name != "custom":
        raise UserError(f"dataset.on_device: received true with loop={cfg.loop.name}; on-device "
                        "data needs loop=custom")
    _at_least("checkpoint.every_steps", cfg.checkpoint.every_steps, 0, allow_none=True)
    _at_least("checkpoint.keep", cfg.checkpoint.keep, 1)
    if cfg.cluster.port is not None and not 1024 <= cfg.cluster.port <= 65535 - cfg.workers - cfg.ps:
        raise UserError(f"cluster.port: received {cfg.cluster.port}; expected 1024..65535 (or null "
                        "for free ports)")
    if cfg.resume and cfg.loop.name == "fit":
        raise UserError("resume: received true with loop=fit; checkpoints and resume are part of "
                        "the custom loop: use loop=custom")
    if cfg.timeout is not None and cfg.timeout <= 0:
        raise UserError(f"timeout: received {cfg.timeout}; expected seconds > 0 or null")
    if cfg.learning_rate is not None and cfg.learning_rate <= 0:
        raise UserError(f"learning_rate: received {cfg.learning_rate}; expected > 0")
    if cfg.model.name == "custom" and (OmegaConf.is_missing(cfg.model, "factory") or
                                       not cfg.model.factory):
        raise UserError("model.factory: received null; model=custom needs "
                        "model.factory=package.module:function")
    ds = cfg.dataset
    if ds.name == "synthetic":
        if len(ds.shape) not in (1, 3) or any(d < 1 for d in ds.shape):
            raise UserError(f"dataset.shape: received {list(ds.shape)}; expected [h, w, c] or [d] "
                            "with every size >= 1")
        _at_least("dataset.num_classes", ds.num_classes, 2)
        _at_least("dataset.size", ds.size, 1)
    if ds.name == "custom" and (OmegaConf.is_missing(ds, "factory") or not ds.factory):
        raise UserError("dataset.factory: received null; dataset=custom needs "
                        "dataset.factory=package.module:function")
    tfds_missing = OmegaConf.is_missing(ds, "tfds_name")
    if ds.name == "tfds" or tfds_missing or ds.tfds_name is not None:
        if tfds_missing or not ds.tfds_name:
            raise UserError("dataset.tfds_name: received nothing; dataset=tfds needs a TFDS builder "
                            "name, e.g. dataset.tfds_name=cifar100")
        _choice("dataset.preprocessing", ds.preprocessing, PREPROCESSING)
        if ds.image_size is not None and (len(ds.image_size) != 2 or min(ds.image_size) < 1):
            raise UserError(f"dataset.image_size: received {list(ds.image_size)}; expected [h, w] "
                            "with sizes >= 1, or null")
    _validate_task(cfg)
    if not 0 < ds.test_fraction < 1:
        raise UserError(f"dataset.test_fraction: received {ds.test_fraction}; expected 0 < x < 1")

    if cfg.loop.name == "fit" and cfg.strategy.name == "central":
        raise UserError(
            "loop: received 'fit' with strategy=central; Keras 3 fit logs wrong loss/accuracy under "
            "CentralStorageStrategy, so distexp refuses it: use loop=custom")
    if cfg.loop.name == "fit" and cfg.strategy.name in ("multiworker", "ps"):
        ref = "keras-team/keras#20585" if cfg.strategy.name == "multiworker" else "keras-team/keras#18624"
        raise UserError(f"loop: received 'fit' with strategy={cfg.strategy.name}; Keras 3 fit cannot "
                        f"train it ({ref}): use loop=custom")
    if cfg.strategy.name == "ps" and cfg.jit_compile:
        raise UserError("jit_compile: received true with strategy=ps; the step's variables live on "
                        "the parameter servers, which XLA cannot reach from a worker: use "
                        "jit_compile=false")
    if cfg.strategy.name == "ps" and cfg.dataset.on_device:
        raise UserError("dataset.on_device: received true with strategy=ps; ps steps are scheduled "
                        "on remote workers, where no batch stays between scheduled calls: use "
                        "dataset.on_device=false")
    if cfg.strategy.cross_device_ops is not None and cfg.strategy.name != "mirrored":
        raise UserError(f"strategy.cross_device_ops: received {cfg.strategy.cross_device_ops!r} "
                        f"with strategy={cfg.strategy.name}; it applies to strategy=mirrored only: "
                        "leave it null")
    if cfg.strategy.name == "ps" and cfg.ps < 1:
        raise UserError(f"ps: received {cfg.ps}; strategy=ps needs at least 1 parameter server")

    replicas = replicas_per_worker(cfg) * sync_workers(cfg)
    if cfg.global_batch_size is not None and cfg.global_batch_size % replicas:
        raise UserError(
            f"global_batch_size: received {cfg.global_batch_size}; it must divide evenly over "
            f"{replicas} replicas (try {max(replicas, cfg.global_batch_size // replicas * replicas)})")


def _validate_task(cfg: DictConfig) -> None:
    """The task, its model and loop, its objective and target (no TensorFlow: built-in tasks
    are plain classes; a user's task is checked in the trainer)."""
    from distexp import tasks

    ds = cfg.dataset
    _choice("dataset.task", ds.task, tuple(tasks.REGISTRY))
    name = tasks.name_of(cfg)
    _choice("task.name", name, tasks.NAMES)
    if name == "custom" and not cfg.task.factory:
        raise UserError("task.factory: received null; task.name=custom needs "
                        "task.factory=package.module:function")
    _choice("dataset.source_tokens", ds.source_tokens, TOKENS)
    _choice("dataset.target_tokens", ds.target_tokens, TOKENS)
    _at_least("dataset.max_length", ds.max_length, 1, allow_none=True)
    _at_least("dataset.vocab_size", ds.vocab_size, 5, allow_none=True)
    _at_least("model.embedding_dim", cfg.model.embedding_dim, 1)
    _at_least("model.units", cfg.model.units, 1)
    if ds.name == "text_pairs" and not ds.path:
        raise UserError("dataset.path: received null; dataset=text_pairs needs "
                        "dataset.path=<a file of source<TAB>target lines>")
    seq2seq_models = tasks.seq2seq.MODELS
    if name == "seq2seq" and cfg.model.name not in seq2seq_models:
        raise UserError(f"model: received {cfg.model.name!r} with a seq2seq task (dataset="
                        f"{ds.name}); valid: {', '.join(seq2seq_models)}")
    if name != "seq2seq" and cfg.model.name in seq2seq_models:
        raise UserError(f"dataset: received {ds.name!r} with model={cfg.model.name}, which needs "
                        "sentence pairs; valid: text_pairs, synthetic_pairs")
    task = tasks.builtin(cfg)
    if cfg.loop.name == "fit" and (task is None or not task.fit_ok):
        why = task.fit_refusal if task is not None else (
            "Keras fit computes losses with Keras loss objects, not the task's")
        raise UserError(f"loop: received 'fit' with the {name} task; {why}: use loop=custom")
    if cfg.objective is not None and task is not None:
        _choice("objective", cfg.objective, task.figures() + PERF_OBJECTIVES)
    if cfg.target_accuracy is not None and task is not None and task.target_metric is None:
        raise UserError(f"target_accuracy: received {cfg.target_accuracy}; the {name} task has "
                        "no accuracy to reach: set it to null")


def objective_name(cfg: DictConfig) -> Optional[str]:
    """The figure a job returns: `objective`, else the task's (None for a user's task: the
    trainer writes it to result.json)."""
    if cfg.objective is not None:
        return str(cfg.objective)
    from distexp import tasks

    task = tasks.builtin(cfg)
    return task.objective if task is not None else None


def visible_gpus() -> int:
    """Number of GPUs this process may use, found without importing TensorFlow.

    Honours CUDA_VISIBLE_DEVICES; otherwise counts /proc/driver/nvidia/gpus (the NVIDIA driver's
    own list). The trainer re-checks with TensorFlow, which is authoritative.
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    driver = "/proc/driver/nvidia/gpus"
    present = len(os.listdir(driver)) if os.path.isdir(driver) else 0
    if env is not None:
        ids = [d for d in env.split(",") if d.strip() and d.strip() != "-1"]
        return min(len(ids), present) if present else 0
    return present


def check_gpus(requested: Optional[int], visible: int) -> int:
    """Resolve `gpus` against what is visible: null = all, N = first N, more = error."""
    if requested is None:
        return visible
    if requested > visible:
        raise UserError(
            f"gpus: received {requested}; {visible} GPU(s) visible on this machine. "
            f"To run on CPU use gpus=0 cpu_replicas={max(requested, 2)}")
    return requested


def validate_devices(cfg: DictConfig, gpus: int) -> None:
    """Checks that need the resolved GPU count (still before TensorFlow)."""
    if cfg.strategy.cross_device_ops == "nccl" and gpus == 0:
        raise UserError("strategy.cross_device_ops: received 'nccl'; NCCL needs GPUs and this job "
                        "trains on CPU: use hierarchical_copy or reduction_to_one_device")


def num_workers(cfg: DictConfig) -> int:
    return cfg.workers if cfg.strategy.name in ("multiworker", "ps") else 1


def sync_workers(cfg: DictConfig) -> int:
    """Workers whose replicas share one global batch: all of them under multiworker; one under ps
    (each ps step runs on one worker, asynchronously: TensorFlow's num_replicas_in_sync)."""
    return cfg.workers if cfg.strategy.name == "multiworker" else 1


def replicas_per_worker(cfg: DictConfig, gpus: Optional[int] = None) -> int:
    """Replicas each worker trains with (known before TensorFlow starts).

    multiworker and ps train one replica per worker on CPU (MultiWorkerMirroredStrategy and the
    ps workers use one CPU device): `cpu_replicas` applies to mirrored and central only.
    """
    if cfg.strategy.name == "one_device":
        return 1
    if gpus is None:
        gpus = cfg.gpus if cfg.gpus is not None else visible_gpus()
    if gpus > 0:
        return gpus
    return 1 if cfg.strategy.name in ("multiworker", "ps") else cfg.cpu_replicas


def global_batch(cfg: DictConfig, replicas: int) -> int:
    if cfg.global_batch_size is not None:
        return int(cfg.global_batch_size)
    return int(cfg.batch_size_per_replica) * replicas


def flatten(cfg: DictConfig) -> dict:
    """The resolved config as flat `a.b.c -> str` params (MLflow's param shape)."""
    out: dict = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = "null" if node is None else str(node)

    walk("", OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    return out
