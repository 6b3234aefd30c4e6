"""What an interrupted job says about continuing it (the job process: no TensorFlow).

After a sweep's job FINISHED, `tidy` removes its checkpoints (its own `<job dir>/checkpoints`; a
checkpoint.dir set by the user stays), unless `checkpoint.keep_in_sweeps=true`: a sweep measures,
and never resumes a finished job.

The checkpoint kept is the one `resume=true` starts from: the newest that `checkpoint.dir`'s
state file (tf.train.CheckpointManager's `checkpoint`, a text protobuf) names and whose index is
on disk. distexp.train.checkpoints reads the checkpoints themselves (and falls back to an older
one when the newest does not read back whole); this module only reads the state file's text.
"""
from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path
from typing import List, Optional, Tuple

from distexp.options import loops

_LATEST = re.compile(r'^model_checkpoint_path:\s*"(.*)"\s*$', re.M)


def kept(directory) -> Optional[Tuple[str, int]]:
    """(the newest checkpoint's path, its step) in `directory`, or None."""
    try:
        m = _LATEST.search((Path(directory) / "checkpoint").read_text())
    except (OSError, UnicodeDecodeError):
        return None
    if not m:
        return None
    path = Path(directory) / m.group(1)  # relative to the directory (an absolute one stays)
    step = re.search(r"ckpt-(\d+)$", m.group(1))
    if not step or not Path(f"{path}.index").is_file():
        return None
    return str(path), int(step.group(1))


def command(overrides: List[str]) -> str:
    """The command that continues the job: its overrides, resume=true instead of any resume=."""
    keep = [o for o in overrides if o.lstrip("+~").partition("=")[0] != "resume"]
    return " ".join(["python -m distexp", *map(shlex.quote, keep), "resume=true"])


def hint(cfg, overrides: Optional[List[str]] = None) -> str:
    """'; checkpoint kept: <path> (step N); continue with: <command>' for the interrupted line
    ('' when this job keeps no checkpoints: loop=fit, checkpoint.every_steps=0)."""
    if not loops.of(cfg).checkpoints:
        return (f"; loop={cfg.loop.name} keeps no checkpoint: run the same command again to "
                "start over")
    if cfg.checkpoint.every_steps == 0:
        return ("; checkpoint.every_steps=0 keeps no checkpoint: run the same command again to "
                "start over")
    if overrides is None:
        try:
            from hydra.core.hydra_config import HydraConfig

            overrides = list(HydraConfig.get().overrides.task)
        except ValueError:  # not inside a Hydra job
            return ""
    found = kept(cfg.checkpoint.dir)
    if found is None:
        return (f"; no checkpoint was kept in {cfg.checkpoint.dir} (none was written yet): run "
                "the same command again to start over")
    return f"; checkpoint kept: {found[0]} (step {found[1]}); continue with: {command(overrides)}"


def stopped_line(line: str, status: str, signal_name: str, cfg,
                 overrides: Optional[List[str]] = None) -> str:
    """A stopped job's one line (without "distexp: "): `line` ("interrupted: ... (logs: ...)")
    with the signal that stopped it, then what was kept and the command that continues."""
    if line.startswith("interrupted"):
        line = f"interrupted by {signal_name}{line[len('interrupted'):]}"
    if status == "FINISHED":  # the stop came as the run was closed: the job is complete
        return line + "; the job had finished: its run and figures are kept"
    return line + hint(cfg, overrides)


def tidy(cfg, status: str, job_dir, multirun: bool) -> bool:
    """After a job ended: remove a FINISHED sweep job's own checkpoints (`<job dir>/checkpoints`,
    the default in a sweep) unless checkpoint.keep_in_sweeps; whether it removed them. Called by
    the job process that logs the run (the chief's)."""
    if not multirun or status != "FINISHED" or cfg.checkpoint.keep_in_sweeps:
        return False
    own = Path(job_dir).absolute() / "checkpoints"
    if Path(str(cfg.checkpoint.dir)).absolute() != own or not own.is_dir():
        return False
    shutil.rmtree(own, ignore_errors=True)
    return not own.exists()
