"""cluster=ray beside cluster=local: the same 2-worker multiworker job, alternating local / ray for
--rounds rounds, on a running Ray of 2 nodes (`--address host:port`; without it this script holds
one on this machine, 2 nodes of 1 CPU bound to 127.0.0.1, for its duration).

Per job: the time to the first step from the command's start (the job's `first_step_unix`, its
first training step's end, minus the moment this script started the command: Python's, Hydra's
and TensorFlow's start-up, the MLflow run, and for ray the connection, the placement group and the
actors) and the steady examples/s (`perf/examples_per_sec`: timed steps after warm-up, with its
95 % interval). Then each figure's median per kind. Prints `uptime` first: on a shared machine the
figures move with the load. Its jobs run and write in --out (a new temporary directory by default):
    python benchmarks/ray.py --rounds 3
    python benchmarks/ray.py --address 127.0.0.1:6379 --epochs 4
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOLD = """
import os, sys
os.environ["RAY_NODE_IP_ADDRESS"] = "127.0.0.1"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from ray.cluster_utils import Cluster
c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1",
                                                  "include_dashboard": False})
c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
c.wait_for_nodes()
print("ADDRESS", c.address, flush=True)
sys.stdin.read()
c.shutdown()
"""


def job(kind: str, address: str, out: Path, i: int, epochs: int) -> dict:
    run_dir = out / f"{kind}-{i}"
    args = [sys.executable, "-m", "distexp", "strategy=multiworker", "workers=2",
            f"cluster={kind}", f"epochs={epochs}", "warmup_steps=5",
            f"tracking.uri=sqlite:///{out / 'mlflow.db'}", f"hydra.run.dir={run_dir}"]
    if kind == "ray":
        args.append(f"cluster.address={address}")
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=out)
    if r.returncode != 0:
        raise SystemExit(f"{kind} job {i} failed (exit {r.returncode}): {r.stderr[-1500:]}")
    res = json.loads((run_dir / "result.json").read_text())
    return {"kind": kind, "i": i, "first_step_s": res["first_step_unix"] - t0,
            "eps": res["perf/examples_per_sec"], "ci": res.get("perf/examples_per_sec_ci95")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--address", help="a running Ray (host:port); default: hold a 2-node one here")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    out = (a.out or Path(tempfile.mkdtemp(prefix="distexp-ray-bench-"))).absolute()
    out.mkdir(parents=True, exist_ok=True)
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    holder = None
    address = a.address
    if not address:
        holder = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, start_new_session=True, cwd=out,
                                  env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
        address = holder.stdout.readline().split()[1]
    try:
        rows = [job(kind, address, out, i, a.epochs)
                for i in range(a.rounds) for kind in ("local", "ray")]
    finally:
        if holder is not None:
            holder.stdin.close()
            holder.wait(timeout=120)
    print(f"{'kind':6} {'job':>3} {'first step (s)':>15} {'examples/s':>11} {'+-95%':>7}")
    for r in rows:
        print(f"{r['kind']:6} {r['i']:>3} {r['first_step_s']:>15.1f} {r['eps']:>11.0f} "
              f"{(r['ci'] or 0):>7.0f}")
    for kind in ("local", "ray"):
        mine = [r for r in rows if r["kind"] == kind]
        print(f"median {kind}: first step {statistics.median(r['first_step_s'] for r in mine):.1f} s,"
              f" {statistics.median(r['eps'] for r in mine):.0f} examples/s")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
