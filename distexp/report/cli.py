"""`python -m distexp.report`: a sweep's scaling and accuracy table and plots, from MLflow.

Reads the runs (never TensorFlow), prints a table that fits 120 columns (distexp.report.table)
and the verdict, and writes the full Markdown table report.md, report.csv,
throughput.png, efficiency.png, speedup.png and loss.png to ``<sweep dir>/report/`` (or --out), then logs them
as artifacts (``report/``) of the sweep's parent run.

Separation of concerns:
- distexp.report   (this) reading the runs from MLflow, the table, report.md, the command
- distexp.report.columns  report.csv: every column and its value per row, one definition
- distexp.report.scaling  rows per job config over its repeats, weak/strong comparisons, intervals, split
- distexp.report.conclusions  the verdict the report opens with, the accuracy and end-to-end notes
- distexp.figures.outcomes  a sweep's decision: its records and every text made of them
- distexp.report.decided   the decision put on the rows (the table's speed-ups are its)
- distexp.report.wording  a rate, a speed-up, a verdict as text (one formatter each, every place)
- distexp.report.diagnosis  a job's bottleneck, its end-to-end figure against the steady state
- distexp.figures.stats    the interval and the runs-needed estimate from repeated runs
- distexp.report.plots    throughput.png, efficiency.png, speedup.png, loss.png
- distexp.figures.meaning  what a figure means (random-label accuracy, where the MFU peak came from)
Definitions: docs/report.md.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from distexp import errors
from distexp.console_lines import WIDTH
from distexp.figures import meaning, perf_keys, text
from distexp.figures.outcomes import Decision, from_json, section_lines
from distexp.report import conclusions, decided, wording
from distexp.report.columns import bottleneck_text, shown_mfu, write_csv
from distexp.report.decided import apply
from distexp.report.plots import plots
from distexp.report.scaling import NO_BASELINE, Row, Significance, add_scaling, aggregate, row_from_run
from distexp.tracking import lookup
from distexp.tracking import tags as tag


class ReportError(lookup.LookupFailed):
    """One line for the user, exit 2."""


# --- reading MLflow ----------------------------------------------------------------------------

def _client(uri: str):
    return lookup.open_store(uri, "a sweep first (python -m distexp -m ...)")


def find(client, experiment: str, sweep_id: Optional[str], filter_string: Optional[str]):
    """(parent run or None, the runs to report)."""
    ids = lookup.experiment_ids(client, experiment)
    parent = None
    if sweep_id or not filter_string:
        parent = lookup.latest_sweep(client, ids, sweep_id)
        if parent is None:
            what = f"sweep {sweep_id!r}" if sweep_id else "a sweep (a parent run)"
            raise ReportError(f"--sweep-id: found no {what} in experiment {experiment!r}; run "
                              "`python -m distexp -m ...` or pass --filter to report any runs")
        query = lookup.jobs_of(parent)
        if filter_string:
            query += f" and {filter_string}"
    else:
        query = filter_string
    try:
        runs = client.search_runs(ids, query, max_results=5000)
    except Exception as ex:  # noqa: BLE001  (a bad --filter)
        raise ReportError(f"--filter: received {filter_string!r}; MLflow says: "
                          f"{errors.first_line(ex)}") from None
    runs = [r for r in runs if r.data.tags.get(tag.RUN_KIND) != "sweep"]
    if not runs:
        raise ReportError(f"no runs to report (query: {query})")
    return parent, runs


def loss_curve(client, run_id: str) -> Tuple[List[Tuple[int, float]], str]:
    """Per-step losses from the run's steps.csv artifact, else per-epoch `train/loss` history."""
    import tempfile

    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run_id, "steps.csv", tmp)
            with open(path) as f:
                pts = [(int(r["step"]), float(r["loss"])) for r in csv.DictReader(f)]
        if pts:
            return pts, "step"
    except Exception:  # noqa: BLE001  (no such artifact: a failed run, or logged elsewhere)
        pass
    return metric_by_step(client, run_id, "train/loss"), "epoch"


def steps_to_target(client, r: Row) -> Optional[int]:
    """Optimizer steps when the job first reached target_accuracy: the epoch of the evaluation
    that reached it (the step perf/time_to_accuracy_s was first logged at) x steps per epoch.
    The job's first run (as for the loss plot)."""
    if r.time_to_target is None or r.steps_per_epoch is None:
        return None
    hist = client.get_metric_history(r.run_id, perf_keys.TIME_TO_ACCURACY_S)
    return min(h.step for h in hist) * r.steps_per_epoch if hist else None


