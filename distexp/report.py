"""`python -m distexp.report`: a sweep's scaling and accuracy table and plots, from MLflow.

Reads the runs (never TensorFlow), prints a Markdown table, and writes report.md, report.csv,
throughput.png, efficiency.png and loss.png to ``<sweep dir>/report/`` (or --out), then logs them
as artifacts (``report/``) of the sweep's parent run.

Definitions (README, "The scaling report"):
- examples/s: the run's `perf/examples_per_sec` (warm-up excluded) +/- `perf/examples_per_sec_ci95`.
- baseline of a run: the FINISHED 1-replica runs of the same model, dataset and loop with the same
  per-replica batch (weak scaling: the default, global batch = per-replica x replicas) or, failing
  that, the same global batch (strong scaling: global_batch_size fixed). one_device runs are
  preferred; several equal candidates are averaged (the same job measured again).
- speed-up = examples/s / baseline examples/s; scaling efficiency = speed-up / replicas.
  Spread of the speed-up: first-order propagation of both 95 % half-widths.
- No baseline: the columns say so; no number is made up.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

NO_BASELINE = "no 1-replica baseline"
STRATEGIES = ("one_device", "mirrored", "central", "multiworker", "ps")  # table order
KIND = "distexp.run_kind"
SWEEP_ID = "distexp.sweep_id"


class ReportError(Exception):
    """One line for the user, exit 2."""


@dataclass
class Row:
    run_id: str
    run_name: str
    status: str
    strategy: str
    model: str
    dataset: str
    loop: str
    workers: Optional[int]
    replicas: Optional[int]
    global_batch: Optional[int]
    rate: Optional[float]            # perf/examples_per_sec
    ci95: Optional[float]            # perf/examples_per_sec_ci95
    eval_accuracy: Optional[float]
    time_to_first_step: Optional[float]
    job_num: Optional[int] = None
    speedup: Optional[float] = None
    speedup_ci95: Optional[float] = None
    efficiency: Optional[float] = None
    baseline: str = ""
    loss: List[Tuple[int, float]] = field(default_factory=list)  # (step or epoch, loss)
    loss_x: str = "epoch"

    @property
    def group(self) -> Tuple[str, str, str]:
        return (self.model, self.dataset, self.loop)

    @property
    def per_replica(self) -> Optional[float]:
        if self.global_batch is None or not self.replicas:
            return None
        return self.global_batch / self.replicas

    @property
    def measured(self) -> bool:
        return self.status == "FINISHED" and self.rate is not None and self.rate > 0


def _int(v) -> Optional[int]:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def row_from_run(run) -> Row:
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    return Row(run_id=run.info.run_id, run_name=run.info.run_name or run.info.run_id[:8],
               status=run.info.status, strategy=p.get("strategy.name", "?"),
               model=p.get("model.name", "?"), dataset=p.get("dataset.name", "?"),
               loop=p.get("loop.name", "?"), workers=_int(p.get("num_workers")),
               replicas=_int(p.get("num_replicas")), global_batch=_int(p.get("global_batch_size")),
               rate=m.get("perf/examples_per_sec"), ci95=m.get("perf/examples_per_sec_ci95"),
               eval_accuracy=m.get("eval/accuracy"),
               time_to_first_step=m.get("perf/time_to_first_step_s"),
               job_num=_int(t.get("distexp.job_num")))


def add_scaling(rows: Sequence[Row]) -> None:
    """Fill speed-up, its spread, efficiency and the baseline's description (see the docstring)."""
    singles = [r for r in rows if r.measured and r.replicas == 1]
    for r in rows:
        if not r.measured:
            r.baseline = f"n/a ({r.status.lower() if r.status != 'FINISHED' else 'no throughput'})"
            continue
        mode, cands = None, []
        for mode, same in (("weak", lambda b: b.per_replica == r.per_replica),
                           ("strong", lambda b: b.global_batch == r.global_batch)):
            cands = [b for b in singles if b.group == r.group and same(b)]
            if cands:
                break
        if not cands:
            r.baseline = NO_BASELINE
            continue
        one = [b for b in cands if b.strategy == "one_device"]
        cands = one or cands
        base = sum(b.rate for b in cands) / len(cands)
        r.speedup = r.rate / base
        r.efficiency = r.speedup / r.replicas
        who = "one_device" if one else "/".join(sorted({b.strategy for b in cands}))
        r.baseline = f"{who} r1 ({mode}{', mean of %d' % len(cands) if len(cands) > 1 else ''})"
        base_cis = [b.ci95 for b in cands]
        if r.ci95 is not None and all(c is not None for c in base_cis):
            base_ci = math.sqrt(sum(c * c for c in base_cis)) / len(cands)
            r.speedup_ci95 = r.speedup * math.hypot(r.ci95 / r.rate, base_ci / base)


# --- reading MLflow ----------------------------------------------------------------------------

