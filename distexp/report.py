"""`python -m distexp.report`: a sweep's scaling and accuracy table and plots, from MLflow.

Reads the runs (never TensorFlow), prints a Markdown table, and writes report.md, report.csv,
throughput.png, efficiency.png and loss.png to ``<sweep dir>/report/`` (or --out), then logs them
as artifacts (``report/``) of the sweep's parent run.

Definitions (README, "The scaling report"):
- one row per job config: the FINISHED runs that differ only in `repeat` (the sweep's
  ``repeats=N``) are aggregated; examples/s is their median. A FAILED, KILLED or diverged
  (tag ``distexp.diverged``) run is a row of its own with no throughput and is never a baseline.
- baseline of a row: the 1-replica rows of the same job (same model, dataset, loop and other
  overrides) with the same per-replica batch (weak scaling: the default, global batch =
  per-replica x replicas) or, failing that, the same global batch (strong scaling:
  global_batch_size fixed). one_device is preferred; several candidates are pooled.
- speed-up = median examples/s / the baseline's median; scaling efficiency = speed-up / replicas.
- its 95 % interval and `significant`: from the between-run variation when both sides have >= 2
  runs (distexp.stats: Welch's t on log examples/s); a non-significant speed-up is marked "~"
  (as Go's benchstat does) with the runs that would resolve it. With one run a side the interval
  is the within-run one (10-step windows, first-order propagation) and no significance is claimed.
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

from distexp import meaning, stats

NO_BASELINE = "no 1-replica baseline"
WITHIN_RUN = "within-run only"
# Override keys that make a run the scaling variant of a job rather than another job.
SCALING_KEYS = ("strategy", "cpu_replicas", "gpus", "workers", "ps", "cluster",
                "batch_size_per_replica", "global_batch_size")
# Override keys that differ between runs of one job config (repeats, a resumed re-run).
RUN_KEYS = ("repeat", "resume", "sweep.resume", "checkpoint.dir")
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
    speedup_ci95: Optional[float] = None   # within-run: first-order half-width (one run a side)
    speedup_low: Optional[float] = None
    speedup_high: Optional[float] = None
    significant: bool = False
    verdict: str = ""                      # significant | ~ | within-run only | baseline
    repeats_needed: Optional[int] = None
    efficiency: Optional[float] = None
    baseline: str = ""
    loss: List[Tuple[int, float]] = field(default_factory=list)  # (step or epoch, loss)
    loss_x: str = "epoch"
    overrides: str = ""
    diverged: bool = False
    mfu: Optional[float] = None
    peak_source: Optional[str] = None
    rates: List[float] = field(default_factory=list)      # examples/s of each repeat
    run_ids: List[str] = field(default_factory=list)

    @property
    def key(self) -> tuple:
        """The job config: runs with the same key differ only in `repeat` (or were resumed)."""
        return (self.strategy, self.model, self.dataset, self.loop, self.workers, self.replicas,
                self.global_batch, _without(self.overrides, RUN_KEYS))

    @property
    def base_key(self) -> tuple:
        """What a baseline must share: the job without its scaling keys."""
        return (self.group, _without(self.overrides, RUN_KEYS + SCALING_KEYS))

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
        return (self.status == "FINISHED" and not self.diverged and self.rate is not None
                and self.rate > 0)

    @property
    def shown_status(self) -> str:
        return "DIVERGED" if self.diverged else self.status


def _without(overrides: str, keys: Sequence[str]) -> str:
    """The overrides (a run's distexp.overrides tag), sorted, without `keys` (and their subkeys)."""
    def dropped(o: str) -> bool:
        k = o.split("=", 1)[0].lstrip("+~")
        return k in keys or k.split(".", 1)[0] in keys

    return " ".join(sorted(o for o in overrides.split() if not dropped(o)))


def _int(v) -> Optional[int]:
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None


def row_from_run(run) -> Row:
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    diverged = str(t.get("distexp.diverged", "")).lower() == "true"
    finished = run.info.status == "FINISHED" and not diverged
    rate = m.get("perf/examples_per_sec") if finished else None  # a failed run has no throughput
    return Row(run_id=run.info.run_id, run_name=run.info.run_name or run.info.run_id[:8],
               status=run.info.status, strategy=p.get("strategy.name", "?"),
               model=p.get("model.name", "?"), dataset=p.get("dataset.name", "?"),
               loop=p.get("loop.name", "?"), workers=_int(p.get("num_workers")),
               replicas=_int(p.get("num_replicas")), global_batch=_int(p.get("global_batch_size")),
               rate=rate, ci95=m.get("perf/examples_per_sec_ci95") if finished else None,
               eval_accuracy=m.get("eval/accuracy"),
               time_to_first_step=m.get("perf/time_to_first_step_s"),
               job_num=_int(t.get("distexp.job_num")),
               overrides=t.get("distexp.overrides", ""), diverged=diverged,
               mfu=m.get("perf/mfu") if finished else None,
               peak_source=t.get("distexp.peak_source"),
               rates=[rate] if rate is not None and rate > 0 else [], run_ids=[run.info.run_id])


def aggregate(rows: Sequence[Row]) -> List[Row]:
    """One row per job config for the measured runs (median over repeats); every other run
    (failed, killed, diverged, no throughput) stays a row of its own."""
    groups: Dict[tuple, List[Row]] = {}
    out: List[Row] = []
    for r in rows:
        if r.measured:
            groups.setdefault(r.key, []).append(r)
        else:
            out.append(r)
    for rs in groups.values():
        rs.sort(key=lambda r: r.job_num if r.job_num is not None else 0)
        first = rs[0]
        if len(rs) == 1:
            out.append(first)
            continue
        med = lambda vals: stats.median(vals) if vals else None  # noqa: E731
        agg = Row(**{**first.__dict__,
                     "rate": stats.median([r.rate for r in rs]), "ci95": None,
                     "eval_accuracy": med([r.eval_accuracy for r in rs if r.eval_accuracy is not None]),
                     "time_to_first_step": med([r.time_to_first_step for r in rs
                                                if r.time_to_first_step is not None]),
                     "mfu": med([r.mfu for r in rs if r.mfu is not None]),
                     "rates": [r.rate for r in rs], "run_ids": [r.run_id for r in rs]})
        out.append(agg)
    return out


def add_scaling(rows: Sequence[Row]) -> None:
    """Fill speed-up, its interval and verdict, efficiency and the baseline's description."""
    singles = [r for r in rows if r.measured and r.replicas == 1]
    for r in rows:
        if not r.measured:
            what = ("diverged" if r.diverged else r.status.lower() if r.status != "FINISHED"
                    else "no throughput")
            r.baseline = f"n/a ({what})"
            continue
        mode, cands = None, []
        for mode, same in (("weak", lambda b: b.per_replica == r.per_replica),
                           ("strong", lambda b: b.global_batch == r.global_batch)):
            cands = [b for b in singles if b.base_key == r.base_key and same(b)]
            if cands:
                break
        if not cands:
            r.baseline = NO_BASELINE
            continue
        one = [b for b in cands if b.strategy == "one_device"]
        cands = one or cands
        base_rates = [x for b in cands for x in b.rates]
        base = stats.median(base_rates)
        r.speedup = r.rate / base
        r.efficiency = r.speedup / r.replicas
        who = "one_device" if one else "/".join(sorted({b.strategy for b in cands}))
        pooled = f", {len(cands)} configs pooled" if len(cands) > 1 else ""
        r.baseline = f"{who} r1 ({mode}{pooled})"
        is_base = any(r is b for b in cands)
        if r.replicas == 1 and not is_base:  # the same work on one device: no scaling figure
            r.baseline += " [1 replica: overhead vs one_device, not scaling]"
            r.efficiency = None
        if is_base:
            r.speedup_low = r.speedup_high = None
            r.verdict = "baseline"
            continue
        between = stats.ratio_interval(r.rates, base_rates)
        if between is not None:
            r.speedup_low, r.speedup_high, _ = between
            r.significant = r.speedup_low > 1 or r.speedup_high < 1
            r.verdict = "significant" if r.significant else "~"
            if not r.significant:
                r.repeats_needed = stats.repeats_needed(r.rates, base_rates)
            continue
        r.verdict = WITHIN_RUN  # one run on a side: no between-run spread, no significance
        base_cis = [b.ci95 for b in cands]
        if len(r.rates) == 1 and r.ci95 is not None and len(base_rates) == len(cands) and \
                all(c is not None for c in base_cis):
            base_mean = sum(base_rates) / len(base_rates)
            base_ci = math.sqrt(sum(c * c for c in base_cis)) / len(cands)
            r.speedup_ci95 = r.speedup * math.hypot(r.ci95 / r.rate, base_ci / base_mean)
            r.speedup_low = r.speedup - r.speedup_ci95
            r.speedup_high = r.speedup + r.speedup_ci95


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


def _speed(r: Row) -> str:
    if r.speedup is None:
        return NO_BASELINE if r.baseline == NO_BASELINE else "-"
    if r.verdict == "baseline":
        return "1.00x (baseline)"
    mark = "" if r.significant else "~ "  # benchstat's mark: no significant difference
    if r.verdict == WITHIN_RUN:
        spread = f" ± {r.speedup_ci95:.2f}" if r.speedup_ci95 is not None else ""
        return f"{mark}{r.speedup:.2f}x{spread} (within run)"
    return f"{mark}{r.speedup:.2f}x [{r.speedup_low:.2f}, {r.speedup_high:.2f}]"


def _verdict(r: Row) -> str:
    if r.verdict == "~":
        if r.repeats_needed is None:
            return "~ no difference visible (not resolvable in 1000 runs)"
        return f"~ not significant: ~{r.repeats_needed} runs each would resolve it"
    if r.verdict == WITHIN_RUN:
        return f"{WITHIN_RUN}: no significance (use repeats>=2)"
    return r.verdict or "-"


def _rate(r: Row) -> str:
    if r.rate is None:
        return "-"
    if len(r.rates) > 1:
        return f"{r.rate:,.1f} ({min(r.rates):,.0f}-{max(r.rates):,.0f})"
    return f"{r.rate:,.1f}" + (f" ± {r.ci95:,.1f}" if r.ci95 is not None else "")


def _accuracy(r: Row) -> str:
    if r.eval_accuracy is not None and not meaning.accuracy_meaningful(r.dataset):
        return meaning.NOT_MEANINGFUL
    return _fmt(r.eval_accuracy, ".4f")


def table_rows(rows: Sequence[Row]) -> Tuple[List[str], List[List[str]]]:
    groups = {r.group for r in rows}
    head = (["model/dataset/loop"] if len(groups) > 1 else []) + [
        "strategy", "workers", "replicas", "global batch", "runs",
        "examples/s (median; range, or ±95% CI of 1 run)", "speed-up [95% CI]", "verdict",
        "efficiency", "baseline", "eval acc", "MFU", "first step (s)", "status"]
    body = []
    for r in rows:
        eff = f"{100 * r.efficiency:.0f}%" if r.efficiency is not None else (
            NO_BASELINE if r.baseline == NO_BASELINE else
            "n/a (1 replica)" if r.speedup is not None else "-")
        body.append(([f"{r.model}/{r.dataset}/{r.loop}"] if len(groups) > 1 else []) + [
            r.strategy, _fmt(r.workers, "d"), _fmt(r.replicas, "d"), _fmt(r.global_batch, "d"),
            str(len(r.rates) or 1), _rate(r), _speed(r), _verdict(r) if r.speedup is not None
            else "-", eff, r.baseline, _accuracy(r),
            "-" if r.mfu is None else f"{100 * r.mfu:.2f}%",
            _fmt(r.time_to_first_step, ".1f"), r.shown_status])
    return head, body


def markdown(rows: Sequence[Row], title: str) -> str:
    head, body = table_rows(rows)
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(b) + " |" for b in body]
    lines += ["", "examples/s: warm-up steps excluded; the median over a job's runs (`repeats`), "
              "with their range; a single run shows ± its 95 % interval over 10-step windows. "
              "speed-up = examples/s / the baseline's (the 1-replica runs of the same job; weak = "
              "same per-replica batch, strong = same global batch); efficiency = speed-up / "
              "replicas. [95% CI] from the variation between runs (Welch's t on log examples/s, "
              ">= 2 runs a side); \"~\" = not significantly different from the baseline (the "
              "interval contains 1), with the runs per job that would resolve the observed "
              "difference at 80 % power; \"within run\" = one run a side: the interval only sees "
              "noise inside that run, not between runs, and no significance is claimed. "
              "See README, \"The scaling report\"."]
    one_rep = [r for r in rows if r.replicas == 1 and r.significant and (r.speedup or 0) > 1]
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
    sources = sorted({meaning.peak_source(r.peak_source) for r in rows if r.mfu is not None})
    if sources:
        lines += ["", "MFU = model FLOPs/example x examples/s / peak FLOP/s; peak: "
                  + "; ".join(sources) + "."]
    failed = [r for r in rows if r.diverged or r.status in ("FAILED", "KILLED")]
    if failed:
        lines += ["", f"{len(failed)} run(s) failed or diverged: listed with no throughput and "
                  "never used as a baseline."]
    lines.append("")
    return "\n".join(lines)


