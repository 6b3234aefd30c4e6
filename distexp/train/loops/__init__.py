"""Training loops: `custom` (distexp's outer loop over the shared step, every strategy, ps
included) and `fit` (Keras compile/fit, classification only). Both report through
distexp.train.progress.Reporter and evaluate with distexp.train.loops.evaluate."""
from __future__ import annotations


def get(name: str):
    if name == "custom":
        from distexp.train.loops import custom

        return custom.train
    if name == "fit":
        from distexp.train.loops import fit

        return fit.train
    from distexp.errors import UserError

    raise UserError(f"loop: received {name!r}; valid: custom, fit")
