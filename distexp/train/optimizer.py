"""The optimizer by name (`model.optimizer`: adam, sgd, rmsprop), at the rate the job resolved
(distexp.config.resolved.learning_rate). Call `build` inside ``strategy.scope()``."""
from __future__ import annotations

from omegaconf import DictConfig

from distexp.options import optimizers as records


def adam(lr: float):
    import keras

    return keras.optimizers.Adam(lr)


def sgd(lr: float):
    import keras

    return keras.optimizers.SGD(lr, momentum=0.9)


def rmsprop(lr: float):
    import keras

    return keras.optimizers.RMSprop(lr)


def build(cfg: DictConfig, model, lr: float):
    """The optimizer at rate `lr`, with its slot variables built now (Keras 3 builds them lazily,
    which breaks the first `strategy.run` of a custom loop under MirroredStrategy)."""
    import keras

    opt = records.REGISTRY.find(cfg.model.optimizer).load()(lr)
    if cfg.get("precision") == "mixed_float16":  # dynamic loss scaling (fit would add it too)
        opt = keras.optimizers.LossScaleOptimizer(opt)
    opt.build(model.trainable_variables)
    return opt
