"""Cluster kinds by name: `of(cfg)` is the record of `cfg.cluster` (distexp.cluster.kind). The
built-ins register in the contract's order (local, tf_config, slurm); a kind defined outside
distexp names the module that registers it in its yaml (`record: my_pkg.my_cluster`)."""
from __future__ import annotations

import importlib
from typing import Tuple

from omegaconf import DictConfig

from distexp.cluster.kind import REGISTRY, Kind
from distexp.errors import UserError


def get(name: str) -> Kind:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserError(f"cluster: received {name!r}; valid: {', '.join(REGISTRY)}") from None


def of(cfg: DictConfig) -> Kind:
    """The kind of `cfg.cluster`; `cluster.record` (a module path) is imported first, so a kind
    defined outside distexp registers itself."""
    module = cfg.cluster.get("record")
    if module and cfg.cluster.name not in REGISTRY:
        try:
            importlib.import_module(str(module))
        except ImportError as ex:
            raise UserError(f"cluster.record: received {module!r}, which cannot be imported "
                            f"({ex}); valid: an importable module that registers a Kind "
                            "(distexp.cluster.kind.register)") from None
    return get(cfg.cluster.name)


def names() -> Tuple[str, ...]:
    return tuple(REGISTRY)


# The built-in kinds register themselves, in the contract's order.
from distexp.cluster import local, tf_config, slurm  # noqa: E402,F401
