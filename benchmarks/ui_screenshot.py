"""The MLflow UI screenshot of docs/tracking-and-ui.md, from a real scaling sweep (not the load test's tiny jobs).

    python benchmarks/ui_screenshot.py [--repeats 2] [--out docs/mlflow-ui-scaling.png]

Runs `python -m distexp -m experiment=scaling repeats=N` into a fresh store under a temporary
directory, then `python -m distexp.report`, starts `mlflow server` on it, and opens the sweep in
Debian's Chromium (Playwright): the parent run expanded, its jobs with perf/examples_per_sec,
the replicas and the strategy on screen. Needs chromium and playwright (the test extras).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from servers import MlflowServer, Rest  # noqa: E402

from helpers.browser import chromium_page, close_assistant, expand_parent_runs, toggle_columns  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "mlflow-ui-scaling.png")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="distexp-ui-"))
    sweep = [sys.executable, "-m", "distexp", "-m", "experiment=scaling", f"repeats={a.repeats}"]
    print("$", " ".join(sweep[1:]), flush=True)
    subprocess.run(sweep, cwd=work, check=True)
    subprocess.run([sys.executable, "-m", "distexp.report"], cwd=work, check=True)
    ui = MlflowServer.start(f"sqlite:///{work}/outputs/mlflow.db", work / "outputs" / "mlartifacts",
                            work / "ui.log")
    try:
        exp = Rest(ui.url).experiment_id("distexp")
        with chromium_page(1500, 900) as page:
            page.goto(f"{ui.url}/#/experiments/{exp}/runs")
            page.get_by_text("sweep-").first.wait_for(timeout=90_000)
            close_assistant(page)
            toggle_columns(page, ("Dataset", "Source", "Models", "perf/examples_per_sec",
                                  "num_replicas", "repeat"))
            expand_parent_runs(page)
            page.get_by_text("mirrored-cnn-synthetic-r2").first.wait_for(timeout=30_000)
            page.wait_for_timeout(800)
            a.out.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(a.out))
    finally:
        ui.stop()
    print(f"screenshot: {a.out}; the sweep's store and report: {work}/outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
