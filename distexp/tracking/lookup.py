"""Finding what a job or sweep left in a store, for the report and the UI (one home): the store
itself (a SQLite file that is missing or not a database is one line, checked before MLflow opens
it and leaves a lock file), an experiment by name, and the latest sweep's parent run."""
from __future__ import annotations

from typing import List, Optional

from distexp.tracking import tags as tag
from distexp.tracking.store import client as make_client, not_a_database, sqlite_path


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


def latest_sweep(client, ids: List[str], sweep_id: Optional[str] = None):
    """The parent run of the latest sweep in experiments `ids` (or of sweep `sweep_id`); None."""
    query = f"tags.`{tag.RUN_KIND}` = 'sweep'"
    if sweep_id:
        query += f" and tags.`{tag.SWEEP_ID}` = '{sweep_id}'"
    found = client.search_runs(ids, query, order_by=["attributes.start_time DESC"], max_results=1)
    return found[0] if found else None


def jobs_of(parent) -> str:
    """The search filter of a sweep's job runs."""
    return f"tags.`{tag.SWEEP_ID}` = '{parent.data.tags[tag.SWEEP_ID]}' and tags.`{tag.RUN_KIND}` = 'job'"
