"""A schema field with its `--help` description: every dataclass Hydra composes onto (the
options' own, distexp.options.models and datasets; the rest, distexp.config.schema) declares its
keys with `key`, and `python -m distexp --help` prints the description (distexp.config.help).
No TensorFlow."""
from __future__ import annotations

from dataclasses import field
from typing import Any, Tuple


def key(default: Any = None, help: str = "", *, factory: Any = None,
        only: Tuple[str, ...] = ()) -> Any:
    """A field with its description; `only`: for a cluster's key that applies to some kinds only,
    those kinds (a model's or dataset's keys are its option's dataclass's own, a strategy's its
    record's `options`)."""
    meta = {"help": help, "only": tuple(only)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)
