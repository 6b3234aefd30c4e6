"""A Ray cluster of 2 nodes (1 CPU each) on this machine, every node bound to 127.0.0.1, held by
this process: `python -m tests.helpers.ray_cluster` prints `ADDRESS <host:port>` once the nodes are
up, then reads commands on stdin: `remove` kills the second node (its raylet and its workers: a
node lost), `add` adds one again; end of input (or SIGTERM) shuts the cluster down.

Ray's own tests hold their clusters this way (ray.cluster_utils.Cluster). Ray binds to the
machine's interface address by default; here every node is given node_ip_address=127.0.0.1 (and
RAY_NODE_IP_ADDRESS for the processes it starts), and a driver joining it must resolve 127.0.0.1
as itself (distexp.cluster.ray_connect does)."""
from __future__ import annotations

import os
import signal
import sys
import time

LOOPBACK = "127.0.0.1"


def main() -> None:
    os.environ["RAY_NODE_IP_ADDRESS"] = LOOPBACK
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # "localhost" is 127.0.0.1 here
    from ray.cluster_utils import Cluster

    nodes = int(os.environ.get("DISTEXP_TEST_RAY_NODES", "2"))
    t0 = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": LOOPBACK, "include_dashboard": False})
    extra = [cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK) for _ in range(nodes - 1)]
    cluster.wait_for_nodes()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"ADDRESS {cluster.address} {time.monotonic() - t0:.1f}", flush=True)
    try:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "remove" and extra:
                cluster.remove_node(extra.pop(), allow_graceful=False)
                print("REMOVED", flush=True)
            elif cmd == "add":
                extra.append(cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK))
                cluster.wait_for_nodes()
                print("ADDED", flush=True)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
