"""What distexp costs over hand-written TensorFlow (benchmarks/plain_tf.py), measured alternately.

    python benchmarks/overhead.py                  # the full run (~10 min on 2 cores)
    python benchmarks/overhead.py --rounds 1 --steps 100 --sweep-jobs 2   # a quick look
    python benchmarks/overhead.py --only first_step --rounds 8            # one part only
    python benchmarks/overhead.py --only throughput --cells mirrored/custom --rounds 6

For each cell (one_device / mirrored with cpu_replicas=2) x (custom / fit), every round runs distexp
and then the plain script (the order flips every round) with the same model (tutorial CNN), data
(seeded random 28x28x1 images, cached batches), batch (64 per replica), optimizer and steps, and
takes the ratio of their steady-state examples/s: distexp's logged perf/examples_per_sec vs the
plain script's examples / wall time over the same steps after the same warm-up. Running both
sides back to back, alternating, makes other load on the machine hit both. distexp runs its
default job: `steps_per_execution=auto`, so its timed steps include the tuning phase (calls at
smaller k) and the report lists the k each run chose.

Also measured: time to the end of the first training step from launching the command (distexp
with MLflow on, distexp with tracking.enabled=false, the plain script), `python -m distexp --help`,
and a sweep of N jobs (`-m seed=0,..`) against N single jobs. Prints a Markdown report; --json
writes the raw numbers.
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
PLAIN = ROOT / "benchmarks" / "plain_tf.py"
PARTS = ["throughput", "first_step", "help", "sweep"]
CELLS = [("one_device", "custom", 1), ("one_device", "fit", 1), ("mirrored", "custom", 2),
         ("mirrored", "fit", 2)]


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), e.get("PYTHONPATH", "")])
    e.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    e.pop("HYDRA_FULL_ERROR", None)
    return e


def sh(cmd, cwd) -> float:
    """Run `cmd`, return its wall time; raise with its output if it fails."""
    t0 = time.time()
    p = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return time.time() - t0


def distexp_args(strategy, loop, replicas, steps, warmup, work: Path, tracking=True, extra=()):
    return [sys.executable, "-m", "distexp", f"strategy={strategy}", f"loop={loop}",
            f"cpu_replicas={replicas}", "model=cnn", "dataset=synthetic", "dataset.shape=[28,28,1]",
            "dataset.size=2048", "batch_size_per_replica=64", "epochs=1",
            f"steps_per_epoch={warmup + steps}", f"warmup_steps={warmup}",
            f"tracking.enabled={str(tracking).lower()}",
            f"tracking.uri=sqlite:///{work / 'mlflow.db'}", *extra]


def run_distexp(strategy, loop, replicas, steps, warmup, work: Path, tracking=True, extra=()):
    job = Path(tempfile.mkdtemp(dir=work, prefix="job-"))
    t0 = time.time()
    sh(distexp_args(strategy, loop, replicas, steps, warmup, work, tracking, extra)
       + [f"hydra.run.dir={job}"], work)
    r = json.loads((job / "result.json").read_text())
    G = 64 * replicas  # batch_size_per_replica=64
    said = [ln for ln in (job / "chief.log").read_text().splitlines()
            if ln.startswith("steps_per_execution: ")]
    return {"examples_per_sec": r["perf/examples_per_sec"], "k": said[0] if said else None,
            "cpu_per_example": r["cpu_seconds_timed"] / (G * r["perf/timed_steps"]),
            "first_step_s": r["first_step_unix"] - t0, "result": r}


def run_plain(strategy, loop, replicas, steps, warmup, work: Path):
    t0 = time.time()
    p = subprocess.run([sys.executable, str(PLAIN), f"--strategy={strategy}", f"--loop={loop}",
                        f"--replicas={replicas}", f"--steps={steps}", f"--warmup={warmup}"],
                       cwd=work, env=env(), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"plain_tf.py failed:\n{p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {"examples_per_sec": r["examples_per_sec"], "cpu_per_example": r["cpu_per_example"],
            "first_step_s": r["first_step_unix"] - t0}


def mmm(values):
    return min(values), statistics.median(values), max(values)


def fmt(values, spec="{:.3f}"):
    lo, med, hi = mmm(values)
    return f"{spec.format(med)} ({spec.format(lo)} - {spec.format(hi)})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--sweep-jobs", type=int, default=4)
    p.add_argument("--help-runs", type=int, default=5)
    p.add_argument("--json", type=Path, help="write the raw numbers here")
    p.add_argument("--only", nargs="+", choices=PARTS, default=PARTS,
                   help="parts to run (default: all)")
    p.add_argument("--cells", nargs="+", choices=[f"{s}/{loop}" for s, loop, _ in CELLS],
                   help="throughput cells to run (default: all)")
    a = p.parse_args()
    if a.cells:
        CELLS[:] = [c for c in CELLS if f"{c[0]}/{c[1]}" in a.cells]

    work = Path(tempfile.mkdtemp(prefix="distexp-bench-"))
    raw = {"cells": {}, "first_step": {"distexp": [], "distexp_no_tracking": [], "plain": []}}
    started = time.time()
    for rnd in range(a.rounds):
        if "first_step" in a.only and "throughput" not in a.only:
            # short jobs, alternating distexp (MLflow on / off) and the plain script
            for side in (["distexp", "plain"] if rnd % 2 == 0 else ["plain", "distexp"]):
                fn = run_distexp if side == "distexp" else run_plain
                raw["first_step"][side].append(
                    fn("one_device", "custom", 1, 10, 5, work)["first_step_s"])
            r = run_distexp("one_device", "custom", 1, 10, 5, work, tracking=False)
            raw["first_step"]["distexp_no_tracking"].append(r["first_step_s"])
            print(f"round {rnd + 1} first step: distexp {raw['first_step']['distexp'][-1]:.2f} s, "
                  f"no tracking {r['first_step_s']:.2f} s, plain "
                  f"{raw['first_step']['plain'][-1]:.2f} s", file=sys.stderr, flush=True)
            continue
        if "throughput" not in a.only:
            break
        for strategy, loop, replicas in CELLS:
            key = f"{strategy}/{loop}"
            cell = raw["cells"].setdefault(key, {"distexp": [], "plain": [], "ratio": [],
                                                 "cpu_ratio": [], "k": []})
            sides = ["distexp", "plain"] if rnd % 2 == 0 else ["plain", "distexp"]
            got = {}
            for side in sides:
                fn = run_distexp if side == "distexp" else run_plain
                got[side] = fn(strategy, loop, replicas, a.steps, a.warmup, work)
                cell[side].append(got[side]["examples_per_sec"])
                raw["first_step"][side].append(got[side]["first_step_s"])
            cell["ratio"].append(got["distexp"]["examples_per_sec"] / got["plain"]["examples_per_sec"])
            cell["k"].append(got["distexp"]["k"])  # steps_per_execution as the job resolved it
            # examples per CPU-second, distexp over plain (> 1: distexp spends less CPU/example)
            cell["cpu_ratio"].append(got["plain"]["cpu_per_example"]
                                     / got["distexp"]["cpu_per_example"])
            print(f"round {rnd + 1} {key}: distexp {got['distexp']['examples_per_sec']:.0f} ex/s, "
                  f"plain {got['plain']['examples_per_sec']:.0f} ex/s, ratio "
                  f"{cell['ratio'][-1]:.3f}, CPU ratio {cell['cpu_ratio'][-1]:.3f}; "
                  f"{cell['k'][-1]}",
                  file=sys.stderr, flush=True)
        if "first_step" in a.only:
            r = run_distexp("one_device", "custom", 1, 20, 5, work, tracking=False)
            raw["first_step"]["distexp_no_tracking"].append(r["first_step_s"])

    if "help" in a.only:
        raw["help_s"] = [sh([sys.executable, "-m", "distexp", "--help"], work)
                         for _ in range(a.help_runs)]
    if "sweep" in a.only:
        raw["sweep"] = sweep(a, work)
    raw["wall_s"] = time.time() - started
    raw["machine"] = {"cpus": os.cpu_count(), "loadavg_end": os.getloadavg()}
    if a.json:
        a.json.write_text(json.dumps(raw, indent=1))
    print(report(raw, a))


def sweep(a, work: Path) -> dict:
    """N jobs as one `-m` sweep vs N single `python -m distexp` commands, wall time."""
    n = a.sweep_jobs
    job = ["strategy=one_device", "epochs=1", "steps_per_epoch=20", "warmup_steps=5",
           f"tracking.uri=sqlite:///{work / 'sweep.db'}"]
    singles, sweeps = [], []
    for rnd in range(max(1, a.rounds - 1)):
        single = sum(sh([sys.executable, "-m", "distexp", *job, f"seed={i}",
                         f"hydra.run.dir={work}/single-{rnd}-{i}"], work) for i in range(n))
        swept = sh([sys.executable, "-m", "distexp", "-m", *job,
                    "seed=" + ",".join(str(i) for i in range(n)),
                    f"hydra.sweep.dir={work}/sweep-{rnd}"], work)
        singles.append(single)
        sweeps.append(swept)
    return {"jobs": n, "single_total_s": singles, "sweep_s": sweeps,
            "overhead": [s / t - 1 for s, t in zip(sweeps, singles)]}


def report(raw, a) -> str:
    out = [f"Rounds: {a.rounds}; per run {a.warmup} warm-up + {a.steps} timed steps; "
           f"median (min - max).", ""]
    if raw["cells"]:
        out += ["| cell | distexp ex/s | plain TF ex/s | ratio distexp/plain (wall) | "
                "ratio of examples per CPU-second |", "|---|---|---|---|---|"]
    for key, c in raw["cells"].items():
        out.append(f"| {key} | {fmt(c['distexp'], '{:.0f}')} | {fmt(c['plain'], '{:.0f}')} | "
                   f"{fmt(c['ratio'])} | {fmt(c['cpu_ratio'])} |")
    for key, c in raw["cells"].items():
        for i, said in enumerate(c.get("k", [])):
            out.append(f"- {key} round {i + 1}: {said}")
    fs = raw["first_step"]
    if fs["distexp"] and fs["plain"] and fs["distexp_no_tracking"]:
        out += ["", "| time to first training step (from launching the command) | seconds |",
            "|---|---|",
            f"| distexp, MLflow on (sqlite) | {fmt(fs['distexp'], '{:.2f}')} |",
            f"| distexp, tracking.enabled=false | {fmt(fs['distexp_no_tracking'], '{:.2f}')} |",
            f"| plain TF script | {fmt(fs['plain'], '{:.2f}')} |",
            f"| distexp - plain, paired by round (MLflow on) | "
            f"{fmt([d - p for d, p in zip(fs['distexp'], fs['plain'])], '{:+.2f}')} |",
            "| distexp - plain, paired by round (tracking off) | " + (fmt(
                [d - p for d, p in zip(fs['distexp_no_tracking'], fs['plain'])], '{:+.2f}')
                if "throughput" not in a.only else "n/a (see the rows above)") + " |"]
    if "help_s" in raw:
        out += ["", f"`python -m distexp --help`: {fmt(raw['help_s'], '{:.2f}')} s"]
    sw = raw.get("sweep")
    if sw:
        out.append(f"\nSweep of {sw['jobs']} jobs: {fmt(sw['sweep_s'], '{:.1f}')} s vs {sw['jobs']} "
               f"single jobs {fmt(sw['single_total_s'], '{:.1f}')} s: overhead "
               f"{fmt([100 * o for o in sw['overhead']], '{:+.1f}')} %")
    out.append(f"\nWhole benchmark: {raw['wall_s'] / 60:.1f} min; {raw['machine']['cpus']} CPUs; "
               f"load average at the end {raw['machine']['loadavg_end'][0]:.2f}")
    return "\n".join(out)


if __name__ == "__main__":
    main()
