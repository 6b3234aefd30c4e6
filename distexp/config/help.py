"""`python -m distexp --help`: each key with its default and its description, wrapped to the
terminal's width (shutil.get_terminal_size; 100 columns for a pipe), nothing cut.

Hydra renders ``hydra.help.template`` (conf/config.yaml); its ``${distexp.help:}`` part is this
module's `render`, an OmegaConf resolver that sees the composed config (``_root_``):
- descriptions are the schema's own (`help` in each dataclass field's metadata,
  distexp.fields.key), written once, where the key is defined; a field without one (the
  job's internal `resolved`) is not listed;
- a group's keys are those of its chosen option (distexp.options.groups.keys_of, which the
  run's params and the checks ask too): the dataclass its record names, `record` when set; an
  option without a dataclass of its own, every key its node has: no `embedding_dim` under
  model=cnn, no `shape` under dataset=digits, no `tpu` under strategy=mirrored, no
  `peer_start_timeout` under cluster=local.
  `--cfg job` prints every key of the composed config.
No TensorFlow.
"""
from __future__ import annotations

import dataclasses
import shutil
import textwrap
import typing
from typing import Dict, List, Optional

from omegaconf import DictConfig, OmegaConf

from distexp.options import groups as option_groups

WIDTH = 100


def described(cls) -> Dict[str, dict]:
    """key -> the metadata (help) of each field of the dataclass `cls` that has a help."""
    return {f.name: dict(f.metadata) for f in dataclasses.fields(cls) if f.metadata.get("help")}


def descriptions(schema) -> Dict[str, dict]:
    """'group.key' (or 'key' at the top) -> the field's metadata (help), from the schema
    (a group's keys: its declared dataclass's; an option's own: `rows` asks its node's)."""
    out: Dict[str, dict] = {}
    types = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        if dataclasses.is_dataclass(types[f.name]):
            out.update({f"{f.name}.{k}": m for k, m in described(types[f.name]).items()})
        elif f.metadata.get("help"):
            out[f.name] = dict(f.metadata)
    return out


def _wrapped(text: str, width: int) -> List[str]:
    """`text` wrapped to `width` columns, every word kept (a word longer than it, a path, on a
    line of its own, uncut)."""
    return textwrap.wrap(" ".join(text.split()), max(width, 20), break_long_words=False,
                         break_on_hyphens=False) or [""]


def columns() -> int:
    """The terminal's width (shutil: $COLUMNS, else the terminal's, else 100 for a pipe)."""
    return shutil.get_terminal_size((WIDTH, 24)).columns


def _value(node) -> str:
    v = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) or \
        OmegaConf.is_list(node) else node
    return "null" if v is None else str(v)


def rows(root: DictConfig, schema) -> List[tuple]:
    """(key, default, description) for each key to list; `schema`: the config's dataclass."""
    docs = descriptions(schema)
    out: List[tuple] = []
    for key in root.keys():
        if key == "hydra" or isinstance(root[key], DictConfig) or key not in docs:
            continue
        out.append((key, _value(root[key]) if not OmegaConf.is_missing(root, key) else "???",
                    docs[key]["help"]))
    for group in [*option_groups.GROUPS, "tracking", "checkpoint", "sweep", "task"]:
        node = root.get(group)
        if not isinstance(node, DictConfig):
            continue
        own = OmegaConf.get_type(node)  # an option's own dataclass (a model's, a dataset's)
        own = described(own) if dataclasses.is_dataclass(own) else {}
        keys = option_groups.keys_of(group, node) if group in option_groups.GROUPS else node.keys()
        for key in keys:
            meta = own.get(key) or docs.get(f"{group}.{key}")
            if meta is None:
                continue
            out.append((f"{group}.{key}", _value(node[key]) if not OmegaConf.is_missing(node, key)
                        else "???", meta["help"]))
    return out


def render(root: DictConfig, schema, cols: Optional[int] = None) -> str:
    """Each key=default, its description beside it wrapped to the terminal's width (`cols`),
    nothing cut; where the column beside is too narrow (< 30), the description under the key."""
    listed = rows(root, schema)
    cols = cols or columns()
    width = max(len(f"{k}={v}") for k, v, _ in listed if len(f"{k}={v}") <= 44) + 2
    beside = cols - 2 - width >= 30
    lines = []
    for k, v, d in listed:
        kv = f"{k}={v}"
        if beside:
            indent = " " * (2 + width)
            text = _wrapped(d, cols - len(indent))
            head = f"  {kv.ljust(width)}" if len(kv) <= 44 else f"  {kv}\n{indent}"
        else:
            indent = " " * 6
            text = _wrapped(d, cols - len(indent))
            head = f"  {kv}\n{indent}"
        lines.append(head + f"\n{indent}".join(text))
    return "\n".join(lines).replace("$", "$$")  # Hydra's template substitutes $NAME


def groups() -> str:
    """Hydra's ``$APP_CONFIG_GROUPS`` (every group outside hydra/ and its options, from every
    config source) without the options' schemas (``<group>/base_<option>``, not choices)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()

    def walk(parent: str):
        for name in loader.list_groups(parent):
            path = f"{parent}/{name}" if parent else name
            if path != "hydra":
                yield path
                yield from walk(path)

    lines = []
    for group in sorted(walk("")):
        options = sorted(o for o in loader.get_group_options(group) if not o.startswith("base_"))
        if options:
            lines.append(f"{group}: {', '.join(options)}")
    return "\n".join(lines)


def register(schema) -> None:
    """The ``distexp.help`` resolver, describing the keys of `schema` (the config's dataclass),
    and ``distexp.groups``, the groups and their options."""
    if not OmegaConf.has_resolver("distexp.help"):
        OmegaConf.register_new_resolver("distexp.help", lambda *, _root_: render(_root_, schema),
                                        use_cache=False)
    if not OmegaConf.has_resolver("distexp.groups"):
        OmegaConf.register_new_resolver("distexp.groups", groups, use_cache=False)
