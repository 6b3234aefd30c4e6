"""Training on a TPU (skipped without one): one replica per core. Tier: slow."""
from __future__ import annotations

import json
import os

import pytest

from distexp.strategies.tpu import local_tpu

pytestmark = pytest.mark.slow
HAS_TPU = bool(os.environ.get("TPU_NAME")) or local_tpu()


@pytest.mark.tpu
@pytest.mark.skipif(not HAS_TPU, reason="needs a TPU (TPU_NAME, or a TPU VM)")
def test_tpu_trains_one_replica_per_core(cli):
    r = cli("strategy=tpu", "epochs=3", "tracking.enabled=false", "hydra.run.dir=job", timeout=1800)
    assert r.returncode == 0, r
    result = json.loads((cli.cwd / "job" / "result.json").read_text())
    assert result["eval/accuracy"] >= 0.8
    assert "Number of devices: 8" in r.stdout or "Number of devices:" in r.stdout
