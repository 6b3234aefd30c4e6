"""A finished sweep, made readable in the MLflow UI (the sweep process, at its end; no TensorFlow).

`summarise` runs the scaling report (distexp.report) on the sweep and puts what it found where the
UI shows it without a click (distexp.ui opens the view, distexp.tracking.view):
- the parent run's and the experiment's Description (``mlflow.note.content``): the verdict as the
  first line (the runs page shows the experiment's description collapsed to its first line), then
  the report's table; clipped to MLflow's tag limits (experiment 5,000, run 8,000 characters);
- each job's run: a ``speed-up`` tag ("1.62x [1.40, 1.85] significant");
- the parent's metrics, keyed by replica count as the step, so that MLflow's automatic charts draw
  the scaling curve: ``scaling/<strategy>/examples_per_sec``, ``.../speedup``, ``.../efficiency``;
- the report's PNGs as images of the parent (``log_image``: the run page's image grid) besides
  the report/ artifacts the report logs;
- the sweep's shared table view (distexp.tracking.view.publish_view).
A failure here never fails the sweep: it is one line saying what is missing.
"""
from __future__ import annotations

import os
import sys
from typing import List, Optional, Sequence

from distexp.errors import first_line
from distexp.report.console import verdict  # the verdict line
from distexp.report.text import speed_tag
from distexp.tracking import tags as tag

EXPERIMENT_NOTE_MAX = 5000
RUN_NOTE_MAX = 8000


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    tail = "\n\n(cut to MLflow's tag limit: the whole table is in report/report.md)"
    return text[: limit - len(tail)] + tail


def scaling_metrics(rows: Sequence) -> List[tuple]:
    """(key, value, step) for the parent's charts: step = replicas."""
    out = []
    for r in rows:
        if not r.measured or not r.replicas:
            continue
        out.append((f"scaling/{r.strategy}/examples_per_sec", r.rate, r.replicas))
        if r.speedup is not None:
            out.append((f"scaling/{r.strategy}/speedup", r.speedup, r.replicas))
        if r.efficiency is not None:
            out.append((f"scaling/{r.strategy}/efficiency", r.efficiency, r.replicas))
    return out


def preload() -> None:
    """Import what `summarise` needs (the report, matplotlib's pyplot: ~0.35-0.5 s here) ahead of
    the sweep's end (distexp.sweeps.ending.Sweeps.using_the_wait)."""
    from distexp.report import cli  # noqa: F401

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot


def summarise(run, sweep_id: str, uri: str, experiment: str) -> Optional[str]:
    """Report, descriptions, charts and view for the sweep whose parent is `run` (a JobRun);
    return the verdict line, or None (and print why) when the report could not be made."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        from distexp.report import cli as report

        rows, out, md = report.build(uri, experiment, sweep_id, log=True)
    except Exception as ex:  # noqa: BLE001  (e.g. every job failed: no runs to report)
        print(f"distexp: the sweep's report was not made ({first_line(ex, 200)}); its runs are in "
              "MLflow", file=sys.stderr, flush=True)
        return None
    line = auto_line(report.outcome_lines(md)) or verdict(rows)
    try:
        _publish(run, sweep_id, rows, md, line, out)
    except Exception as ex:  # noqa: BLE001  (the sweep's runs are logged; this is its summary)
        print(f"distexp: the sweep's summary in MLflow is incomplete ({first_line(ex, 200)})",
              file=sys.stderr, flush=True)
    return line


def auto_line(outcomes: List[str]) -> Optional[str]:
    """repeats=auto's outcomes as the one line (the description's first, short enough to read
    uncut): the equal-work comparisons (else every comparison), the rest counted."""
    if not outcomes:
        return None
    head, pairs = outcomes[0], outcomes[1:]
    shown = [p for p in pairs if "(equal work)" in p] or pairs
    rest = len(pairs) - len(shown)
    more = f"; +{rest} more in the report" if rest else ""
    rounds = head.split(": ", 1)[-1].split(",", 1)[0]
    return "Outcome: " + "; ".join(shown) + more + f" ({rounds})"


def _publish(run, sweep_id: str, rows, md: str, line: str, out) -> None:
    client = run.client
    run.set_tag(tag.NOTE, clip(f"{line}\n\n{md}", RUN_NOTE_MAX))
    client.set_experiment_tag(run.experiment_id, tag.NOTE, clip(
        f"{line}\n\nThe latest sweep of this experiment: {sweep_id}.\n\n{md}",
        EXPERIMENT_NOTE_MAX))
    for r in rows:
        text = speed_tag(r)
        for rid in r.run_ids if text else []:
            client.set_tag(rid, tag.SPEED_UP, text)
    items = scaling_metrics(rows)
    if items:
        import time

        ts = int(time.time() * 1000)
        run.log_metric_items([[k, v, ts, step] for k, v, step in items])
    _images(client, run.run_id, out)
    from distexp.tracking import view

    view.publish_view(client, run.experiment_id, sweep_id, run.run_id)


def _images(client, run_id: str, out) -> None:
    """The report's PNGs as the parent's images (MLflow shows them on the run's page)."""
    try:
        from PIL import Image
    except ImportError:  # pillow comes with matplotlib; without it the PNGs stay artifacts
        return
    for name in ("throughput", "efficiency", "loss"):
        path = out / f"{name}.png"
        if path.exists():
            with Image.open(path) as img:
                client.log_image(run_id, img.convert("RGB"), key=f"report/{name}", step=0)
