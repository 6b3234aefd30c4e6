"""cluster=ray and hydra/launcher=ray without Ray running (distexp.cluster.ray, ray_sweep): the
tasks and bundles a job places, TF_CONFIG's cluster from the actors' reports, the refusal lines of
a job bigger than the cluster, each sweep job's Ray resources, the launcher's capability the GPU
pool asks, and the one line without the extra. Tier: unit. On a 2-node Ray: tests/cluster/test_ray.py."""
from __future__ import annotations

import json
import sys

import pytest

from distexp import strategies
from distexp.cluster import ray_plan as rayk
from distexp.cluster.processes import tf_config
from distexp.config import checks
from distexp.errors import UserError
from distexp.sweeps import gpu_pool
from helpers import run_in_process

pytestmark = pytest.mark.unit

RAY_LAUNCHER = "hydra_plugins.distexp_ray_launcher.ray_launcher.DistexpRayLauncher"
JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SUBMITIT = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
TWO_NODES = [{"CPU": 1.0}, {"CPU": 1.0}]


def test_a_ps_job_is_one_bundle_per_task_the_workers_with_their_gpus(compose):
    cfg = compose("strategy=ps", "workers=2", "ps=1", "gpus=1", "cluster=ray", "cluster.cpus=2")
    ts = rayk.tasks(cfg, strategies.of(cfg))
    assert [t.name for t in ts] == ["chief", "worker-0", "worker-1", "ps-0"]
    assert rayk.bundles(ts) == [{"CPU": 2.0}, {"CPU": 2.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 1.0},
                                {"CPU": 2.0}]
    assert rayk.strategy("spread", ts, 2) == "SPREAD" and rayk.strategy("pack", ts, 2) == "PACK"


def test_a_one_process_strategy_is_one_task_with_every_gpu(compose):
    cfg = compose("strategy=mirrored", "gpus=4", "cluster=ray")
    assert rayk.bundles(rayk.tasks(cfg, strategies.of(cfg))) == [{"CPU": 1.0, "GPU": 4.0}]


def test_tf_config_is_built_from_the_actors_reports(compose):
    cfg = compose("strategy=ps", "workers=2", "ps=1", "cluster=ray")
    reports = {"chief": ("10.0.0.1", 41000), "worker-0": ("10.0.0.2", 41001),
               "worker-1": ("10.0.0.3", 41002), "ps-0": ("10.0.0.1", 41003)}
    cluster = rayk.cluster_of(strategies.of(cfg), cfg, reports)
    assert cluster == {"chief": ["10.0.0.1:41000"], "worker": ["10.0.0.2:41001", "10.0.0.3:41002"],
                       "ps": ["10.0.0.1:41003"]}
    assert json.loads(tf_config(cluster, "worker-1"))["task"] == {"type": "worker", "index": 1}
    hosts = rayk.hosts_of({"worker-0": ("127.0.0.1", 1), "worker-1": ("127.0.0.1", 2)},
                          {"worker-0": "94a89d7d7a67", "worker-1": "fcceb2bd9967"})
    assert hosts == {"worker-0": "127.0.0.1 node 94a89d7d", "worker-1": "127.0.0.1 node fcceb2bd"}


def test_gpus_beyond_the_cluster_is_one_line_naming_what_it_offers(compose):
    cfg = compose("strategy=multiworker", "workers=2", "gpus=1", "cluster=ray")
    rec = strategies.of(cfg)
    with pytest.raises(UserError) as ex:
        rayk.check_fits(cfg, rec, rayk.tasks(cfg, rec), {"CPU": 2.0}, TWO_NODES, "127.0.0.1:6379")
    assert str(ex.value) == (
        "gpus: received 1 per worker (workers=2, gpus=1: 2 worker), which needs 2 GPU(s); the Ray "
        "cluster at 127.0.0.1:6379 offers 2 CPU, 0 GPU over 2 node(s) (ray.cluster_resources()). "
        "Set gpus=0 (CPU) or fewer workers")


def test_more_tasks_than_cpus_or_a_task_no_node_holds_is_one_line(compose):
    cfg = compose("strategy=ps", "workers=2", "ps=1", "cluster=ray")
    rec = strategies.of(cfg)
    with pytest.raises(UserError, match=r"^workers: received workers=2, ps=1, gpus=None \(1 chief "
                       r"\+ 2 worker \+ 1 ps\), which needs 4 CPU\(s\) \(cluster.cpus=1 per task\);"
                       r" the Ray cluster at h:1 offers 2 CPU, 0 GPU over 2 node"):
        rayk.check_fits(cfg, rec, rayk.tasks(cfg, rec), {"CPU": 2.0}, TWO_NODES, "h:1")
    cfg = compose("strategy=mirrored", "gpus=2", "cluster=ray")
    rec = strategies.of(cfg)
    with pytest.raises(UserError, match=r"task chief needs 2 GPU\(s\) and 1 CPU\(s\) on one node; "
                       r"the largest node of the Ray cluster at h:1 has 1 GPU\(s\)"):
        rayk.check_fits(cfg, rec, rayk.tasks(cfg, rec), {"CPU": 2.0, "GPU": 2.0},
                        [{"CPU": 1.0, "GPU": 1.0}] * 2, "h:1")
    rayk.check_fits(cfg, rec, rayk.tasks(cfg, rec), {"CPU": 2.0, "GPU": 2.0},
                    [{"CPU": 1.0, "GPU": 2.0}], "h:1")  # fits: no line


