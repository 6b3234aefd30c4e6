"""A user's own code named in the config (`model.factory`, `dataset.factory`, `task.factory`:
'package.module:function'): checked before TensorFlow starts (the module can be found, not
imported: a user's module may import TensorFlow), loaded in the training process."""
from __future__ import annotations

import importlib
from typing import Dict

from distexp.errors import UserError


def check_factory(key: str, spec) -> None:
    """Before TensorFlow starts (and before the MLflow run is created): the spec's shape, that its
    module can be found and that the module defines the function, both without importing it (a
    user's module may import TensorFlow). The trainer imports it."""
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
    _check_function(key, spec, module, attr)


def _check_function(key: str, spec: str, module: str, attr: str) -> None:
    """The function named in `spec` is defined in its module's source (read with `ast`, not
    imported). A module whose names cannot be read that way (no source, `import *`, a module
    `__getattr__`) is left to the trainer's import."""
    import difflib
    import importlib.util

    origin = importlib.util.find_spec(module).origin
    names = _top_level_names(origin)
    if names is None or attr in names:
        return
    public = sorted(n for n, is_fn in names.items() if is_fn and not n.startswith("_"))
    close = difflib.get_close_matches(attr, public, n=1)
    hint = f" (did you mean {module}:{close[0]}?)" if close else ""
    shown = ", ".join(public[:12]) + (", ..." if len(public) > 12 else "")
    raise UserError(f"{key}: received {spec!r}; {origin} defines no {attr!r}{hint}; valid: "
                    f"its functions: {shown or '(none)'}")


def _top_level_names(path) -> "Dict[str, bool] | None":
    """{name: is a function or class} for what a module's source binds at top level (inside
    if/try/with blocks too); None when that cannot be known without running it."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (OSError, TypeError, ValueError, SyntaxError):  # no source (a .so, a namespace package)
        return None
    names: Dict[str, bool] = {}
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            names.update({(a.asname or a.name).split(".")[0]: False for a in node.names})
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update({n.id: False for t in targets for n in ast.walk(t)
                          if isinstance(n, ast.Name)})
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
            todo += [s for h in getattr(node, "handlers", []) for s in h.body]
    return None if "__getattr__" in names else names


def load_factory(key: str, spec: str):
    module, _, attr = (spec or "").partition(":")
    if not module or not attr:
        raise UserError(f"{key}: received {spec!r}; expected 'package.module:function'")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as ex:
        raise UserError(f"{key}: received {spec!r}; cannot import it ({ex}); expected "
                        "'package.module:function' naming an existing function") from None
