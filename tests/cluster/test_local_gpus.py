"""cluster=local on a GPU box, without TensorFlow (a faked NVIDIA driver): `gpus` is per worker, so
multiworker and ps split the visible GPUs into one disjoint CUDA_VISIBLE_DEVICES set per worker
process (the ps coordinator and servers get none); too few GPUs is one line before any process
starts; gpus=null splits them evenly and says what it cannot use."""
from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from distexp import errors, strategies
from distexp.cluster import kinds
from distexp.config import checks, resolved
from helpers import run_in_process


def _job_plan(compose, tmp_path, *overrides):
    """The plan as the job process makes it (distexp.job.lifecycle.prepare)."""
    cfg = compose(*overrides)
    found = checks.validate(cfg)
    return cfg, kinds.plan(cfg, tmp_path, found.gpus, found.visible)


def _devices(plan) -> dict:
    return {p.name: p.env.get("CUDA_VISIBLE_DEVICES")
            for p in plan.processes(Path("/tmp/config.yaml"), {})}


@pytest.mark.parametrize("overrides,devices", [
    (["strategy=multiworker", "workers=2", "gpus=1"], {"worker-0": "0", "worker-1": "1"}),
    (["strategy=multiworker", "workers=2", "gpus=2"], {"worker-0": "0,1", "worker-1": "2,3"}),
    (["strategy=multiworker", "workers=4", "gpus=1"],
     {"worker-0": "0", "worker-1": "1", "worker-2": "2", "worker-3": "3"}),
    (["strategy=multiworker", "workers=3", "gpus=1"],
     {"worker-0": "0", "worker-1": "1", "worker-2": "2"}),
    (["strategy=multiworker", "workers=2"], {"worker-0": "0,1", "worker-1": "2,3"}),
    (["strategy=ps", "workers=2", "ps=1", "gpus=1"],
     {"chief": "", "worker-0": "0", "worker-1": "1", "ps-0": ""}),
    (["strategy=ps", "workers=2", "ps=2", "gpus=2"],
     {"chief": "", "worker-0": "0,1", "worker-1": "2,3", "ps-0": "", "ps-1": ""}),
    (["strategy=ps", "workers=1", "ps=1", "gpus=4"], {"chief": "", "worker-0": "0,1,2,3", "ps-0": ""}),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_each_local_worker_gets_its_own_gpus(compose, tmp_path, gpus, overrides, devices):
    """On 4 GPUs: every worker its own `gpus` of them (none shared), the others none; the facts
    the trainers read count them per worker."""
    gpus(4)
    cfg, plan = _job_plan(compose, tmp_path, *overrides)
    assert _devices(plan) == devices
    per = len(devices["worker-0"].split(","))
    assert plan.gpus_per_worker == per
    assert plan.task_gpus == {name: len(ids.split(",")) if ids else 0
                              for name, ids in devices.items()}
    facts = resolved.resolve(cfg, resolved.check_gpus(cfg.gpus, 4), plan)
    workers = sum(name.startswith("worker-") for name in devices)
    assert (facts["gpus"], facts["replicas_per_worker"], facts["replicas"]) == (
        per, per, per * workers)
    assert plan.gpu_ids() == [g for ids in devices.values() for g in ids.split(",") if g]


def test_the_split_takes_the_pinned_gpus(compose, tmp_path, gpus):
    """GPUs pinned by CUDA_VISIBLE_DEVICES (the user, or a sweep's pool) are the ones split."""
    gpus(8, pinned="3,4,5,6")
    _, plan = _job_plan(compose, tmp_path, "strategy=multiworker", "workers=2", "gpus=1")
    assert _devices(plan) == {"worker-0": "3", "worker-1": "4"}
    _, plan = _job_plan(compose, tmp_path, "strategy=ps", "workers=2", "gpus=2")
    assert _devices(plan) == {"chief": "", "worker-0": "3,4", "worker-1": "5,6", "ps-0": ""}


@pytest.mark.parametrize("visible,overrides,line", [
    (4, ["strategy=multiworker", "workers=2", "gpus=3"],
     "gpus: received 3 per worker; 2 local workers need 6 GPU(s) and 4 are visible. Use gpus=2, "
     "workers=1 or gpus=0 (CPU)"),
    (1, ["strategy=multiworker", "workers=2", "gpus=1"],
     "gpus: received 1 per worker; 2 local workers need 2 GPU(s) and 1 are visible. Use workers=1 "
     "or gpus=0 (CPU)"),
    (3, ["strategy=ps", "workers=2", "gpus=2"],
     "gpus: received 2 per worker; 2 local workers need 4 GPU(s) and 3 are visible. Use gpus=1, "
     "workers=1 or gpus=0 (CPU)"),
])
def test_too_few_gpus_for_the_workers_is_one_line(compose, tmp_path, gpus, visible, overrides,
                                                  line):
    """The checks refuse it (as a sweep's planning does: no set-up, so no control is added for
    a job that would then be refused), with the plan's own line."""
    from distexp.cluster.processes import split_gpus
    from distexp.sweeps.planning import setup, with_controls

    gpus(visible)
    with pytest.raises(errors.UserError) as ex:
        checks.validate(compose(*overrides))
    assert str(ex.value) == line
    assert setup(compose(*overrides)) is None
    found = compose(*overrides)
    assert with_controls([overrides], lambda o: (found, setup(found))) == ([overrides], [])  # no control
    cfg = compose(*overrides)  # the plan's refusal is the same line: one source
    with pytest.raises(errors.UserError) as ex:
        split_gpus(cfg.gpus, visible, strategies.of(cfg).num_workers(cfg))
    assert str(ex.value) == line
    assert setup(compose(*overrides[:-1], "gpus=0")) is not None


@pytest.mark.parametrize("overrides,hint", [
    (["strategy=mirrored"], "gpus=0 cpu_replicas=3"),
    (["strategy=central"], "gpus=0 cpu_replicas=3"),
    (["strategy=one_device"], "gpus=0"),
    (["strategy=multiworker", "workers=1"],
     "gpus=0 (one CPU replica per worker; workers=3 for 3 replicas)"),
    (["strategy=ps", "workers=1"], "gpus=0 (one CPU replica per worker; workers=3 for 3 replicas)"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_more_gpus_than_visible_says_how_this_strategy_runs_on_cpu(compose, gpus, overrides, hint):
    """cpu_replicas only where the strategy's record splits the CPU; a multiworker or ps worker
    holds one CPU replica, so its hint is workers; one_device has one device. (A local cluster's
    workers are refused by the checks first: the test above.)"""
    gpus(2)
    cfg = compose(*overrides, "gpus=3")
    with pytest.raises(errors.UserError) as ex:
        resolved.check_gpus(cfg.gpus, resolved.visible_gpus(), strategies.of(cfg))
    assert str(ex.value) == (
        "gpus: received 3; 2 GPU(s) visible on this machine. To run on CPU use " + hint)


@pytest.mark.parametrize("strategy", ["multiworker", "ps"])
def test_fewer_gpus_than_workers_is_a_cpu_job_said_in_one_line(compose, tmp_path, gpus, capsys,
                                                               strategy):
    """A faked 1-GPU driver, 2 local workers, gpus=null: the workers cannot share the GPU, so the
    job trains on CPU (every process's CUDA_VISIBLE_DEVICES empty) and says so, with the keys
    that change it, in one line before TensorFlow starts."""
    gpus(1)
    _, plan = _job_plan(compose, tmp_path, f"strategy={strategy}", "workers=2")
    assert set(_devices(plan).values()) == {""}
    assert plan.gpus_per_worker == 0 and set(plan.task_gpus.values()) == {0}
    assert capsys.readouterr().out == (
        f"distexp: strategy={strategy}: 2 local workers and 1 GPU(s) visible: a GPU is never "
        "shared between worker processes, so every worker trains on CPU. To train on the "
        "GPU(s): workers=1 (one GPU each), or strategy=mirrored (one process, every GPU); gpus=0 "
        "trains on CPU without this line\n")
    # gpus=0 asked for the CPU: nothing to say; 3 GPUs over 2 workers: the unused one is said
    _job_plan(compose, tmp_path, f"strategy={strategy}", "workers=2", "gpus=0")
    assert capsys.readouterr().out == ""
    gpus(3)
    _job_plan(compose, tmp_path, f"strategy={strategy}", "workers=2")
    assert capsys.readouterr().out == (
        f"distexp: strategy={strategy}: 3 GPUs over 2 local workers: 1 each, 1 unused "
        "(workers=3 would use every GPU, one each)\n")


@pytest.mark.parametrize("visible,overrides", [
    (4, ["strategy=multiworker", "workers=2"]), (4, ["strategy=multiworker", "workers=2", "gpus=1"]),
    (3, ["strategy=ps", "workers=2"]), (1, ["strategy=multiworker", "workers=2"]),
    (4, ["strategy=mirrored"]), (4, ["strategy=one_device", "gpus=1"]),
])
def test_the_checks_count_the_gpus_the_plan_pins(compose, tmp_path, gpus, visible, overrides):
    """The facts the checks and a sweep's planning find before any plan (resolve without one)
    are the job's: with gpus=null, 4 GPUs over 2 local workers are 2 each (4 replicas, not 8)."""
    gpus(visible)
    cfg, plan = _job_plan(compose, tmp_path, *overrides)
    gpus_ = resolved.check_gpus(cfg.gpus, visible)
    before, after = resolved.resolve(cfg, gpus_), resolved.resolve(cfg, gpus_, plan)
    keys = ("gpus", "replicas_per_worker", "replicas", "sync_replicas", "global_batch")
    assert {k: before[k] for k in keys} == {k: after[k] for k in keys}


def test_checks_that_need_the_gpus_read_each_workers(compose, gpus):
    """global_batch_size divides over the job's replicas (4 GPUs, 2 workers: 4 replicas), and
    NCCL is refused where the workers train on CPU (1 GPU, 2 workers), before any process."""
    gpus(4)
    checks.validate(compose("strategy=multiworker", "workers=2", "global_batch_size=12"))
    with pytest.raises(errors.UserError, match="must divide evenly over 4 replicas"):
        checks.validate(compose("strategy=multiworker", "workers=2", "global_batch_size=10"))
    gpus(1)
    with pytest.raises(errors.UserError) as ex:
        checks.validate(compose("strategy=multiworker", "workers=2", "strategy.communication=nccl"))
    assert str(ex.value) == ("strategy.communication: received 'nccl'; NCCL needs GPUs and this "
                             "job trains on CPU: use auto or ring")


def test_a_sweep_job_splits_the_gpus_it_holds(compose, tmp_path, gpus, capsys):
    """In a sweep (distexp.sweeps.gpu_pool) on 4 GPUs, another job holding 0 and 1: a
    `multiworker workers=2 gpus=1` job holds 2 and 3 and its workers get one each."""
    from distexp.sweeps import gpu_pool
    from helpers import JOBLIB_LAUNCHER

    gpus(4)
    sweep = tmp_path / "sweep"
    other = gpu_pool.acquire(sweep / gpu_pool.POOL_DIR, ["0", "1", "2", "3"], 2)
    overrides = ["strategy=multiworker", "workers=2", "gpus=1"]
    cfg = compose(*overrides)
    found = checks.validate(cfg)  # before the lease, as run_job: the sweep's 4 GPUs
    with gpu_pool.pinned(cfg, sweep, JOBLIB_LAUNCHER, found) as held:
        plan = kinds.plan(cfg, tmp_path, found.leased(cfg, held).gpus,
                          found.leased(cfg, held).visible)
    other.release()
    assert (other.ids, held) == (["0", "1"], ["2", "3"])
    assert _devices(plan) == {"worker-0": "2", "worker-1": "3"}


def test_the_job_process_gives_each_worker_its_gpus(tmp_path, gpus, monkeypatch):
    """`python -m distexp strategy=multiworker workers=2 gpus=1` through the CLI's entry point on 4
    GPUs: the processes it would start (stopped just before) are pinned to GPU 0 and GPU 1, and
    the facts in the job's config.yaml count 1 GPU per worker; with gpus=3 it refuses in one line
    and starts nothing."""
    from distexp.job import lifecycle

    gpus(4)
    started = {}

    def stop_before_training(job, executing):
        started.update(_devices(job.plan))
        raise errors.UserError("stopped by the test before training")

    monkeypatch.setattr(lifecycle, "execute", stop_before_training)
    job = tmp_path / "job"
    common = ["tracking.enabled=false", "warm_start=false", f"hydra.run.dir={job}"]
    r = run_in_process(["strategy=multiworker", "workers=2", "gpus=1", *common], tmp_path)
    assert r.stderr == "distexp: error: stopped by the test before training\n", r
    assert started == {"worker-0": "0", "worker-1": "1"}
    facts = OmegaConf.load(job / "config.yaml").resolved
    assert (facts.gpus, facts.task_gpus, facts.replicas) == (
        1, {"worker-0": 1, "worker-1": 1}, 2)
    started.clear()
    r = run_in_process(["strategy=multiworker", "workers=2", "gpus=3", *common], tmp_path)
    assert (r.returncode, r.stderr) == (2, (
        "distexp: error: gpus: received 3 per worker; 2 local workers need 6 GPU(s) and 4 are "
        "visible. Use gpus=2, workers=1 or gpus=0 (CPU)\n")), r
    assert started == {}


def test_a_job_counts_its_gpus_once_and_resolves_once_more_with_its_plan(tmp_path, gpus,
                                                                        monkeypatch):
    """Each fact of a job computed once (distexp.config.resolved.JobFacts): through the CLI's entry
    point, the visible GPUs are counted by the checks alone, and the job's layout is resolved by
    the checks and once more with the cluster plan (the refinement written to config.yaml)."""
    from distexp.job import lifecycle

    gpus(4)
    counted, resolved_by = [], []
    count, resolve = resolved.visible_gpus, resolved.resolve

    def counting():
        counted.append(1)
        return count()

    def resolving(cfg, gpus=None, plan=None, **kw):
        resolved_by.append("plan" if plan is not None else "checks")
        return resolve(cfg, gpus, plan, **kw)

    for module in (resolved, checks):
        monkeypatch.setattr(module, "visible_gpus", counting)
    monkeypatch.setattr(resolved, "resolve", resolving)
    monkeypatch.setattr(checks, "resolve", resolving)
    monkeypatch.setattr(lifecycle, "execute", lambda job, executing: (_ for _ in ()).throw(
        errors.UserError("stopped by the test before training")))
    job = tmp_path / "job"
    r = run_in_process(["strategy=multiworker", "workers=2", "tracking.enabled=false",
                        "warm_start=false", f"hydra.run.dir={job}"], tmp_path)
    assert r.stderr == "distexp: error: stopped by the test before training\n", r
    assert (len(counted), resolved_by) == (1, ["checks", "plan"])
    assert OmegaConf.load(job / "config.yaml").resolved.gpus == 2  # 4 split over 2 workers
