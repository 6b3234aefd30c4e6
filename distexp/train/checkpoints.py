"""Checkpoints of the custom loops (tf.train.CheckpointManager) and `resume=true`.

- What is saved: the model, the optimizer (slots and iterations) and the training step count.
  The data order is a function of the step (seeded shuffle, repeated), so a resumed job skips the
  batches already trained and sees exactly the batches an uninterrupted job would.
- Where: the chief writes `checkpoint.dir` (stable across invocations, unlike the Hydra run dir,
  so a later `resume=true` finds it); every other worker must take part in the save under
  MultiWorkerMirroredStrategy and writes a throwaway directory, deleted at the end (the TF
  multi-worker tutorial's pattern). Under ps only the coordinator saves.
- When: every `checkpoint.every_steps` steps (null = at every epoch's end, 0 = never) and at the end.
- A fresh job (resume=false) deletes the checkpoints a previous job left in `checkpoint.dir`, so a
  later resume can never continue someone else's training.
- Whose: beside the checkpoints the chief writes `distexp-model.json` (the model's name, its
  parameter count and variable shapes); `resume=true` with another model is one line naming both
  (a checkpoint without that file that does not fit is one line too, not TensorFlow's traceback).
- One job at a time: the chief holds an exclusive lock on `checkpoint.dir` while it trains (the
  kernel drops it when the process dies, so a crashed job's directory is free for its resume).
  Concurrent jobs of the same strategy/model/dataset (parallel or concurrent sweeps) would
  otherwise overwrite each other's files: a fresh job that finds the directory busy writes to
  `<checkpoint.dir>.<pid>` instead and says so; a resume that finds it busy is a user error.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from distexp.tracking import tags as tag

IDENTITY = "distexp-model.json"  # whose checkpoints these are (written by the chief)


class Checkpoints:
    def __init__(self, cfg, *, model, optimizer, step, chief: bool, steps_per_epoch: int,
                 saves: bool = True, say=print, logger=None):
        import tensorflow as tf

        every = cfg.checkpoint.every_steps
        self.every = steps_per_epoch if every is None else int(every)
        self.real = Path(cfg.checkpoint.dir)
        self.resume = bool(cfg.resume)
        self.step = step  # a tf.Variable (int64) the loop owns
        self.chief = chief
        self.saves = saves and self.every > 0
        self.say = say
        self.logger = logger  # tracking.RunLogger: the run says whether and whence it resumed
        self.ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
        self.identity = identity(cfg, model)
        self._tmp: Optional[str] = None
        self._lock = None
        self.manager = None
        if self.saves:
            if chief:
                self._lock = _take(self.real)
                if self._lock is None:
                    if self.resume:
                        from distexp.errors import UserError

                        raise UserError(f"checkpoint.dir: received {str(self.real)!r}; another "
                                        "running job is using it, so there is nothing safe to "
                                        "resume from: wait for it, or set checkpoint.dir")
                    busy, self.real = self.real, Path(f"{self.real}.{os.getpid()}")
                    self._lock = _take(self.real)
                    say(f"checkpoint: {busy} is in use by another running job; this job's "
                        f"checkpoints go to {self.real}")
                if not self.resume:
                    clear(self.real)
                    self._write_identity()
                where = str(self.real)
            else:
                where = self._tmp = tempfile.mkdtemp(prefix="distexp-ckpt-")
            self.manager = tf.train.CheckpointManager(self.ckpt, where,
                                                      max_to_keep=int(cfg.checkpoint.keep))

    def restore(self) -> int:
        """With resume=true: the latest checkpoint of checkpoint.dir (every worker reads the
        chief's), returning the step it was taken at; 0 = fresh start."""
        import tensorflow as tf

        if not self.resume:
            return 0
        latest = tf.train.latest_checkpoint(str(self.real))
        if latest is None:
            self.say(f"resume: no checkpoint in {self.real}; starting fresh")
            self._tag("no checkpoint: fresh start", 0, "")
            if self.manager is not None and self.chief:
                self._write_identity()
            return 0
        self._check_identity()
        try:
            self.ckpt.restore(latest).expect_partial()
        except (ValueError, tf.errors.OpError) as ex:  # written by another model, no identity file
            from distexp.errors import UserError

            why = str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__
            why = why.split(" Target variable:")[0][:300]
            raise UserError(f"checkpoint.dir: received {str(self.real)!r}, whose checkpoint does "
                            f"not fit this job's model={self.identity['model']} ({why}); valid: "
                            "resume with the model that wrote it, another checkpoint.dir, or "
                            "resume=false (a fresh start)") from None
        step = int(self.step.numpy())
        self.say(f"resume: restored {latest} (step {step})")
        self._tag("restored", step, latest)
        return step

    def _write_identity(self) -> None:
        if self.chief and self.saves:
            (self.real / IDENTITY).write_text(json.dumps(self.identity) + "\n")

    def _check_identity(self) -> None:
        """resume=true: the checkpoint's model must be this job's (one line naming both)."""
        try:
            theirs = json.loads((self.real / IDENTITY).read_text())
        except (OSError, ValueError):
            return  # an older checkpoint: restore() says it when it does not fit
        mine = self.identity
        if theirs.get("model") == mine["model"] and theirs.get("shapes") == mine["shapes"]:
            return
        from distexp.errors import UserError

        same = theirs.get("model") == mine["model"]
        raise UserError(
            f"checkpoint.dir: received {str(self.real)!r}, which holds a checkpoint of "
            f"model={theirs.get('model')} ({theirs.get('parameters', 0):,} parameters); this "
            f"job's model is {mine['model']} ({mine['parameters']:,} parameters"
            + (", other variable shapes" if same else "") + "); valid: resume with "
            + ("the model that wrote it" if same else f"model={theirs.get('model')}")
            + ", another checkpoint.dir, or resume=false (a fresh start)")

    def _tag(self, what: str, step: int, path: str) -> None:
        if self.logger is not None and self.chief:
            self.logger.set_tags({tag.RESUME: what, tag.RESUMED_FROM_STEP: step,
                                  tag.RESUMED_FROM: path or "-"})

    def after_step(self, step: int, last: bool = False, since: Optional[int] = None) -> bool:
        """Save when a multiple of every_steps was reached in (since, step] (default: the step
        before) or at the last step; True when something was written."""
        since = step - 1 if since is None else since
        if not self.saves or not (last or step // self.every > since // self.every):
            return False
        self.step.assign(step)
        self.manager.save(checkpoint_number=step)
        return True

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None


def _take(directory: Path):
    """An open file holding an exclusive flock on `directory`, or None when another process has it."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    f = open(directory / ".distexp.lock", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def identity(cfg, model) -> dict:
    """Whose checkpoint: the model's name (a user's factory named), parameters, variable shapes."""
    name = cfg.model.name
    if name == "custom":
        name = f"custom ({cfg.model.factory})"
    return {"model": name, "parameters": sum(math.prod(v.shape) for v in model.weights),
            "shapes": [list(v.shape) for v in model.weights]}


def clear(directory: Path) -> None:
    """Remove what tf.train.CheckpointManager (and the identity file) wrote in `directory` (and
    nothing else)."""
    if not directory.is_dir():
        return
    for p in directory.iterdir():
        if p.name in ("checkpoint", IDENTITY) or p.name.startswith("ckpt-"):
            p.unlink(missing_ok=True)
