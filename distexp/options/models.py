"""Model records (`model=<name>`): the built-ins in the order `model`'s valid names are listed,
and the dataclass of each one's node (`ModelConfig`, the keys every model has; a model's own keys
in a subclass).

A model of one's own outside distexp: a module that registers a `Model` (``register(Model(name=
"toy", implementation="my_pkg.toy:build"))``) and ``conf/model/<name>.yaml`` naming it
(``record: my_pkg.toy_record``; its node has ModelConfig's keys). The implementation is called
inside ``strategy.scope()`` as ``fn(model_cfg, input_shape, num_classes)`` and returns a
keras.Model that outputs logits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import MISSING, DictConfig

from distexp.errors import UserError
from distexp.fields import key
from distexp.options.option import Option, at_least
from distexp.registry import Registry


@dataclass
class ModelConfig:
    name: str = key(MISSING, "the chosen option (model=...)")
    optimizer: str = key("adam", "a Keras optimizer name: adam, sgd, rmsprop")
    learning_rate: float = key(1e-3, "used when the top-level learning_rate is null")
    min_size: int = key(0, "smallest image size the architecture accepts: smaller inputs are "
                        "resized up (resize=true) or refused; 0 = none")
    resize: bool = key(True, "resize inputs smaller than min_size up to it (false: refuse them)")
    record: Optional[str] = key(None, "a model of one's own: the module that registers its "
                                "record (distexp.options.models); null for the built-ins")


@dataclass
class GruSeq2SeqConfig(ModelConfig):
    embedding_dim: int = key(256, "embedding size (encoder and decoder)")
    units: int = key(1024, "GRU units (encoder and decoder)")


@dataclass
class CustomModelConfig(ModelConfig):
    factory: Optional[str] = key(None, '"package.module:function" called inside strategy.scope() '
                                 "as fn(input_shape=(h, w, c), num_classes=k) -> keras.Model")


@dataclass(frozen=True)
class Model(Option):
    schema: Any = ModelConfig
    # The task whose data the model reads (distexp.tasks): classification or seq2seq.
    task: str = "classification"

    def check(self, model: DictConfig) -> None:
        """This model's settings (UserError, one line), before TensorFlow: here ModelConfig's
        keys (every model's); a model's own keys in its subclass, which calls this first
        (super().check(model))."""
        at_least("model.min_size", model.min_size, 0)
        if not math.isfinite(model.learning_rate):
            raise UserError(f"model.learning_rate: received {model.learning_rate}; expected a "
                            "finite number")
        if model.learning_rate <= 0:
            raise UserError(f"model.learning_rate: received {model.learning_rate}; expected > 0")


@dataclass(frozen=True)
class GruSeq2Seq(Model):
    def check(self, model):
        super().check(model)
        for size in ("embedding_dim", "units"):
            if model[size] < 1:
                raise UserError(f"model.{size}: received {model[size]}; expected >= 1")


REGISTRY = Registry("model", base="Model (distexp.options.models.register)")
register = REGISTRY.put

for _name in ("mlp", "cnn", "resnet50", "mobilenet_v2"):
    register(Model(_name, f"distexp.models:{_name}"))
register(GruSeq2Seq("gru_seq2seq", "distexp.models.gru_seq2seq:build_gru_seq2seq", GruSeq2SeqConfig,
               task="seq2seq"))
register(Model("custom", "distexp.models:custom", CustomModelConfig, factory=True))


def of(cfg: DictConfig) -> Model:
    """The record of `cfg.model` (`model.record`, a module path, imported first)."""
    return REGISTRY.load(cfg.model.name, cfg.model.get("record"))


def for_task(task: str):
    """The names of the models that read a task's data (seq2seq: gru_seq2seq)."""
    return tuple(r.name for r in REGISTRY.values() if r.task == task)
