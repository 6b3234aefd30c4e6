"""Checkpoints of the custom loops (tf.train.CheckpointManager) and `resume=true`.

- What is saved: the model, the optimizer (slots and iterations), the training step count and
  the model's random generators (each Keras SeedGenerator's state: Dropout masks, noise and random
  augmentation layers; a checkpoint of the model alone does not reach them). The data order is a
  function of the step (seeded shuffle, repeated), so a resumed job skips the batches already
  trained and sees exactly the batches an uninterrupted job would: its per-step losses are the
  uninterrupted job's.
- Where: the chief writes `checkpoint.dir` (stable across invocations, unlike the Hydra run dir,
  so a later `resume=true` finds it); every other worker must take part in the save under
  MultiWorkerMirroredStrategy and writes a throwaway directory, deleted at the end (the TF
  multi-worker tutorial's pattern). Under ps only the coordinator saves.
- When: every `checkpoint.every_steps` steps (null = at every epoch's end, 0 = never) and at the end.
- A fresh job (resume=false) deletes the checkpoints a previous job left in `checkpoint.dir`, so a
  later resume can never continue someone else's training, and says so in one line (the steps
  removed, and the keys that job's configuration differed in).
- Whose: beside the checkpoints the chief writes `distexp-model.json` (the model's name, its
  parameter count and variable shapes, and the configuration it trains with:
  distexp.config.trained_with); `resume=true` with another configuration (but the length of
  training) is one line naming the keys (the job process says it before TensorFlow where the
  chief runs beside it), with another model one line naming both (a checkpoint without that file
  that does not fit is one line too, not TensorFlow's traceback).
- One job at a time: the chief holds an exclusive lock on `checkpoint.dir` while it trains (the
  kernel drops it when the process dies, so a crashed job's directory is free for its resume).
  Concurrent jobs of the same strategy/model/dataset (parallel or concurrent sweeps) would
  otherwise overwrite each other's files: a fresh job that finds the directory busy writes to
  `<checkpoint.dir>.<pid>` instead and says so; a resume that finds it busy is a user error.
- A save that fails (a full disk, a read-only file system) is one line naming `checkpoint.dir`,
  the bytes free and needed and the checkpoint kept; what it wrote is removed (the earlier
  checkpoints are whole: the manager records and sweeps only after a save succeeded), so
  `resume=true` continues from the last one once there is room.
- Resume reads the newest checkpoint back whole before restoring it (distexp.train.
  checkpoint_files.unreadable). One that does not (truncated, corrupt, a file missing) is skipped
  for the newest that does, said in one line and the run's tag `distexp.resume_fallback`; when
  none does, one line naming the newest one's file and what to do.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from distexp import stops
from distexp.config import trained_with
from distexp.console_lines import DETAIL
from distexp.errors import UserError, first_line
from distexp.options import models
from distexp.tracking import tags as tag
from distexp.train import checkpoint_files
from distexp.train.checkpoint_files import IDENTITY, clear

WARNED = threading.Event()  # SIGUSR1 came: the next step saves


def listen_for_time_warning() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGUSR1, lambda signum, frame: WARNED.set())


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
        self.ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step,
                                        seeds=seed_states(model))
        self.identity = identity(cfg, model)
        self._tmp: Optional[str] = None
        self._lock = None
        self.manager = None
        if self.saves:
            if chief:
                self._lock = _take(self.real)
                if self._lock is None:
                    if self.resume:
                        raise UserError(f"checkpoint.dir: received {str(self.real)!r}; another "
                                        "running job is using it, so there is nothing safe to "
                                        "resume from: wait for it, or set checkpoint.dir")
                    busy, self.real = self.real, Path(f"{self.real}.{os.getpid()}")
                    self._lock = _take(self.real)
                    say(f"checkpoint: {busy} is in use by another running job; this job's "
                        f"checkpoints go to {self.real}")
                self._start_dir()
                where = str(self.real)
            else:
                where = self._tmp = tempfile.mkdtemp(prefix="distexp-ckpt-")
            self.manager = tf.train.CheckpointManager(self.ckpt, where,
                                                      max_to_keep=int(cfg.checkpoint.keep))
        # SIGUSR1 (Slurm's --signal=USR1@<s> before its time limit): a checkpoint at the next step.
        # One process only: a multi-worker save needs every worker at the same step.
        self.on_warning = self.saves and int(OmegaConf.select(cfg, "resolved.workers") or 1) == 1

    def _start_dir(self) -> None:
        """The chief's checkpoint.dir before training: a fresh job empties it and says whose it
        is; a resume removes only what a save killed half-way left."""
        try:
            if self.resume:
                checkpoint_files.remove_temporary(self.real)
            else:
                theirs = trained_with.recorded(self.real)
                removed = clear(self.real)
                if removed:
                    self.say(_removed_line(self.real, removed, theirs, self.identity.get("config")))
                self._write_identity()
        except OSError as ex:
            raise UserError(f"checkpoint.dir: received {str(self.real)!r}; it cannot be written "
                            f"({ex.strerror}; {shutil.disk_usage(self.real).free:,} bytes free); "
                            "valid: a writable directory with room for the checkpoints, or "
                            "checkpoint.every_steps=0 (no checkpoints)") from None

    def restore(self) -> int:
        """With resume=true: the newest checkpoint of checkpoint.dir that reads back whole (every
        worker reads the chief's), returning the step it was taken at; 0 = fresh start."""
        if not self.resume:
            return 0
        found = checkpoint_files.candidates(self.real)
        if not found:
            self.say(f"resume: no checkpoint in {self.real}; starting fresh")
            self._tag("no checkpoint: fresh start", 0, "")
            if self.manager is not None and self.chief:
                self._write_identity()
            return 0
        self._check_identity(found[0])
        path, skipped = self._newest_whole(found)
        self._restore(path)
        step = int(self.step.numpy())
        if skipped:
            self.say(f"resume: {skipped}; restored the newest checkpoint that reads back whole, "
                     f"{path} (step {step})")
            if self.logger is not None and self.chief:
                self.logger.set_tags({tag.RESUME_FALLBACK: f"{skipped}; restored {path}"})
        else:
            self.say(f"resume: restored {path} (step {step})")
        self._tag("restored", step, path)
        return step

    def _newest_whole(self, found) -> tuple:
        """(the newest checkpoint that reads back whole, what was wrong with the newer ones or
        ""); none whole: one line naming the newest one's file and what to do."""
        bad = []
        for path in found:
            problem = checkpoint_files.unreadable(path)
            if problem is None:
                more = len(bad) - 1
                return path, (f"{bad[0][0]} cannot be read back ({bad[0][1]})" +
                              (f" (nor can {more} other checkpoint{'s' * (more > 1)} newer than "
                               "the one restored)" if more else "") if bad else "")
            print(f"{DETAIL}resume: {problem[0]}: {problem[1]}", flush=True)  # log only
            bad.append(problem)
        raise UserError(f"checkpoint.dir: received {str(self.real)!r}; no checkpoint in it reads "
                        f"back whole: {bad[0][0]} ({bad[0][1]})"
                        + (f", and {len(bad) - 1} older" if len(bad) > 1 else "")
                        + "; valid: restore those files from a copy, another checkpoint.dir, or "
                        "resume=false (a fresh start, which deletes them)")

    def _restore(self, path: str) -> None:
        import tensorflow as tf

        try:
            self.ckpt.restore(path).expect_partial()
        except (ValueError, tf.errors.OpError) as ex:  # written by another model, no identity file
            why = first_line(ex, None)
            why = why.split(" Target variable:")[0][:300]
            raise UserError(f"checkpoint.dir: received {str(self.real)!r}, whose checkpoint does "
                            f"not fit this job's model={self.identity['model']} ({why}); valid: "
                            "resume with the model that wrote it, another checkpoint.dir, or "
                            "resume=false (a fresh start)") from None

    def _write_identity(self) -> None:
        if self.chief and self.saves:
            (self.real / IDENTITY).write_text(json.dumps(self.identity) + "\n")

    def _check_identity(self, newest: str) -> None:
        """resume=true: the checkpoint's configuration must be this job's but the length of
        training (one line naming the keys), its model this job's (one line naming both)."""
        try:
            theirs = json.loads((self.real / IDENTITY).read_text())
        except (OSError, ValueError):
            return  # an older checkpoint: restore() says it when it does not fit
        recorded = trained_with.recorded(self.real)
        if recorded is not None and self.identity.get("config") is not None:
            diffs = trained_with.differences(self.identity["config"], recorded)
            if diffs:
                raise trained_with.refusal(diffs, newest)
        mine = self.identity
        if theirs.get("model") == mine["model"] and theirs.get("shapes") == mine["shapes"]:
            return
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
        warned = self.on_warning and WARNED.is_set()
        if not self.saves or not (last or warned or step // self.every > since // self.every):
            return False
        import tensorflow as tf

        if warned:
            WARNED.clear()
            self.say(f"checkpoint: SIGUSR1 (a time-limit warning): step {step} saved now; "
                     "training goes on")

        self.step.assign(step)
        stops.hold("checkpoint")  # tests (distexp.stops.HOLD_ENV)
        try:
            self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as ex:  # a full disk, a read-only file system
            self._failed_save(step, ex)
        return True

    def _failed_save(self, step: int, ex: BaseException) -> None:
        """Remove what the failed save wrote and stop with one line: checkpoint.dir, the bytes free
        and needed, the checkpoint kept (the manager has not recorded or swept anything)."""
        where = Path(self.manager.directory)
        print(f"{DETAIL}checkpoint save: {checkpoint_files.reason(ex)}", flush=True)  # log only
        checkpoint_files.remove_partial(where, step)
        whole = [c for c in checkpoint_files.candidates(where) if Path(c + ".index").is_file()]
        kept = whole[0] if whole else None  # the state file's newest (not the manager's memory)
        needed = checkpoint_files.size(kept) or checkpoint_files.variable_bytes(self.ckpt_variables())
        try:
            free = f"{shutil.disk_usage(where).free:,}"
        except OSError:
            free = "unknown"
        text = str(ex)
        read_only = "Read-only file system" in text
        why = ("no space left on the device" if "No space left" in text else
               "the file system is read-only" if read_only else checkpoint_files.reason(ex))
        fix = ("make it writable (or set checkpoint.dir to a writable directory)" if read_only
               else "make room (or set checkpoint.dir to a disk with room)")
        key = f"checkpoint.dir: received {str(self.real)!r}" if self.chief else \
            f"checkpoint: this worker's temporary directory {str(where)!r}"
        if kept is not None and checkpoint_files.number(kept) == step:
            # the save landed and the state file records it; what failed came after it (the
            # manager removing its oldest checkpoint): the directory turned unwritable meanwhile
            raise UserError(f"{key}; the checkpoint of step {step} ({kept}) was written, then "
                            f"removing an older one failed ({why}: {free} bytes free); it is "
                            f"kept whole: {fix}, then run the same command with resume=true"
                            ) from None
        after = (f"the checkpoint of step {checkpoint_files.number(kept)} ({kept}) is kept whole: {fix}, "
                 "then run the same command with resume=true" if kept else
                 f"no earlier checkpoint of this job was kept: {fix} and run it again")
        raise UserError(f"{key}; the checkpoint of step {step} could not be written ({why}: "
                        f"{free} bytes free, about {needed:,} needed); {after}") from None

    def ckpt_variables(self) -> list:
        """Every variable the checkpoint holds (model, optimizer, step, seeds)."""
        model, optimizer = self.ckpt.model, self.ckpt.optimizer
        return [*model.variables, *optimizer.variables, self.step]

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None


def seed_states(model) -> list:
    """The model's random generators: each Keras SeedGenerator's state (Dropout, noise and random
    augmentation layers), which `model.variables` lists beside the weights but a
    tf.train.Checkpoint of the model does not reach. Without them a resumed job draws the
    masks an uninterrupted job drew in its first steps, and trains to other losses."""
    weights = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weights]


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
    """Whose checkpoint: the model's name (a user's factory named), parameters, variable shapes,
    and the configuration it trains with (distexp.config.trained_with; from the job's facts)."""
    name = cfg.model.name
    if models.of(cfg).factory:
        name = f"custom ({cfg.model.factory})"
    facts = OmegaConf.select(cfg, "resolved")
    return {"model": name, "parameters": sum(math.prod(v.shape) for v in model.weights),
            "shapes": [list(v.shape) for v in model.weights],
            "config": trained_with.record(cfg, facts) if facts is not None else None}


def _removed_line(directory: Path, steps: list, theirs, mine) -> str:
    """A fresh start's line: the checkpoints it removed, and how their job's configuration
    differed from this one's (or that resume=true would have continued it)."""
    diffs = trained_with.differences(mine, theirs) if theirs and mine else None
    whose = ("" if diffs is None else
             f"; that job had another {', '.join(k for k, _, _ in diffs[:trained_with.SHOWN])}"
             if diffs else "; that job had this configuration: resume=true would have continued it")
    which = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
    return (f"checkpoint: a fresh start (resume=false) removed {len(steps)} checkpoint"
            f"{'s' * (len(steps) > 1)} ({which}) of an earlier job from {directory}{whose}")
