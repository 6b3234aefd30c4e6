"""Tasks by name: `classification`, `seq2seq`, or a user's own (`task.factory=pkg.mod:function`).

The task is implied by the dataset (`dataset.task`: digits -> classification, text_pairs ->
seq2seq), so a user never says it twice; `task.name` overrides it and `task.factory` brings a
user's task in without editing distexp. No TensorFlow is imported here.

A user's task: `function(**task.kwargs)` returns an instance of `distexp.tasks.Task` (or any
object with the same methods): see base.py for the contract and docs/extending.md, "Your own task".
"""
from __future__ import annotations

from distexp.options.tasks import REGISTRY, USER
from distexp.tasks.base import Task
from distexp.tasks.classification import Classification
from distexp.tasks.seq2seq import Seq2Seq

NAMES = REGISTRY.names()  # the records': the built-ins, then the user's (custom)

__all__ = ["Task", "Classification", "Seq2Seq", "REGISTRY", "NAMES", "name_of", "builtin", "get"]


def name_of(cfg) -> str:
    """The task this job trains: task.name, else the user's (custom) when task.factory is set,
    else the dataset's own task."""
    task = cfg.get("task")
    if task is not None and task.get("name"):
        return str(task.name)
    if task is not None and task.get("factory"):
        return USER.name
    return str(cfg.dataset.get("task") or "classification")


def builtin(cfg) -> "Task | None":
    """The built-in task (no TensorFlow); None for a user's task (known only in the trainer)."""
    rec = REGISTRY.get(name_of(cfg))
    return rec.load()() if rec is not None and not rec.factory else None


def get(cfg) -> Task:
    """The task object, in the training process (a user's factory is imported here)."""
    from distexp.errors import UserError

    rec = REGISTRY.find(name_of(cfg))
    if not rec.factory:
        return rec.load()()
    from omegaconf import OmegaConf

    from distexp.user_code import load_factory

    spec = cfg.task.factory
    fn = load_factory("task.factory", spec)
    kwargs = OmegaConf.to_container(cfg.task.kwargs, resolve=True) if cfg.task.kwargs else {}
    try:
        task = fn(**kwargs)
    except Exception as ex:  # noqa: BLE001
        raise UserError(f"task.factory: {spec} raised {type(ex).__name__}: {ex}") from None
    missing = [m for m in ("loss", "metrics", "eval_sums", "build_model", "figures")
               if not callable(getattr(task, m, None))]
    if missing:
        raise UserError(f"task.factory: {spec} returned {type(task).__name__}, which lacks "
                        f"{', '.join(missing)}; expected a distexp.tasks.Task subclass instance")
    return task
