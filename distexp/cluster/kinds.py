"""Cluster kinds by name, and the job's plan: which training processes a job needs, and what each
one is told (no TensorFlow here).

`of(cfg)` is the record of `cfg.cluster` (distexp.cluster.kind). The built-ins register in the
contract's order (local, tf_config, slurm); a kind defined outside distexp names the module that
registers it in its yaml (`record: my_pkg.my_cluster`).

`plan(cfg, ...)` is the job's `Plan` (distexp.cluster.processes). The strategy's record
(distexp.strategies) gives the layout: its cluster's jobs, which of them train, serve or log; a
strategy without a cluster (one_device, mirrored, central, tpu) is one trainer process, the chief.
The cluster kind's record plans the processes of a strategy with a cluster: all of them on this
machine (local), or this job process's one task of a cluster someone else started (tf_config,
slurm). Every process runs the same command (`python -m distexp.train.trainer`); its role comes
from the cluster resolver, as on a real cluster.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from omegaconf import DictConfig

from distexp import strategies
from distexp.cluster.kind import REGISTRY, Kind
from distexp.cluster.processes import Plan


def of(cfg: DictConfig) -> Kind:
    """The kind of `cfg.cluster`; `cluster.record` (a module path) is imported first, so a kind
    defined outside distexp registers itself."""
    return REGISTRY.load(cfg.cluster.name, cfg.cluster.get("record"))


def plan(cfg: DictConfig, job_dir: Path, gpus: int, visible: Optional[int] = None) -> Plan:
    """`gpus`: what `gpus` resolved to on this machine (check_gpus: per worker); `visible`: the GPUs
    this machine shows (default `gpus`, what gpus=null resolves to). A kind that starts every
    process here (cluster=local) splits the visible GPUs between its workers, `gpus` each; any
    other kind's one process gets `gpus`."""
    rec = strategies.of(cfg)
    kind = of(cfg)
    if not rec.cluster_jobs:  # one training process
        return kind.one_process(cfg, rec, job_dir, gpus)
    return kind.plan(cfg, rec, job_dir, gpus if visible is None or not kind.starts_processes
                     else visible)


# The built-in kinds register themselves, in the contract's order.
from distexp.cluster import local, tf_config, slurm, ray  # noqa: E402,F401
