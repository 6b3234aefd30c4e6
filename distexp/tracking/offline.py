"""What a job could not send to MLflow, and the command that sends it later.

When the server dies during a job, the job process appends every later metric, param, artifact and
the run's final status to ``<job_dir>/mlflow-offline.jsonl`` (``Offline``). Once the server is
back, ``python -m distexp.tracking import <job_dir>`` (``main`` / ``import_dir``) replays the file
into the run, in order, and renames it ``*.imported``.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Optional

from distexp.tracking.redaction import redact
from distexp.tracking.sink import Kind
from distexp.tracking.store import client, reason

OFFLINE_FILE = "mlflow-offline.jsonl"


class Offline:
    """Appends records for run `run_id` to `<job_dir>/mlflow-offline.jsonl`."""

    def __init__(self, job_dir: Path, run_id: str, uri: str):
        self.path = Path(job_dir) / OFFLINE_FILE
        self.run_id, self.uri = run_id, uri

    def note(self, ex: BaseException) -> None:
        self.append({"kind": Kind.OFFLINE, "uri": redact(self.uri), "reason": reason(ex),
                     "time": time.time()})

    def append(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"run_id": self.run_id, **record}) + "\n")


def _records(path: Path) -> list:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def offline_summary(job_dir: Path) -> Optional[dict]:
    """What a job's offline file holds (None if there is none): counts and the first reason."""
    path = Path(job_dir) / OFFLINE_FILE
    if not path.exists():
        return None
    records = _records(path)
    return {"path": path, "reason": next((r["reason"] for r in records if r["kind"] == Kind.OFFLINE), ""),
            "metrics": sum(len(r["metrics"]) for r in records if r["kind"] == Kind.METRICS),
            "artifacts": sum(r["kind"] == Kind.ARTIFACT for r in records),
            "status": next((r["status"] for r in records if r["kind"] == Kind.END), None)}


def import_dir(job_dir: Path, uri: Optional[str] = None) -> dict:
    """Replay `job_dir`'s offline file into its MLflow run; rename it to *.imported when done."""
    from mlflow.entities import Metric, Param

    path = Path(job_dir) / OFFLINE_FILE
    records = _records(path)
    stored = next((r["uri"] for r in records if r["kind"] == Kind.OFFLINE), None)
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or stored
    if not uri or "***@" in uri:
        raise SystemExit("the offline file does not hold the tracking URI's credentials: pass "
                         "--uri <tracking URI> (or set MLFLOW_TRACKING_URI)")
    mlflow_client = client(uri)
    counts = {"metrics": 0, "params": 0, "artifacts": 0, "status": None}
    for r in records:
        run_id, kind = r["run_id"], r["kind"]
        if kind == Kind.METRICS:
            ms = [Metric(k, v, ts, step) for k, v, ts, step in r["metrics"]]
            mlflow_client.log_batch(run_id, metrics=ms)
            counts["metrics"] += len(ms)
        elif kind == Kind.PARAMS:
            mlflow_client.log_batch(run_id, params=[Param(k, v) for k, v in r["params"].items()])
            counts["params"] += len(r["params"])
        elif kind == Kind.ARTIFACT:
            mlflow_client.log_artifact(run_id, r["path"], r["artifact_path"])
            counts["artifacts"] += 1
        elif kind == Kind.TAG:
            mlflow_client.set_tag(run_id, r["key"], r["value"])
        elif kind == Kind.END:
            mlflow_client.set_terminated(run_id, status=r["status"])
            counts["status"] = r["status"]
    path.rename(path.with_name(path.name + ".imported"))
    return counts


def import_command(job_dir: Path, uri: str) -> str:
    cmd = f"python -m distexp.tracking import {job_dir}"
    return cmd if redact(uri) == uri else cmd + " --uri <tracking URI with credentials>"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distexp.tracking",
                                description="Replay what a job could not send to MLflow.")
    sub = p.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help=f"replay <job_dir>/{OFFLINE_FILE} into its run")
    imp.add_argument("job_dirs", nargs="+", type=Path)
    imp.add_argument("--uri", help="tracking URI (default: the job's, without credentials)")
    args = p.parse_args(argv)
    for d in args.job_dirs:
        c = import_dir(d, args.uri)
        print(f"{d}: imported {c['metrics']} metric values, {c['params']} params, "
              f"{c['artifacts']} artifacts; run status {c['status'] or 'unchanged'}")
    return 0
