"""A finished sweep, made readable in the MLflow UI (the sweep process, at its end; no TensorFlow).

`summarise` runs the scaling report (distexp.report) on the sweep and puts what it found where the
UI shows it without a click (distexp.ui opens the view, distexp.tracking.view):
- the parent run's and the experiment's Description (``mlflow.note.content``): the verdict as the
  first line (the runs page shows the experiment's description collapsed to its first line), then
  the report's table; clipped to MLflow's tag limits (experiment 5,000, run 8,000 characters);
- each job's run: its set-up (tag ``set-up``, "mirrored x2 batch 128"; with the sweep's decision
  its name and answer, "mirrored x2: 0.72x [0.45, 1.14] not settled vs control": the UI groups
  the runs by it), its set-up's equal-work speed-up (over one replica at the same global batch) as the tag
  ``speed-up`` ("1.16x [1.05, 1.28] significant") and the metric ``scaling/speedup_equal_work``
  (the number the grouped row averages: the same on every run of a set-up), and the set-up's
  examples/s as ``scaling/examples_per_sec_setup`` (the median of its measured runs, rounded to
  a whole number) and its eval figure as ``scaling/eval_accuracy_setup`` (the median, 3
  decimals); all on the set-up's first measured run only (MLflow's group average over ten equal
  floats reads 0.9160000000000001; over one it is the figure); and its place among its set-up's
  runs, ``distexp.setup_rank`` (`ranks`: the view's order, so that MLflow's first page of 100
  runs holds every set-up). A set-up is the report's row: its runs' tag ``distexp.setup_key``;
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
from typing import Dict, List, Optional, Sequence

from distexp.errors import first_line
from distexp.report.table import headline  # the verdict line
from distexp.report.wording import speed_tag
from distexp.tracking import tags as tag
from distexp.tracking.view import SETUP_ACCURACY_METRIC, SETUP_RATE_METRIC, SPEEDUP_METRIC

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
    import matplotlib

    from distexp.report import cli  # noqa: F401

    matplotlib.use("Agg")
    import matplotlib.pyplot


def summarise(run, sweep_id: str, uri: str, experiment: str) -> Optional[str]:
    """Report, descriptions, charts and view for the sweep whose parent is `run` (a JobRun);
    return the verdict line, or None (and print why) when the report could not be made."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        from distexp.report import cli

        rows, out, md = cli.build(uri, experiment, sweep_id, log=True)
    except Exception as ex:  # noqa: BLE001  (e.g. every job failed: no runs to report)
        print(f"distexp: the sweep's report was not made ({first_line(ex, 200)}); its runs are in "
              "MLflow", file=sys.stderr, flush=True)
        return None
    from distexp.figures.outcomes import description_line
    from distexp.report.decided import of_rows

    decision = of_rows(rows)  # the sweep's records: its answer, rendered
    line = description_line(decision) if decision is not None else headline(rows)
    try:
        _publish(run, sweep_id, rows, md, line, out)
    except Exception as ex:  # noqa: BLE001  (the sweep's runs are logged; this is its summary)
        print(f"distexp: the sweep's summary in MLflow is incomplete ({first_line(ex, 200)})",
              file=sys.stderr, flush=True)
    return line


def setups(rows: Sequence) -> Dict[str, str]:
    """{run id: its set-up's name}: with the sweep's decision, its name and answer
    (distexp.figures.outcomes.setup_answer: "mirrored x2: 0.72x [0.45, 1.14] not settled vs
    control"); else "mirrored x2 batch 128", and the overrides that
    tell two set-ups apart where those read the same ("[optimizer.lr=0.1]"). A set-up is the
    report's (Row.key: the runs' set-up tag, else their job config), its failed runs included."""
    from distexp.figures.outcomes import setup_answer
    from distexp.report.decided import of_rows, setup_of

    decision = of_rows(rows)
    if decision is not None:
        found = [setup_of(r, decision) for r in rows]
        if None not in found:
            return {rid: setup_answer(decision, i) for r, i in zip(rows, found) for rid in r.run_ids}
    base, own = {}, {}
    for r in rows:
        base.setdefault(r.key, f"{r.strategy} x{r.replicas} batch {r.global_batch}")
        own.setdefault(r.key, set(r.job_overrides.split()))
    name = dict(base)
    for k in base:
        told = sorted(own[k] - set.intersection(*(own[j] for j in base if base[j] == base[k])))
        name[k] += f" [{' '.join(told)}]" if told else ""
    return {rid: name[r.key] for r in rows for rid in r.run_ids}


def ranks(rows: Sequence) -> Dict[str, str]:
    """{run id: its place among its set-up's runs, zero-padded (tag distexp.setup_rank)}: its
    measured runs first, by job number, then its other runs. The UI's view lists runs by it
    (distexp.tracking.view), so that a page of runs holds every set-up, not the first one's."""
    by_setup: Dict[tuple, List[str]] = {}
    for r in sorted(rows, key=lambda r: not r.measured):
        by_setup.setdefault(r.key, []).extend(r.run_ids)
    return {rid: f"{k:06d}" for ids in by_setup.values() for k, rid in enumerate(ids)}


def _publish(run, sweep_id: str, rows, md: str, line: str, out) -> None:
    client = run.client
    run.set_tag(tag.NOTE, clip(f"{line}\n\n{md}", RUN_NOTE_MAX))
    client.set_experiment_tag(run.experiment_id, tag.NOTE, clip(
        f"{line}\n\nThe latest sweep of this experiment: {sweep_id}.\n\n{md}",
        EXPERIMENT_NOTE_MAX))
    import time

    from mlflow.entities import Metric, RunTag

    ts = int(time.time() * 1000)
    names, rank = setups(rows), ranks(rows)
    for r in rows:
        text, c = speed_tag(r), r.strong
        metrics = []
        if r.measured:  # a failed or diverged run's own row: no figure moves the set-up's
            metrics.append(Metric(SETUP_RATE_METRIC, round(r.rate), ts, 0))  # a plain number
            if r.eval_accuracy is not None:
                metrics.append(Metric(SETUP_ACCURACY_METRIC, round(r.eval_accuracy, 3), ts, 0))
            if c is not None:  # a (pooled) baseline is 1.0, as its tag says
                metrics.append(Metric(SPEEDUP_METRIC, 1.0 if c.is_base else round(c.value, 3),
                                      ts, 0))
        for k, rid in enumerate(r.run_ids):  # the set-up's figures on its first run only: the
            # grouped row's average is then that figure exactly (not 0.9160000000000001)
            client.log_batch(rid, tags=[RunTag(tag.SETUP, names[rid]), RunTag(tag.SETUP_RANK, rank[rid])]
                             + ([RunTag(tag.SPEED_UP, text)] if text else []),
                             metrics=metrics if k == 0 else [])
    items = scaling_metrics(rows)
    if items:
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
