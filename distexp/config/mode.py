"""Whether this process runs a job of a Hydra multirun (`python -m distexp -m ...`): the one
place that asks Hydra (a leaf)."""
from __future__ import annotations


def in_multirun(outside_hydra: bool = False) -> bool:
    """True in a job of a multirun. `outside_hydra`: the answer when Hydra is not running at all
    (a test or a tool that composes a config itself): the checks take such a config as a sweep's
    job, so that `repeats` composes; everything else takes it as a single run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return outside_hydra
    return HydraConfig.get().mode == RunMode.MULTIRUN
