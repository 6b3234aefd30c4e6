"""cluster=local: this job process starts every process of the job on this machine, addressed as
127.0.0.1 and, where the kernel allows, in a network namespace of the job's own with loopback only
(distexp.cluster.netns: TensorFlow's servers bind every interface), each told its TF_CONFIG
(multiworker: worker-0..N-1, worker-0 the chief, as MultiWorkerMirroredStrategy names a cluster
without a chief task; ps: the chief (the coordinator), worker-0..N-1 and ps-0..P-1 servers,
stopped at the end). The visible GPUs are split between the workers (CUDA_VISIBLE_DEVICES); `gpus`
is per worker."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig

from distexp.cluster.kinds import ClusterConfig, Kind, port, register
from distexp.cluster.processes import Plan, free_ports, split_gpus
from distexp.errors import UserError
from distexp.fields import key


@dataclass
class LocalConfig(ClusterConfig):
    host: str = key("127.0.0.1", "the address in a local cluster's TF_CONFIG (127.0.0.1 or "
                    "localhost only); TensorFlow's servers bind every interface, so the job's "
                    "processes run in a network namespace with loopback only, where the kernel "
                    "allows it (else a warning names the open ports)")
    port: Optional[int] = port()


@register
class Local(Kind):
    name = "local"
    starts_processes = True
    schema = LocalConfig

    def plan(self, cfg: DictConfig, rec, job_dir: Path, gpus: int) -> Plan:
        """`gpus`: the GPUs this machine shows (distexp.cluster.kinds.plan), split here."""
        n, host = rec.num_workers(cfg), str(cfg.cluster.host)
        if host not in ("127.0.0.1", "localhost"):
            raise UserError(f"cluster.host: received {host!r}; a local cluster is addressed as 127.0.0.1 "
                            "only (for several hosts use cluster=tf_config or cluster=slurm)")
        names, jobs = rec.task_names(cfg), rec.jobs(cfg)
        per_worker, visible_ids = split_gpus(cfg.gpus, gpus, n)
        note = gpu_note(rec.name, n, gpus, per_worker, cfg.gpus)
        if note:  # before TensorFlow starts: never a silent CPU job on a GPU machine
            print(note, flush=True)
        ports = list(range(cfg.cluster.port, cfg.cluster.port + len(names))) if cfg.cluster.port \
            else free_ports(len(names))
        addrs = iter(f"127.0.0.1:{p}" for p in ports)
        cluster = {job: [next(addrs) for _ in range(count)] for job, count in jobs.items()}
        extra, task_gpus, i = {}, {}, 0
        for name in names:
            env, task_gpus[name] = {"CUDA_VISIBLE_DEVICES": ""}, 0
            if name.rpartition("-")[0] in rec.replica_jobs and per_worker:  # the i-th replica worker
                env = {"CUDA_VISIBLE_DEVICES": ",".join(
                    visible_ids[i * per_worker:(i + 1) * per_worker])}
                task_gpus[name] = per_worker
                i += 1
            if gpus == 0 and "CUDA_VISIBLE_DEVICES" not in os.environ:
                env.pop("CUDA_VISIBLE_DEVICES")  # CPU machine: leave the environment alone
            extra[name] = env
        # TensorFlow's servers bind every interface: the processes get a network of their own
        # (distexp.cluster.netns), unless the trainers must download the data
        download = bool(cfg.dataset.get("download"))
        return Plan(names=names, replica_workers=n, sync_workers=rec.sync_of(n),
                    gpus_per_worker=per_worker, task_gpus=task_gpus, extra_env=extra,
                    servers=rec.servers(cfg), job_dir=job_dir, cluster=cluster, retry_ports=True,
                    isolate=not download, netns="dataset.download=true" if download else None)


def gpu_note(strategy: str, workers: int, visible: int, per_worker: int,
             requested: Optional[int]) -> Optional[str]:
    """The line a job prints when `gpus` is null and the visible GPUs do not split evenly over its
    local workers: none each (the job trains on CPU: a GPU is not shared between worker
    processes, whose collectives would each claim it whole), or some left unused."""
    if requested is not None or visible == 0:
        return None
    if per_worker == 0:
        return (f"distexp: strategy={strategy}: {workers} local workers and {visible} GPU(s) "
                f"visible: a GPU is never shared between worker processes, so every worker "
                f"trains on CPU. To train on the GPU(s): workers={visible} (one GPU each), or "
                f"strategy=mirrored (one process, every GPU); gpus=0 trains on CPU without "
                f"this line")
    unused = visible - per_worker * workers
    if unused:
        return (f"distexp: strategy={strategy}: {visible} GPUs over {workers} local workers: "
                f"{per_worker} each, {unused} unused (workers={visible} would use every GPU, one "
                f"each)")
    return None
