"""The warm trainer's goals, measured from outside the process, alternating distexp and its hand-written
counterpart (benchmarks/handwritten.py) so that other load hits both. Run it alone on the machine.

    python benchmarks/warm.py                     # all parts, 2 rounds (~6 min on 2 cores)
    python benchmarks/warm.py --only sweep --rounds 3
    python benchmarks/warm.py --only aa --rounds 6

- sweep: `python -m distexp -m seed=0,1,2,3,4,5 epochs=2` against the same six jobs in one
  hand-written process: wall-clock ratio, and each distexp job's cost beyond its steady epochs
  ((wall - 12 x the hand-written steady epoch) / 6; the hand-written loop's own likewise).
- first: the default job's first step (`log_every_steps=1`, its `step 1/` line) against the
  hand-written script's `first step done` line, both stamped from the command's start; and
  perf/time_to_first_step_s against distexp's stamp.
- aa: the default job at `epochs=20`, warm_start=true against false: perf/examples_per_sec of
  each (Welch's test: is the difference significant?), and both against the hand-written loop's
  steady examples/s (its epochs after the first): its steps alone (distexp's examples/s times the
  steps, not the evaluation), and its epochs with their evaluation.
Prints a Markdown report with `uptime`'s load average at the start and end of each part.

The MLflow store: `--store existing` (the default) gives each distexp command a store that already
exists (a copy of one created before the rounds, as `outputs/mlflow.db` is after a user's first
command); `--store fresh` a new file each time, so the command creates the store's tables too
(seconds: SQLAlchemy's migrations), a cost paid once per store. The hand-written side logs nothing.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("HYDRA_FULL_ERROR", None)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def stamped(cmd, cwd, marker: str):
    """(seconds from start to the first line containing `marker` or None, wall seconds, output)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, bufsize=1)
    first, out = None, []
    for line in p.stdout:
        out.append(line)
        if first is None and marker in line:
            first = time.perf_counter() - t0
    code = p.wait()
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"failed (exit {code}): {' '.join(cmd)}\n{''.join(out[-20:])}")
    return first, wall, "".join(out)


def handwritten(cwd, jobs: int, epochs: int):
    first, wall, out = stamped([sys.executable, str(ROOT / "benchmarks" / "handwritten.py"),
                                "--jobs", str(jobs), "--epochs", str(epochs)], cwd, "first step done")
    data = json.loads(out.strip().splitlines()[-1])
    steady = [e for j in data["jobs"] for e in j["epoch_s"][1:]]
    return first, wall, data, steady


def distexp(cwd, *args, marker="\0"):
    return stamped([sys.executable, "-m", "distexp", *args], cwd, marker)


def metric(uri: str, key: str, n: int):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("distexp")
    runs = c.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"],
                         max_results=n)
    return [r.data.metrics.get(key) for r in runs]


STORE = {"mode": "existing"}


def store(tmp: Path, name: str) -> str:
    """The tracking URI of a store for one command: a copy of one made before the rounds (its
    tables created), or a new file (`--store fresh`)."""
    import shutil

    path = tmp / f"{name}.db"
    if STORE["mode"] == "existing":
        template = tmp / "template.db"
        if not template.exists():
            from mlflow.tracking import MlflowClient

            MlflowClient(f"sqlite:///{template}").search_experiments()  # creates the tables
        shutil.copy(template, path)
    return f"sqlite:///{path}"


def part_sweep(rounds: int, tmp: Path) -> list:
    rows, lines = [], [f"## sweep: 6 jobs (seed=0..5, epochs=2)  load at start {load()}", "",
                       "| round | distexp sweep s | hand-written s | ratio | distexp s/job beyond "
                       "steady epochs | hand-written s/job beyond |", "|---|---|---|---|---|---|"]
    for r in range(rounds):
        order = ("d", "h") if r % 2 == 0 else ("h", "d")
        got = {}
        for who in order:
            if who == "d":
                got["d"] = distexp(tmp, "-m", "seed=0,1,2,3,4,5", "epochs=2",
                                   f"tracking.uri={store(tmp, f'sweep{r}')}")[1]
            else:
                _, got["h"], _, steady = handwritten(tmp, 6, 2)
                got["steady"] = statistics.median(steady)
        d, h, e = got["d"], got["h"], got["steady"]
        rows.append(d / h)
        lines.append(f"| {r + 1} | {d:.1f} | {h:.1f} | {d / h:.2f}x | {(d - 12 * e) / 6:.2f} | "
                     f"{(h - 12 * e) / 6:.2f} |")
    lines += ["", f"median ratio {statistics.median(rows):.2f}x; load at end {load()}", ""]
    return lines


