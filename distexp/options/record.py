"""The record of a model, dataset, loop or optimizer: what distexp knows about one option of its
group before TensorFlow starts, in one place (as a strategy's record, distexp.strategies.record).

A record names its implementation lazily (``"package.module:function"``, imported only when the
training process calls it), the group's keys that apply to it alone (`keys`: a run's params and
`--help` show them for this option only) and whether a user's code is named by the group's
`factory` key (model=custom, dataset=custom). Each group's record adds its own capabilities
(distexp.options.models, datasets, loops, optimizers). No TensorFlow.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Tuple


@dataclass(frozen=True)
class Option:
    name: str
    # "package.module:function": what the training process calls (imported then, not before).
    implementation: str = ""
    # The group's keys that apply to this option only (any other key applies to every option).
    keys: Tuple[str, ...] = ()
    # A user's code, named by the group's `factory` key ("package.module:function").
    factory: bool = False

    def load(self) -> Callable:
        """The implementation, imported now."""
        module, _, attr = self.implementation.partition(":")
        return getattr(importlib.import_module(module), attr)

    def applies(self, key: str, only: Tuple[str, ...]) -> bool:
        """Whether `key` of the group applies to this option: every key no option claims
        (`only`: the keys some option claims), and this option's own."""
        return key not in only or key in self.keys
