"""The training loops by name (`loop`): each loop module registers its `train(ctx)` here."""
from __future__ import annotations

from distexp.registry import Registry

REGISTRY = Registry("loop")