def part_first(rounds: int, tmp: Path) -> list:
    lines = [f"## first step (default job, log_every_steps=1)  load at start {load()}", "",
             "| round | distexp step 1 line s | hand-written first step s | difference s | "
             "perf/time_to_first_step_s | figure - stamp s |", "|---|---|---|---|---|---|"]
    diffs = []
    for r in range(rounds):
        uri = store(tmp, f"first{r}")
        order = ("d", "h") if r % 2 == 0 else ("h", "d")
        got = {}
        for who in order:
            if who == "d":
                got["d"] = distexp(tmp, "epochs=1", "log_every_steps=1", f"tracking.uri={uri}",
                                   marker=" step 1/")[0]
            else:
                got["h"] = handwritten(tmp, 1, 1)[0]
        fig = metric(uri, "perf/time_to_first_step_s", 1)[0]
        diffs.append(got["d"] - got["h"])
        lines.append(f"| {r + 1} | {got['d']:.2f} | {got['h']:.2f} | {got['d'] - got['h']:+.2f} | "
                     f"{fig:.2f} | {fig - got['d']:+.2f} |")
    lines += ["", f"median difference {statistics.median(diffs):+.2f} s; load at end {load()}", ""]
    return lines


def part_aa(rounds: int, tmp: Path) -> list:
    from distexp.figures.stats import ratio_interval

    lines = [f"## A/A: warm_start=true vs false, default job epochs=20  load at start {load()}", ""]
    rates = {"true": [], "false": []}
    for r in range(rounds):
        for w in (("true", "false") if r % 2 == 0 else ("false", "true")):
            uri = store(tmp, f"aa-{w}-{r}")
            distexp(tmp, "epochs=20", f"warm_start={w}", f"tracking.uri={uri}")
            rates[w].append(metric(uri, "perf/examples_per_sec", 1)[0])
    _, _, data, steady = handwritten(tmp, 1, 20)
    plain = data["examples_per_epoch"] / statistics.median(steady)
    trained = data["examples_per_epoch"] / statistics.median(data["jobs"][0]["train_s"][1:])
    ci = ratio_interval(rates["true"], rates["false"])
    for w in ("true", "false"):
        xs = rates[w]
        lines.append(f"- warm_start={w}: examples/s median {statistics.median(xs):,.0f} "
                     f"({', '.join(f'{x:,.0f}' for x in xs)}); x{statistics.median(xs) / trained:.2f} "
                     f"the hand-written loop's steps, x{statistics.median(xs) / plain:.2f} its "
                     "epochs with evaluation")
    lines += [f"- hand-written steady loop (epochs 2-20, median): its steps alone {trained:,.0f} "
              f"examples/s (what distexp's examples/s times); with its per-epoch evaluation "
              f"{plain:,.0f}", ("- warm / cold examples/s, 95 % interval (Welch on logs): "
              + (f"{ci[0]:.3f} - {ci[1]:.3f}: " + ("not significant (contains 1)"
                 if ci[0] <= 1 <= ci[1] else "SIGNIFICANT") if ci else "too few runs")), "",
              f"load at end {load()}", ""]
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", choices=["sweep", "first", "aa"])
    ap.add_argument("--store", choices=["existing", "fresh"], default="existing")
    a = ap.parse_args()
    STORE["mode"] = a.store
    out = [f"# warm trainer benchmark ({time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
           f"{a.store} MLflow store)", ""]
    with tempfile.TemporaryDirectory() as d:
        for name, fn in (("sweep", part_sweep), ("first", part_first), ("aa", part_aa)):
            if a.only in (None, name):
                out += fn(a.rounds if name != "first" else max(a.rounds, 3), Path(d))
                print("\n".join(out), flush=True) if a.only else None
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
