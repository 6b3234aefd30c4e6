"""A schema field with its `--help` description: every dataclass Hydra composes onto (each
option's own: distexp.options.models and datasets, the strategies' and cluster kinds' records;
the rest, distexp.config.schema) declares its keys with `key`, and `python -m distexp --help`
prints the description (distexp.config.help). A leaf: nothing of distexp. No TensorFlow."""
from __future__ import annotations

from dataclasses import field
from typing import Any


def key(default: Any = None, help: str = "", *, factory: Any = None) -> Any:
    """A field with its description (which option a key belongs to is its option's dataclass's
    business: distexp.options.groups)."""
    meta = {"help": help}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)
