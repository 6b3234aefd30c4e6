"""Which training processes a job needs, and what each one is told (no TensorFlow here).

- one_device / mirrored / central: one trainer process, the chief.
- multiworker / ps with cluster=local: see `plan` (issue 3 extends this).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from omegaconf import DictConfig

from distexp import launch, tracking
from distexp.config import UserError


@dataclass
class Plan:
    """The processes of one job, before they start."""

    names: List[str]                      # first = the chief (logs, prints)
    replica_workers: int = 1              # processes that hold replicas
    logs_to_mlflow: bool = True           # false for a non-chief task of an external cluster
    extra_env: Dict[str, Dict[str, str]] = field(default_factory=dict)
    servers: List[str] = field(default_factory=list)
    job_dir: Optional[Path] = None

    def processes(self, config_path: Path, env: Dict[str, str], run_id: Optional[str],
                  uri: str) -> List[launch.Proc]:
        procs = []
        for i, name in enumerate(self.names):
            e = dict(env)
            e.update(self.extra_env.get(name, {}))
            e["DISTEXP_TASK"] = name
            if i == 0 and run_id:
                e[tracking.RUN_ID_ENV] = run_id
                e[tracking.URI_ENV] = uri
            procs.append(launch.Proc(name=name, cmd=launch.trainer_cmd(config_path), env=e,
                                     log=self.job_dir / f"{name}.log", console=(i == 0),
                                     server=name in self.servers))
        return procs


def plan(cfg: DictConfig, job_dir: Path, gpus: int) -> Plan:
    name = cfg.strategy.name
    if name in ("one_device", "mirrored", "central"):
        return Plan(names=["chief"], job_dir=job_dir)
    raise UserError(f"strategy: received {name!r}; multi-process strategies are not available yet")
