"""A toy model trains on a toy dataset, both from a record and a yaml alone (test_toy_options.py
checks the job process's side): one tiny job in a fresh process, the trainer calling the
implementations the records name."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import CONF, child_env, plug_in
from helpers import TOY_OPTIONS as RECORD
from helpers.cli import TRAIN_SCRIPT

pytestmark = pytest.mark.slow

def test_a_toy_model_trains_on_a_toy_dataset(tmp_path, monkeypatch):
    search = plug_in(tmp_path, monkeypatch, "model", "tiny", "toy_options", RECORD)
    plug_in(tmp_path, monkeypatch, "dataset", "blobs", "toy_options", RECORD)
    job = tmp_path / "job"
    job.mkdir()
    env = {k: v for k, v in child_env(tests=False, TF_CPP_MIN_LOG_LEVEL="2").items()
           if not k.startswith("DISTEXP_")}
    env["PYTHONPATH"] = f"{tmp_path / 'pkg'}:{env.get('PYTHONPATH', '')}"
    out = subprocess.run([sys.executable, "-c", TRAIN_SCRIPT, str(CONF), str(job), search,
                          "model=tiny", "dataset=blobs", "strategy=one_device", "gpus=0",
                          "epochs=5", "batch_size_per_replica=16", "warmup_steps=1",
                          "model.learning_rate=0.05",
                          "tracking.enabled=false", "measure_peak_flops=false",
                          "measure_step_split=false", "checkpoint.every_steps=0"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(next(ln for ln in out.stdout.splitlines()
                             if ln.startswith("RESULT "))[len("RESULT "):])
    assert result["eval/accuracy"] > 0.9, result  # separable blobs: the toy model learned them