def metric_by_step(client, run_id: str, key: str) -> List[Tuple[int, float]]:
    """(step, value) of a per-epoch metric, once per step (the final value is logged again at
    the last step)."""
    seen: Dict[int, float] = {}
    for h in sorted(client.get_metric_history(run_id, key), key=lambda h: (h.step, h.timestamp)):
        seen.setdefault(h.step, h.value)
    return sorted(seen.items())


# --- writing -----------------------------------------------------------------------------------

def _fmt(v: Optional[float], spec: str, missing: str = "-") -> str:
    return missing if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _strong(r: Row) -> str:
    """The strong comparison (1 replica at the same global batch), or why there is none."""
    if not r.measured:
        return "-"
    c = r.strong
    if c is None:
        return "not measured (no 1-replica job at this global batch)" if (r.replicas or 0) > 1 \
            else "-"
    return Significance.BASELINE.value if c.is_base else wording.comparison(c)


def _eval_head(rows: Sequence[Row]) -> str:
    """The eval column is the task's figure: `eval acc`, `eval token_accuracy`, `eval mae` ..."""
    names = {r.eval_metric for r in rows}
    if names == {"eval/accuracy"}:
        return "eval acc"
    return f"eval {names.pop()[5:]}" if len(names) == 1 else "eval (each task's figure)"


def _accuracy(r: Row) -> str:
    if r.eval_accuracy is not None and not meaning.accuracy_meaningful(r.dataset):
        return meaning.NOT_MEANINGFUL
    return _fmt(r.eval_accuracy, ".4f")


def table_rows(rows: Sequence[Row]) -> Tuple[List[str], List[List[str]]]:
    groups = {r.group for r in rows}
    decided = any(r.decision is not None for r in rows)
    head = (["model/dataset/loop"] if len(groups) > 1 else []) + [
        "strategy", "workers", "replicas", "global batch", "runs",
        "examples/s (median; range, or [95% CI] of 1 run)",
        "speed-up" if decided else "speed-up [95% CI]", "verdict",
        *["accuracy vs baseline (points, paired by round)"] * decided,
        "efficiency", "baseline", "at equal global batch (vs 1 replica)", "steps",
        _eval_head(rows), "MFU", "bottleneck", "first step (s)", "status"]
    body = []
    for r in rows:
        eff = f"{100 * r.efficiency:.0f}%" if r.efficiency is not None else (
            NO_BASELINE if r.baseline == NO_BASELINE else
            "n/a (1 replica)" if r.speedup is not None else "-")
        body.append(([f"{r.model}/{r.dataset}/{r.loop}"] if len(groups) > 1 else []) + [
            r.strategy, _fmt(r.workers, "d"), _fmt(r.replicas, "d"), _fmt(r.global_batch, "d"),
            str(len(r.rates) or 1), wording.rate(r), wording.speedup(r),
            wording.significance(r) if r.speedup is not None else "-",
            *[wording.accuracy_vs_baseline(r)] * decided, eff, r.baseline, _strong(r),
            _fmt(r.optimizer_steps, "d"), _accuracy(r),
            "-" if shown_mfu(r) is None else f"{text.mfu_percent(shown_mfu(r))}%",
            bottleneck_text(r) or "-",
            _fmt(r.time_to_first_step, ".1f"), r.shown_status])
    return head, body


DECISION_NOTE = {
    False: "repeats=auto: repeated confidence intervals over the planned rounds on the speed "
           "ratio of steady-state examples/s, runs paired by round: each outcome holds at the "
           "round the sweep stopped, whatever made it stop. The table shows the same speed-ups "
           "(against the baseline, and at equal work against the control). See distexp's "
           "docs/sweeps.md.",
    True: "Fixed-sample: paired t intervals over the repeats' rounds, one look after the last "
          "round (valid because the number of runs was fixed before the sweep). The table shows "
          "the same speed-ups. See distexp's docs/sweeps.md."}


