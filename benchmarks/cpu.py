"""The CPU default job against the hand-written loop (issue 49, item 7), side by side in one run.

    python benchmarks/cpu.py                  # 3 rounds, 1 and 2 replicas (~4 min on 2 quiet cores)
    python benchmarks/cpu.py --smoke          # 1 round, 1 replica, 2 epochs, no measuring window (<60 s)

Per round and replica count n, in alternating order (distexp first in odd rounds, the hand-written
script first in even ones, so that other load hits both):
- throughput: `python -m distexp epochs=E cpu_replicas=n` (the default job: strategy=mirrored;
  n=1 is `python -m distexp` itself) and its perf/examples_per_sec, against
  `benchmarks/handwritten.py --jobs 1 --epochs E`'s steady steps alone (its epochs 2..E without
  their evaluation: what distexp's examples/s times). The hand-written loop is what a user writes
  by hand on a CPU: one device, no strategy, for both n.
- first step: `python -m distexp epochs=1 log_every_steps=1 cpu_replicas=n`'s `step 1/` line
  (the default job prints no step line) against the hand-written script's `first step done` (in
  its throughput run), both stamped from the command's start.
`--distexp-threads 2` runs the distexp commands at TensorFlow's default intra-op threads (2 on 2
cores) instead of distexp's one-thread rule for small models (docs/configuration.md): the same
command with and without it is that rule's side-by-side ratio. Each row carries `uptime`'s
1-minute load at its start. The summary: the medians over rounds of the ratio and of the
first-step difference, and whether the goals (>= 1.4x; <= 0 s) are met.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOAL_RATIO = 1.4
THREADS_ENV = "TF_NUM_INTRAOP_THREADS"


def _warm():
    """benchmarks/warm.py (its stamped commands, stores and MLflow reads)."""
    spec = importlib.util.spec_from_file_location("warm_bench", HERE / "warm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load1() -> float:
    import os

    return os.getloadavg()[0]


def hand_rate(data: dict) -> float:
    """The hand-written loop's steady examples/s: its steps alone, median over epochs 2..E."""
    return data["examples_per_epoch"] / statistics.median(data["jobs"][0]["train_s"][1:])


def one_round(w, tmp: Path, r: int, n: int, epochs: int, extra: list, threads=None) -> dict:
    """One round at n replicas: {distexp, hand, k, d_first, h_first, load}. `threads`: the
    distexp commands' TF_NUM_INTRAOP_THREADS (None: distexp's own choice); the hand-written
    script always runs at TensorFlow's default."""
    got = {"load": load1()}
    for who in (("d", "h") if r % 2 == 0 else ("h", "d")):
        w.ENV.pop(THREADS_ENV, None)
        if who == "d":
            if threads:
                w.ENV[THREADS_ENV] = str(threads)
            uri = w.store(tmp, f"tp{n}-{r}")
            w.distexp(tmp, f"epochs={epochs}", f"cpu_replicas={n}", f"tracking.uri={uri}", *extra)
            got["distexp"] = w.metric(uri, "perf/examples_per_sec", 1)[0]
            got["k"] = _param(uri, "steps_per_execution_resolved")
            uri = w.store(tmp, f"first{n}-{r}")
            got["d_first"] = w.distexp(tmp, "epochs=1", "log_every_steps=1", f"cpu_replicas={n}",
                                       f"tracking.uri={uri}", *extra, marker=" step 1/")[0]
        else:
            got["h_first"], _, data, _ = w.handwritten(tmp, 1, epochs)  # first step stamped too
            got["hand"] = hand_rate(data)
    return got


def _param(uri: str, key: str):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("distexp")
    run = c.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"],
                        max_results=1)[0]
    return run.data.params.get(key)


def table(n: int, rows: list) -> list:
    """The Markdown lines of one replica count's rounds and their medians."""
    lines = [f"## cpu_replicas={n}", "",
             "| round | load (1 min) | distexp ex/s | hand-written steps ex/s | ratio | k | "
             "distexp first step s | hand-written first step s | difference s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, g in enumerate(rows, 1):
        lines.append(f"| {i} | {g['load']:.2f} | {g['distexp']:,.0f} | {g['hand']:,.0f} | "
                     f"{g['distexp'] / g['hand']:.2f}x | {g['k']} | {g['d_first']:.2f} | "
                     f"{g['h_first']:.2f} | {g['d_first'] - g['h_first']:+.2f} |")
    ratio = statistics.median(g["distexp"] / g["hand"] for g in rows)
    first = statistics.median(g["d_first"] - g["h_first"] for g in rows)
    lines += ["", f"median ratio {ratio:.2f}x (goal >= {GOAL_RATIO}x: "
              f"{'met' if ratio >= GOAL_RATIO else 'NOT met'}); median first-step difference "
              f"{first:+.2f} s (goal <= 0: {'met' if first <= 0 else 'NOT met'}); distexp "
              f"{statistics.median(g['distexp'] for g in rows):,.0f} ex/s, hand-written "
              f"{statistics.median(g['hand'] for g in rows):,.0f}", ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--replicas", default="1,2", help="comma-separated cpu_replicas values")
    ap.add_argument("--distexp-threads", type=int, default=None,
                    help="TF_NUM_INTRAOP_THREADS for the distexp commands only (2: TensorFlow's "
                         "default on 2 cores, i.e. without distexp's one-thread rule)")
    ap.add_argument("--smoke", action="store_true",
                    help="1 round, 1 replica, 2 epochs, no measuring window: the script works")
    a = ap.parse_args(argv)
    extra = []
    if a.smoke:
        a.rounds, a.epochs, a.replicas = 1, 2, "1"
        extra = ["measure_min_seconds=0", "measure_min_steps=0"]
    w = _warm()
    replicas = [int(v) for v in a.replicas.split(",")]
    out = [f"# CPU default job vs hand-written loop ({time.strftime('%Y-%m-%d %H:%M')}, "
           f"{__import__('os').cpu_count()} cores, {a.rounds} rounds, epochs={a.epochs}"
           f"{', smoke' if a.smoke else ''}, distexp's intra-op threads: "
           f"{a.distexp_threads or 'its own choice'})", ""]
    with tempfile.TemporaryDirectory(prefix="distexp-cpu-bench-") as d:
        tmp = Path(d)
        rows = {n: [] for n in replicas}
        for r in range(a.rounds):
            for n in replicas:
                rows[n].append(one_round(w, tmp, r, n, a.epochs, extra, a.distexp_threads))
        for n in replicas:
            out += table(n, rows[n])
    out.append(f"load at end {load1():.2f}")
    print("\n".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
