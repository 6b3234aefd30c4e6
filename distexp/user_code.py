"""A user's own code named in the config (`model.factory`, `dataset.factory`, `task.factory`:
'package.module:function'): checked before TensorFlow starts (the module can be found, not
imported: a user's module may import TensorFlow), loaded in the training process."""
from __future__ import annotations

import importlib

from distexp.errors import UserError


def check_factory(key: str, spec) -> None:
    """Before TensorFlow starts: the spec's shape, and that its module can be found (not imported:
    a user's module may import TensorFlow). The trainer imports it and checks the function."""
    import importlib.util

    module, _, attr = (spec or "").partition(":")
    if not module or not attr:
        raise UserError(f"{key}: received {spec!r}; expected 'package.module:function'")
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise UserError(f"{key}: received {spec!r}; no module named {module!r} on the Python path; "
                        "valid: an importable module (run from the directory that holds it, or add "
                        "it to PYTHONPATH)")


def load_factory(key: str, spec: str):
    module, _, attr = (spec or "").partition(":")
    if not module or not attr:
        raise UserError(f"{key}: received {spec!r}; expected 'package.module:function'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as ex:
        raise UserError(f"{key}: received {spec!r}; cannot import it ({ex}); expected "
                        "'package.module:function' naming an existing function") from None
