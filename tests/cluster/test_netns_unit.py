"""cluster=local's network namespace, planned without a process: which jobs get one, the line a
job prints when its servers are on the machine's network, and how a process joins."""
from __future__ import annotations

from pathlib import Path

import pytest

from distexp.cluster import kinds, netns
from distexp.config import checks


def _local_plan(compose, *overrides):
    cfg = compose(*overrides)
    checks.validate(cfg)
    return kinds.plan(cfg, Path("/tmp"), 0)


def test_local_clusters_ask_for_a_namespace_unless_the_trainers_download(compose):
    assert _local_plan(compose, "strategy=multiworker", "workers=2").isolate
    assert _local_plan(compose, "strategy=ps", "workers=2", "ps=1").isolate
    assert not _local_plan(compose, "strategy=mirrored").isolate  # one process: no TensorFlow server
    dl = _local_plan(compose, "strategy=multiworker", "workers=2", "dataset=tfds", "dataset.tfds_name=mnist",
               "dataset.download=true")
    assert (dl.isolate, dl.netns) == (False, "dataset.download=true")


def test_a_refused_namespace_is_one_line_naming_the_ports(compose, capsys):
    plan = _local_plan(compose, "strategy=multiworker", "workers=2", "cluster.port=41000")
    plan.netns = "unshare: EPERM"  # as netns.open_namespace says it
    assert plan.isolation() == {}
    assert capsys.readouterr().out == (
        "distexp: warning: ports 41000,41001 (TensorFlow, no auth) open to other hosts "
        "(unshare: EPERM): allow user namespaces\n")
    assert netns.refused([41000], "dataset.download=true", kernel=False).endswith(
        "(dataset.download=true): prepare the data first")


def test_a_namespace_reaches_each_process_through_its_environment(compose):
    plan = _local_plan(compose, "strategy=ps", "workers=1", "ps=1")

    class Held:
        paths = ["/proc/7/ns/user", "/proc/7/ns/net"]
        env = netns.Namespace.env
        closed = False

        def close(self):
            self.closed = True

    held = plan.netns = Held()
    procs = plan.processes(Path("/tmp/c.yaml"), plan.isolation())
    assert {p.env["DISTEXP_NETNS"] for p in procs} == {"/proc/7/ns/user:/proc/7/ns/net"}
    plan.release()
    assert held.closed and plan.netns is None


def test_joining_nothing_is_nothing_and_a_missing_namespace_raises():
    netns.join(None)
    netns.join("")
    with pytest.raises(OSError):
        netns.join("/proc/0/ns/net")
