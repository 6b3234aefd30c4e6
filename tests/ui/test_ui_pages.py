"""The sweep's view on MLflow's pages of runs: a continued sweep of 3 set-ups and 330 runs (more
than MLflow's UI loads at once, 100) opens with every set-up, in Debian's Chromium. The store is
written by hand (no TensorFlow); the server and the page are real. Tier: slow (a browser)."""
from __future__ import annotations

import time

import pytest

from helpers.browser import chromium_page, close_assistant, need_chromium
from helpers.servers import free_port
from helpers.store import job_params, new_store, perf_metrics, store_run

pytestmark = [pytest.mark.slow, pytest.mark.extended]

SETUPS = [("one_device", 1, 64, ""), ("mirrored", 2, 128, ""),
          ("one_device", 1, 128, " global_batch_size=128")]


def test_the_view_opens_on_every_set_up_of_a_330_run_sweep(tmp_path):
    """Sorted by run name (the view before the set-up ranks) the first 100 runs were mirrored's
    only: one group, "100 matching runs", the baseline and the control gone. Sorted by
    distexp.setup_rank: the three set-ups, each with its figures (its first run, rank 000000)."""
    need_chromium()
    from distexp import tracking
    from distexp.sweeps.publish import summarise
    from distexp.tracking import tags as tag
    from distexp.tracking import view
    from distexp.ui import serve, stop

    client, uri = new_store(tmp_path / "outputs")
    exp = client.create_experiment("distexp", artifact_location=(tmp_path / "art").as_uri())
    (tmp_path / "sweep").mkdir()
    pid = client.create_run(exp, run_name="sweep-s1", tags={
        tag.SWEEP_ID: "s1", tag.RUN_KIND: "sweep", tag.SWEEP_DIR: str(tmp_path / "sweep")}).info.run_id
    num = 0
    for r in range(110):
        for i, (strategy, replicas, batch, extra) in enumerate(SETUPS):
            store_run(client, exp, f"{strategy}-r{replicas}-cnn-digits", "FINISHED",
                      job_params(strategy, replicas, batch),
                      perf_metrics(1000.0 * replicas * (1 + 0.01 * (r % 7)), 10.0),
                      {tag.SWEEP_ID: "s1", tag.RUN_KIND: "job", tag.PARENT_RUN: pid,
                       tag.JOB_NUM: str(num), tag.REPEAT: str(r), tag.SETUP_INDEX: str(i),
                       tag.SETUP_KEY: f"key{i}", tag.OVERRIDES: f"strategy={strategy}{extra} repeat={r}"})
            num += 1
    summarise(tracking.JobRun.reopen(uri, pid), "s1", uri, "distexp")
    state = view.view_state("s1", pid)
    page = client.search_runs([exp], state["searchFilter"], max_results=100,
                              order_by=[f"{state['orderByKey']} ASC"])
    assert {r.data.tags.get(tag.SETUP_KEY) for r in page} == {"key0", "key1", "key2"}
    port = free_port()
    server = serve(uri, "127.0.0.1", port, tmp_path / "server.log")
    try:
        _wait(f"http://127.0.0.1:{port}/health")
        with chromium_page(1600, 1000) as p:
            p.goto(view.url(f"http://127.0.0.1:{port}", exp, view.view_key("s1")))
            p.get_by_text("Group: ").first.wait_for(timeout=120_000)
            p.wait_for_timeout(2000)
            close_assistant(p)
            rows = [next(c for c in t.split("\n") if c.startswith("Group: "))
                    for t in p.locator("[role=row]").all_inner_texts() if "Group: " in t]
            assert sorted(rows) == ["Group: mirrored x2 batch 128",
                                                  "Group: one_device x1 batch 128",
                                                  "Group: one_device x1 batch 64"], rows
            assert p.get_by_role("button", name="Load more").is_visible()  # the other 230 runs
            p.screenshot(path=str(tmp_path / "ui.png"))
    finally:
        stop(server)


def _wait(health: str) -> None:
    import urllib.request

    end = time.time() + 180
    while time.time() < end:
        try:
            with urllib.request.urlopen(health, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the MLflow server did not answer")
