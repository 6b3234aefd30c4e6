"""The built-in models' implementations -> keras.Model that outputs logits (each named lazily by
its record, distexp.options.models: what distexp knows about a model before TensorFlow).

Call `build` inside ``strategy.scope()``: variables created outside it land on the
wrong device (Keras: "Model must be created under scope of DistStrat it will be trained with").
"""
from __future__ import annotations

from typing import Tuple

from omegaconf import DictConfig

from distexp.errors import UserError
from distexp.options import models as records
from distexp.user_code import load_factory

Shape = Tuple[int, ...]


def build(cfg: DictConfig, input_shape: Shape, num_classes: int):
    """The model of `cfg.model`'s record, built by its implementation."""
    return records.of(cfg).load()(cfg.model, tuple(input_shape), int(num_classes))


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


def mlp(m: DictConfig, shape: Shape, classes: int):
    import keras

    return keras.Sequential([
        keras.Input(shape=shape),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(classes),
    ], name="mlp")


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


def resnet50(m: DictConfig, shape: Shape, classes: int):
    return _application("ResNet50", m, shape, classes)


def mobilenet_v2(m: DictConfig, shape: Shape, classes: int):
    return _application("MobileNetV2", m, shape, classes)


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