def default_uri() -> str:
    return f"sqlite:///{os.getcwd()}/outputs/mlflow.db"


def _client(uri: str):
    from distexp.tracking import _client as make

    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        if not path.is_absolute():
            path = Path.cwd() / path
        if not path.exists():
            raise ReportError(f"--tracking-uri: no MLflow store at {path}; run a sweep first "
                              "(python -m distexp -m ...) or pass --tracking-uri URI")
    return make(uri)


def find(client, experiment: str, sweep_id: Optional[str], filter_string: Optional[str]):
    """(parent run or None, the runs to report)."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = ", ".join(e.name for e in client.search_experiments()) or "(none)"
        raise ReportError(f"--experiment: received {experiment!r}; experiments in the store: {names}")
    ids = [exp.experiment_id]
    parent = None
    if sweep_id or not filter_string:
        query = f"tags.`{KIND}` = 'sweep'"
        if sweep_id:
            query += f" and tags.`{SWEEP_ID}` = '{sweep_id}'"
        found = client.search_runs(ids, query, order_by=["attributes.start_time DESC"],
                                   max_results=1)
        if not found:
            what = f"sweep {sweep_id!r}" if sweep_id else "a sweep (a parent run)"
            raise ReportError(f"--sweep-id: found no {what} in experiment {experiment!r}; run "
                              "`python -m distexp -m ...` or pass --filter to report any runs")
        parent = found[0]
        sid = parent.data.tags[SWEEP_ID]
        query = f"tags.`{SWEEP_ID}` = '{sid}' and tags.`{KIND}` = 'job'"
        if filter_string:
            query += f" and {filter_string}"
    else:
        query = filter_string
    try:
        runs = client.search_runs(ids, query, max_results=5000)
    except Exception as ex:  # noqa: BLE001  (a bad --filter)
        raise ReportError(f"--filter: received {filter_string!r}; MLflow says: "
                          f"{str(ex).strip().splitlines()[0][:300]}") from None
    runs = [r for r in runs if r.data.tags.get(KIND) != "sweep"]
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
    return loss_history(client, run_id), "epoch"


def loss_history(client, run_id: str) -> List[Tuple[int, float]]:
    seen: Dict[int, float] = {}
    for h in sorted(client.get_metric_history(run_id, "train/loss"),
                    key=lambda h: (h.step, h.timestamp)):
        seen.setdefault(h.step, h.value)  # the final value is logged again at the last step
    return sorted(seen.items())


# --- writing -----------------------------------------------------------------------------------

def _fmt(v: Optional[float], spec: str, missing: str = "-") -> str:
    return missing if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def table_rows(rows: Sequence[Row]) -> Tuple[List[str], List[List[str]]]:
    groups = {r.group for r in rows}
    head = (["model/dataset/loop"] if len(groups) > 1 else []) + [
        "strategy", "workers", "replicas", "global batch", "examples/s (±95% CI)", "speed-up",
        "efficiency", "baseline", "eval acc", "first step (s)", "status"]
    body = []
    for r in rows:
        rate = _fmt(r.rate, ",.1f")
        if r.rate is not None and r.ci95 is not None:
            rate += f" ± {r.ci95:,.1f}"
        if r.speedup is not None:
            speed = f"{r.speedup:.2f}x" + (f" ± {r.speedup_ci95:.2f}" if r.speedup_ci95 else "")
            eff = f"{100 * r.efficiency:.0f}%"
        else:
            speed = eff = NO_BASELINE if r.baseline == NO_BASELINE else "-"
        body.append(([f"{r.model}/{r.dataset}/{r.loop}"] if len(groups) > 1 else []) + [
            r.strategy, _fmt(r.workers, "d"), _fmt(r.replicas, "d"), _fmt(r.global_batch, "d"),
            rate, speed, eff, r.baseline, _fmt(r.eval_accuracy, ".4f"),
            _fmt(r.time_to_first_step, ".1f"), r.status])
    return head, body


def markdown(rows: Sequence[Row], title: str) -> str:
    head, body = table_rows(rows)
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(b) + " |" for b in body]
    lines += ["", "examples/s: warm-up steps excluded, ± the 95 % interval over 10-step windows. "
              "speed-up = examples/s / the baseline's (the 1-replica run of the same model, dataset "
              "and loop; weak = same per-replica batch, strong = same global batch); efficiency = "
              "speed-up / replicas. See README, \"The scaling report\".", ""]
    return "\n".join(lines)


CSV_FIELDS = ["run_id", "run_name", "job_num", "status", "model", "dataset", "loop", "strategy",
              "workers", "replicas", "global_batch", "examples_per_sec", "examples_per_sec_ci95",
              "speedup", "speedup_ci95", "efficiency", "baseline", "eval_accuracy",
              "time_to_first_step_s"]


def write_csv(rows: Sequence[Row], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow([r.run_id, r.run_name, r.job_num, r.status, r.model, r.dataset, r.loop,
                        r.strategy, r.workers, r.replicas, r.global_batch, r.rate, r.ci95,
                        r.speedup, r.speedup_ci95, r.efficiency, r.baseline, r.eval_accuracy,
                        r.time_to_first_step])


def plots(rows: Sequence[Row], out: Path, title: str) -> List[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    several = len({r.group for r in rows}) > 1

    def label(key):
        (model, dataset, loop), strategy = key
        return f"{strategy} ({model}/{dataset}/{loop})" if several else strategy

    series: Dict[tuple, List[Row]] = {}
    for r in rows:
        if r.measured:
            series.setdefault((r.group, r.strategy), []).append(r)
    paths = []

    def figure(name, ylabel, value, err=None, ideal=None):
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
        drawn = False
        for key, rs in sorted(series.items()):
            pts: Dict[int, List[Row]] = {}
            for r in rs:
                if value(r) is not None:
                    pts.setdefault(r.replicas, []).append(r)
            if not pts:
                continue
            xs = sorted(pts)
            ys = [sum(value(r) for r in pts[x]) / len(pts[x]) for x in xs]
            es = None
            if err is not None and all(err(r) is not None for x in xs for r in pts[x]):
                es = [math.sqrt(sum(err(r) ** 2 for r in pts[x])) / len(pts[x]) for x in xs]
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=label(key))
            drawn = True
        if ideal is not None and drawn:
            ax.axhline(ideal, color="grey", linestyle="--", linewidth=1, label="ideal")
        if not drawn:
            ax.text(0.5, 0.5, NO_BASELINE if name == "efficiency" else "no measured run",
                    ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("replicas")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: {ylabel}", fontsize=10)
        xs_all = sorted({r.replicas for r in rows if r.replicas})
        if xs_all:
            ax.set_xticks(xs_all)
        if drawn:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)

    figure("throughput", "examples/s", lambda r: r.rate, err=lambda r: r.ci95)
    figure("efficiency", "scaling efficiency (%)",
           lambda r: None if r.efficiency is None else 100 * r.efficiency,
           err=lambda r: None if r.speedup_ci95 is None else 100 * r.speedup_ci95 / r.replicas,
           ideal=100.0)

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    drawn = False
    xlabels = set()
    for r in rows:
        if r.loss:
            xs, ys = zip(*r.loss)
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, linewidth=1,
                    label=f"{r.run_name}" + (f" #{r.job_num}" if r.job_num is not None else ""))
            xlabels.add(r.loss_x)
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no train/loss logged", ha="center", va="center", transform=ax.transAxes)
    else:
        ax.legend(fontsize=7)
    ax.set_xlabel(" / ".join(sorted(xlabels)) or "epoch")
    ax.set_ylabel("training loss")
    ax.set_title(f"{title}: training loss", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = out / "loss.png"
    fig.savefig(path)
    plt.close(fig)
    paths.append(path)
    return paths


# --- the command -------------------------------------------------------------------------------

def build(uri: str, experiment: str = "distexp", sweep_id: Optional[str] = None,
          filter_string: Optional[str] = None, out: Optional[Path] = None,
          log: bool = True) -> Tuple[List[Row], Path, str]:
    """Make the report; return (rows, output dir, markdown)."""
    client = _client(uri)
    parent, runs = find(client, experiment, sweep_id, filter_string)
    rows = [row_from_run(r) for r in runs]
    for r in rows:
        r.loss, r.loss_x = loss_curve(client, r.run_id)
    add_scaling(rows)
    order = {name: i for i, name in enumerate(STRATEGIES)}
    rows.sort(key=lambda r: (r.group, order.get(r.strategy, len(order)), r.strategy,
                             r.replicas or 0, r.job_num if r.job_num is not None else 0))
    if parent is not None:
        sid = parent.data.tags[SWEEP_ID]
        title = f"Sweep {sid}"
        sweep_dir = parent.data.tags.get("distexp.sweep_dir")
        default_out = (Path(sweep_dir) / "report" if sweep_dir and Path(sweep_dir).is_dir()
                       else Path("outputs") / "reports" / sid)
    else:
        title = f"Runs matching {filter_string}"
        default_out = Path("outputs") / "reports" / time.strftime("%Y-%m-%d_%H-%M-%S")
    out = Path(out) if out is not None else default_out
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(rows, title)
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
    uri = a.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or default_uri()
    try:
        rows, out, md = build(uri, a.experiment, a.sweep_id, a.filter, a.out, log=not a.no_log)
    except ReportError as ex:
        print(f"distexp.report: error: {ex}", file=sys.stderr)
        return 2
    print(md)
    print(f"Written to {out}: report.md, report.csv, throughput.png, efficiency.png, loss.png"
          + ("" if a.no_log else " (also logged to the sweep's parent run under report/)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
