"""The job's tail: how long `python -m distexp` runs after its last epoch line (goal
<= 1 s), measured from the outside on the lines as they arrive.

    python benchmarks/tail.py                      # the default job, 2 fresh directories x 3 runs
    python benchmarks/tail.py --dirs 1 --runs 5 --before "epochs=1 steps_per_epoch=5"
    python benchmarks/tail.py --runs 3 -- measure_step_split=false model=mlp

Each directory is new (no store, no outputs/): its first run is the first job there, which
creates the MLflow store and everything else a first job creates; it is listed on its own line
and in the summary apart from the later runs (`--before`: a job run first in each directory,
not counted, e.g. the short job that creates the store). Every run's line carries `uptime`'s
load average: the machine may be shared.

Per run: the time from the last `epoch N/N` line to the `final:` line (what the trainer measures
and logs after training: the step-time probes, FLOPs, the final figures), from `final:` to the
command's exit (the trainer's exit, the job process ending the MLflow run and storing the log and
artifacts), and the sum. Prints the median and range of each over the runs, with the load average.
Run it with nothing else on the machine.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAST_EPOCH = re.compile(r"^epoch (\d+)/(\1)\b")


def one_run(extra, cwd: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HYDRA_FULL_ERROR", None)
    start = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "distexp", *extra], cwd=cwd, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    last_epoch = final = None
    for line in p.stdout:
        now = time.perf_counter()
        if LAST_EPOCH.match(line):
            last_epoch = now
        elif line.startswith("final:"):
            final = now
    code = p.wait()
    end = time.perf_counter()
    if code != 0 or last_epoch is None or final is None:
        raise SystemExit(f"tail: the job failed or printed no last epoch / final line (exit {code})")
    return {"to_final": final - last_epoch, "final_to_exit": end - final,
            "tail": end - last_epoch, "total": end - start}


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def _before(extra: str, cwd: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "distexp", *extra.split()], cwd=cwd, env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"tail: the --before job failed (exit {r.returncode})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dirs", type=int, default=2, help="fresh directories")
    ap.add_argument("--runs", type=int, default=3, help="runs in each directory")
    ap.add_argument("--before", default="", help="a job run first in each directory, not counted")
    ap.add_argument("overrides", nargs="*", help="job overrides (after --)")
    a = ap.parse_args()
    rows = []
    print(f"job: python -m distexp {' '.join(a.overrides)}  ({a.dirs} fresh directories x "
          f"{a.runs} runs{'; first: ' + a.before if a.before else ''})")
    for n in range(a.dirs):
        with tempfile.TemporaryDirectory() as d:
            if a.before:
                _before(a.before, Path(d))
            for i in range(a.runs):
                r = one_run(a.overrides, Path(d))
                r["first"] = i == 0
                rows.append(r)
                print(f"  dir {n + 1} run {i + 1}{' (first in the directory)' if i == 0 else ''}:"
                      f" tail {r['tail']:.2f} s (to final: {r['to_final']:.2f}, final to exit "
                      f"{r['final_to_exit']:.2f}), whole command {r['total']:.1f} s  ({_load()})",
                      flush=True)
    for label, sel in (("first runs", [r for r in rows if r["first"]]),
                       ("later runs", [r for r in rows if not r["first"]]), ("all runs", rows)):
        if not sel:
            continue
        print(f"{label} ({len(sel)}):")
        for key, what in (("to_final", "last epoch line -> final: line"),
                          ("final_to_exit", "final: line -> exit"),
                          ("tail", "last epoch line -> exit"), ("total", "whole command")):
            xs = [r[key] for r in sel]
            print(f"  {what:32s} median {statistics.median(xs):6.2f} s  (min {min(xs):.2f}, "
                  f"max {max(xs):.2f})")
    print(f"at the end: {_load()}; goal: every tail under 1.0 s "
          f"({'met' if all(r['tail'] < 1.0 for r in rows) else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
