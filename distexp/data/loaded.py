"""What a dataset loader returns (`Data`): host arrays, or unbatched tf.data datasets, and what a task needs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np


@dataclass
class Data:
    x_train: Optional[np.ndarray]
    y_train: Optional[np.ndarray]
    x_eval: Optional[np.ndarray]
    y_eval: Optional[np.ndarray]
    num_classes: int
    # Data that is random or already cached: batch once, cache the batches (no per-step work).
    cache_batches: bool = False
    # Instead of arrays: unbatched, preprocessed tf.data.Datasets of (x, y), the shape of one x,
    # the number of examples of each (None = unknown) and whether to cache them in memory.
    train: Any = None
    eval: Any = None
    shape: Optional[Tuple[int, ...]] = None
    sizes: Tuple[Optional[int], Optional[int]] = (None, None)
    cache: bool = True
    # Functions of a batch (x, y) -> (x, y) applied after batching, training and evaluation alike:
    # the work a loader or a task adds to every example (the dtype cast, the label range check),
    # vectorised: one call per batch. Mapped per example, the same work cost ~2 ms a batch of 64
    # here (an example-wise map with an assertion is not parallelised by tf.data), enough to make
    # a small model's training input-bound.
    per_batch: Tuple[Callable, ...] = ()
    # What a task needs to know beyond shapes (seq2seq: vocabulary sizes, max lengths), also
    # logged as params.
    info: Dict[str, Any] = field(default_factory=dict)

    @property
    def input_shape(self):
        if self.train is not None:
            return tuple(self.shape)
        if isinstance(self.x_train, tuple):  # several inputs: one shape each
            return tuple(tuple(a.shape[1:]) for a in self.x_train)
        return tuple(self.x_train.shape[1:])

    def describe(self) -> str:
        what = f"train {self.n_train}, eval {self.n_eval}"
        if self.info:
            return what + ", " + ", ".join(f"{k} {v}" for k, v in self.info.items())
        return what + f", input {list(self.input_shape)}, {self.num_classes} classes"

    def params(self) -> Dict[str, Any]:
        return {f"data.{k}": v for k, v in self.info.items()}

    @property
    def n_train(self) -> Optional[int]:
        return self.sizes[0] if self.train is not None else len(self.y_train)

    @property
    def n_eval(self) -> Optional[int]:
        return self.sizes[1] if self.train is not None else len(self.y_eval)
