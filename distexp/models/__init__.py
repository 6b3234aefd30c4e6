"""Models by name -> keras.Model that outputs logits, and the optimizer.

Call `build` and `optimizer` inside ``strategy.scope()``: variables created outside it land on the
wrong device (Keras: "Model must be created under scope of DistStrat it will be trained with").
"""
from __future__ import annotations

import importlib
from typing import Callable, Dict, Tuple

from omegaconf import DictConfig

from distexp.errors import UserError

Shape = Tuple[int, ...]
Builder = Callable[[DictConfig, Shape, int], object]
REGISTRY: Dict[str, Builder] = {}


def register(name: str):
    def deco(fn: Builder) -> Builder:
        REGISTRY[name] = fn
        return fn
    return deco


def build(cfg: DictConfig, input_shape: Shape, num_classes: int):
    try:
        builder = REGISTRY[cfg.model.name]
    except KeyError:
        raise UserError(f"model: received {cfg.model.name!r}; valid: "
                        f"{', '.join(sorted(REGISTRY))}") from None
    return builder(cfg.model, tuple(input_shape), int(num_classes))


def _image_input(m: DictConfig, shape: Shape):
    """Input layer plus a Resizing layer when the image is smaller than the model accepts."""
    import keras

    if len(shape) != 3:
        raise UserError(f"model: received {m.name!r} with input shape {list(shape)}; it needs "
                        "images [h, w, c]: use model=mlp or dataset.shape=[h,w,c]")
    inp = keras.Input(shape=shape)
    h, w, c = shape
    size = int(m.min_size)
    if min(h, w) >= size:
        return inp, inp, shape
    if not m.resize:
        raise UserError(f"model: {m.name} needs inputs of at least {size}x{size}; received "
                        f"{h}x{w} with model.resize=false (set model.resize=true to resize)")
    return inp, keras.layers.Resizing(max(h, size), max(w, size))(inp), (max(h, size), max(w, size), c)


@register("mlp")
def mlp(m: DictConfig, shape: Shape, classes: int):
    import keras

    return keras.Sequential([
        keras.Input(shape=shape),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(classes),
    ], name="mlp")


@register("cnn")
def cnn(m: DictConfig, shape: Shape, classes: int):
    """The TensorFlow tutorial CNN (distributed training tutorials)."""
    import keras

    inp, x, _ = _image_input(m, shape)
    x = keras.layers.Conv2D(32, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(64, activation="relu")(x)
    return keras.Model(inp, keras.layers.Dense(classes)(x), name="cnn")


def _application(fn_name: str, m: DictConfig, shape: Shape, classes: int):
    import keras

    inp, x, inner = _image_input(m, shape)
    net = getattr(keras.applications, fn_name)(weights=None, input_shape=inner, classes=classes,
                                               classifier_activation=None)
    return keras.Model(inp, net(x), name=m.name)


@register("resnet50")
def resnet50(m: DictConfig, shape: Shape, classes: int):
    return _application("ResNet50", m, shape, classes)


@register("mobilenet_v2")
def mobilenet_v2(m: DictConfig, shape: Shape, classes: int):
    return _application("MobileNetV2", m, shape, classes)


@register("custom")
def custom(m: DictConfig, shape: Shape, classes: int):
    """A user's model: model.factory=package.module:function -> function(input_shape, num_classes)."""
    fn = load_factory("model.factory", m.factory)
    try:
        model = fn(input_shape=shape, num_classes=classes)
    except Exception as ex:  # noqa: BLE001
        raise UserError(f"model.factory: {m.factory} raised {type(ex).__name__}: {ex}") from None
    import keras  # the trainer's side: Keras is loaded by now

    if not isinstance(model, keras.Model):
        what = type(model).__module__ + "." + type(model).__qualname__
        if type(model).__module__ == "builtins":
            what = type(model).__qualname__
        shown = repr(model)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise UserError(f"model.factory: {m.factory} returned a {what} ({shown}); expected a "
                        f"keras.Model (Keras {keras.__version__}) built for input_shape="
                        f"{tuple(shape)} and num_classes={classes}, e.g. keras.Sequential([...]); "
                        "return the model, not its class or a tf_keras model")
    return model


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


def optimizer(cfg: DictConfig, model, lr: float):
    """The optimizer at rate `lr` (distexp.config.resolved.learning_rate), with its slot
    variables built now (Keras 3 builds them lazily, which breaks the first `strategy.run` of a
    custom loop under MirroredStrategy)."""
    import keras

    name = cfg.model.optimizer
    if name == "adam":
        opt = keras.optimizers.Adam(lr)
    elif name == "sgd":
        opt = keras.optimizers.SGD(lr, momentum=0.9)
    else:
        opt = keras.optimizers.RMSprop(lr)
    if cfg.get("precision") == "mixed_float16":  # dynamic loss scaling (fit would add it too)
        opt = keras.optimizers.LossScaleOptimizer(opt)
    opt.build(model.trainable_variables)
    return opt