def test_a_bad_placement_is_one_line():
    with pytest.raises(UserError, match=r"^cluster.placement: received 'strict'; valid: spread, "
                                        r"pack$"):
        rayk.check_placement("strict")


@pytest.mark.parametrize("overrides,resources", [
    (["strategy=one_device", "gpus=1"], {"num_cpus": 1, "num_gpus": 1}),
    (["strategy=mirrored", "gpus=2"], {"num_cpus": 1, "num_gpus": 2}),
    (["strategy=mirrored"], {"num_cpus": 1, "num_gpus": 0}),               # null: none
    (["strategy=multiworker", "workers=2", "gpus=1"], {"num_cpus": 1, "num_gpus": 2}),  # x workers
    (["strategy=multiworker", "workers=2", "gpus=1", "cluster=ray"],
     {"num_cpus": 0, "num_gpus": 0}),                                     # its actors reserve
])
def test_each_sweep_job_is_a_ray_task_with_the_resources_it_needs(compose, overrides, resources):
    from distexp.cluster import ray_sweep

    assert ray_sweep.job_resources(compose(*overrides), {"num_cpus": 1}) == resources


def test_the_gpu_pool_asks_the_launcher_whether_it_places_jobs_elsewhere(compose):
    assert gpu_pool.places_jobs_elsewhere(RAY_LAUNCHER) is True
    assert gpu_pool.places_jobs_elsewhere(SUBMITIT) is True   # submitit's Slurm launcher
    assert gpu_pool.places_jobs_elsewhere(JOBLIB) is False
    assert gpu_pool.places_jobs_elsewhere("") is False
    cfg = compose("strategy=mirrored", "gpus=2", "cluster=ray")
    found = checks.validate(cfg)
    assert (found.visible, found.gpus, found.pool_gpus(cfg)) == (2, 2, 0)  # its nodes' GPUs


@pytest.mark.parametrize("arg", ["cluster=ray", "hydra/launcher=ray"])
def test_ray_without_its_extra_is_one_line(tmp_path, monkeypatch, arg):
    monkeypatch.setitem(sys.modules, "ray", None)
    r = run_in_process(["strategy=multiworker", arg], tmp_path)
    assert r.returncode == 2, r
    key = arg.partition("=")[0]
    assert r.stderr.strip().splitlines() == [
        f"distexp: error: {key}: received 'ray', whose package is not installed; valid: install "
        "the extra first: pip install -e \".[ray]\" (from a clone) or pip install "
        "\"distexp[ray]\""], r
    assert not (tmp_path / "outputs").exists()


def test_a_sweep_says_in_one_line_how_its_jobs_share_the_cluster():
    from distexp.cluster import ray_sweep

    head = "distexp: hydra/launcher=ray: "
    assert ray_sweep.spread_line(1, remote=False) == (
        head + "the jobs run one after another (1 Ray node: at once they would share it)")
    assert ray_sweep.spread_line(0, remote=False) == ray_sweep.spread_line(1, remote=False)
    assert ray_sweep.spread_line(3, remote=False) == (
        head + "each job runs on a Ray node of its own (3 nodes: up to 3 at once)")
    assert ray_sweep.spread_line(3, remote=True) == (
        head + "the jobs run one after another (each job spans the cluster: at once they would "
        "share it)")


@pytest.mark.parametrize("env, said", [
    ({}, "requires a token and none was found (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, "
         "~/.ray/auth_token)"),
    ({"RAY_AUTH_MODE": "disabled"}, "requires a token, and RAY_AUTH_MODE=disabled here: set "
                                    "RAY_AUTH_MODE=token and"),
    ({"RAY_AUTH_MODE": "token"}, "refused the token in ~/.ray/auth_token"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/t"}, "refused the token in $RAY_AUTH_TOKEN_PATH"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "x", "RAY_AUTH_TOKEN_PATH": "/t"},
     "refused the token in $RAY_AUTH_TOKEN"),
])
def test_a_refused_token_names_where_it_came_from(monkeypatch, env, said):
    from distexp.cluster import ray_run

    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert ray_run._token_said() == said
