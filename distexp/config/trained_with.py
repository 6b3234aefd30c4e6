"""What a checkpoint was trained with, and whether `resume=true` may continue it (no TensorFlow).

- `record`: the job's configuration as it shapes the training: its resolved config (the params its
  run logs, distexp.config.schema.flatten) without the keys that change nothing of what is trained
  (NOT_TRAINING: tracking, progress, paths, checkpoints, timings, sweeps, the cluster's addresses),
  the learning rate as the optimizer's base rate (`learning_rate`, else the model's), and the
  replicas and global batch the job resolved to. The chief writes it into the checkpoint
  directory's identity file (distexp.train.checkpoints) when a fresh job starts.
- `differences`: the keys two records disagree on, but the length of training (LENGTH: `epochs`,
  `steps_per_epoch`), which a resume may change. A key one of them lacks (a distexp that did not
  have it) is not compared.
- `check`: `resume=true` on a checkpoint trained with another configuration is one line naming
  the keys, received vs the checkpoint's, and the checkpoint's path (exit 2); called by the
  checks in the job process, before TensorFlow, where the chief runs here (the chief trainer
  checks again before it restores, wherever it runs). Also `checkpoint.keep_in_sweeps`, a sweep's
  key, refused for a single run.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from omegaconf import DictConfig

from distexp import strategies
from distexp.errors import UserError
from distexp.options import groups

IDENTITY = "distexp-model.json"  # whose checkpoints these are (written by the chief)
# Keys (and prefixes, ending in ".") that do not change what is trained: where figures go, what
# the console shows, where and how often checkpoints are written, how long a job may run, which
# figures are measured, how the sweep repeats jobs, where the cluster's tasks listen, how many
# steps one tf.function call runs (the same steps either way), the input pipeline's performance
# knobs and where prepared data is cached.
NOT_TRAINING = ("tracking.", "checkpoint.", "sweep.", "cluster.", "resume", "progress",
                "log_every_steps", "timeout", "warm_start", "measure_peak_flops", "measure_min_seconds",
                "measure_min_steps",
                "measure_step_split", "profile", "objective", "target_accuracy", "terminate_on_nan",
                "repeats", "repeat", "steps_per_execution", "warmup_steps", "dataset.prefetch",
                "dataset.threadpool", "dataset.data_dir", "dataset.download", "dataset.cache")
LENGTH = ("epochs", "steps_per_epoch")  # a resume may train for longer (or shorter)
SHOWN = 4  # differing keys named in the line; the rest counted


def _trains(key: str) -> bool:
    return not any(key == k or (k.endswith(".") and key.startswith(k)) for k in NOT_TRAINING)


def record(cfg: DictConfig, facts) -> Dict[str, str]:
    """The configuration a job trains with, as flat `key -> str`; `facts`: its resolved facts
    (the checks' `resolve`, or the trainer's `cfg.resolved`): replicas and global batch."""
    from distexp.config.schema import flatten

    counts = set(strategies.of(cfg).count_keys())  # workers/ps: only where they start processes
    out = {k: v for k, v in flatten(cfg).items()
           if _trains(k) and (k not in ("workers", "ps") or k in counts)}
    out.pop("model.learning_rate", None)  # folded into learning_rate (its default)
    base = cfg.learning_rate if cfg.learning_rate is not None else cfg.model.learning_rate
    out["learning_rate"] = repr(float(base))
    out["resolved.replicas"] = str(facts["replicas"])
    out["resolved.global_batch"] = str(facts["global_batch"])
    return out


def differences(mine: Dict[str, str], theirs: Dict[str, str]) -> List[Tuple[str, str, str]]:
    """(key, this job's value, the checkpoint's) for each key both records hold and disagree on,
    but the length of training; the config's keys first, then the facts (resolved.*)."""
    keys = sorted(set(mine) & set(theirs), key=lambda k: (k.startswith("resolved."), k))
    return [(k, mine[k], theirs[k]) for k in keys if k not in LENGTH and mine[k] != theirs[k]]


def _option_of(key: str) -> Optional[str]:
    """The group whose chosen option `key` is (`model.name` -> model), else None."""
    group, _, rest = key.partition(".")
    return group if rest == "name" and group in groups.GROUPS else None


def _override(key: str, value: str) -> str:
    """The override that sets `key` back: an option by its group (`strategy=one_device`)."""
    return f"{_option_of(key) or key}={value}"


def refusal(diffs: List[Tuple[str, str, str]], checkpoint: str) -> UserError:
    """The one line: the keys that differ, received vs the checkpoint's, and its path. Another
    option of a group (`model.name`) speaks for the group's other keys, which follow from it."""
    options = {_option_of(k) for k, _, _ in diffs} - {None}
    diffs = [d for d in diffs if d[0].partition(".")[0] not in options or _option_of(d[0])]
    shown, more = diffs[:SHOWN], len(diffs) - SHOWN
    extra = f" (and {more} more key{'s' * (more > 1)})" if more > 0 else ""
    names = ", ".join(k for k, _, _ in shown)
    received = shown[0][1] if len(shown) == 1 else ", ".join(f"{k}={m}" for k, m, _ in shown)
    theirs = ", ".join(f"{k}={t}" for k, _, t in shown)
    back = " ".join(_override(k, t) for k, _, t in shown if not k.startswith("resolved."))
    return UserError(
        f"{names}: received {received}{extra} with resume=true; the checkpoint {checkpoint} was "
        f"trained with {theirs} (a resume continues the same configuration: only epochs and "
        f"steps_per_epoch may differ); valid: " + (f"{back}, " if back else "the gpus, "
                                                   "cpu_replicas, workers and batch it had, ")
        + "another checkpoint.dir, or resume=false (a fresh start, which replaces it)")


def newest(directory) -> Optional[str]:
    """The newest checkpoint (highest step) whose index is in `directory`, as `<dir>/ckpt-N`."""
    steps = [int(m.group(1)) for p in Path(directory).glob("ckpt-*.index")
             if (m := re.fullmatch(r"ckpt-(\d+)\.index", p.name))]
    return f"{directory}/ckpt-{max(steps)}" if steps else None


def recorded(directory) -> Optional[Dict[str, str]]:
    """The configuration the identity file in `directory` records; None when there is none (no
    file, or one written before distexp recorded it)."""
    try:
        found = json.loads((Path(directory) / IDENTITY).read_text()).get("config")
    except (OSError, ValueError, AttributeError):
        return None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else None


def check(cfg: DictConfig, kind, rec, facts: dict, in_sweep: bool) -> None:
    """The job process's resume checks (distexp.config.checks.validate): a sweep's key in a single
    run; with resume=true, a checkpoint in checkpoint.dir trained with another configuration
    (where the chief runs here; in a sweep the trainer checks, as only the job knows its own
    checkpoint.dir)."""
    if cfg.checkpoint.keep_in_sweeps and not in_sweep:
        raise UserError("checkpoint.keep_in_sweeps: received true for a single run; it applies to "
                        "a sweep only (a single run always keeps its checkpoints): add -m "
                        "(python -m distexp -m ...) or leave it out")
    if not cfg.resume or in_sweep or not kind.chief_here(rec):
        return
    directory = Path(str(cfg.checkpoint.dir)).absolute()
    checkpoint = newest(directory)
    theirs = recorded(directory) if checkpoint else None
    if theirs is None:
        return  # none: the trainer starts fresh and says so; an older one: it checks the model
    diffs = differences(record(cfg, facts), theirs)
    if diffs:
        raise refusal(diffs, checkpoint)
