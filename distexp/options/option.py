"""The record of a model, dataset, loop or optimizer: what distexp knows about one option of its
group before TensorFlow starts, in one place (as a strategy's record, distexp.strategies.record).

A record names its implementation lazily (``"package.module:function"``, imported only when the
training process calls it), its keys (`schema`: the dataclass Hydra composes the option's node
onto, stored as ``<group>/base_<name>`` and named first in the option's yaml, ``defaults:
[base_<name>, _self_]``: a key of another option is refused when the config is composed) and
whether a user's code is named by the group's `factory` key (model=custom, dataset=custom). Each
group's record adds its own capabilities (distexp.options.models, datasets, loops, optimizers).
No TensorFlow.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

from distexp.errors import UserError


def at_least(key: str, value: Optional[float], low: float, *, allow_none: bool = False) -> None:
    """`key` is a number >= `low` (null too with `allow_none`), else one UserError line."""
    if value is None:
        if allow_none:
            return
        raise UserError(f"{key}: received null; expected a number >= {low}")
    if value < low:
        raise UserError(f"{key}: received {value}; expected >= {low}")


@dataclass(frozen=True)
class Option:
    name: str
    # "package.module:function": what the training process calls (imported then, not before).
    implementation: str = ""
    # The dataclass of the option's node (its keys, their types, defaults and descriptions); None
    # for a group without option nodes of its own (optimizers).
    schema: Any = None
    # A user's code, named by the group's `factory` key ("package.module:function").
    factory: bool = False

    def load(self) -> Callable:
        """The implementation, imported now."""
        module, _, attr = self.implementation.partition(":")
        return getattr(importlib.import_module(module), attr)
