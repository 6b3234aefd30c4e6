"""A strategy with a process layout of its own, from a record and a yaml alone.

The test writes both into a temporary directory (a module that registers the record, and
`conf/strategy/relay.yaml` naming it with `record:`), adds that conf dir to Hydra's search path
and checks that the generic code (checks, cluster plan, Slurm task counts, the job's resolved
facts) plans, validates and builds the job's processes from what the record answers. Nothing
outside the temporary directory is edited. No TensorFlow: the job process's side only.
"""
from __future__ import annotations

import json
import sys

import pytest

from distexp import errors, strategies
from distexp.cluster import kinds, slurm_env
from distexp.config import checks, resolved
from distexp.sweeps import slurm_launcher as sweep_slurm
from helpers import plug_in

# A chief that trains (as MultiWorkerMirroredStrategy's explicit chief task does) + `workers`
# workers + one "monitor" server that only serves: a layout no built-in strategy has.
RECORD = '''
from distexp.strategies import Record, register


@register
class Relay(Record):
    name = "relay"
    cluster_jobs = (("chief", None), ("worker", "workers"), ("monitor", None))
    replica_jobs = ("chief", "worker")
    server_roles = ("monitor",)
    lockstep = True
    cpu_replicas = True
    loops = {"custom": None, "fit": "the toy does not do fit"}

    def build(self, cfg, devices, resolver=None):
        import tensorflow as tf

        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch, compose):
    search = plug_in(tmp_path, monkeypatch, "strategy", "relay", "toy_relay_record", RECORD)
    yield lambda *o: compose(search, "strategy=relay", *o)
    strategies.REGISTRY.pop("relay", None)
    sys.modules.pop("toy_relay_record", None)


def test_a_toy_strategy_plans_validates_and_builds_its_processes(toy, tmp_path):
    cfg = toy("workers=2", "cpu_replicas=2", "gpus=0")
    assert "relay" not in strategies.REGISTRY  # nothing registered it yet: the yaml's record does
    checks.validate(cfg)
    rec = strategies.of(cfg)
    assert type(rec).__name__ == "Relay" and strategies.REGISTRY.find("relay") is rec

    plan = kinds.plan(cfg, tmp_path, 0)
    assert plan.names == ["chief", "worker-0", "worker-1", "monitor-0"]
    assert plan.servers == ["monitor-0"]
    # the chief and both workers hold replicas and share one global batch
    assert (plan.replica_workers, plan.sync_workers) == (3, 3)
    procs = plan.processes(tmp_path / "config.yaml", {})
    tfc = {p.name: json.loads(p.env["TF_CONFIG"]) for p in procs}
    assert list(tfc["chief"]["cluster"]) == ["chief", "worker", "monitor"]
    assert [len(v) for v in tfc["chief"]["cluster"].values()] == [1, 2, 1]
    assert tfc["monitor-0"]["task"] == {"type": "monitor", "index": 0}
    assert [(p.console, p.server) for p in procs] == [(True, False), (False, False),
                                                      (False, False), (False, True)]
    assert [p.env["DISTEXP_TASK"] for p in procs] == [p.name for p in procs]

    facts = resolved.resolve(cfg, 0, plan)
    assert (facts["replicas"], facts["global_batch"], facts["workers"]) == (6, 6 * 64, 3)

    # Slurm: four tasks (chief + 2 workers + monitor), ranks over the job names alphabetically
    assert kinds.of(cfg).local_processes(cfg, rec) == 4
    assert sweep_slurm.job_tasks(toy("workers=2", "cluster=slurm"), 2) == 2
    env = {"SLURM_STEP_NODELIST": "a", "SLURM_STEP_TASKS_PER_NODE": "4"}
    assert slurm_env.slurm_addresses(toy("workers=2", "cluster=slurm", "cluster.port=20000"),
                                     env, rec) == {"chief": "a:20000", "monitor-0": "a:20001",
                                                   "worker-0": "a:20002", "worker-1": "a:20003"}


def test_a_toy_strategy_is_checked_by_its_record(toy, monkeypatch, tmp_path):
    with pytest.raises(errors.UserError, match="loop: received 'fit' with strategy=relay; the toy"):
        checks.validate(toy("loop=fit"))
    # an external cluster without the record's monitor job is refused in one line
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"chief": ["h:1"], "worker": ["h:2"]},
                                                "task": {"type": "worker", "index": 0}}))
    with pytest.raises(errors.UserError, match="strategy=relay: the cluster has chief x1, worker "
                                               "x1; it needs chief, worker, monitor jobs"):
        kinds.plan(toy("cluster=tf_config"), tmp_path, 0)
    with pytest.raises(errors.UserError, match="strategy.record: received 'no_such_module'"):
        strategies.of(toy("strategy.name=relay2", "strategy.record=no_such_module"))
