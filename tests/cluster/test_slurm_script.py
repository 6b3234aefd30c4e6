"""scripts/slurm-cluster.sh without a real Slurm: `scontrol`, `pgrep` and `dpkg` are stand-ins on
PATH, so nothing is installed, started or written. Integration tier (starts processes)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.integration
SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"


def _fakes(bin_dir: Path, pid: int) -> None:
    fakes = {
        "dpkg": "exit 0",  # every package installed
        "pgrep": f"echo {pid}",  # a slurmctld this script did not start
        "scontrol": 'echo "slurm_load_ctl_conf error: Unable to contact slurm controller" >&2; '
                    "exit 1",
    }
    bin_dir.mkdir()
    for name, body in fakes.items():
        f = bin_dir / name
        f.write_text(f"#!/bin/sh\n{body}\n")
        f.chmod(0o755)


def test_up_beside_a_slurmctld_that_does_not_answer_says_what_it_found(tmp_path):
    """Seen: `up --nodes 2` right after another Slurm was stopped (its slurmctld still exiting)
    ended in `name=$(scontrol show config ...) failed (exit 1, line 274)`. Now: one line naming
    the process, scontrol's answer and what to do; exit 1."""
    if os.geteuid() != 0 or not Path("/etc/debian_version").exists():
        pytest.skip("the script runs as root on Debian only")
    ctld = subprocess.Popen(["sleep", "120"])
    try:
        _fakes(tmp_path / "bin", ctld.pid)
        env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
                   SLURM_FOREIGN_WAIT_S="1")
        r = subprocess.run([str(SCRIPT), "up", "--nodes", "2"], capture_output=True, text=True,
                           env=env, timeout=120)
    finally:
        ctld.kill()
        ctld.wait()
    assert r.returncode == 1, r
    assert r.stderr == (
        f"slurm-cluster: error: found a slurmctld not started by this script (pid {ctld.pid}, "
        "sleep 120) that does not answer after 1 s (scontrol show config: slurm_load_ctl_conf "
        "error: Unable to contact slurm controller); if it is stopping, run 'up' again once it "
        f"has exited; else stop it (kill {ctld.pid}) and run 'up'\n"), r.stderr
