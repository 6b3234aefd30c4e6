"""Loop records (`loop=<name>`): what each training loop can do, asked before TensorFlow starts
(checks, the resume hint, the report's diagnosis). The implementation is called in the training
process as ``train(ctx)`` (distexp.train.loops.context.Context)."""
from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from distexp.options.option import Option
from distexp.registry import Registry


@dataclass(frozen=True)
class Loop(Option):
    # Saves checkpoints (checkpoint.*) and continues from them (resume=true).
    checkpoints: bool = False
    # Can train on one batch kept on the replicas' devices (dataset.on_device=true).
    on_device: bool = False
    # Computes the loss with the task's own loss (any task); else only tasks with `fit_ok`.
    task_loss: bool = False
    # Runs distexp's own replica step (distexp.train.step): jit_compile=auto turns XLA on for it on
    # GPU replicas and xla_step shapes it; else Keras compiles its own (auto: off, distexp.config.xla).
    own_step: bool = False


REGISTRY = Registry("loop", base="Loop (distexp.options.loops.register)")
register = REGISTRY.put

register(Loop("custom", "distexp.train.loops.custom:train", checkpoints=True, on_device=True,
              task_loss=True, own_step=True))
register(Loop("fit", "distexp.train.loops.fit:train"))


def of(cfg: DictConfig) -> Loop:
    return REGISTRY.load(cfg.loop.name, cfg.loop.get("record"))


def named(name: str):
    """The record of a loop a run's params name; None for a name not registered here."""
    return REGISTRY.get(name)


def able(capability: str) -> str:
    """The loops that can (`loop=custom`, joined with " or ")."""
    return " or ".join(f"loop={n}" for n, r in REGISTRY.items() if getattr(r, capability))
