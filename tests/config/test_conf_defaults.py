"""One home per default: a key's default and description live in the schema (distexp/config/schema.py
and each option's schema dataclass); a yaml under distexp/conf/ sets only what differs from it.

conf/config.yaml keeps the defaults list and Hydra's settings; an option's yaml names its schema,
its `name` and the keys where that option departs from its schema (model/cnn.yaml's learning rate).
Restating a default there made it win over the schema (`_self_` after `base_config`), so a default
changed in the schema changed nothing on the command line, and the two descriptions drifted.
The presets (experiment/, hparams_search/) are exempt: they pin a published workload on purpose
(experiment=seq2seq_gru is the tutorial's 64 per replica whatever the default becomes).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from omegaconf import OmegaConf

from distexp.config import schema
from distexp.options import groups
from helpers import ROOT

CONF = ROOT / "distexp" / "conf"
PRESETS = ("experiment", "hparams_search", "hydra")


def _defaults(cls) -> dict:
    return OmegaConf.to_container(OmegaConf.structured(cls), resolve=False)


def restated(tree: dict, defaults: dict, where: str = "") -> list:
    """The keys of `tree` whose value is the schema's default (`defaults`), dotted; `defaults:`,
    `hydra:` and `name` (an option's yaml names its option) aside."""
    out = []
    for k, v in tree.items():
        if k in ("defaults", "hydra", "name") or k not in defaults:
            continue
        if isinstance(v, dict) and isinstance(defaults[k], dict):
            out += restated(v, defaults[k], f"{where}{k}.")
        elif v == defaults[k]:
            out.append(f"{where}{k}: {v!r}")
    return out


def schema_of(rel: Path) -> dict:
    """The schema's defaults for the node a yaml under conf/ sets."""
    top = _defaults(schema.Config)
    if len(rel.parts) == 1:
        return top
    group = rel.parts[0]
    if group in groups.GROUPS:
        rec = groups.GROUPS[group].REGISTRY.get(rel.stem)
        cls = getattr(rec, "schema", None)
        return _defaults(cls) if dataclasses.is_dataclass(cls) else {}
    return top.get(group) or {}


def yamls():
    return sorted(p for p in CONF.rglob("*.yaml") if p.relative_to(CONF).parts[0] not in PRESETS)


def test_no_yaml_restates_a_schema_default():
    schema.register()
    found = []
    for p in yamls():
        rel = p.relative_to(CONF)
        tree = OmegaConf.to_container(OmegaConf.load(p), resolve=False) or {}
        found += [f"distexp/conf/{rel}: {r}" for r in restated(tree, schema_of(rel))]
    assert found == []


def test_config_yaml_keeps_the_defaults_list_and_hydra_only():
    tree = OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml"), resolve=False)
    assert sorted(tree) == ["defaults", "hydra"]


def test_a_restated_default_is_found():
    """The check itself: a top-level, a nested and a differing key; `name` is an option's own."""
    defaults = _defaults(schema.Config)
    tree = {"epochs": defaults["epochs"], "seed": defaults["seed"] + 1, "name": "x",
            "sweep": {"margin": defaults["sweep"]["margin"], "alpha": 0.5}}
    assert restated(tree, defaults) == ["epochs: 5", "sweep.margin: 0.05"]
    model = schema_of(Path("model/cnn.yaml"))
    assert restated({"optimizer": model["optimizer"], "learning_rate": -1.0}, model) == [
        f"optimizer: {model['optimizer']!r}"]
