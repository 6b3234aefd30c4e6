"""Every use of a private Ray (or hydra-ray-launcher) name, in one module: when Ray changes, the
one that moved is named by tests/cluster/test_ray_compat.py (each name of `PRIVATE` looked up in
the installed Ray), and nothing else of distexp reaches into Ray's internals
(tests/project/test_layout.py). Nothing here is imported before Ray is needed.

- `loopback_driver`: ray._private.ray_constants.ENABLE_RAY_CLUSTER (with its environment flag),
  so that a driver resolves 127.0.0.1 as itself;
- `AUTH_LOGGER` and `enable_token_auth`: ray._private.authentication (the `ray` CLI's rule);
- `gcs_client`: ray._raylet.GcsClient, to ask a cluster's nodes before joining it;
- `LOOPBACK_NODE`: ray.init's private `_node_ip_address` keyword;
- `run_hydra_job`: hydra-ray-launcher's private `_launcher_util._run_job`.
"""
from __future__ import annotations

import os
from typing import Any, Dict

LOOPBACK = "127.0.0.1"
AUTH_MODULE = "ray._private.authentication.authentication_token_setup"
AUTH_LOGGER = AUTH_MODULE
LOOPBACK_NODE: Dict[str, Any] = {"_node_ip_address": LOOPBACK}  # ray.init's keyword

# (module, name) for each private name used here; ("ray", "init(_node_ip_address)") is a keyword
PRIVATE = (
    ("ray._private.ray_constants", "ENABLE_RAY_CLUSTER"),
    (AUTH_MODULE, "maybe_enable_token_auth_if_token_available"),
    ("ray._raylet", "GcsClient"),
    ("ray", "init(_node_ip_address)"),
    ("hydra_plugins.hydra_ray_launcher._launcher_util", "_run_job"),
)


def loopback_driver() -> None:
    """A Ray bound to 127.0.0.1: make this driver resolve 127.0.0.1 as itself. Ray replaces a
    loopback address by the machine's interface address unless clusters are "disabled" (its flag
    for Windows and macOS, read at import; set on the module too when Ray was imported already),
    so the driver would dial an address the cluster does not listen on."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_NODE_IP_ADDRESS", LOOPBACK)
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False


def enable_token_auth() -> bool:
    """Token mode set as the `ray` CLI sets it for `ray start` (its private helper); False for a
    Ray without token authentication."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return False
    return maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def gcs_client(address: str):
    """A client of the cluster's GCS at `address` (Ray's private one)."""
    from ray._raylet import GcsClient

    return GcsClient(address=address)


def run_hydra_job(*args):
    """hydra-ray-launcher's own run of one Hydra job inside a Ray task (its private helper)."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import _run_job

    return _run_job(*args)
