"""What a training loop is given (distexp.train.trainer builds it)."""
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
    data: Any              # distexp.data.loaded.Data (ps workers build their own pipelines)
    train_ds: Any          # tf.data at the global batch, repeated
    eval_ds: Any           # tf.data at the global batch, one pass
    global_batch: int
    steps_per_epoch: int
    epochs: int
    reporter: Any          # distexp.train.progress.Reporter
    dispatch_cls: Any      # how steps run (distexp.train.step.dispatcher): SyncDispatch or PSDispatch
    workers: int = 1       # processes holding replicas (the job's resolved facts)
