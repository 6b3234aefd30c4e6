"""Task records (`task.name`, else the task the dataset implies): what distexp knows about a task
before TensorFlow starts. A built-in names its class lazily (``"distexp.tasks.seq2seq:Seq2Seq"``,
a fresh instance per job: a task keeps state for its job); `custom` is the user's task, named by
`task.factory` (`factory=True`, as model=custom and dataset=custom). No TensorFlow."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from distexp.options.option import Option
from distexp.registry import Registry


@dataclass(frozen=True)
class TaskOption(Option):
    # What a model of this task reads, when only some datasets have it (a refusal names it:
    # "model=gru_seq2seq, which needs sentence pairs"); "" = any dataset of labelled examples.
    data: str = ""


REGISTRY = Registry("task.name", base="TaskOption (distexp.options.tasks.register)")
register = REGISTRY.put

register(TaskOption("classification", "distexp.tasks.classification:Classification"))
register(TaskOption("seq2seq", "distexp.tasks.seq2seq:Seq2Seq", data="sentence pairs"))
USER = register(TaskOption("custom", factory=True))  # the user's task (task.factory)


def built_in() -> Tuple[str, ...]:
    """The tasks distexp implements (what a dataset may imply)."""
    return tuple(r.name for r in REGISTRY.values() if not r.factory)
