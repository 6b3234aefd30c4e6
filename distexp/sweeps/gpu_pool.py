"""A sweep's GPUs handed out to its jobs: jobs that run at the same time never share a GPU.

Each job of a multirun on this machine (launchers basic, joblib, submitit's local one: not a
launcher that places its jobs on other machines, Slurm's or Ray's, whose jobs get GPUs there:
distexp.sweeps.launchers) holds the GPUs it trains on for as long as it runs:
one lock file per GPU in `<sweep dir>/gpu_pool/`, held with flock, so it works across joblib's
worker processes (and is let go by the kernel if a job process dies). The job's processes are
pinned to what it holds with `CUDA_VISIBLE_DEVICES`; a job that finds too few GPUs free waits for
them, and says so once. `sweep.share_gpus=true` turns the pool off: every job then uses the first
GPUs, as a single run would.

What a job holds (distexp.config.resolved.JobFacts.pool_gpus, from the job's checks, which count
the visible GPUs once): a one-process job, `gpus` (null = every visible GPU); a multiworker or ps
job on cluster=local, `gpus` per worker times its local worker processes, and for gpus=null
the visible GPUs split evenly over them (visible // workers each, times the workers: a remainder
is not held); none for gpus=0, an external cluster (cluster=tf_config or slurm place their own
processes) or cluster=ray (its nodes' GPUs). Nothing here imports TensorFlow.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from distexp.config import resolved
from distexp.sweeps.launchers import places_jobs_elsewhere

POOL_DIR = "gpu_pool"
POLL_S = 0.2


class Held:
    """GPU ids held by this process (their lock files open and flock'ed) until `release`."""

    def __init__(self, ids: List[str], files: list):
        self.ids, self._files = ids, files

    def release(self) -> None:
        for f in self._files:
            f.close()  # closing the file lets its flock go
        self._files = []


def _slot(pool: Path, gpu: str) -> Path:
    return pool / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu)}.lock"


def acquire(pool: Path, ids: Sequence[str], count: int,
            on_wait: Callable[[], None] = lambda: None) -> Held:
    """Hold `count` of `ids` (the first free ones, all or none, chosen under the pool's own lock
    so that two jobs never each take half of what both need); waits while too few are free,
    calling `on_wait` once."""
    pool.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        with open(pool / "pool.lock", "a") as mutex:
            fcntl.flock(mutex, fcntl.LOCK_EX)
            got = []
            for gpu in ids:
                f = open(_slot(pool, gpu), "a")
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    f.close()
                    continue
                got.append((gpu, f))
                if len(got) == count:
                    return Held([g for g, _ in got], [f for _, f in got])
            for _, f in got:
                f.close()
        if not waited:
            on_wait()
            waited = True
        time.sleep(POLL_S)


@contextlib.contextmanager
def pinned(cfg: DictConfig, sweep_dir: Path, launcher: str,
           found: resolved.JobFacts) -> Iterator[Optional[List[str]]]:
    """While a job runs: hold its GPUs from the sweep's pool and set CUDA_VISIBLE_DEVICES to them
    (restored after). `found`: the job's checked facts (distexp.config.checks.validate): how many
    it needs (`JobFacts.pool_gpus`, within what the checks found visible). Yields the ids, or None
    where the pool does not apply."""
    from distexp.cluster.processes import visible_ids

    count = found.pool_gpus(cfg)
    share = bool(OmegaConf.select(cfg, "sweep.share_gpus", default=False))
    if share or count == 0 or places_jobs_elsewhere(launcher):
        yield None
        return
    ids = visible_ids(found.visible)

    def say_wait():
        print(f"distexp: waiting for {count} free GPU(s) of the sweep's {len(ids)}: the jobs "
              "running now hold them (a job never shares a GPU with another: "
              "sweep.share_gpus=true lets them)", flush=True)

    held = acquire(Path(sweep_dir) / POOL_DIR, ids, count, say_wait)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(held.ids)
    print(f"distexp: this job trains on GPU(s) {','.join(held.ids)} (CUDA_VISIBLE_DEVICES), "
          f"held from the sweep's {len(ids)} until it ends", flush=True)
    try:
        yield held.ids
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
        held.release()


def for_job(cfg: DictConfig, found: resolved.JobFacts):
    """`pinned` for the job Hydra is running now (its checked facts `found`); nothing outside a
    multirun."""
    from distexp.config import mode

    if not mode.in_multirun():
        return contextlib.nullcontext()
    from hydra.core.hydra_config import HydraConfig

    hc = HydraConfig.get()
    return pinned(cfg, Path(str(hc.sweep.dir)).absolute(),
                  str(OmegaConf.select(hc, "launcher._target_", default="") or ""), found)
