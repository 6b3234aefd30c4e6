"""A cluster kind of one's own, from a record and a yaml alone (as test_toy_strategy.py does for
strategies).

The test writes both into a temporary directory: a module that registers a `Kind` for a made-up
engine that tells each task its rank and the cluster's addresses through two variables
(TOY_RANK, TOY_HOSTS: what an LSF/PBS/operator kind would read), and `conf/cluster/toy.yaml`
naming it with `record:`. It adds that conf dir to Hydra's search path and checks that the generic
code (the checks, the cluster plan, the Slurm launcher's task count, the sweep's "first task",
the strategy's resolver) asks the record and never a name. Nothing outside the temporary
directory is edited. No TensorFlow: the job process's side, and a resolver the toy builds itself.
"""
from __future__ import annotations

import sys

import pytest

from distexp import errors, strategies
from distexp.cluster import kinds
from distexp.cluster import kinds as cluster_kind
from distexp.config import checks
from distexp.sweeps import callback
from distexp.sweeps import slurm_launcher as sweep_slurm
from helpers import plug_in

RECORD = '''
import os

from distexp.cluster.kinds import External, register


@register
class Toy(External):
    """Every task is told its rank (TOY_RANK) and every task's address (TOY_HOSTS), in the
    strategy's job order (multiworker: worker-0, worker-1, ...)."""
    name = "toy"

    def plan(self, cfg, rec, job_dir, gpus):
        addrs = os.environ["TOY_HOSTS"].split(",")
        names = rec.task_names(cfg)
        job, _, index = names[int(os.environ["TOY_RANK"])].partition("-")
        return self.task_plan(rec, job_dir, gpus, (job, int(index or 0), rec.jobs(cfg)),
                              dict(zip(names, addrs)))

    def first_task(self, env):
        return env.get("TOY_RANK", "0") == "0"

    def resolver(self, cfg, rec, gpus):
        return ("toy resolver", rec.name, gpus)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch, compose):
    search = plug_in(tmp_path, monkeypatch, "cluster", "toy", "toy_cluster_record", RECORD)
    monkeypatch.setenv("TOY_HOSTS", "node-a:7000,node-b:7000")
    monkeypatch.setenv("TOY_RANK", "1")
    yield lambda *o: compose(search, "cluster=toy", *o)
    cluster_kind.REGISTRY.pop("toy", None)
    sys.modules.pop("toy_cluster_record", None)


def test_a_toy_cluster_kind_plans_and_answers_for_the_job(toy, tmp_path, monkeypatch):
    cfg = toy("strategy=multiworker", "workers=2", "gpus=0")
    assert "toy" not in cluster_kind.REGISTRY  # nothing registered it yet: the yaml's record does
    checks.validate(cfg)  # the kind is looked up by its record, not refused as an unknown name
    kind = kinds.of(cfg)
    assert type(kind).__name__ == "Toy" and kinds.REGISTRY.find("toy") is kind

    plan = kinds.plan(cfg, tmp_path, 0)
    assert (plan.names, plan.task, plan.logs_to_mlflow) == (["worker-1"], "worker:1", False)
    assert plan.hosts == {"worker-0": "node-a", "worker-1": "node-b"}
    assert (plan.replica_workers, plan.sync_workers) == (2, 2)
    # its job process watches the peer that must start (distexp.cluster.liveness), as any
    # external kind's task does: a peer that never listens fails the job
    assert type(plan.until).__name__ == "ServerWatch" and set(plan.until.watches) == {"worker-0"}
    # one task per job process, on several machines: no local processes, no CPU peak, no
    # checkpoint.dir probe here, one Slurm task per job (it is not a Slurm kind)
    assert kind.local_processes(cfg, strategies.of(cfg)) == 1
    assert kind.spans_machines(cfg, strategies.of(cfg)) is True
    assert kind.chief_here(strategies.of(cfg)) is False
    assert sweep_slurm.job_tasks(cfg, 2) == 1
    assert callback._first_task(cfg) is False  # TOY_RANK=1: the sweep's record is rank 0's
    monkeypatch.setenv("TOY_RANK", "0")
    assert callback._first_task(cfg) is True
    assert kinds.plan(cfg, tmp_path, 0).logs_to_mlflow is True
    # the strategy's resolver is the kind's (the trainer passes the kind; TensorFlow not needed)
    assert strategies.of(cfg).resolver(cfg, 0, kind) == ("toy resolver", "multiworker", 0)


def test_a_toy_cluster_kind_is_checked_like_a_built_in(toy, tmp_path):
    # the record's module cannot be imported: one line naming cluster.record
    with pytest.raises(errors.UserError, match=r"^cluster.record: received 'no_such_module', "
                                               r"which cannot be imported"):
        checks.validate(toy("cluster.name=toy2", "cluster.record=no_such_module"))
    # an unknown kind still lists the known ones (the toy's module was imported by now)
    checks.validate(toy("strategy=multiworker"))
    with pytest.raises(errors.UserError, match=r"^cluster: received 'nope'; valid: local, "
                                               r"tf_config, slurm, ray, toy$"):
        checks.validate(toy("cluster.name=nope"))
    # a strategy of one process never asks the kind for a plan: the chief, here
    cfg = toy("strategy=mirrored")
    assert kinds.plan(cfg, tmp_path, 0).names == ["chief"]
    assert kinds.of(cfg).chief_here(strategies.of(cfg)) is True
