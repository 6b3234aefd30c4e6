"""Training loops: `custom` (strategy.run) and `fit` (Keras compile/fit). Both share the
evaluation in distexp.loops.common and report through distexp.progress.Reporter."""
from __future__ import annotations


def get(name: str):
    if name == "custom":
        from distexp.loops import custom

        return custom.train
    if name == "fit":
        from distexp.loops import fit

        return fit.train
    from distexp.config import UserError

    raise UserError(f"loop: received {name!r}; valid: custom, fit")
