"""Parallel sweep jobs get disjoint GPUs across joblib's worker processes (loky, as Hydra's
joblib launcher runs them): with a faked 4-GPU driver, 4 jobs of gpus=1 held at the same time
get 4 different CUDA_VISIBLE_DEVICES; jobs of gpus=2 get disjoint pairs."""
from __future__ import annotations

import pytest

from helpers import fake_driver, pool_job

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("gpus,jobs", [(1, 4), (2, 2)])
def test_parallel_jobs_hold_disjoint_gpus(tmp_path, gpus, jobs):
    from joblib import Parallel, delayed

    driver, seen = fake_driver(tmp_path, 4), tmp_path / f"seen-{gpus}"
    seen.mkdir()
    got = Parallel(n_jobs=jobs, backend="loky")(
        delayed(pool_job)(str(driver), str(tmp_path / "sweep"), gpus, str(seen), jobs)
        for _ in range(jobs))
    held = [g.split(",") for g in got]
    assert all(len(h) == gpus for h in held), got
    flat = [g for h in held for g in h]
    assert sorted(flat) == ["0", "1", "2", "3"]  # each GPU held by one job, none by two
