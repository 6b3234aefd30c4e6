"""The MLflow UI's view of a sweep (one home: `python -m distexp.ui`, a job's and a sweep's end):
the command that opens it, the shared table view, and the URL.

    http://HOST:PORT/#/experiments/<id>/runs?workflowType=machine_learning&viewStateShareKey=<key>

- ``workflowType=machine_learning`` opens MLflow 3's "Model training" runs table instead of the
  GenAI overview (docs/facts.md#mlflow-ui).
- ``viewStateShareKey=<key>`` is MLflow's own shared table view (3.15+): the UI reads the
  experiment tag ``mlflow.sharedViewState.<key>`` and applies its search facets (filter, sort) and
  UI state (visible columns, their order and widths, the runs grouped by set-up). The tag's value
  is the envelope the UI bundle parses (`{"name", "createdAt", "updatedAt", "state"}` with `state`
  a JSON string; read from `server/js/build/static/js/*.chunk.js` of 3.17.2 and 3.18.0, the same
  in both; the group-by state and its group ids from 3.17.2's); `view_state` holds keys that
  bundle picks (its search facets and UI state; tests/ui/test_ui.py checks both against the
  installed bundle). Nothing here is a private API of the Python package: it is one experiment
  tag, written with the public client.

No TensorFlow, no Hydra; MLflow only through the client a caller passes or `sweep_view` opens.
"""
from __future__ import annotations

import json
import time
from typing import List, Optional, Sequence

from distexp.tracking import lookup
from distexp.tracking import tags as tag
from distexp.tracking.store import redact

# The equal-work speed-up of a job's set-up (distexp.sweeps.publish logs it on each of its runs):
# a metric, so that the set-up's grouped row shows it (MLflow aggregates metrics, not tags).
SPEEDUP_METRIC = "scaling/speedup_equal_work"
# The set-up's own throughput (the report's row: the median of its measured runs), logged on its
# measured runs only, so that the grouped row's rate is the figure its speed-up is a ratio of.
SETUP_RATE_METRIC = "scaling/examples_per_sec_setup"
RATE_METRIC = f"metrics.`{SETUP_RATE_METRIC}`"
# The set-up's eval figure (the task's, accuracy by default): the median of its measured runs.
SETUP_ACCURACY_METRIC = "scaling/eval_accuracy_setup"
# Columns, in this order: the grouped rows' aggregates first (metrics), then the display tags a
# job's run carries (distexp.tracking.display, summary): its figures as rounded text.
COLUMNS = [f"metrics.`{SPEEDUP_METRIC}`", RATE_METRIC, f"metrics.`{SETUP_ACCURACY_METRIC}`",
           *(f"tags.`{t}`" for t in (tag.SPEED_UP, tag.EXAMPLES_PER_SEC, tag.ACCURACY))]
NAME_COLUMN = "attributes.`Run Name`"  # the group's name ("Group: one_device x1 batch 128") too
# MLflow's "Created" column, pinned beside the name in every view (150 px); its width only
DATE_COLUMN = "runDateAndNestInfo"
# Pixels, so that at 1600 px with MLflow's Assistant panel open (400 px: MLflow 3.17 opens it on
# a local server's first load, docs/tracking-and-ui.md) a set-up's name and answer read whole
# and its speed-up, examples/s and accuracy are in view, left of the panel (~1160 px;
# tests/ui/test_ui_slow.py).
WIDTHS = {NAME_COLUMN: 460, DATE_COLUMN: 100, COLUMNS[0]: 100, RATE_METRIC: 95, COLUMNS[2]: 95,
          f"tags.`{tag.SPEED_UP}`": 190, f"tags.`{tag.EXAMPLES_PER_SEC}`": 170}
# The runs in the order of their place among their set-up's runs (distexp.sweeps.publish.ranks:
# the first run of every set-up, then the second of every set-up, ...): MLflow's UI loads 100
# runs a page ("Load more" the next) and groups the runs it has loaded, so sorted by name a sweep
# of 300 runs showed its first set-up's runs only. Runs without the tag (the parent, a sweep not
# yet summarised) come after them (MLflow sorts a missing tag last).
SORT = f"tags.`{tag.SETUP_RANK}`"
GROUP = "tag." + tag.SETUP      # MLflow's id of the group of runs without a set-up tag
TAG_MAX = 5000                  # MLflow's limit on an experiment tag's value


def command(uri: Optional[str] = None, sweep_id: Optional[str] = None) -> str:
    """The command a job or sweep prints at its end."""
    cmd = "python -m distexp.ui"
    if uri and uri != lookup.default_uri():
        cmd += f" --tracking-uri {redact(uri)}"
    return cmd + (f" --sweep-id {sweep_id}" if sweep_id else "")


def view_key(sweep_id: str) -> str:
    return f"distexp-sweep-{sweep_id}"


def view_state(sweep_id: str, parent_run_id: Optional[str], setups: Sequence[str] = ()) -> dict:
    """The shared view of one sweep: its runs only, grouped by set-up (tag set-up: one row per
    set-up, its runs' average of each metric; `setups` start collapsed, a click shows the runs),
    the figures as columns, the runs listed round by round (SORT: each page of MLflow's holds
    every set-up). Runs without a set-up (the sweep's parent, and every job of a sweep still
    running or summarised before set-ups were tagged) are one group, open."""
    return {
        "searchFilter": f"tags.`{tag.SWEEP_ID}` = '{sweep_id}'",
        "orderByKey": SORT,
        "orderByAsc": True,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": COLUMNS,
        "columnOrder": [*COLUMNS, NAME_COLUMN, DATE_COLUMN],
        "columnWidths": WIDTHS,
        "groupBy": {"aggregateFunction": "average",
                    "groupByKeys": [{"mode": "tag", "groupByData": tag.SETUP}]},
        "groupsExpanded": {GROUP: True, **{f"{GROUP}.{s}": False for s in setups}},
        "runsExpanded": {parent_run_id: True} if parent_run_id else {},
        "runsHiddenMode": "SHOW_ALL",  # charts draw every job, not the first 10
        "viewMaximized": False,
        "runListHidden": False,
        "hideEmptyCharts": True,
    }


def sweep_setups(client, experiment_id: str, sweep_id: str) -> List[str]:
    """The set-ups the sweep's runs are tagged with (distexp.sweeps.publish), sorted."""
    runs = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_ID}` = '{sweep_id}'",
                              max_results=5000)
    return sorted({r.data.tags[tag.SETUP] for r in runs if r.data.tags.get(tag.SETUP)})


def publish_view(client, experiment_id: str, sweep_id: str, parent_run_id: Optional[str]) -> str:
    """Write the sweep's shared view as an experiment tag; return its key."""
    key = view_key(sweep_id)
    now = int(time.time() * 1000)
    setups = sweep_setups(client, experiment_id, sweep_id)
    for names in (setups, []):  # too many set-ups to list under the tag's limit: groups open
        envelope = json.dumps({"name": f"distexp sweep {sweep_id}", "createdAt": now,
                               "updatedAt": now,
                               "state": json.dumps(view_state(sweep_id, parent_run_id, names))})
        if len(envelope) <= TAG_MAX:
            break
    client.set_experiment_tag(experiment_id, tag.SHARED_VIEW + key, envelope)
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
