"""Features that need a pip extra, and the one line that refuses one whose extra is not installed;
and a key typed the argparse way (`--epochs 3`), refused in one line naming `epochs=3`.

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


# Hydra's own flags (hydra/_internal/utils.py get_args_parser); any other `--name` is a key
# written the argparse way, which Hydra refuses with its usage text only.
_HYDRA_FLAGS = frozenset((
    "--help", "--hydra-help", "--version", "--cfg", "--resolve", "--package", "--run",
    "--multirun", "--shell-completion", "--config-path", "--config-name", "--config-dir",
    "--experimental-rerun", "--info"))


def dashed_key(argv: Sequence[str]) -> Optional[str]:
    """The one line (without "distexp: error: ") for the first `--key value` or `--key=value`
    argument, which Hydra does not take, with the `key=value` to type instead; else None."""
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if not name.startswith("--") or name in _HYDRA_FLAGS or len(name) < 3:
            continue
        key = name[2:].replace("-", "_")
        following = argv[i + 1] if i + 1 < len(argv) else "-"
        if not eq and not following.startswith("-") and "=" not in following:
            value, arg = following, f"{arg} {following}"
        return (f"{name}: received {arg!r}; keys are set as key=value (Hydra's override syntax): "
                f"{key}={value or '<value>'}")
    return None


def refused(argv: Sequence[str]) -> Optional[str]:
    """The one line for the first argument refused before Hydra composes, else None."""
    return missing(argv) or dashed_key(argv)
