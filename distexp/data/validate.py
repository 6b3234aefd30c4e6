"""What a user's dataset factory returned, checked before it reaches TensorFlow (NumPy only).

Each problem is one line (UserError) that names the factory, what it returned and what is valid:
no examples, labels that are text, inputs that are not finite numbers. What labels mean (class
ids in range, one per example) is the task's to check (distexp.tasks.Classification.check_data).
One vectorised pass over each array; no pass over a tf.data pipeline (its element spec only).
"""
from __future__ import annotations

import numpy as np

from distexp.errors import UserError


def check_arrays(where: str, x_tr, y_tr, x_ev, y_ev) -> None:
    """`where`: "dataset.factory mod:fn returned". Raises UserError on the first problem."""
    for part, x in (("training", x_tr), ("evaluation", x_ev)):
        if len(x) == 0:
            raise UserError(f"{where} no {part} examples (x_{_short(part)} of shape {x.shape}); "
                            f"valid: at least one {part} example (the training set: at least "
                            "one global batch)")
    for name, y in (("y_train", y_tr), ("y_eval", y_ev)):
        if y.dtype.kind in "USO":
            raise UserError(f"{where} {name} of text ({_examples(y)}, dtype {y.dtype}); valid: "
                            f"integer class ids 0..num_classes-1 ({_fix(y)}) or float targets")
    for name, a in (("x_train", x_tr), ("x_eval", x_ev), ("y_train", y_tr), ("y_eval", y_ev)):
        _finite(where, name, a)


def _finite(where: str, name: str, a) -> None:
    if a.dtype.kind not in "fc":
        if a.dtype.kind in "iub":
            return
        raise UserError(f"{where} {name} of dtype {a.dtype}; valid: numbers (a float or integer "
                        "array)")
    bad = ~np.isfinite(a)
    if bad.any():
        rows = np.flatnonzero(bad.reshape(len(a), -1).any(axis=1))
        kinds = sorted({"NaN" if np.isnan(v) else "inf" for v in a[bad][:100].ravel()})
        raise UserError(f"{where} {name} with {int(bad.sum())} {'/'.join(kinds)} value(s) in "
                        f"{len(rows)} example(s) (the first: example {rows[0]}); valid: finite "
                        "numbers (drop or impute those examples in the factory)")


def check_tfdata(where: str, train, ev) -> None:
    """A pair of tf.data.Datasets: labels that are text, a training set known to be empty."""
    import tensorflow as tf

    for name, d in (("training", train), ("evaluation", ev)):
        label = tf.nest.flatten(d.element_spec[1])[0]
        if label.dtype == tf.string:
            raise UserError(f"{where} a {name} dataset whose labels are strings ({label}); valid: "
                            "integer class ids 0..num_classes-1 or float targets (map the names "
                            "to ids in the factory, e.g. with tf.keras.layers.StringLookup)")
        if int(d.cardinality()) == 0:
            raise UserError(f"{where} an empty {name} dataset (0 examples); valid: at least one "
                            "example (the training set: at least one global batch)")


def _short(part: str) -> str:
    return "train" if part == "training" else "eval"


def _examples(y) -> str:
    shown = ", ".join(repr(v) for v in sorted({str(v) for v in y.ravel()[:1000]})[:3])
    return f"e.g. {shown}"


def _fix(y) -> str:
    if all(str(v).strip().lstrip("-").isdigit() for v in y.ravel()[:1000]):
        return "digits as text: y.astype(int) in the factory"
    return "class names: names, y = np.unique(y, return_inverse=True) in the factory"