def markdown(rows: Sequence[Row], title: str, decision: Optional[Decision] = None) -> str:
    head, body = table_rows(rows)
    lines = [f"# {title}", ""]
    if decision is not None:  # the sweep's answer; no verdict computed again beside it
        first, *rest = section_lines(decision)
        lines += [f"## {first}", ""] + rest + ["", DECISION_NOTE[decision.fixed]]
    else:
        lines += ["## Verdict", ""]
        lines += [f"- {line}" for line in conclusions.verdict_lines(rows)]
    lines += ["", "## Jobs", "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(b) + " |" for b in body]
    if decision is not None:
        lines += ["", "examples/s: warm-up steps excluded; the median over a job's runs, with their "
                  "range. speed-up and \"at equal global batch\": the sweep's decision above (the "
                  "geometric mean of the ratios paired by round, its interval and outcome); "
                  "accuracy vs baseline: its accuracy half (the mean paired difference in points, "
                  "its interval and outcome); "
                  "efficiency = speed-up / replicas. See distexp's docs/report.md."]
    else:
        lines += _fixed_note()
    lines += _notes(rows)
    lines.append("")
    return "\n".join(lines)


def _fixed_note() -> List[str]:
    return ["", "examples/s: warm-up steps excluded; the median over a job's runs (`repeats`), "
              "with their range; a single run shows its 95 % interval over 10-step windows. "
              "speed-up = examples/s / the baseline's (the 1-replica runs of the same job; weak = "
              "same per-replica batch, strong = same global batch); efficiency = speed-up / "
              "replicas. [95% CI] from the variation between runs (Welch's t on log examples/s, "
              ">= 2 runs a side); \"~\" = not significantly different from the baseline (the "
              "interval contains 1), with the runs per job that would resolve the observed "
              "difference at 80 % power; \"within run\" = one run a side: the interval only sees "
              "noise inside that run, not between runs, and no significance is claimed. "
              "See distexp's docs/report.md."]


def _notes(rows: Sequence[Row]) -> List[str]:
    """The notes under the table (both kinds of report)."""
    lines: List[str] = []
    one_rep = [r for r in rows if r.replicas == 1 and r.significant and (r.speedup or 0) > 1
               and r.decision is None]  # a decision's 1-replica comparisons change the batch
    if one_rep:
        lines += ["", "Note: " + ", ".join(sorted({r.strategy for r in one_rep})) + " with 1 "
                  "replica measured significantly faster than one_device: the same work on one "
                  "device, so this is not a scaling gain (check the input pipeline and what else "
                  "ran on the machine)."]
    if any(r.eval_accuracy is not None and not meaning.accuracy_meaningful(r.dataset)
           for r in rows):
        lines += ["", f"eval acc {meaning.NOT_MEANINGFUL}: the dataset's labels are random "
                  "(dataset=synthetic), so accuracy is chance level by construction and says "
                  "nothing about training; use it for throughput only."]
    notes = conclusions.accuracy_notes(rows) + conclusions.end_to_end_notes(rows)
    lines += [x for n in notes for x in ("", n)]
    if any(r.breakdown for r in rows):
        lines += ["", "bottleneck: the largest part of the mean step time (perf/step_input_ms, "
                  "_compute_ms, _sync_ms, _other_ms; other = unattributed) and its share."]
    sources = sorted({meaning.peak_source(r.peak_source) for r in rows
                      if shown_mfu(r) is not None})
    if sources:
        lines += ["", "MFU = model FLOPs/example x examples/s / peak FLOP/s; peak: "
                  + "; ".join(sources) + ". A constant of the machine: it does not rank jobs "
                  "(examples/s does), and it moves only with the job's own throughput."]
    if any(r.mfu is not None and shown_mfu(r) is None for r in rows):
        lines += ["", "MFU not shown for runs whose peak was a matmul benchmark measured during "
                  "the run (it moved with the machine's load, not with the job)."]
    failed = [r for r in rows if r.diverged or r.status in ("FAILED", "KILLED")]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed or diverged: listed with no throughput and "
                  "never used as a baseline."]
    return lines


# --- the command -------------------------------------------------------------------------------

