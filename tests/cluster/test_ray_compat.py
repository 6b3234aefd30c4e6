"""Every private Ray (and hydra-ray-launcher) name distexp uses is in distexp.cluster.ray_compat,
and each still exists in the installed Ray: when an upgrade moves one, this test names it. Skipped
without the ray extra. No cluster is started."""
from __future__ import annotations

import importlib
import inspect

import pytest

from distexp.cluster import ray_compat

ray = pytest.importorskip("ray")


def missing(private=ray_compat.PRIVATE) -> list:
    """The names of `private` the installed Ray lacks, as `module.name`."""
    gone = []
    for module, name in private:
        try:
            mod = importlib.import_module(module)
        except ImportError:
            gone.append(f"{module}.{name} (no module {module})")
            continue
        if name.endswith(")"):  # a function's keyword: "init(_node_ip_address)"
            func, _, kw = name[:-1].partition("(")
            func = getattr(mod, func)  # a private keyword comes through **kwargs, popped by name
            found = kw in inspect.signature(func).parameters or \
                f'kwargs.pop("{kw}"' in inspect.getsource(func)
        else:
            found = hasattr(mod, name)
        if not found:
            gone.append(f"{module}.{name}")
    return gone


def test_every_private_name_distexp_uses_is_in_the_installed_ray():
    assert missing() == [], f"moved in ray {ray.__version__}: update distexp/cluster/ray_compat.py"


def test_a_name_that_moved_is_named():
    moved = (("ray._private.ray_constants", "NO_SUCH_FLAG"), ("ray", "init(_no_such_keyword)"),
             ("ray._no_such_module", "X"), ("ray._raylet", "GcsClient"))
    assert missing(moved) == ["ray._private.ray_constants.NO_SUCH_FLAG", "ray.init(_no_such_keyword)",
                              "ray._no_such_module.X (no module ray._no_such_module)"]


def test_the_loopback_driver_turns_ray_clusters_off_for_this_driver(monkeypatch):
    from ray._private import ray_constants

    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    monkeypatch.delenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", raising=False)
    monkeypatch.delenv("RAY_NODE_IP_ADDRESS", raising=False)
    ray_compat.loopback_driver()
    assert ray_constants.ENABLE_RAY_CLUSTER is False
    import os

    assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert os.environ["RAY_NODE_IP_ADDRESS"] == "127.0.0.1"
