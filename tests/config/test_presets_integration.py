"""The Slurm launcher's config composes through the CLI (--cfg hydra). Tier: integration."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_slurm_launcher_config_composes(cli):
    r = cli("--cfg", "hydra", "hydra/launcher=slurm", timeout=60)
    assert r.returncode == 0, r
    assert "hydra_plugins.distexp_slurm_launcher.slurm_launcher.DistexpSlurmLauncher" in r.stdout
    # fits a small node; tasks follow the job unless set
    assert "cpus_per_task: 1" in r.stdout and "tasks_per_node: null" in r.stdout
