"""Features that need a pip extra, and the one line that refuses one whose extra is not installed.

Asked of the command line before Hydra composes and before a trainer (TensorFlow) starts; a leaf:
it imports nothing of distexp.
"""
from __future__ import annotations

import importlib.util
from typing import Optional, Sequence

# (key on the command line, its value, the module the feature needs, the extra that installs it)
NEEDS = (
    ("hparams_search", "optuna", "hydra_plugins.hydra_optuna_sweeper", "optuna"),
    ("hydra/sweeper", "optuna", "hydra_plugins.hydra_optuna_sweeper", "optuna"),
    ("cluster", "ray", "ray", "ray"),
    ("hydra/launcher", "ray", "ray", "ray"),
)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package is missing
        return False


def missing(argv: Sequence[str]) -> Optional[str]:
    """The one line (without "distexp: error: ") for the first argument that asks for a feature
    whose extra is not installed, else None."""
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        for k, v, module, extra in NEEDS:
            if eq and key == k and value.strip() == v and not _installed(module):
                return (f"{key}: received {value.strip()!r}, whose package is not installed; "
                        f"valid: install the extra first: pip install -e \".[{extra}]\" "
                        f"(from a clone) or pip install \"distexp[{extra}]\"")
    return None
