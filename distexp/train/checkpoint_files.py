"""What tf.train.CheckpointManager leaves in a directory, read and tidied without trusting it.

- `candidates`: the checkpoints a directory holds, newest (highest step) first: those its
  `checkpoint` state file lists and those whose index file is there (a state file that does not
  parse still leaves the checkpoints findable).
- `unreadable`: whether a checkpoint reads back whole, by reading every tensor once (TensorFlow's
  bundle reader checks each tensor's length and checksum) before any variable is assigned: a
  restore that fails half-way would leave the model half restored. It names the file at fault.
- `remove_partial`: what a save that failed (a full disk, a read-only file system) or a process
  killed while saving left behind: `ckpt-N_temp/` (SaveV2 writes there first), the files of the
  checkpoint being written, the state file's temporary copy.
- `clear`: what the manager (and distexp's identity file) wrote, and nothing else.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import List, Optional, Tuple

from distexp.config.trained_with import IDENTITY  # whose checkpoints these are (the chief's)

_NUMBER = re.compile(r"ckpt-(\d+)$")


def number(prefix: str) -> int:
    """The step a checkpoint prefix (`.../ckpt-20`) was saved at (its manager's number)."""
    m = _NUMBER.search(str(prefix))
    return int(m.group(1)) if m else -1


def candidates(directory: Path) -> List[str]:
    """The checkpoint prefixes in `directory`, newest first."""
    import tensorflow as tf

    found = {str(p)[: -len(".index")] for p in Path(directory).glob("ckpt-*.index")}
    try:
        state = tf.train.get_checkpoint_state(str(directory))
    except Exception:  # noqa: BLE001  (a state file that does not parse: the glob still finds them)
        state = None
    if state is not None:
        listed = [*state.all_model_checkpoint_paths, state.model_checkpoint_path]
        found.update(os.path.join(str(directory), p) for p in listed if p)
    return sorted(found, key=number, reverse=True)


def unreadable(prefix: str) -> Optional[Tuple[str, str]]:
    """None when the checkpoint reads back whole, else (the file at fault, why)."""
    import tensorflow as tf

    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception as ex:  # noqa: BLE001  (missing, truncated or not an index at all)
        return f"{prefix}.index", reason(ex)
    try:
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except Exception as ex:  # noqa: BLE001  (IndexError: Read less bytes than requested; DataLoss)
        named = re.search(re.escape(prefix) + r"\.data-[\w-]+", str(ex))  # e.g. a missing shard
        shards = sorted(Path(prefix).parent.glob(Path(prefix).name + ".data-*"))
        at_fault = named.group(0) if named else \
            str(shards[0]) if len(shards) == 1 else f"{prefix}.data-*"
        return at_fault, reason(ex)
    return None


def reason(ex: BaseException) -> str:
    text = " ".join(str(ex).split()) or type(ex).__name__
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:\w+\]$", "", text)
    return f"{type(ex).__name__}: {text[:200]}"


def remove_partial(directory: Path, step: int) -> None:
    """After a failed save of step `step`: remove what it wrote (the earlier checkpoints stay)."""
    directory = Path(directory)
    for p in list(directory.glob(f"ckpt-{step}_temp*")) + list(directory.glob(f"ckpt-{step}.*")) \
            + list(directory.glob("checkpoint.tmp*")):
        _remove(p)


def remove_temporary(directory: Path) -> None:
    """What a save killed half-way left (any step): `ckpt-*_temp*`, `checkpoint.tmp*`."""
    for p in list(Path(directory).glob("ckpt-*_temp*")) + list(Path(directory).glob("checkpoint.tmp*")):
        _remove(p)


def _remove(p: Path) -> None:
    """Best effort: on a file system that turned read-only nothing can go (and nothing was written)."""
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
        return
    try:
        p.unlink(missing_ok=True)
    except OSError:
        pass


def size(prefix: Optional[str]) -> int:
    """Bytes a checkpoint takes on disk (its index and data files)."""
    if not prefix:
        return 0
    p = Path(prefix)
    return sum(f.stat().st_size for f in p.parent.glob(p.name + ".*") if f.is_file())


def variable_bytes(variables) -> int:
    """Bytes the values of `variables` take (a first checkpoint's size, before there is one)."""
    import math

    import tensorflow as tf

    return sum(math.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables)


def clear(directory: Path) -> List[int]:
    """Remove what tf.train.CheckpointManager (and the identity file) wrote in `directory` (and
    nothing else); the steps of the checkpoints removed (those with an index), oldest first."""
    if not Path(directory).is_dir():
        return []
    steps = sorted(number(str(p)[: -len(".index")]) for p in Path(directory).glob("ckpt-*.index"))
    for p in Path(directory).iterdir():
        if p.name in ("checkpoint", IDENTITY) or p.name.startswith(("ckpt-", "checkpoint.tmp")):
            _remove(p)
    return steps
