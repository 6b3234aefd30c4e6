"""Optimizer records (`model.optimizer=<name>`); the implementation is called inside
``strategy.scope()`` as ``fn(learning_rate)`` and returns a Keras optimizer."""
from __future__ import annotations

from distexp.options.option import Option
from distexp.registry import Registry

REGISTRY = Registry("model.optimizer", base="Option (distexp.options.optimizers.register)")
register = REGISTRY.put

for _name in ("adam", "sgd", "rmsprop"):
    register(Option(_name, f"distexp.train.optimizer:{_name}"))
