"""The option groups that have records, by config key (`GROUPS`, the one list, in the order
`--help` lists them): a group node's record when it is known, which keys belong to its option
(`keys_of`: its record's schema; the run's params, `--help` and the checks ask it), and what a
run calls a user's option (its factory's function). No TensorFlow."""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Optional

from distexp import strategies
from distexp.cluster import kinds
from distexp.options import datasets, loops, models
from distexp.options.option import Option

GROUPS = {"strategy": strategies, "model": models, "dataset": datasets, "loop": loops,
          "cluster": kinds}


def known(group: str, node) -> Optional[Option]:
    """The record of `node` (a group's node or plain dict); None when its option is not
    registered (a user's record not imported yet)."""
    if group == "dataset":
        return datasets.known(node)
    return GROUPS[group].REGISTRY.get(str(node.get("name")))


def keys_of(group: str, node) -> List[str]:
    """The keys of a group's node (a node or plain dict) that belong to its chosen option, in the
    node's order: the one answer for the run's params (distexp.config.schema.flatten), `--help`
    (distexp.config.help) and the checks (distexp.config.checks). A field of its record's schema
    (every key the node has where the option has no schema of its own, or is not registered
    yet), `record` only when set (a user's option). A key of another option (set by a sweep over
    options) is not its."""
    return [str(k) for k in node.keys() if _applies(group, node, str(k))]


def _applies(group: str, node, key: str) -> bool:
    if key == "record":
        return node.get("record") is not None
    own = _keys(known(group, node))
    return own is None or key in own


def foreign(group: str, key: str) -> bool:
    """Whether `key` is a key of some registered option of `group` (so, on a node of another
    option, a sweep over the group's options set it for the options that have it)."""
    return bool(owners(group, key))


def owners(group: str, key: str) -> Dict[str, Any]:
    """The registered options of `group` whose schema has `key` -> its default there (in the
    registry's order)."""
    out = {}
    for rec in GROUPS[group].REGISTRY.values():
        if key in (_keys(rec) or ()):
            f = next(f for f in dataclasses.fields(rec.schema) if f.name == key)
            out[rec.name] = f.default_factory() if f.default is dataclasses.MISSING else f.default
    return out


def _keys(rec) -> Optional[frozenset]:
    """The keys of a record's schema; None where it has none (every key of its node is its own)."""
    schema = getattr(rec, "schema", None)
    if schema is None or not dataclasses.is_dataclass(schema):
        return None
    return frozenset(f.name for f in dataclasses.fields(schema))


def workload(group: str, name: str, factory: Optional[str] = None) -> str:
    """What a run's name, description and default checkpoint.dir call a model or dataset
    (`group`): a user's own by its factory's function (`mnist_convnet` for
    model.factory=mymodels:mnist_convnet), not "custom" (the option whose record says a factory
    names the user's code)."""
    rec = known(group, {"name": name})
    if rec is None or not rec.factory or not factory or factory == "null":
        return name
    return re.split(r"[:.]", str(factory).strip())[-1] or name
