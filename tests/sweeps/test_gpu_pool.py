"""The sweep's GPU pool (distexp.sweeps.gpu_pool) on a faked 4-GPU driver, in this process: what
each job holds, disjoint slots, a job that waits for a free GPU (and says so once), the
environment pinned and given back, and where the pool stands aside (sweep.share_gpus=true, a
Slurm launcher, gpus=0, an external cluster). Across joblib's worker processes:
tests/sweeps/test_gpu_pool_integration.py."""
from __future__ import annotations

import os
import threading
import time

import pytest

from distexp.cluster.processes import visible_ids
from distexp.config import checks, resolved
from distexp.sweeps import gpu_pool
from helpers import JOBLIB_LAUNCHER, fake_driver


def pinned(cfg, sweep_dir, launcher):
    """The pool's lease as the job asks for it: with the facts its checks found."""
    return gpu_pool.pinned(cfg, sweep_dir, launcher, checks.validate(cfg))


@pytest.fixture
def four_gpus(tmp_path, monkeypatch):
    monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(fake_driver(tmp_path, 4)))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tmp_path / "sweep"


@pytest.mark.parametrize("overrides,held", [
    (["strategy=one_device", "gpus=1"], 1),
    (["strategy=mirrored", "gpus=2"], 2),
    (["strategy=mirrored"], 4),                           # gpus=null: every visible GPU
    (["strategy=multiworker", "workers=2", "gpus=1"], 2),  # per worker x local workers
    (["strategy=ps", "workers=3", "gpus=1"], 3),          # the coordinator and servers: none
    (["strategy=multiworker", "workers=2"], 4),
    (["strategy=multiworker", "workers=3"], 3),            # 4 over 3 workers: 1 each, one left
    (["strategy=multiworker", "workers=5"], 0),            # fewer GPUs than workers: CPU
    (["strategy=mirrored", "gpus=0"], 0),
    (["strategy=multiworker", "cluster=tf_config", "gpus=1"], 0),  # places its own processes
])
def test_what_a_job_holds(compose, four_gpus, overrides, held):
    cfg = compose(*overrides)
    found = checks.validate(cfg)
    assert found.visible == 4 and found.pool_gpus(cfg) == held


def test_four_jobs_of_one_gpu_hold_four_different_gpus(compose, four_gpus, monkeypatch):
    ids = visible_ids(resolved.visible_gpus())
    assert ids == ["0", "1", "2", "3"]
    held = [gpu_pool.acquire(four_gpus, ids, 1) for _ in range(4)]
    assert sorted(h.ids[0] for h in held) == ids
    held[2].release()  # a job ended: the next one gets its GPU
    again = gpu_pool.acquire(four_gpus, ids, 1)
    assert again.ids == [held[2].ids[0]]
    for h in (held[0], held[1], held[3], again):
        h.release()
    # CUDA_VISIBLE_DEVICES set by the user: the pool hands out those GPUs only, in that order
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert visible_ids(resolved.visible_gpus()) == ["3", "1"]
    one = compose("strategy=one_device", "gpus=1")
    with pinned(one, four_gpus, JOBLIB_LAUNCHER) as first:
        assert first == ["3"] and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    other = gpu_pool.acquire(four_gpus / gpu_pool.POOL_DIR, ["3"], 1)  # GPU 3: another job's
    with pinned(one, four_gpus, JOBLIB_LAUNCHER) as second:
        assert second == ["1"] and os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    other.release()
    with pinned(compose("strategy=mirrored"), four_gpus, JOBLIB_LAUNCHER) as every:
        assert every == ["3", "1"]  # gpus=null: every GPU the user left visible
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3,1"


def test_a_job_waits_for_a_free_gpu_and_says_so_once(four_gpus, monkeypatch):
    monkeypatch.setattr(gpu_pool, "POLL_S", 0.01)
    ids = visible_ids(resolved.visible_gpus())
    first = gpu_pool.acquire(four_gpus, ids, 3)
    waits, got = [], []
    waiter = threading.Thread(target=lambda: got.append(
        gpu_pool.acquire(four_gpus, ids, 2, on_wait=lambda: waits.append(1))))
    waiter.start()
    time.sleep(0.3)
    assert got == [] and waits == [1]  # 1 free, 2 needed: all or none, it waits
    first.release()
    waiter.join(10)
    assert got and len(got[0].ids) == 2 and waits == [1]


def test_a_job_is_pinned_to_what_it_holds_and_the_environment_given_back(compose, four_gpus,
                                                                          capsys):
    cfg = compose("strategy=mirrored", "gpus=2")
    other = gpu_pool.acquire(four_gpus / gpu_pool.POOL_DIR, visible_ids(resolved.visible_gpus()), 1)
    with pinned(cfg, four_gpus, JOBLIB_LAUNCHER) as ids:
        assert ids == ["1", "2"]  # GPU 0 is another job's
        assert resolved.visible_gpus() == 2
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1,2"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert capsys.readouterr().out == (
        "distexp: this job trains on GPU(s) 1,2 (CUDA_VISIBLE_DEVICES), held from the sweep's 4 "
        "until it ends\n")
    other.release()


@pytest.mark.parametrize("overrides,launcher", [
    (["gpus=1", "sweep.share_gpus=true"], JOBLIB_LAUNCHER),
    (["gpus=1"], "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
    (["gpus=0"], JOBLIB_LAUNCHER),
])
def test_where_the_pool_stands_aside(compose, four_gpus, overrides, launcher, capsys):
    with pinned(compose("strategy=mirrored", *overrides), four_gpus, launcher) as ids:
        assert ids is None
        assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert capsys.readouterr().out == ""


def test_more_gpus_than_visible_is_refused_by_the_checks_before_the_pool(compose, four_gpus):
    """The job's checks run before its lease (distexp.job.lifecycle.run_job): a job asking for
    more GPUs than the sweep's machine shows is refused in one line and never waits for them."""
    from distexp.errors import UserError

    with pytest.raises(UserError, match=r"^gpus: received 5; 4 GPU\(s\) visible on this machine"):
        checks.validate(compose("strategy=mirrored", "gpus=5"))


@pytest.mark.parametrize("overrides,lease,visible,gpus", [
    (["strategy=mirrored"], ["3", "1", "0", "2"], 4, 4),       # null: all it holds
    (["strategy=mirrored", "gpus=2"], ["1", "2"], 2, 2),
    (["strategy=multiworker", "workers=3"], ["0", "1", "2"], 3, 3),  # one each, one left free
    (["strategy=multiworker", "workers=2", "gpus=1"], ["2", "3"], 2, 1),  # per worker
])
def test_the_lease_refines_the_checked_facts_and_leaves_the_layout(compose, four_gpus, overrides,
                                                                   lease, visible, gpus):
    """What the job plans from after its lease (JobFacts.leased): the GPUs it holds are the ones
    it may use; the per-worker layout the checks resolved does not change."""
    cfg = compose(*overrides)
    found = checks.validate(cfg)
    assert found.pool_gpus(cfg) == len(lease)
    after = found.leased(cfg, lease)
    assert (after.visible, after.gpus, after.layout) == (visible, gpus, found.layout)
