"""`lifecycle.prepare` plans and writes, and starts nothing, for every cluster kind: no process (a
trainer, the warm trainer), no thread (the run's creation, a node's metrics), no network
namespace, no Ray connection or actor. `execute` acquires the plan (tests/cluster/test_ray.py
runs it on a Ray cluster). No TensorFlow, no process."""
from __future__ import annotations

import json
import subprocess
import threading

import pytest
from omegaconf import OmegaConf

from distexp.cluster import netns, ray_run
from distexp.config import checks
from distexp.job import lifecycle, warm_client

STARTS = [(subprocess, "Popen"), (threading.Thread, "start"), (netns, "open_namespace"),
          (ray_run, "connect"), (ray_run, "_reserve"), (warm_client, "start")]


@pytest.fixture
def nothing_starts(monkeypatch, tmp_path):
    """Every way to start something records its name in the list instead (and fails)."""
    from hydra.core.hydra_config import HydraConfig

    hc = OmegaConf.create({"runtime": {"output_dir": str(tmp_path / "job")},
                           "overrides": {"task": []}, "mode": None})
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: hc))
    started = []
    for owner, name in STARTS:
        def starts(*args, _name=name, **kw):
            started.append(_name)
            raise AssertionError(f"prepare started something: {_name}")
        monkeypatch.setattr(owner, name, starts)
    return started


@pytest.mark.parametrize("overrides", [
    ["strategy=one_device"],
    ["strategy=multiworker", "workers=2"],
    ["strategy=ps", "workers=1", "ps=1"],
    ["strategy=multiworker", "workers=2", "cluster=tf_config"],
    ["strategy=multiworker", "workers=2", "cluster=slurm"],
    ["strategy=multiworker", "workers=2", "cluster=ray"],
    ["strategy=one_device", "cluster=ray"],
], ids=" ".join)
def test_prepare_plans_and_starts_nothing(compose, tmp_path, monkeypatch, nothing_starts,
                                          overrides):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]},
        "task": {"type": "worker", "index": 0}}))
    for k, v in {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2",
                 "SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": "2",
                 "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0"}.items():
        monkeypatch.setenv(k, v)
    cfg = compose(*overrides, f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", "warm_start=true")
    job = lifecycle.prepare(cfg, checks.validate(cfg))
    assert nothing_starts == []
    assert job.config_path.exists()  # what it writes, it writes
    assert job.forwarder is None and job.new_forwarder is not None  # the run: set up, not begun
    if "cluster=ray" in overrides:  # its tasks planned, none placed
        assert (len(job.plan.tasks_of), job.plan.actors, job.plan.group, job.plan.cluster) == \
            (len(job.plan.names), {}, None, {})


def test_execute_acquires_the_plan_first(compose, tmp_path, nothing_starts):
    """The Ray connection is `execute`'s: its failure (here, the patched connect) comes from
    there, before any process or thread starts and before the run is said to open; what
    `prepare` wrote is removed, as when a check refuses the job (only Hydra's .hydra/ left)."""
    cfg = compose("strategy=multiworker", "workers=2", "cluster=ray",
                  f"tracking.uri=sqlite:///{tmp_path}/mlflow.db")
    job = lifecycle.prepare(cfg, checks.validate(cfg))
    assert sorted(p.name for p in job.job_dir.iterdir()) == ["config.yaml", "overrides.yaml"]
    opened = []
    with pytest.raises(AssertionError, match="connect"):
        lifecycle.execute(job, executing=lambda: opened.append(1))
    assert nothing_starts == ["connect"] and opened == []
    assert list(job.job_dir.iterdir()) == []
