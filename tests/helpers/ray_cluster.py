"""A Ray cluster of 2 nodes (1 CPU each) on this machine, every node bound to 127.0.0.1, held by
this process: `python -m tests.helpers.ray_cluster` prints `ADDRESS <host:port>` once the nodes are
up, then reads commands on stdin: `remove` kills the second node (its raylet and its workers: a
node lost), `add` adds one again; end of input (or SIGTERM) shuts the cluster down.

Ray's own tests hold their clusters this way (ray.cluster_utils.Cluster). Ray binds to the
machine's interface address by default; here every node is given node_ip_address=127.0.0.1 (and
RAY_NODE_IP_ADDRESS for the processes it starts), and a driver joining it must resolve 127.0.0.1
as itself (distexp.cluster.ray_connect does)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"
# What a driver on this machine needs to join a cluster bound to 127.0.0.1 (the job process sets
# it itself: distexp.cluster.ray_run; the sweep's too: distexp.cluster.ray_sweep)
DRIVER_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_NODE_IP_ADDRESS": LOOPBACK}
LEFT = """
import json, sys, ray
ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", log_to_driver=False,
         logging_level="ERROR")
from ray._private import state
mine = ray.get_runtime_context().get_job_id()
print("LEFT " + json.dumps({
    "actors": [a["ActorClassName"] for a in state.actors().values()
               if a["State"] != "DEAD" and a["JobID"] != mine],
    "groups": [k for k, v in ray.util.placement_group_table().items() if v["state"] != "REMOVED"],
    "nodes": sum(1 for n in ray.nodes() if n["Alive"])}))
"""


class Held:
    """The cluster held by `python tests/helpers/ray_cluster.py` in a child: its address, and the
    commands it takes (remove / add a node); `close` shuts it down."""

    def __init__(self, timeout: float = 180):
        env = {**os.environ, **DRIVER_ENV}
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env, start_new_session=True)
        line = self._line(timeout)
        if not line.startswith("ADDRESS "):
            self.close()
            raise RuntimeError(f"the Ray cluster did not start: {line!r}")
        self.address = line.split()[1]

    def _line(self, timeout: float) -> str:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sel.select(timeout=1):
                line = self.proc.stdout.readline()
                if line.startswith(("ADDRESS", "REMOVED", "ADDED")) or not line:
                    return line.strip()
        return ""

    def command(self, cmd: str, timeout: float = 120) -> str:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self._line(timeout)

    def left(self) -> dict:
        """Live actors (other than the asking driver's), placement groups not removed, live nodes."""
        out = subprocess.run([sys.executable, "-c", LEFT, self.address], capture_output=True,
                             text=True, timeout=120, env={**os.environ, **DRIVER_ENV})
        line = [x for x in out.stdout.splitlines() if x.startswith("LEFT ")]
        assert line, out.stderr[-2000:]
        return json.loads(line[0][5:])

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


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
                node = extra.pop()
                cluster.remove_node(node, allow_graceful=False)
                print(f"REMOVED {node.node_id}", flush=True)
            elif cmd == "add":
                extra.append(cluster.add_node(num_cpus=1, node_ip_address=LOOPBACK))
                cluster.wait_for_nodes()
                print("ADDED", flush=True)
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
