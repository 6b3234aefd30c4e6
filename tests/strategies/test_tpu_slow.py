"""Training on a TPU (skipped without one): one replica per core. Tier: slow."""
from __future__ import annotations

import json
import os
import re

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
    # one replica per core: the replicas are the TPU cores TensorFlow lists, TPU:0 .. TPU:n-1
    m = re.search(r"^Number of devices: (\d+)  \(([^;]*);", r.stdout, flags=re.M)
    assert m, r.stdout
    cores = [d.strip() for d in m.group(2).split(",")]
    assert [re.search(r"TPU:(\d+)$", d) and int(re.search(r"TPU:(\d+)$", d).group(1))
            for d in cores] == list(range(int(m.group(1)))), m.group(0)
