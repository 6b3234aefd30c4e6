"""Training loops: `custom` (distexp's outer loop over the shared step, every strategy, ps
included) and `fit` (Keras compile/fit, classification only). Both report through
distexp.progress.Reporter and evaluate with distexp.loops.evaluate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Context:
    cfg: Any
    strategy: Any
    task: Any              # distexp.tasks.Task
    model: Any
    optimizer: Any
    data: Any              # distexp.datasets.Arrays (ps workers build their own pipelines)
    train_ds: Any          # tf.data at the global batch, repeated
    eval_ds: Any           # tf.data at the global batch, one pass
    global_batch: int
    steps_per_epoch: int
    epochs: int
    reporter: Any          # distexp.progress.Reporter
    is_ps: bool = False


def get(name: str):
    if name == "custom":
        from distexp.loops import custom

        return custom.train
    if name == "fit":
        from distexp.loops import fit

        return fit.train
    from distexp.config import UserError

    raise UserError(f"loop: received {name!r}; valid: custom, fit")
