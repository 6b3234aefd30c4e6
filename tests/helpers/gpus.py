"""A faked NVIDIA driver (its /proc/driver/nvidia/gpus list, one entry per GPU) for the tests of
what distexp decides about GPUs before TensorFlow starts, and a sweep job that only holds its
GPUs from the sweep's pool (distexp.sweeps.gpu_pool), run in joblib's worker processes."""
from __future__ import annotations

import os
import time
from pathlib import Path

JOBLIB_LAUNCHER = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


def fake_driver(root: Path, gpus: int) -> Path:
    """A directory laid out as /proc/driver/nvidia/gpus with `gpus` entries (PCI bus ids)."""
    driver = root / "nvidia-gpus"
    for i in range(gpus):
        (driver / f"0000:{i + 1:02x}:00.0").mkdir(parents=True)
    return driver


def faked_gpus(monkeypatch, tmp_path: Path):
    """`gpus(n, pinned=None)`: this machine shows `n` GPUs (the driver's list, distexp's
    resolved.NVIDIA_GPUS pointed at a fake_driver), and CUDA_VISIBLE_DEVICES is `pinned` (None:
    unset). A test file's `gpus` fixture returns it."""
    from distexp.config import resolved

    def fake(n: int, pinned=None):
        monkeypatch.setattr(resolved, "NVIDIA_GPUS", str(fake_driver(tmp_path / f"driver-{n}", n)))
        if pinned is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", pinned)
    return fake


def pool_job(driver: str, sweep_dir: str, gpus: int, seen: str, jobs: int) -> str:
    """One sweep job in a worker process: hold its GPUs from the pool (the driver faked), write
    the CUDA_VISIBLE_DEVICES it got into `seen`, and keep them until all `jobs` jobs hold
    theirs (so they are held at the same time). Returns what it got."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf

    from distexp.config import resolved
    from distexp.sweeps import gpu_pool

    resolved.NVIDIA_GPUS = driver
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    cfg = OmegaConf.create({"gpus": gpus, "strategy": {"name": "one_device"},
                            "sweep": {"share_gpus": False}})
    # what checks.validate finds for a one-process job of `gpus` GPUs (no Hydra in this worker)
    found = resolved.JobFacts(rec=SimpleNamespace(cluster_jobs=False),
                              kind=SimpleNamespace(remote=False, starts_processes=True),
                              visible=resolved.visible_gpus(), gpus=gpus, layout={"gpus": gpus})
    with gpu_pool.pinned(cfg, Path(sweep_dir), JOBLIB_LAUNCHER, found) as ids:
        got = os.environ["CUDA_VISIBLE_DEVICES"]
        assert ids is not None and got == ",".join(ids)
        (Path(seen) / f"{os.getpid()}-{time.monotonic_ns()}").write_text(got)
        deadline = time.monotonic() + 120
        while len(list(Path(seen).iterdir())) < jobs:
            if time.monotonic() > deadline:
                return "timeout: the other jobs never held their GPUs at the same time"
            time.sleep(0.05)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # given back as it was
    return got
