"""The option groups that have records, by config key: a group node's record when it is known
(the run's params and `--help` ask it which of the group's keys apply). No TensorFlow."""
from __future__ import annotations

from typing import Optional, Tuple

from distexp.options import datasets, loops, models
from distexp.options.record import Option

GROUPS = {"model": models, "dataset": datasets, "loop": loops}


def known(group: str, node) -> Optional[Option]:
    """The record of `node` (a group's node or plain dict); None when its option is not
    registered (a user's record not imported yet: then every key is kept)."""
    if group == "dataset":
        return datasets.known(node)
    return GROUPS[group].REGISTRY.get(str(node.get("name")))


def claimed(group: str) -> Tuple[str, ...]:
    """The keys of `group` that some option claims (they apply to that option only)."""
    return tuple(sorted({k for r in GROUPS[group].REGISTRY.values() for k in r.keys}))


def applies(group: str, node, key: str) -> bool:
    """Whether `key` of a group node applies to its option: the option's own keys, the keys no
    option claims; `record` only when set (a user's option)."""
    if key == "record":
        return node.get("record") is not None
    rec = known(group, node)
    return rec is None or rec.applies(key, claimed(group))
