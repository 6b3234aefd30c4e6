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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from distexp.cluster import ray_compat, ray_run

SENT_PREFIXES = ray_run.SENT_PREFIXES + ("HYDRA_",)  # a job's task: the trainers' and Hydra's
CANCEL_WAIT_S = 60.0
_SAID: set = set()


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
    machine or at a loopback address whose nodes are on loopback is joined as 127.0.0.1, after
    token authentication is set as the `ray` CLI sets it (distexp.cluster.ray_run)."""
    args = OmegaConf.to_container(init, resolve=True) or {}
    args = {k: v for k, v in args.items() if v is not None or k == "address"}
    address = args.get("address") or os.environ.get("RAY_ADDRESS", "")
    if ray_run.as_loopback(address):  # `ray start`'s cluster: its node's own address (ray_run)
        ray_compat.loopback_driver()
        if not address.startswith("ray://"):
            args = {**ray_compat.LOOPBACK_NODE, **args}
    if not address:
        args.setdefault("include_dashboard", False)
    args.setdefault("logging_level", "WARNING")
    return args


def _run(cwd: str, env: Dict[str, str], *args):
    """The job, in the sweep's directory and environment (restored after: Ray reuses workers);
    (its output, its result): what it printed goes back whole with its result, so the sweep's
    console shows each job's lines in order and without Ray's (coloured) prefix."""
    before_env, before_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env)
    if os.path.isdir(cwd):
        os.chdir(cwd)
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as out:
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        try:
            result = ray_compat.run_hydra_job(*args)
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
            os.chdir(before_cwd)
            os.environ.clear()
            os.environ.update(before_env)
        out.seek(0)
        return out.read().decode("utf-8", "replace"), result


def _shown(got: tuple):
    """A job's result, once its output is on the console."""
    text, result = got
    sys.stdout.write(text)
    sys.stdout.flush()
    return result


def spread_line(nodes: int, remote: bool) -> str:
    """The one line a sweep on hydra/launcher=ray prints: how its jobs share the cluster (every job
    measures throughput, and jobs sharing a node would measure their sharing)."""
    head = "distexp: hydra/launcher=ray:"
    if remote or nodes < 2:
        why = "each job spans the cluster" if remote else "1 Ray node"
        return f"{head} the jobs run one after another ({why}: at once they would share it)"
    return f"{head} each job runs on a Ray node of its own ({nodes} nodes: up to {nodes} at once)"


def _nodes_for(need: Dict[str, Any]) -> List[str]:
    """The ids of the live nodes whose resources hold one job's request."""
    import ray

    cpus, gpus = float(need.get("num_cpus") or 0), float(need.get("num_gpus") or 0)
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive")
            and n["Resources"].get("CPU", 0) >= cpus and n["Resources"].get("GPU", 0) >= gpus]


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int):
    """hydra-ray-launcher's `_core.launch`, one Ray task per job with its own resources, each on a
    node of its own (NodeAffinitySchedulingStrategy), one after another where the cluster has one
    node that holds a job (or each job is a cluster=ray job, placed by its own actors)."""
    import ray
    from hydra.core.singleton import Singleton
    from hydra.core.utils import filter_overrides, setup_globals

    setup_globals()
    cfg = launcher.config
    Path(str(cfg.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    if not sys.stdout.isatty():  # what Ray itself forwards: no colour codes in a file or pipe
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    if not ray.is_initialized():
        ray_run.quiet()
        ray.init(**_init_args(launcher.ray_cfg.init))
        # a Ray started here stops at the sweep's exit (Ray's atexit: the launcher declares
        # exits_through_teardown, distexp.sweeps.launchers)
    base = OmegaConf.to_container(launcher.ray_cfg.remote, resolve=True) or {}
    env = {k: v for k, v in os.environ.items() if k.startswith(SENT_PREFIXES)}
    jobs = []
    for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(cfg, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"job_id_for_{idx}"
            sweep_config.hydra.job.num = idx
        jobs.append((idx, overrides, sweep_config, job_resources(sweep_config, base)))
    remote = any(_spans_cluster(j[2]) for j in jobs)
    nodes = _nodes_for(jobs[0][3]) if jobs and not remote else []
    line = spread_line(len(nodes), remote)
    if line not in _SAID:  # once per sweep, not per round
        _SAID.add(line)
        print(line, flush=True)
    slots: List[Optional[str]] = nodes if len(nodes) >= 2 else [None]
    args = (os.getcwd(), env, launcher.hydra_context)
    rest = (launcher.task_function, Singleton.get_state())
    refs, running, results = {}, {}, {}
    try:
        for idx, overrides, sweep_config, resources in jobs:
            slot = _free_slot(running, slots, results)
            print(f"[ray] #{idx} : {' '.join(filter_overrides(overrides))}", flush=True)
            task = ray.remote(**_on(resources, slot))(_run)
            refs[idx] = task.remote(*args, sweep_config, *rest)
            running[idx] = (refs[idx], slot)
        return [results[i] if i in results else _shown(ray.get(refs[i])) for i, *_ in jobs]
    except KeyboardInterrupt:
        _cancel(list(refs.values()))
        raise


def _spans_cluster(cfg: DictConfig) -> bool:
    """A cluster=ray job: its tasks are placed by its own actors, anywhere on the cluster."""
    from distexp.cluster import kinds
    from distexp.errors import UserError

    try:
        return bool(kinds.of(cfg).remote)
    except UserError:
        return False


def _on(resources: Dict[str, Any], node: Optional[str]) -> Dict[str, Any]:
    """The task's options, pinned to `node` (a node's id) when the sweep gives it one."""
    if not node:
        return resources
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {**resources, "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}


def _free_slot(running: Dict[int, tuple], slots: List[Optional[str]], results: dict):
    """A node no job of the sweep runs on now, waiting for a job to end (a slot None: anywhere,
    one job at a time)."""
    import ray

    while True:
        busy = {slot for _, slot in running.values()}
        free = [s for s in slots if s not in busy]
        if free:
            return free[0]
        ready, _ = ray.wait([ref for ref, _ in running.values()], num_returns=1)
        for idx in [i for i, (ref, _) in running.items() if ref in ready]:
            results[idx] = _shown(ray.get(running.pop(idx)[0]))


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
