"""The MLflow UI's view of a sweep (one home: `python -m distexp.ui`, a job's and a sweep's end):
the command that opens it, the shared table view, and the URL.

    http://HOST:PORT/#/experiments/<id>/runs?workflowType=machine_learning&viewStateShareKey=<key>

- ``workflowType=machine_learning`` opens MLflow 3's "Model training" runs table instead of the
  GenAI overview (docs/facts.md#mlflow-ui).
- ``viewStateShareKey=<key>`` is MLflow's own shared table view (3.15+): the UI reads the
  experiment tag ``mlflow.sharedViewState.<key>`` and applies its search facets (filter, sort) and
  UI state (visible columns, expanded parent runs). The tag's value is the envelope the UI
  bundle parses (`{"name", "createdAt", "updatedAt", "state"}` with `state` a JSON string; read
  from `server/js/build/static/js/*.chunk.js` of 3.17.2 and 3.18.0, the same in both);
  `view_state` holds keys that bundle picks (its search facets and UI state; tests/test_ui.py
  checks both against the installed bundle). Nothing here is a private
  API of the Python package: it is one experiment tag, written with the public client.

No TensorFlow, no Hydra; MLflow only through the client a caller passes or `sweep_view` opens.
"""
from __future__ import annotations

import json
import os
import time
from typing import Optional

from distexp.tracking import lookup
from distexp.tracking import tags as tag
from distexp.tracking.store import redact

# Display tags a job's run carries (distexp.tracking.display): what the table shows, rounded.
COLUMNS = ["params.`strategy.name`", "params.`num_replicas`", "params.`global_batch_size`",
           *(f"tags.`{t}`" for t in (tag.EXAMPLES_PER_SEC, tag.ACCURACY, tag.SPEED_UP))]
SORT = "tags.`mlflow.runName`"  # in a sweep a run's name starts with what varies (docs/sweeps.md)


def default_uri() -> str:
    return f"sqlite:///{os.getcwd()}/outputs/mlflow.db"


def command(uri: Optional[str] = None, sweep_id: Optional[str] = None) -> str:
    """The command a job or sweep prints at its end."""
    cmd = "python -m distexp.ui"
    if uri and uri != default_uri():
        cmd += f" --tracking-uri {redact(uri)}"
    return cmd + (f" --sweep-id {sweep_id}" if sweep_id else "")


def view_key(sweep_id: str) -> str:
    return f"distexp-sweep-{sweep_id}"


def view_state(sweep_id: str, parent_run_id: Optional[str]) -> dict:
    """The shared view of one sweep: its runs only, sorted by name, the figures as columns, the
    parent expanded so that its jobs are rows at once."""
    return {
        "searchFilter": f"tags.`{tag.SWEEP_ID}` = '{sweep_id}'",
        "orderByKey": SORT,
        "orderByAsc": True,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": COLUMNS,
        "runsExpanded": {parent_run_id: True} if parent_run_id else {},
        "runsHiddenMode": "SHOW_ALL",  # charts draw every job, not the first 10
        "viewMaximized": False,
        "runListHidden": False,
        "hideEmptyCharts": True,
    }


def publish_view(client, experiment_id: str, sweep_id: str, parent_run_id: Optional[str]) -> str:
    """Write the sweep's shared view as an experiment tag; return its key."""
    key = view_key(sweep_id)
    now = int(time.time() * 1000)
    envelope = {"name": f"distexp sweep {sweep_id}", "createdAt": now, "updatedAt": now,
                "state": json.dumps(view_state(sweep_id, parent_run_id))}
    client.set_experiment_tag(experiment_id, tag.SHARED_VIEW + key, json.dumps(envelope))
    return key


def url(base: str, experiment_id: str, key: Optional[str]) -> str:
    q = "workflowType=machine_learning" + (f"&viewStateShareKey={key}" if key else "")
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{q}"


class NoView(lookup.LookupFailed):
    """One line for the user, exit 2."""


def sweep_view(uri: str, experiment: Optional[str], sweep_id: Optional[str]):
    """(experiment id, view key or None, sweep id or None) of the latest sweep (or `sweep_id`)
    in `experiment` (default: wherever the latest sweep is)."""
    client = lookup.open_store(uri, "a job first (python -m distexp)")
    ids = lookup.experiment_ids(client, experiment or None)
    if not ids:
        raise NoView(f"--tracking-uri: the store at {redact(uri)} has no experiment; run a job first")
    parent = lookup.latest_sweep(client, ids, sweep_id)
    if parent is None:
        if sweep_id:
            raise NoView(f"--sweep-id: received {sweep_id!r}; no such sweep in the store (a "
                         "sweep prints its id when it starts)")
        latest = client.search_runs(ids, "", order_by=["attributes.start_time DESC"], max_results=1)
        return (latest[0].info.experiment_id if latest else ids[0]), None, None
    sid = parent.data.tags[tag.SWEEP_ID]
    key = publish_view(client, parent.info.experiment_id, sid, parent.info.run_id)
    return parent.info.experiment_id, key, sid
