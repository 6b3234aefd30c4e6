"""`hydra/launcher=ray`: a sweep's jobs as Ray tasks (hydra-ray-launcher's RayLauncher, whose
launch this replaces; its own still forces `object_store_memory` into `ray.init`, which a running
cluster refuses, facebookresearch/hydra#3363).

- Each job is one Ray task with the resources it needs: `hydra.launcher.ray.remote` (num_cpus 1 by
  default) and `gpus` GPUs (times the workers of a cluster=local multiworker/ps job; null: none);
  a cluster=ray job reserves nothing itself (its actors do, distexp.cluster.ray_run). On a cluster,
  Ray's resources do what the sweep's GPU pool does on one machine (distexp.sweeps.gpu_pool).
- The job runs in the sweep's working directory (a path every node sees) with the distexp, MLflow
  and TensorFlow variables of the sweep's environment.
- Ctrl-C / SIGTERM of the sweep: every job task is cancelled (KeyboardInterrupt in the job: its run
  ends KILLED, its processes stop), then the sweep ends as with joblib.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from distexp import env

SENT_PREFIXES = (env.PREFIX, "MLFLOW_", "TF_", "HYDRA_")
CANCEL_WAIT_S = 60.0


def job_resources(cfg: DictConfig, base: Dict[str, Any]) -> Dict[str, Any]:
    """The Ray task options of one job of `cfg` (no Ray, no TensorFlow)."""
    from distexp import strategies
    from distexp.cluster import kinds
    from distexp.errors import UserError

    out = dict(base)
    try:
        kind, rec = kinds.of(cfg), strategies.of(cfg)
    except UserError:  # a bad name: the job's own checks say it in one line
        return out
    if kind.remote:
        out.update(num_cpus=0, num_gpus=0)
        return out
    gpus = int(cfg.gpus or 0)
    out["num_gpus"] = gpus * (rec.num_workers(cfg) if rec.cluster_jobs and kind.starts_processes
                              else 1)
    return out


def _init_args(init: DictConfig) -> Dict[str, Any]:
    """ray.init's arguments: the launcher's, less a forced object_store_memory; a Ray on this
    machine or at a loopback address is joined as 127.0.0.1 (distexp.cluster.ray_run)."""
    from distexp.cluster import ray_run

    args = OmegaConf.to_container(init, resolve=True) or {}
    args = {k: v for k, v in args.items() if v is not None or k == "address"}
    address = args.get("address") or os.environ.get("RAY_ADDRESS", "")
    if not address or address.removeprefix("ray://").rpartition(":")[0] in ray_run.LOOPBACK:
        ray_run._loopback_here()
        if not address.startswith("ray://"):
            args.setdefault("_node_ip_address", "127.0.0.1")
    if not address:
        args.setdefault("include_dashboard", False)
    args.setdefault("logging_level", "WARNING")
    return args


def _run(cwd: str, env: Dict[str, str], *args):
    """The job, in the sweep's directory and environment (restored after: Ray reuses workers)."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import _run_job

    before_env, before_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env)
    if os.path.isdir(cwd):
        os.chdir(cwd)
    try:
        return _run_job(*args)
    finally:
        os.chdir(before_cwd)
        os.environ.clear()
        os.environ.update(before_env)


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """hydra-ray-launcher's `_core.launch`, one Ray task per job with its own resources."""
    import ray
    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides, setup_globals

    setup_globals()
    cfg = launcher.config
    Path(str(cfg.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    if not ray.is_initialized():
        ray.init(**_init_args(launcher.ray_cfg.init))
        # a Ray started here stops at the sweep's exit (Ray's atexit; distexp.__main__ lets it run)
    base = OmegaConf.to_container(launcher.ray_cfg.remote, resolve=True) or {}
    env = {k: v for k, v in os.environ.items() if k.startswith(SENT_PREFIXES)}
    refs = []
    for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(cfg, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"job_id_for_{idx}"
            sweep_config.hydra.job.num = idx
        print(f"[ray] #{idx} : {' '.join(filter_overrides(overrides))}", flush=True)
        task = ray.remote(**job_resources(sweep_config, base))(_run)
        refs.append(task.remote(os.getcwd(), env, launcher.hydra_context, sweep_config,
                                launcher.task_function, Singleton.get_state()))
    try:
        return [ray.get(r) for r in refs]
    except KeyboardInterrupt:
        _cancel(refs)
        raise


def _cancel(refs) -> None:
    """Ctrl-C: every job task gets KeyboardInterrupt (its run ends KILLED, its processes stop);
    waits for them to end, then forces what is left."""
    import ray

    for r in refs:
        ray.cancel(r, force=False)
    deadline = time.monotonic() + CANCEL_WAIT_S
    pending = list(refs)
    while pending and time.monotonic() < deadline:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=1.0)
    for r in pending:
        ray.cancel(r, force=True)
