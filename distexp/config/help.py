"""`python -m distexp --help`: each key with its default and a one-line description.

Hydra renders ``hydra.help.template`` (conf/config.yaml); its ``${distexp.help:}`` part is this
module's `render`, an OmegaConf resolver that sees the composed config (``_root_``):
- descriptions come from the schema (the comments above/beside each dataclass field in
  distexp/config/schema.py) and the option files' own comments (conf/**.yaml), so they are
  written once, where the key is defined;
- a group's keys are those its chosen option sets (conf/<group>/<option>.yaml) plus the keys the
  schema's comments tie to that option by name (``# digits: ...``): no `embedding_dim` under
  model=cnn, no `shape` under dataset=digits. `--cfg job` still prints everything.
No TensorFlow.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Dict, List, Optional

from omegaconf import DictConfig, OmegaConf

CONF = Path(__file__).resolve().parent.parent / "conf"
SCHEMA = Path(__file__).resolve().parent / "schema.py"
GROUP_OF = {"StrategyConfig": "strategy", "ModelConfig": "model", "DatasetConfig": "dataset",
            "TaskConfig": "task", "LoopConfig": "loop", "ClusterConfig": "cluster",
            "CheckpointConfig": "checkpoint", "TrackingConfig": "tracking",
            "SweepConfig": "sweep", "Config": ""}
GROUPS = ("strategy", "model", "dataset", "loop", "cluster")
WIDTH = 100


def schema_comments() -> Dict[str, str]:
    """'group.key' (or 'key' at the top) -> the comment written with that field in schema.py."""
    out: Dict[str, str] = {}
    cls, block, after_field = None, [], False
    lines = SCHEMA.read_text().splitlines()
    for line in lines:
        m = re.match(r"class (\w+)", line)
        if m:
            cls, block = m.group(1), []
            continue
        s = line.strip()
        if cls not in GROUP_OF:
            continue
        if s.startswith("#"):  # a comment block describes the fields below it, up to a blank
            if after_field:
                block, after_field = [], False
            block.append(s.lstrip("# ").strip())
            continue
        m = re.match(r"    (\w+): [^=]+(?:=.*)?$", line)
        if m and not line.startswith("     "):
            text = " ".join(block)
            inline = _inline(line)
            if inline:  # a field's own comment; the block above belongs to an earlier field
                text = inline if after_field else f"{text} {inline}".strip()
            key = f"{GROUP_OF[cls]}.{m.group(1)}".lstrip(".")
            if text:
                out[key] = text
            after_field = True
            continue
        if not s:
            block = []
    return out


def _inline(line: str) -> Optional[str]:
    """The comment at the end of a line of code (tokenize: never a '#' inside a string)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return tok.string.lstrip("# ").strip()
    except (tokenize.TokenError, IndentationError):
        return None
    return None


def yaml_keys(path: Path) -> Dict[str, str]:
    """The top-level keys an option file sets -> their inline comment ('' if none)."""
    out: Dict[str, str] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        m = re.match(r"(\w+):(.*)$", line)
        if m and m.group(1) not in ("defaults", "hydra"):
            out[m.group(1)] = _inline(m.group(2).strip()) or ""
    return out


def _one_line(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _value(node) -> str:
    v = OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) or \
        OmegaConf.is_list(node) else node
    return "null" if v is None else str(v).replace("$", "$$")


def _applies(comment: str, option: str) -> Optional[bool]:
    """A schema comment that starts with option names ('digits: ...', 'mirrored / central:')
    says which options a key is for; None when it names none."""
    m = re.match(r"([\w/ ,=]+):\s", comment)
    if not m:
        return None
    names = {n.strip().split("=")[-1] for n in re.split(r"[/,]| and ", m.group(1)) if n.strip()}
    return option in names


def render(root: DictConfig) -> str:
    docs = schema_comments()
    choices = OmegaConf.select(root, "hydra.runtime.choices") or {}
    rows: List[tuple] = []
    top = yaml_keys(CONF / "config.yaml")
    for key, node in root.items():
        if key == "hydra" or isinstance(node, DictConfig):
            continue
        rows.append((key, _value(root[key]) if not OmegaConf.is_missing(root, key) else "???",
                     top.get(key) or docs.get(key, "")))
    for group in list(GROUPS) + ["tracking", "checkpoint", "sweep", "task"]:
        node = root.get(group)
        if not isinstance(node, DictConfig):
            continue
        option = choices.get(group) or "default"
        own = yaml_keys(CONF / group / f"{option}.yaml")
        for key in node.keys():
            doc = docs.get(f"{group}.{key}", "")
            applies = _applies(doc, option) if group in GROUPS else True
            if group in GROUPS and key not in own and key != "name" and not applies:
                continue  # another option's key (embedding_dim under cnn)
            if group in GROUPS and applies:
                doc = re.sub(r"^[\w/ ,=]+:\s", "", doc)
            text = "; ".join(t.rstrip(".") for t in (doc, own.get(key)) if t) or (
                f"the chosen option ({group}=...)" if key == "name" else "")
            rows.append((f"{group}.{key}", _value(node[key]) if not OmegaConf.is_missing(node, key)
                         else "???", text))
    width = max(len(f"{k}={v}") for k, v, _ in rows if len(f"{k}={v}") <= 44) + 2
    lines = []
    for k, v, d in rows:
        kv = f"{k}={v}"
        lines.append(f"  {kv.ljust(width)}{_one_line(d)}" if len(kv) <= 44 else
                     f"  {kv}\n  {' ' * width}{_one_line(d)}")
    return "\n".join(lines)


def register() -> None:
    if not OmegaConf.has_resolver("distexp.help"):
        OmegaConf.register_new_resolver("distexp.help", lambda *, _root_: render(_root_),
                                        use_cache=False)
