"""`distexp.train.trainer.train(cfg)` is a plain function: called with a config resolved in the
caller's process (compose -> checks -> `resolved.resolve`), it trains what the CLI trains: the same
replicas, global batch and workers, and (same seed, same data order) the same per-step losses.

The call runs in a fresh Python process of its own, not in pytest's: TensorFlow's logical CPU
devices (cpu_replicas=2) cannot change once its runtime started (docs/facts.md#process-state), and another test may
have started it. No environment variable carries a fact to it.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from distexp.parity import losses as _losses
from helpers import CONF, child_env
from helpers.cli import TRAIN_SCRIPT

pytestmark = [pytest.mark.slow, pytest.mark.extended]

JOB = ["strategy=mirrored", "cpu_replicas=2", "gpus=0", "epochs=1", "steps_per_epoch=6",
       "warmup_steps=2", "batch_size_per_replica=16", "tracking.enabled=false",
       "measure_peak_flops=false", "checkpoint.every_steps=0"]

def test_train_called_in_process_trains_what_the_cli_trains(cli, tmp_path):
    r = cli(*JOB, "hydra.run.dir=outputs/cli", timeout=600)
    assert r.returncode == 0, r
    job = cli.cwd / "outputs" / "cli"
    by_cli = json.loads((job / "result.json").read_text())
    written = OmegaConf.load(job / "config.yaml").resolved
    assert (written.replicas, written.global_batch, written.workers) == (2, 32, 1)

    mine = tmp_path / "in_process"
    mine.mkdir()
    env = {k: v for k, v in child_env(tests=False, TF_CPP_MIN_LOG_LEVEL="2").items()
           if not k.startswith("DISTEXP_")}
    out = subprocess.run([sys.executable, "-c", TRAIN_SCRIPT, str(CONF), str(mine), *JOB],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(next(ln for ln in out.stdout.splitlines()
                             if ln.startswith("RESULT "))[len("RESULT "):])
    for key in ("num_replicas", "global_batch_size", "num_workers"):
        assert result[key] == by_cli[key], key
    assert (result["num_replicas"], result["global_batch_size"]) == (2, 32)
    assert "Number of devices: 2  (/cpu:0, /cpu:1; workers: 1)" in out.stdout
    # the same training: 6 steps, each loss equal to the CLI's (float32, same order of reductions)
    assert len(_losses(mine)) == 6
    assert _losses(mine) == pytest.approx(_losses(job), abs=1e-6)
    assert result["eval/accuracy"] == pytest.approx(by_cli["eval/accuracy"], abs=1e-6)
