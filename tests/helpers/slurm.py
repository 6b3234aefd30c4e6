"""What the Slurm tests share (tests/cluster/test_slurm.py on one node, tests/cluster/test_slurm_nodes.py on two):
start the cluster, run Slurm's clients (on this host, or in the two-node cluster's controller
namespace, as on a login node), start a job with srun, find its runs and task processes, and
check that nothing of a job is left. No TensorFlow here."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from helpers.cli import ROOT, cli_env, distexp_cmd
from helpers.processes import processes_mentioning, processes_with, wait_until
from helpers.store import db_uri, mlflow_runs

SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"


def here(*cmd) -> list:
    """A Slurm client on this host (the one-node cluster)."""
    return [str(c) for c in cmd]


def in_controller(*cmd) -> list:
    """A command in the controller's namespace (where srun, sbatch and squeue reach slurmctld)."""
    return [str(SCRIPT), "exec", *map(str, cmd)]


def cluster_up(*args) -> str:
    """`slurm-cluster.sh up ARGS`, its output; skips only where no cluster can start at all."""
    if os.geteuid() != 0:
        pytest.skip("a Slurm cluster needs root to install and start its daemons "
                    f"(uid {os.geteuid()})")
    if not Path("/etc/debian_version").exists():
        pytest.skip("scripts/slurm-cluster.sh needs Debian (apt, slurm-wlm); "
                    "no /etc/debian_version")
    up = subprocess.run([str(SCRIPT), "up", *args], capture_output=True, text=True, timeout=900)
    assert up.returncode == 0, \
        f"slurm-cluster.sh up {' '.join(args)} failed:\n{up.stdout}\n{up.stderr}"
    print(up.stdout.strip())
    return up.stdout


def queue(on=here) -> list:
    """Slurm's queue, one "<job id> <state>" line per job (completing jobs included)."""
    return subprocess.run(on("squeue", "-h", "-o", "%i %T"), capture_output=True,
                          text=True).stdout.split("\n")[:-1]


def runs(tmp: Path, kind=None):
    """The runs in tmp/mlflow.db (of `kind`: job or sweep), none while the store does not exist."""
    if not (tmp / "mlflow.db").exists():  # never create the store here: it races the sweep's
        return []
    _, found = mlflow_runs(db_uri(tmp))
    return [r for r in found if kind is None or r.data.tags.get("distexp.run_kind") == kind]


def srun(tmp: Path, srun_args, name: str, *args, on=here, **kw):
    """`srun SRUN_ARGS python -m distexp ARGS` with its store in tmp and its job dir tmp/name;
    stdout and stderr together."""
    return subprocess.Popen(on("srun", *srun_args, *distexp_cmd(
        *args, f"tracking.uri={db_uri(tmp)}", f"hydra.run.dir={tmp / name}")),
        cwd=tmp, env=cli_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def task_pids(job: Path, rank: int):
    """The job processes (`python -m distexp`, the Slurm tasks) of rank `rank`."""
    return processes_with(str(job), b"-m\0distexp\0", f"SLURM_PROCID={rank}\0".encode())


def training(job: Path, log: str = "worker-0.log"):
    """A condition: the task's log shows its first epoch."""
    return lambda: (job / log).exists() and "epoch 1/" in (job / log).read_text()


def nothing_left(marker: Path, on=here, queue_s: float = 60, processes_s: float = 10):
    """Slurm's queue empty (completing jobs included) and no process of the job alive."""
    wait_until(lambda: not queue(on), queue_s, "an empty Slurm queue")
    wait_until(lambda: not processes_mentioning(str(marker)), processes_s,
               f"no process mentioning {marker}")
