"""Cluster kinds by name: `of(cfg)` is the record of `cfg.cluster` (distexp.cluster.kind). The
built-ins register in the contract's order (local, tf_config, slurm); a kind defined outside
distexp names the module that registers it in its yaml (`record: my_pkg.my_cluster`)."""
from __future__ import annotations

from omegaconf import DictConfig

from distexp.cluster.kind import REGISTRY, Kind


def of(cfg: DictConfig) -> Kind:
    """The kind of `cfg.cluster`; `cluster.record` (a module path) is imported first, so a kind
    defined outside distexp registers itself."""
    return REGISTRY.load(cfg.cluster.name, cfg.cluster.get("record"))


# The built-in kinds register themselves, in the contract's order.
from distexp.cluster import local, tf_config, slurm  # noqa: E402,F401
