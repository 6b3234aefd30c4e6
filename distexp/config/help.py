"""`python -m distexp --help`: each key with its default and a one-line description.

Hydra renders ``hydra.help.template`` (conf/config.yaml); its ``${distexp.help:}`` part is this
module's `render`, an OmegaConf resolver that sees the composed config (``_root_``):
- descriptions are the schema's own (`help` in each dataclass field's metadata,
  distexp.config.schema.key), written once, where the key is defined; a field without one (the
  job's internal `resolved`) is not listed;
- a group's keys are those of its chosen option: the keys its yaml sets
  (conf/<group>/<option>.yaml) and those its record says apply (a model's or dataset's `keys`,
  distexp.options; a strategy's `options`), or the field's `only` for the cluster: no
  `embedding_dim` under model=cnn, no `shape` under dataset=digits. `--cfg job` still prints
  everything.
No TensorFlow.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Dict, List

from omegaconf import DictConfig, OmegaConf

from distexp.options import groups as option_groups

CONF = Path(__file__).resolve().parent.parent / "conf"
GROUPS = ("strategy", "model", "dataset", "loop", "cluster")
WIDTH = 100


def descriptions(schema) -> Dict[str, dict]:
    """'group.key' (or 'key' at the top) -> the field's metadata (help, only), from the schema."""
    out: Dict[str, dict] = {}

    def walk(cls, prefix: str) -> None:
        types = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(types[f.name]) and not prefix:
                walk(types[f.name], f"{f.name}.")
            elif f.metadata.get("help"):
                out[prefix + f.name] = dict(f.metadata)
    walk(schema, "")
    return out


def option_keys(group: str, option: str) -> List[str]:
    """The keys an option's yaml sets (its `defaults` excluded); [] for an option outside conf/."""
    path = CONF / group / f"{option}.yaml"
    if not path.exists():
        return []
    node = OmegaConf.load(path)
    return [k for k in node.keys() if k not in ("defaults", "hydra")] if \
        isinstance(node, DictConfig) else []


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _value(node) -> str:
    v = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) or \
        OmegaConf.is_list(node) else node
    return "null" if v is None else str(v)


def _shown(group: str, node: DictConfig, key: str, option: str, meta: dict) -> bool:
    """Whether a key of a chosen group belongs to its option (see the module docstring)."""
    if key == "name" or key in option_keys(group, option):
        return True
    if key == "record":
        return node.get("record") is not None
    if group == "strategy":
        from distexp import strategies

        rec = strategies.REGISTRY.get(str(node.get("name")))
        return rec is not None and key in rec.options
    if group in option_groups.GROUPS:
        rec = option_groups.known(group, node)
        return rec is not None and key in rec.keys
    return option in meta.get("only", ())


def rows(root: DictConfig, schema) -> List[tuple]:
    """(key, default, description) for each key to list; `schema`: the config's dataclass."""
    docs = descriptions(schema)
    choices = OmegaConf.select(root, "hydra.runtime.choices") or {}
    out: List[tuple] = []
    for key in root.keys():
        if key == "hydra" or isinstance(root[key], DictConfig) or key not in docs:
            continue
        out.append((key, _value(root[key]) if not OmegaConf.is_missing(root, key) else "???",
                    docs[key]["help"]))
    for group in list(GROUPS) + ["tracking", "checkpoint", "sweep", "task"]:
        node = root.get(group)
        if not isinstance(node, DictConfig):
            continue
        option = str(choices.get(group) or "default")
        for key in node.keys():
            meta = docs.get(f"{group}.{key}")
            if meta is None or (group in GROUPS and not _shown(group, node, key, option, meta)):
                continue
            out.append((f"{group}.{key}", _value(node[key]) if not OmegaConf.is_missing(node, key)
                        else "???", meta["help"]))
    return out


def render(root: DictConfig, schema) -> str:
    listed = rows(root, schema)
    width = max(len(f"{k}={v}") for k, v, _ in listed if len(f"{k}={v}") <= 44) + 2
    lines = []
    for k, v, d in listed:
        kv = f"{k}={v}"
        lines.append(f"  {kv.ljust(width)}{_one_line(d)}" if len(kv) <= 44 else
                     f"  {kv}\n  {' ' * width}{_one_line(d)}")
    return "\n".join(lines).replace("$", "$$")  # Hydra's template substitutes $NAME


def register(schema) -> None:
    """The ``distexp.help`` resolver, describing the keys of `schema` (the config's dataclass)."""
    if not OmegaConf.has_resolver("distexp.help"):
        OmegaConf.register_new_resolver("distexp.help", lambda *, _root_: render(_root_, schema),
                                        use_cache=False)
