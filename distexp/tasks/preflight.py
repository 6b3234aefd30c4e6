"""Before the first step: does the data hold class labels, and does the model fit the data?

What `Classification.check_data` and `check_model` run, in seconds, instead of a TensorFlow
error from inside the first step (or, on a GPU, no error at all: sparse cross-entropy does not
check the label range there). Each finding is one line (UserError) that names the factory (or the
built-in option), what it gave and what is valid. Cheap by design: min/max over label arrays, the
model's input and output specs (no forward pass), and for a tf.data pipeline its element spec
plus a range assertion on each batch's labels (checked as the batches are made, on the host).
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from distexp.errors import UserError
from distexp.options import datasets, models

RANGE_MARK = "distexp: label out of range"  # in the assertion a tf.data pipeline raises


def data_source(cfg) -> str:
    """How the line names the data: "dataset.factory: mod:fn", or "dataset: digits"."""
    ds = cfg.dataset
    return f"dataset.factory: {ds.factory}" if datasets.of(cfg).factory else f"dataset: {ds.name}"


def model_source(cfg) -> str:
    m = cfg.model
    return f"model.factory: {m.factory}" if models.of(cfg).factory else f"model: {m.name}"


def check_labels(cfg, data):
    """Class ids, one per example, in [0, num_classes): on arrays now; on a tf.data pipeline its
    spec now and the range as each example passes (returns the data with that check added)."""
    where, k = data_source(cfg), int(data.num_classes)
    if data.train is None:
        for name, y in (("y_train", data.y_train), ("y_eval", data.y_eval)):
            _kind(where, name, y.dtype.kind in "iu", y.dtype, tuple(y.shape), _sample(y))
        lo = min(int(data.y_train.min()), int(data.y_eval.min()))
        hi = max(int(data.y_train.max()), int(data.y_eval.max()))
        if lo < 0 or hi >= k:
            raise UserError(range_line(cfg, lo if lo < 0 else hi, k))
        return data
    import tensorflow as tf

    for name, d in (("training", data.train), ("evaluation", data.eval)):
        spec = d.element_spec[1]
        _kind(where, f"the {name} dataset's labels", spec.dtype.is_integer, spec.dtype.name,
              (None, *spec.shape), "")

    mark = f"{RANGE_MARK} (num_classes={k}):"

    def in_range(x, y):  # on a batch (Data.per_batch): one vectorised check, not one per example
        ok = tf.logical_and(y >= 0, y < k)
        first_bad = tf.boolean_mask(tf.reshape(y, [-1]), tf.logical_not(tf.reshape(ok, [-1])))
        check = tf.debugging.Assert(tf.reduce_all(ok), [mark, first_bad], summarize=1)
        with tf.control_dependencies([check]):
            return x, tf.identity(y)
    return dataclasses.replace(data, per_batch=data.per_batch + (in_range,))


def range_line(cfg, label: int, k: int) -> str:
    """The line for a label outside [0, k), found before training or by TensorFlow."""
    if not datasets.of(cfg).factory:
        by = f"dataset={cfg.dataset.name} has {k} classes"
    elif cfg.dataset.num_classes == k:
        by = f"dataset.num_classes={k}, labels from {cfg.dataset.factory}"
    else:
        by = f"num_classes={k} from {cfg.dataset.factory}"
    return (f"labels: received {label} with {k} classes ({by}); valid: class ids 0..{k - 1}: "
            "raise num_classes to the number of classes, or fix the labels")


def _kind(where: str, name: str, integer: bool, dtype, shape: Tuple, sample: str) -> None:
    if not integer:
        raise UserError(f"{where} returned {name} of dtype {dtype}{sample}; valid for "
                        "classification: "
                        "integer class ids 0..num_classes-1 (y.astype(int) if they are ids; a "
                        "regression needs a task of its own: task.factory)")
    if len(shape) != 1 and tuple(shape[1:]) != (1,):
        raise UserError(f"{where} returned {name} of shape {tuple(shape)}: {shape[1:]} per "
                        "example; "
                        "valid for classification: one class id per example, shape (n,) "
                        "(one-hot labels: y.argmax(axis=-1))")


def _sample(y) -> str:
    return f" (e.g. {', '.join(f'{v:g}' for v in y.ravel()[:3])})" if y.dtype.kind == "f" else ""


def check_model(cfg, model, data) -> Optional[str]:
    """The model takes the data's input and gives one score per class. Returns "probabilities"
    when its last layer is a softmax (else None)."""
    import keras

    where, shape, k = model_source(cfg), tuple(data.input_shape), int(data.num_classes)
    try:
        inputs = [tuple(t.shape[1:]) for t in model.inputs]
    except (AttributeError, ValueError):  # a subclassed or unbuilt model: its output says
        inputs = None
    if inputs is not None and (len(inputs) != 1 or not _fits(inputs[0], shape)):
        wanted = inputs[0] if len(inputs) == 1 else f"{len(inputs)} inputs {inputs}"
        raise UserError(f"{where} expects input {wanted}; the dataset gives {shape} "
                        f"({data_source(cfg)}): build the model for the input_shape it is given")
    out = _output_spec(keras, model, shape, where)
    if isinstance(out, (list, tuple, dict)):
        raise UserError(f"{where} outputs {len(out)} tensors; valid for classification: one, of "
                        f"shape (batch, {k}): one score per class")
    if len(out.shape) != 2 or out.shape[-1] != k:
        raise UserError(f"{where} outputs shape {tuple(out.shape)} for {k} classes; valid: "
                        f"(batch, {k}), one logit per class (end with Flatten() and "
                        f"Dense(num_classes))")
    return "probabilities" if _ends_in_softmax(keras, model) else None


def _fits(expected: Tuple, given: Tuple) -> bool:
    return len(expected) == len(given) and all(e is None or e == g for e, g in zip(expected, given))


def _output_spec(keras, model, shape, where):
    try:
        outs = model.outputs
        return outs[0] if len(outs) == 1 else outs
    except (AttributeError, ValueError):
        pass
    try:
        return model.compute_output_spec(keras.KerasTensor((None, *shape)))
    except Exception as ex:  # the model's own code
        from distexp.errors import first_line

        raise UserError(f"{where} cannot take the dataset's input (batch, {', '.join(map(str, shape))}"
                        f"): {type(ex).__name__}: {first_line(ex)}") from ex


def _ends_in_softmax(keras, model) -> bool:
    layers = getattr(model, "layers", None) or []
    last = layers[-1] if layers else None
    if isinstance(last, keras.layers.Softmax):
        return True
    act = getattr(last, "activation", None)
    return getattr(act, "__name__", "") == "softmax"


def probabilities_note(cfg) -> str:
    return (f"{model_source(cfg)} ends in a softmax: its outputs are probabilities, so the loss "
            "takes them as such (from_logits=False); for the numerically safer logits, end with "
            "Dense(num_classes) without an activation")
