"""The job's tail: how long `python -m distexp` runs after its last epoch line (goal
<= 1 s), measured from the outside on the lines as they arrive.

    python benchmarks/tail.py                      # the default job, 5 runs
    python benchmarks/tail.py --runs 3 -- measure_step_split=false model=mlp

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("overrides", nargs="*", help="job overrides (after --)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.runs):
            rows.append(one_run(a.overrides, Path(d)))
    load = os.getloadavg()
    print(f"job: python -m distexp {' '.join(a.overrides)}  ({a.runs} runs; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end)")
    for key, what in (("to_final", "last epoch line -> final: line"),
                      ("final_to_exit", "final: line -> exit"),
                      ("tail", "last epoch line -> exit"), ("total", "whole command")):
        xs = [r[key] for r in rows]
        print(f"  {what:32s} median {statistics.median(xs):6.2f} s  (min {min(xs):.2f}, "
              f"max {max(xs):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