CSV_FIELDS = ["run_id", "run_name", "job_num", "status", "model", "dataset", "loop", "strategy",
              "workers", "replicas", "global_batch", "runs", "run_ids", "examples_per_sec",
              "examples_per_sec_runs", "examples_per_sec_ci95", "speedup", "speedup_low",
              "speedup_high", "significant", "verdict", "repeats_needed", "speedup_ci95",
              "efficiency", "baseline", "eval_accuracy", "accuracy_meaningful", "mfu",
              "peak_source", "time_to_first_step_s"]


def write_csv(rows: Sequence[Row], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            w.writerow([r.run_id, r.run_name, r.job_num, r.shown_status, r.model, r.dataset,
                        r.loop, r.strategy, r.workers, r.replicas, r.global_batch,
                        len(r.run_ids), " ".join(r.run_ids), r.rate,
                        " ".join(f"{x:.6g}" for x in r.rates), r.ci95, r.speedup, r.speedup_low,
                        r.speedup_high, r.significant, r.verdict, r.repeats_needed,
                        r.speedup_ci95, r.efficiency, r.baseline, r.eval_accuracy,
                        meaning.accuracy_meaningful(r.dataset), r.mfu,
                        meaning.peak_source(r.peak_source) if r.mfu is not None else None,
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

    def figure(name, ylabel, value, band, ideal=None, hollow=lambda r: False, note=""):
        """One line per strategy; error bars = band(r) -> (low, high) or None; hollow markers
        for the points `hollow` picks (not significant)."""
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
        drawn = False
        for key, rs in sorted(series.items()):
            pts = sorted((r for r in rs if value(r) is not None), key=lambda r: r.replicas or 0)
            if not pts:
                continue
            xs, ys = [r.replicas for r in pts], [value(r) for r in pts]
            bands = [band(r) for r in pts]
            yerr = None
            if any(b is not None for b in bands):
                yerr = [[y - b[0] if b else 0 for y, b in zip(ys, bands)],
                        [b[1] - y if b else 0 for y, b in zip(ys, bands)]]
            line = ax.errorbar(xs, ys, yerr=yerr, marker="o", capsize=3, label=label(key))
            open_pts = [(x, y) for x, y, r in zip(xs, ys, pts) if hollow(r)]
            if open_pts:
                color = line.lines[0].get_color()
                ax.scatter(*zip(*open_pts), s=60, facecolors="white", edgecolors=color, zorder=3)
            drawn = True
        if ideal is not None and drawn:
            ax.axhline(ideal, color="grey", linestyle="--", linewidth=1, label="ideal")
        if not drawn:
            ax.text(0.5, 0.5, NO_BASELINE if name == "efficiency" else "no measured run",
                    ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("replicas")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}: {ylabel}{note}", fontsize=10)
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

    def rate_band(r):  # the runs' range with repeats, the within-run 95 % interval with one
        if len(r.rates) > 1:
            return (min(r.rates), max(r.rates))
        return None if r.ci95 is None else (r.rate - r.ci95, r.rate + r.ci95)

    def eff_band(r):
        if r.speedup_low is None or r.speedup_high is None:
            return None
        return (100 * r.speedup_low / r.replicas, 100 * r.speedup_high / r.replicas)

    figure("throughput", "examples/s", lambda r: r.rate, rate_band)
    figure("efficiency", "scaling efficiency (%)",
           lambda r: None if r.efficiency is None else 100 * r.efficiency, eff_band,
           ideal=100.0, hollow=lambda r: r.verdict not in ("significant", "baseline"),
           note="\n(bars: speed-up's 95 % interval; open marker: not significant)")

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
    rows = aggregate([row_from_run(r) for r in runs])
    for r in rows:  # a job's first run stands for its repeats in the loss plot
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
