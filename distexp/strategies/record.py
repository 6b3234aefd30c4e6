"""The strategy record: what distexp knows about one strategy (see distexp.strategies)."""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple, Type

from omegaconf import DictConfig


class Record:
    name: str = ""
    # "single": one training process; "multiworker": `workers` worker processes, worker-0 the
    # chief; "ps": a coordinator (chief) + `workers` worker servers + `ps` parameter servers.
    layout: str = "single"
    synchronous: bool = True
    # Whether `cpu_replicas` splits the CPU into that many logical devices (replicas).
    cpu_replicas: bool = False
    # loop -> None (supported) or why not (one line, before TensorFlow starts).
    loops: Mapping[str, Optional[str]] = {"custom": None, "fit": None}
    # knob -> why it is refused with this strategy (checked when the knob is on).
    refuses: Mapping[str, str] = {}
    # The `strategy.*` keys that apply (others must stay at their defaults).
    options: Tuple[str, ...] = ()
    # The one-replica reference runs the report and distexp.parity compare with.
    baseline: bool = False
    # Task roles that only serve (run tf.distribute.Server until stopped), not train.
    server_roles: Tuple[str, ...] = ()
    # How steps are dispatched (distexp.train.step): "sync" (strategy.run) or "ps" (ClusterCoordinator).
    dispatch: str = "sync"

    # -- before TensorFlow (the job process) ----------------------------------------------------
    def replicas_per_worker(self, cfg: DictConfig, gpus: int) -> int:
        if gpus > 0:
            return gpus
        return int(cfg.cpu_replicas) if self.cpu_replicas else 1

    def num_workers(self, cfg: DictConfig) -> int:
        """Processes that hold replicas."""
        return int(cfg.workers) if self.layout in ("multiworker", "ps") else 1

    def sync_workers(self, cfg: DictConfig) -> int:
        """Workers whose replicas share one global batch."""
        return int(cfg.workers) if self.layout == "multiworker" else 1

    def check(self, cfg: DictConfig) -> None:
        """Checks of this strategy's own settings (UserError)."""

    # -- in the training process ----------------------------------------------------------------
    def device_count(self, cfg: DictConfig, gpus: int) -> int:
        """How many local devices this process trains on (logical CPU devices when no GPU)."""
        return self.replicas_per_worker(cfg, gpus)

    def resolver(self, cfg: DictConfig, gpus: int):
        """The cluster resolver (None: no cluster)."""
        return None

    def build(self, cfg: DictConfig, devices: List[str], resolver=None):
        raise NotImplementedError

    def replica_devices(self, strategy, devices: List[str]) -> List[str]:
        """The devices the built strategy trains on (as configured, unless it found its own)."""
        return devices

REGISTRY: Dict[str, Record] = {}

def register(cls: Type[Record]) -> Type[Record]:
    REGISTRY[cls.name] = cls()
    return cls