def build(uri: str, experiment: str = "distexp", sweep_id: Optional[str] = None,
          filter_string: Optional[str] = None, out: Optional[Path] = None,
          log: bool = True) -> Tuple[List[Row], Path, str]:
    """Make the report; return (rows, output dir, markdown)."""
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:  # a killed job's run shows FAILED, not RUNNING (distexp.tracking.owner)
        from distexp.tracking.owner import end_dead_runs

        end_dead_runs(client, [exp.experiment_id])
    parent, runs = find(client, experiment, sweep_id, filter_string)
    rows = aggregate([row_from_run(r) for r in runs])
    for r in rows:  # a job's first run stands for its repeats in the loss plot
        r.curves.loss, r.curves.loss_x = loss_curve(client, r.run_id)
        r.curves.steps_to_target = steps_to_target(client, r)
        if r.rate_end_to_end is not None:  # what the end-to-end note splits its wall time by
            r.curves.epoch_times = [v for _, v in metric_by_step(client, r.run_id, perf_keys.EPOCH_TIME_S)]
    add_scaling(rows)
    from distexp import strategies

    order = {name: i for i, name in enumerate(strategies.names())}  # the contract's order
    rows.sort(key=lambda r: (r.group, order.get(r.strategy, len(order)), r.strategy,
                             r.replicas or 0, r.job_num if r.job_num is not None else 0))
    if parent is not None:
        sid = parent.data.tags[tag.SWEEP_ID]
        title = f"Sweep {sid}"
        sweep_dir = parent.data.tags.get(tag.SWEEP_DIR)
        default_out = (Path(sweep_dir) / "report" if sweep_dir and Path(sweep_dir).is_dir()
                       else Path("outputs") / "reports" / sid)
    else:
        title = f"Runs matching {filter_string}"
        default_out = Path("outputs") / "reports" / time.strftime("%Y-%m-%d_%H-%M-%S")
    out = Path(out) if out is not None else default_out
    out.mkdir(parents=True, exist_ok=True)
    decision = from_json(parent.data.tags.get(tag.OUTCOMES)) if parent is not None else None
    if decision is not None:
        apply(rows, decision)
    md = markdown(rows, title, decision)
    if parent is not None and parent.data.params.get("launcher", "").startswith("Joblib"):
        md += ("\nNote: this sweep ran with the joblib launcher: jobs ran at the same time and "
               "shared the CPU, so their examples/s are not comparable with each other.\n")
    (out / "report.md").write_text(md)
    write_csv(rows, out / "report.csv")
    files = [out / "report.md", out / "report.csv", *plots(rows, out, title)]
    if log and parent is not None:
        for f in files:
            client.log_artifact(parent.info.run_id, str(f), "report")
    return rows, out, md


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m distexp.report",
        description="Scaling and accuracy table + plots of a sweep, from MLflow (default: the "
                    "latest sweep in experiment 'distexp' of ./outputs/mlflow.db).")
    p.add_argument("--tracking-uri", default=None, help="MLflow URI (default: "
                   "sqlite:///<cwd>/outputs/mlflow.db, or $MLFLOW_TRACKING_URI)")
    p.add_argument("--experiment", default="distexp", help="MLflow experiment (default: distexp)")
    p.add_argument("--sweep-id", default=None, help="a sweep's id (tag distexp.sweep_id; "
                   "printed when the sweep starts); default: the latest sweep")
    p.add_argument("--filter", default=None, help="an MLflow filter string, e.g. "
                   "\"params.`model.name` = 'cnn'\"; with --sweep-id it narrows the sweep's runs, "
                   "alone it reports any matching runs")
    p.add_argument("--out", type=Path, default=None,
                   help="output directory (default: <sweep dir>/report)")
    p.add_argument("--no-log", action="store_true", help="do not log the files to the parent run")
    a = p.parse_args(argv)
    uri = a.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or lookup.default_uri()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # a quiet console
    try:
        rows, out, md = build(uri, a.experiment, a.sweep_id, a.filter, a.out, log=not a.no_log)
    except lookup.LookupFailed as ex:  # ReportError is one
        print(f"distexp.report: error: {ex}", file=sys.stderr)
        return errors.BAD_INPUT
    from distexp.report.table import table

    print(md.splitlines()[0].lstrip("# "))
    decision = decided.of_rows(rows)
    if decision is not None:
        first, *rest = section_lines(decision)
        print("\n".join([f"{first}:"] + rest))
    else:
        print("\n".join(["Verdict:"] + [textwrap.fill(line, WIDTH, initial_indent="- ",
                                                       subsequent_indent="  ", break_long_words=False,
                                                       break_on_hyphens=False)
                                         for line in conclusions.verdict_lines(rows)]))
    print(table(rows))
    print(written_lines(out, logged=not a.no_log))
    return 0


def written_lines(out: Path, logged: bool) -> str:
    """Where the report's files went: the directory on a line of its own (120 columns)."""
    return ("Written: report.md, report.csv, throughput.png, efficiency.png, speedup.png, "
            f"loss.png, in\n  {out}"
            + ("\n(also logged to the sweep's parent run under report/)" if logged else ""))


if __name__ == "__main__":
    sys.exit(main())
