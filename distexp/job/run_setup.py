"""The job's MLflow run as the job process creates it (no TensorFlow here): its name, tags and
params (the flattened config and the resolved facts), created in a thread while the trainer
starts (distexp.tracking.Forwarder). distexp.job.lifecycle.prepare sets it up; `execute` builds it
once the plan is acquired (where a remote kind's tasks landed is among its tags)."""
from __future__ import annotations

import socket
from pathlib import Path
from typing import List

from omegaconf import DictConfig

from distexp import tracking
from distexp.config import schema
from distexp.job import console
from distexp.sweeps import seat  # the job's one door into its sweep
from distexp.tracking import tags as tag


def forwarder(cfg: DictConfig, facts: dict, plan, job_dir: Path, overrides: List[str],
               multirun: bool, hc) -> "tracking.Forwarder":
    """The job's MLflow run, created in a thread while the trainer starts (tracking.Forwarder):
    its name, tags and params (the flattened config and the resolved facts). The store was
    probed by distexp.job.lifecycle.prepare."""
    tags = {tag.JOB_DIR: str(job_dir), tag.OVERRIDES: " ".join(overrides),
            tag.HOST: socket.gethostname(),
            **tracking.owner_tags()}  # this process owns the run (tracking.owner)
    if plan.hosts:  # where each task of an external cluster runs (srun, TF_CONFIG)
        tags[tag.TASK_HOSTS] = ", ".join(f"{n}={h}" for n, h in plan.hosts.items())
    if plan.cluster_id:  # the other nodes' first tasks find the run by it (node_metrics)
        tags[tag.CLUSTER_ID] = plan.cluster_id
    if multirun:
        tags.update(seat.tags(str(hc.sweep.dir), cfg.tracking.uri,
                               cfg.tracking.experiment, int(hc.job.num)))
    if cfg.resume:  # the chief trainer adds distexp.resumed_from_step once it has looked
        tags[tag.RESUME] = "requested"
    params = schema.flatten(cfg)
    params.update({"num_workers": facts["workers"], "global_batch_size": facts["global_batch"],
                   "num_replicas": facts["replicas"]})
    if "tracking.uri" in params:
        params["tracking.uri"] = tracking.redact(params["tracking.uri"])
    name = tracking.run_name(cfg.strategy.name,  # a user's model/data: its factory's name
                             tracking.workload("model", cfg.model.name, cfg.model.get("factory")),
                             tracking.workload("dataset", cfg.dataset.name, cfg.dataset.get("factory")),
                             facts["replicas"], in_sweep=multirun,
                             swept=seat.swept_values(str(hc.sweep.dir)) if multirun else None)

    def create_run():  # in a thread, while the trainer imports TensorFlow (tracking.Forwarder)
        run = tracking.JobRun(cfg.tracking.uri, cfg.tracking.experiment, name, tags, params)
        tracking.end_dead_runs(run.client, [run.experiment_id])  # runs killed before closing
        return run

    def announce(run):  # in a sweep: the job's log only (distexp.job.console.say)
        console.say(f"MLflow run {run.run_id} (experiment {cfg.tracking.experiment!r}) in\n"
                    f"  {tracking.redact(cfg.tracking.uri)}")  # the store on a line of its own

    interval = cfg.tracking.system_metrics_interval if cfg.tracking.system_metrics else None
    # several hosts: the chief's system metrics are system/<its host>/... (MLflow's node_id)
    node = socket.gethostname() if plan.several_hosts() else None
    return tracking.Forwarder(create_run, job_dir, on_ready=announce,
                              system_metrics_interval=interval, system_metrics_node=node,
                              system_metrics_gpus=plan.gpu_ids())  # only the run's GPUs
