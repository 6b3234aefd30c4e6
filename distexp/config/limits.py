"""What this machine cannot hold or places it cannot write: the limits the job checks before
anything starts (distexp.config.checks calls `check` with the facts it found). Each is one line,
`key: received X; ...; expected Y`; no TensorFlow."""
from __future__ import annotations

import os
import tempfile

from omegaconf import DictConfig

from distexp.errors import UserError
from distexp.options import datasets, loops

CPU_REPLICAS_PER_CORE = 8  # logical CPU devices are cheap, but hundreds of them hang the runtime
PROCESSES_PER_CORE = 4     # a local cluster: TF processes (each with its own thread pools) per core
TRAINER_MB = 700           # one training process's resident memory (measured: 723 MB, cnn on digits)


def check(cfg: DictConfig, rec, kind, facts: dict, processes: int) -> None:
    """The machine's limits: logical CPU devices and local processes for its cores and memory, a
    training set of at least one global batch, a writable checkpoint dir where the chief runs.
    `processes`: the training processes this job starts on this machine."""
    _check_machine(cfg, rec, processes, on_cpu=facts["gpus"] == 0)
    _check_data_size(cfg, rec, facts["global_batch"])
    _check_checkpoint_dir(cfg, kind.chief_here(rec))


def machine() -> tuple:
    """(usable cores, available memory in MB or None) of this machine, without TensorFlow."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        return cores, int(info["MemAvailable"].split()[0]) // 1024
    except (OSError, KeyError, ValueError):
        return cores, None


def _check_machine(cfg: DictConfig, rec, processes: int, on_cpu: bool) -> None:
    cores, mem_mb = machine()
    if on_cpu and rec.cpu_replicas:
        most = CPU_REPLICAS_PER_CORE * cores
        if cfg.cpu_replicas > most:
            raise UserError(f"cpu_replicas: received {cfg.cpu_replicas}; this machine has {cores} "
                            f"core(s): expected 1..{most} ({CPU_REPLICAS_PER_CORE} logical devices "
                            "per core; more only slow the start-up and the all-reduce)")
    if processes <= 1:
        return
    key = max(rec.count_keys(), key=lambda k: cfg[k])  # the largest: a tie -> workers
    need_mb = processes * TRAINER_MB
    said = (f"cluster=local would start {processes} TensorFlow processes (~{TRAINER_MB} MB each, "
            f"~{need_mb} MB in all) on this machine's {cores} core(s)"
            + (f" and {mem_mb} MB of available memory" if mem_mb is not None else ""))
    if processes > PROCESSES_PER_CORE * cores or (mem_mb is not None and need_mb > mem_mb):
        raise UserError(f"{key}: received {cfg[key]}; {said}; expected at most "
                        f"{_most_processes(cores, mem_mb)} processes here: fewer workers/ps, or "
                        "cluster=slurm / cluster=tf_config across machines")


def _most_processes(cores: int, mem_mb) -> int:
    most = PROCESSES_PER_CORE * cores
    return most if mem_mb is None else min(most, mem_mb // TRAINER_MB)


def _check_data_size(cfg: DictConfig, rec, batch: int) -> None:
    """A training set smaller than one global batch: not one step could be taken."""
    ds = cfg.dataset
    known = datasets.of(cfg).train_examples(cfg)
    if known is None:
        return
    n, key = known
    sharded = rec.coordinated
    if sharded:
        n //= cfg.workers  # each ps worker reads its own shard
    if n < batch:
        what = f"{n} training examples" + (" per ps worker" if sharded else "")
        raise UserError(f"{key}: received {cfg[key] if '.' not in key else ds.size}; dataset="
                        f"{ds.name} has {what}, fewer than one global batch ({batch}); expected a "
                        "global batch no larger than the training set (lower batch_size_per_"
                        "replica or global_batch_size" + (", or raise dataset.size)" if
                                                          key == "dataset.size" else ")"))


def _check_checkpoint_dir(cfg: DictConfig, chief_here: bool) -> None:
    """The chief's checkpoint.dir must be creatable and writable (a probe directory is made in it
    and removed), when the chief runs here (the cluster kind's answer)."""
    saves = loops.of(cfg).checkpoints and cfg.checkpoint.every_steps != 0
    if not saves or not chief_here:
        return
    path = os.path.abspath(str(cfg.checkpoint.dir))
    probe = path
    while not os.path.lexists(probe):  # the nearest existing ancestor: the one mkdir -p needs
        probe = os.path.dirname(probe)
    problem = None
    if not os.path.isdir(probe):
        problem = f"{probe} is not a directory"
    else:
        try:  # what the chief will do: create a directory there (removed again at once)
            os.rmdir(tempfile.mkdtemp(prefix=".distexp-check-", dir=probe))
        except OSError as ex:
            problem = f"cannot create a directory in {probe} ({ex.strerror})"
    if problem:
        raise UserError(f"checkpoint.dir: received {str(cfg.checkpoint.dir)!r}; {problem}; "
                        "expected a directory this job can create and write, or "
                        "checkpoint.every_steps=0 (no checkpoints)")
