"""Finding what a job or sweep left in a store (one home), for the report, the UI, a resumed sweep
and the Slurm launcher: the store itself (a SQLite file that is missing or not a database is one
line, checked before MLflow opens it and leaves a lock file), an experiment by name, a sweep's
parent run (the latest, or by id) and its job runs."""
from __future__ import annotations

import os
from typing import List, Optional

from distexp.tracking import tags as tag
from distexp.tracking.store import client as make_client
from distexp.tracking.store import not_a_database, sqlite_path


def default_uri() -> str:
    """Where a job run from the working directory writes by default (the schema's tracking.uri,
    tests/config/test_configs.py): the report's, the UI's and the view's store when neither
    --tracking-uri nor $MLFLOW_TRACKING_URI says."""
    return f"sqlite:///{os.getcwd()}/outputs/mlflow.db"


class LookupFailed(Exception):
    """One line for the user (the report and the UI exit 2 with it)."""


def open_store(uri: str, first: str):
    """The client of the store at `uri`. `first`: what to run to create one ("a sweep first
    (python -m distexp -m ...)"), said when there is none."""
    if uri.startswith("sqlite:///"):
        path = sqlite_path(uri)
        if not path.exists():
            raise LookupFailed(f"--tracking-uri: no MLflow store at {path}; run {first} or pass "
                               "--tracking-uri URI")
        bad = not_a_database(path)
        if bad:
            raise LookupFailed(f"--tracking-uri: received {uri!r}; {bad}; valid: the MLflow store "
                               "a sweep wrote (default outputs/mlflow.db where it ran), or a "
                               "tracking server's URL")
    return make_client(uri)


def experiment_ids(client, experiment: Optional[str]) -> List[str]:
    """[the id of `experiment`], or every experiment's id when it is None."""
    if experiment is None:
        return [e.experiment_id for e in client.search_experiments()]
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = ", ".join(e.name for e in client.search_experiments()) or "(none)"
        raise LookupFailed(f"--experiment: received {experiment!r}; experiments in the store: "
                           f"{names}")
    return [exp.experiment_id]


def _runs(kind: str, sweep_id: Optional[str] = None) -> str:
    """The search filter of a sweep's parent (`kind` "sweep") or job runs (`kind` "job")."""
    query = f"tags.`{tag.RUN_KIND}` = '{kind}'"
    return f"tags.`{tag.SWEEP_ID}` = '{sweep_id}' and {query}" if sweep_id else query


def latest_sweep(client, ids: List[str], sweep_id: Optional[str] = None):
    """The parent run of sweep `sweep_id`, else of the latest sweep in experiments `ids` that
    has job runs (a sweep stopped before its first job is not "the latest sweep"); None."""
    found = client.search_runs(ids, _runs("sweep", sweep_id), order_by=["attributes.start_time DESC"],
                               max_results=1 if sweep_id else 50)
    if sweep_id:
        return found[0] if found else None
    return next((p for p in found if client.search_runs(ids, jobs_of(p), max_results=1)), None)


def sweep_parent(client, experiment_id: str, sweep_id: str):
    """Sweep `sweep_id`'s parent run in the experiment (its first: a resume reopens it), or None."""
    found = client.search_runs([experiment_id], _runs("sweep", sweep_id),
                               order_by=["attributes.start_time ASC"], max_results=1)
    return found[0] if found else None


def sweep_jobs(client, experiment_id: str, sweep_id: str, status: Optional[str] = None):
    """Sweep `sweep_id`'s job runs in the order they started (only those with `status`, if given)."""
    query = _runs("job", sweep_id) + (f" and attributes.status = '{status}'" if status else "")
    return client.search_runs([experiment_id], query, order_by=["attributes.start_time ASC"],
                              max_results=50000)


def jobs_of(parent) -> str:
    """The search filter of a sweep's job runs."""
    return _runs("job", parent.data.tags[tag.SWEEP_ID])
