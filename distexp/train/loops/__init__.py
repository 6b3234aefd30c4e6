"""Training loops: `custom` (distexp's outer loop over the shared step, every strategy, ps
included) and `fit` (Keras compile/fit, classification only). Both report through
distexp.train.progress.Reporter and evaluate with distexp.train.loops.evaluate."""
from __future__ import annotations


def get(name: str):
    """The loop's `train(ctx)` (loop: received 'x'; valid: custom, fit)."""
    from distexp.train.loops import custom, fit  # noqa: F401  (they register, in this order)
    from distexp.train.loops.registry import REGISTRY

    return REGISTRY.find(name)
