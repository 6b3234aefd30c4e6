"""distexp's Slurm launcher (`hydra/launcher=slurm`): Hydra accepts launchers only from the
hydra_plugins package, so the class and its schema live here and the logic in distexp.sweeps.slurm_launcher."""
from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore

from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _Submitit


@dataclass
class DistexpSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.distexp_slurm_launcher.slurm_launcher.DistexpSlurmLauncher"
    tasks_per_node: Optional[int] = None  # null: follow the job (distexp.sweeps.slurm_launcher)


ConfigStore.instance().store(group="hydra/launcher", name="distexp_slurm", node=DistexpSlurmConf,
                             provider="distexp")


class DistexpSlurmLauncher(_Submitit):
    """hydra-submitit-launcher's SlurmLauncher with distexp.sweeps.slurm_launcher's launch."""

    def launch(self, job_overrides, initial_job_idx):
        from distexp.sweeps import slurm_launcher

        return slurm_launcher.launch(self, job_overrides, initial_job_idx)
