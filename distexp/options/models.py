"""Model records (`model=<name>`): the built-ins in the order `model`'s valid names are listed.

A model of one's own outside distexp: a module that registers a `Model` (``register(Model(name=
"toy", implementation="my_pkg.toy:build"))``) and ``conf/model/<name>.yaml`` naming it
(``record: my_pkg.toy_record``). The implementation is called inside ``strategy.scope()`` as
``fn(model_cfg, input_shape, num_classes)`` and returns a keras.Model that outputs logits.
"""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from distexp.options.record import Option
from distexp.registry import Registry


@dataclass(frozen=True)
class Model(Option):
    # The task whose data the model reads (distexp.tasks): classification or seq2seq.
    task: str = "classification"


REGISTRY = Registry("model", base="Model (distexp.options.models.register)")
register = REGISTRY.put

for _name in ("mlp", "cnn", "resnet50", "mobilenet_v2"):
    register(Model(_name, f"distexp.models:{_name}"))
register(Model("gru_seq2seq", "distexp.models.seq2seq:build_gru_seq2seq", keys=("embedding_dim", "units"),
               task="seq2seq"))
register(Model("custom", "distexp.models:custom", keys=("factory",), factory=True))


def of(cfg: DictConfig) -> Model:
    """The record of `cfg.model` (`model.record`, a module path, imported first)."""
    return REGISTRY.load(cfg.model.name, cfg.model.get("record"))


def for_task(task: str):
    """The names of the models that read a task's data (seq2seq: gru_seq2seq)."""
    return tuple(r.name for r in REGISTRY.values() if r.task == task)

