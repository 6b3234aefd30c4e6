"""Training loops: `custom` (distexp's outer loop over the shared step, every strategy, ps
included) and `fit` (Keras compile/fit, classification only). Both report through
distexp.train.progress.Reporter and evaluate with distexp.train.loops.evaluate."""
from __future__ import annotations


def get(cfg):
    """The `train(ctx)` of `cfg.loop`'s record (distexp.options.loops)."""
    from distexp.options import loops

    return loops.of(cfg).load()
