"""The MLflow UI at first sight (distexp.ui), the quiet console, and the report's table, in this
process: the console filter, the display tags, the verdict line, the sweep's summary and run
names. Tier: unit. The UI's process and --help: tests/ui/test_ui_integration.py; the sweep opened in
Chromium: tests/ui/test_ui_slow.py."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("port", ["99999", "abc", "0"])
def test_ui_port_is_checked_in_one_line(port, capsys):
    """An out-of-range or non-numeric --port is one line (not an OverflowError traceback)."""
    from distexp import ui

    with pytest.raises(SystemExit) as ex:
        ui.main(["--port", port])
    err = capsys.readouterr().err
    assert ex.value.code == 2 and err == (f"distexp.ui: error: --port: received '{port}'; valid: a "
                                          "port number, 1 to 65535 (default 5000)\n")


def test_console_drops_the_tf_banner_and_says_known_errors_in_words():
    from distexp.job.launch import console_line

    said: set = set()
    banner = ["WARNING: All log messages before absl::InitializeLog() is called are written to "
              "STDERR\n",
              "I0000 00:00:1795455714.352199   21500 port.cc:153] oneDNN custom operations are "
              "on. You may see slightly different numerical results\n"]
    assert [console_line(x, said) for x in banner * 2] == [None] * 4
    e = "E0000 00:00:17.1 21500 mkl_util.h:1] oneDNN supports DT_BOOL only on platforms with AVX\n"
    first = console_line(e, said)
    assert first.startswith("TensorFlow: a boolean op") and "E0000" in first  # named, in words
    assert not first.startswith("E0000") and console_line(e, said) is None  # once
    assert console_line("distexp: detail: FLOPs: ValueError: x\n", said) is None
    assert console_line("epoch 1/1  loss 2.2\n", said) == "epoch 1/1  loss 2.2\n"


def test_display_tags_round_and_describe():
    from distexp.tracking.display import job_tags

    params = {"strategy.name": "mirrored", "num_replicas": "2", "global_batch_size": "128",
              "model.name": "cnn", "dataset.name": "digits", "loop.name": "custom"}
    tags = job_tags({"perf/examples_per_sec": 20586.4, "perf/examples_per_sec_ci95": 712.2,
                     "eval/accuracy": 0.913888888}, params)
    assert tags == {"mlflow.note.content": "mirrored, 2 replicas, global batch 128 (cnn on "
                                           "digits, custom loop)",
                    "examples/s": "20,586 [19,874, 21,299]", "accuracy": "0.914"}
    seq = job_tags({"eval/token_accuracy": 0.5}, {**params, "task.eval_metric":
                                                   "eval/token_accuracy", "num_replicas": "1"})
    assert seq["accuracy"] == "0.500 token_accuracy" and "examples/s" not in seq
    assert job_tags({"perf/examples_per_sec": 2563.4}, params)["examples/s"] == "2,563 (no CI)"
    assert seq["mlflow.note.content"].startswith("mirrored, 1 replica, ")


def test_verdict_line_names_each_strategy_best_speedup():
    from distexp.report.scaling import Comparison, Row
    from distexp.report.table import headline
    from distexp.sweeps.publish import clip, scaling_metrics

    def row(strategy, replicas, rate, speedup=None, verdict_="", low=None, high=None):
        main = Comparison(mode="weak", value=speedup, baseline="one_device r1 (weak)", base_rate=100.0,
                          is_base=verdict_ == "baseline", low=low, high=high, significance=verdict_)
        return Row(run_id=f"{strategy}{replicas}", run_name="", status="FINISHED",
                   strategy=strategy, model="cnn", dataset="digits", loop="custom", workers=1,
                   replicas=replicas, global_batch=64 * replicas, rate=rate, ci95=None,
                   eval_accuracy=0.9, time_to_first_step=1.0, main=main,
                   baseline="one_device r1 (weak)", rates=[rate])

    rows = [row("one_device", 1, 100.0, 1.0, "baseline"),
            row("mirrored", 2, 162.0, 1.62, "significant", 1.4, 1.85),
            row("central", 2, 90.0, 0.9, "~", 0.7, 1.1)]
    from distexp.report.conclusions import verdict_lines

    lines = verdict_lines(rows)  # the report's verdict (its content is tests/report/test_equal_work.py's)
    more = f" (+{len(lines) - 1} more in the report)" if len(lines) > 1 else ""
    assert lines and headline(rows) == f"Verdict: {lines[0]}{more}"
    assert "not measured" in headline(rows)  # no 1-replica job at global batch 128
    assert ("scaling/mirrored/speedup", 1.62, 2) in scaling_metrics(rows)
    assert ("scaling/one_device/examples_per_sec", 100.0, 1) in scaling_metrics(rows)
    assert len(clip("x" * 6000, 5000)) == 5000


def test_sweep_summary_puts_the_verdict_where_the_ui_shows_it(tmp_path):
    """distexp.sweeps.publish on a store written by hand: descriptions, each run's set-up and
    equal-work speed-up (tag and metric), the scaling metrics keyed by replicas, the report's
    images, the shared view grouped by those set-ups. No TensorFlow."""
    import json

    from mlflow.entities import Metric, Param

    from distexp import tracking
    from distexp.sweeps.publish import summarise

    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    (tmp_path / "sweep").mkdir()
    parent = tracking.JobRun(uri, "distexp", "sweep-s1", {
        "distexp.sweep_id": "s1", "distexp.run_kind": "sweep",
        "distexp.sweep_dir": str(tmp_path / "sweep")}, {"overrides": "x"})
    client = parent.client
    ids = {}
    # Uneven repeats, so that a mean, a first or a max would not give the medians' ratio.
    # mirrored x2 at batch 128 (1800, 1850, 2400: median 1850; and a diverged run, FINISHED, at
    # 300) over one_device at batch 64 (weak: 1850 / 1000 = 1.85, the bigger batch included) and
    # over the two 1-replica set-ups at global batch 128, pooled (1500, 1490, 1000 and 1600, 1650,
    # 1700: median 1550; equal work: 1850 / 1550 = 1.194); mirrored x2 at batch 256 has no
    # 1-replica run at its global batch: no speed-up.
    setups = [("one_device", 1, 64, "", [1000.0, 1010.0, 600.0]),
              ("mirrored", 2, 128, "", [1800.0, 1850.0, 2400.0, 300.0]),
              ("one_device", 1, 128, " global_batch_size=128", [1500.0, 1490.0, 1000.0]),
              ("one_device", 1, 128, " batch_size_per_replica=128", [1600.0, 1650.0, 1700.0]),
              ("mirrored", 2, 256, " batch_size_per_replica=128", [2600.0, 2500.0, 3500.0])]
    job = 0
    for strategy, replicas, batch, extra, rates in setups:
        for repeat, rate in enumerate(rates):
            run = client.create_run(parent.experiment_id, run_name=f"{strategy}-r{replicas}",
                                    tags={"distexp.sweep_id": "s1", "distexp.run_kind": "job",
                                          "distexp.job_num": str(job),
                                          "mlflow.parentRunId": parent.run_id,
                                          "distexp.overrides":
                                          f"strategy={strategy}{extra} repeat={repeat}"})
            job += 1
            rid = run.info.run_id
            ids.setdefault((strategy, batch, extra), []).append(rid)
            if rate == 300.0:
                client.set_tag(rid, "distexp.diverged", "true")
            client.log_batch(rid, params=[Param(k, str(v)) for k, v in {
                "strategy.name": strategy, "model.name": "cnn", "dataset.name": "digits",
                "loop.name": "custom", "num_replicas": replicas, "num_workers": 1,
                "global_batch_size": batch}.items()], metrics=[
                Metric(k, v, 1000, 1) for k, v in {"perf/examples_per_sec": rate,
                                                   "perf/examples_per_sec_ci95": rate * 0.02,
                                                   "eval/accuracy": 0.9}.items()])
            client.set_terminated(rid, "FINISHED")
    line = summarise(parent, "s1", uri, "distexp")
    assert line.startswith("Verdict: ") and "1.19x" in line, line
    got = client.get_run(parent.run_id).data
    assert got.tags["mlflow.note.content"].splitlines()[0] == line
    assert "| mirrored |" in got.tags["mlflow.note.content"]  # the report's table below it
    assert "set-up" not in got.tags  # the parent is no set-up: the view's open group
    exp = client.get_experiment(parent.experiment_id)
    assert exp.tags["mlflow.note.content"].startswith(line + "\n")
    runs = {k: [client.get_run(r).data for r in v] for k, v in ids.items()}
    assert {d.tags["set-up"] for k in runs for d in runs[k]} == {
        "one_device x1 batch 64", "mirrored x2 batch 128",
        "one_device x1 batch 128 [global_batch_size=128]",
        "one_device x1 batch 128 [batch_size_per_replica=128]", "mirrored x2 batch 256"}
    speedup, rate = "scaling/speedup_equal_work", "scaling/examples_per_sec_setup"
    mirrored = runs[("mirrored", 128, "")]
    for d in mirrored[:3]:  # the equal-work figure, not the batch-confounded 1.85x
        assert d.tags["speed-up"].startswith("1.19x ["), d.tags
    # the set-up's figures on its first run only: MLflow's group average is that figure exactly
    assert mirrored[0].metrics[speedup] == 1.194  # 1850 / 1550: the medians' ratio
    assert mirrored[0].metrics[rate] == 1850.0    # the set-up's own rate, that ratio's numerator
    assert mirrored[0].metrics["scaling/eval_accuracy_setup"] == 0.9
    assert all(speedup not in d.metrics and rate not in d.metrics for d in mirrored[1:3])
    diverged = mirrored[3]  # a figure of its own would move the grouped row's average
    assert speedup not in diverged.metrics and rate not in diverged.metrics
    for key, median in ((("one_device", 64, ""), 1000.0),
                        (("one_device", 128, " global_batch_size=128"), 1490.0),
                        (("one_device", 128, " batch_size_per_replica=128"), 1650.0)):
        assert [d.tags["speed-up"] for d in runs[key]] == ["1.00x baseline"] * 3
        # a pooled baseline is 1.0, as its tag says (not 1490 / 1550 or 1650 / 1550)
        assert [d.metrics.get(speedup) for d in runs[key]] == [1.0, None, None]
        assert [d.metrics.get(rate) for d in runs[key]] == [median, None, None]
    for d in runs[("mirrored", 256, " batch_size_per_replica=128")]:  # no control: no speed-up
        assert d.tags["speed-up"].startswith("not measured"), d.tags
        assert speedup not in d.metrics
    assert [d.metrics.get(rate) for d in runs[("mirrored", 256, " batch_size_per_replica=128")]] \
        == [2600.0, None, None]
    state = json.loads(json.loads(exp.tags["mlflow.sharedViewState.distexp-sweep-s1"])["state"])
    assert state["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "set-up"}]
    assert state["groupsExpanded"] == {
        "tag.set-up": True, **{f"tag.set-up.{d.tags['set-up']}": False for d in
                               (runs[k][0] for k in runs)}}
    hist = client.get_metric_history(parent.run_id, "scaling/mirrored/speedup")
    assert sorted((h.step, round(h.value, 6)) for h in hist) == [(2, 1.677419), (2, 1.85)]  # 2600 / 1550, 1850 / 1000
    assert [h.step for h in client.get_metric_history(
        parent.run_id, "scaling/one_device/examples_per_sec")] == [1, 1, 1]  # batch 64 and 128
    arts = {a.path for a in client.list_artifacts(parent.run_id, "report")}
    assert {"report/report.md", "report/throughput.png"} <= arts
    images = client.list_artifacts(parent.run_id, "images")
    assert images  # log_image's files: the run page's image grid


def test_set_ups_are_named_as_the_report_groups_runs_and_told_apart():
    """One name per job config (its repeats and failed runs share it); where two read the same
    ("one_device x1 batch 64" with cpu_replicas=1 and 2) the overrides that differ are added.
    Without a 1-replica run at its global batch an N-replica set-up's speed-up is not measured."""
    from distexp.report.scaling import Row, add_scaling, aggregate
    from distexp.report.wording import speed_tag
    from distexp.sweeps.publish import setups

    def run(strategy, replicas, cpu, rate, job, status="FINISHED"):
        return Row(run_id=f"id{job}", run_name="", status=status, strategy=strategy,
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=replicas,
                   global_batch=64 * replicas, rate=rate, ci95=None, eval_accuracy=0.9,
                   time_to_first_step=1.0, job_num=job, rates=[rate], run_ids=[f"id{job}"],
                   overrides=f"strategy={strategy} cpu_replicas={cpu} repeat={job // 4}")

    rows = aggregate([run("one_device", 1, 1, 1000.0, 0), run("one_device", 1, 2, 990.0, 1),
                      run("mirrored", 2, 2, 1600.0, 2), run("mirrored", 2, 2, 0.0, 3, "FAILED"),
                      run("one_device", 1, 1, 1010.0, 4), run("mirrored", 2, 2, 1650.0, 6)])
    add_scaling(rows)
    assert setups(rows) == {
        "id0": "one_device x1 batch 64 [cpu_replicas=1]", "id4": "one_device x1 batch 64 "
        "[cpu_replicas=1]", "id1": "one_device x1 batch 64 [cpu_replicas=2]",
        "id2": "mirrored x2 batch 128", "id3": "mirrored x2 batch 128",
        "id6": "mirrored x2 batch 128"}
    texts = {r.run_ids[0]: speed_tag(r) for r in rows}
    assert texts["id2"] == "not measured: no 1-replica run at global batch 128"
    assert texts["id3"] is None  # the failed run: no throughput
    assert texts["id0"] == texts["id1"] == "1.00x baseline"


def test_the_shared_view_groups_by_set_up_with_the_speed_up_in_view():
    """What the page shows: one row per set-up (tag set-up, MLflow's average of each metric),
    collapsed; the runs without a set-up (the parent) open; the equal-work speed-up the first
    column after the run's name and date, examples/s next, both within 1600 px (widths)."""
    from distexp.tracking import view

    state = view.view_state("s1", "p1", ["mirrored x2 batch 128", "one_device x1 batch 64"])
    assert state["groupBy"] == {"aggregateFunction": "average", "groupByKeys": [
        {"mode": "tag", "groupByData": "set-up"}]}
    assert state["groupsExpanded"] == {"tag.set-up": True,
                                       "tag.set-up.mirrored x2 batch 128": False,
                                       "tag.set-up.one_device x1 batch 64": False}
    assert state["selectedColumns"][:2] == ["metrics.`scaling/speedup_equal_work`",
                                            "metrics.`scaling/examples_per_sec_setup`"]
    assert state["columnOrder"][:2] == state["selectedColumns"][:2]
    assert set(state["columnOrder"]) == set(state["selectedColumns"]) | {view.NAME_COLUMN,
                                                                         view.DATE_COLUMN}
    assert state["selectedColumns"][2] == "metrics.`scaling/eval_accuracy_setup`"
    w = state["columnWidths"]
    # checkbox (73 px), name and date, then the three figures (speed-up, examples/s, accuracy),
    # from the table's left edge (222 px) to its right (1160 px with MLflow's Assistant panel
    # open at 1600 px; measured in Chromium, MLflow 3.17.2)
    assert 222 + 73 + w[view.NAME_COLUMN] + w[view.DATE_COLUMN] + \
        sum(w[c] for c in state["selectedColumns"][:3]) <= 1160
    assert w[view.NAME_COLUMN] >= 440  # "Group: mirrored x2: 0.96x [0.01, 112.22] not settled vs control"
    assert state["searchFilter"] == "tags.`distexp.sweep_id` = 's1'"
    assert view.view_state("s1", None)["groupsExpanded"] == {"tag.set-up": True}


def test_sweep_run_names_differ_where_the_ui_shows_them():
    """What the sweep varies comes first, and a swept value the name would not
    show (one_device's cpu_replicas) is added, so no two jobs of a sweep share a name."""
    from omegaconf import OmegaConf

    from distexp.sweeps.records import swept_keys
    from distexp.tracking import run_name

    cfg = OmegaConf.create({"hydra": {"overrides": {"task": [
        "strategy=one_device,mirrored", "cpu_replicas=1,2", "epochs=2", "repeats=3"]},
        "sweeper": {"params": {"optimizer.lr": "0.1,0.2"}}}})
    assert swept_keys(cfg) == ["strategy", "cpu_replicas", "optimizer.lr"]
    names = {run_name(s, "cnn", "digits", r, True, {"strategy": s, "cpu_replicas": str(c)})
             for s, c, r in [("one_device", 1, 1), ("one_device", 2, 1), ("mirrored", 1, 1),
                             ("mirrored", 2, 2)]}
    assert names == {"one_device-r1-cnn-digits", "one_device-r1-cpu2-cnn-digits",
                     "mirrored-r1-cnn-digits", "mirrored-r2-cnn-digits"}
    assert run_name("mirrored", "cnn", "digits", 2, True, {"optimizer.lr": "0.1"}) == \
        "mirrored-r2-lr=0.1-cnn-digits"
    assert run_name("mirrored", "cnn", "digits", 2) == "mirrored-cnn-digits-r2"


def test_report_console_table_fits_120_columns_and_tells_rows_apart():
    from distexp.report.scaling import Row, add_scaling, aggregate
    from distexp.report.table import table

    def run(strategy, replicas, cpu, rate, job):
        return Row(run_id=f"id{job}", run_name="", status="FINISHED", strategy=strategy,
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=replicas,
                   global_batch=64 * replicas, rate=rate, ci95=rate * 0.03,
                   eval_accuracy=0.913888, time_to_first_step=1.0, job_num=job,
                   overrides=f"strategy={strategy} cpu_replicas={cpu}", rates=[rate],
                   run_ids=[f"id{job}"])

    rows = aggregate([run("one_device", 1, 1, 20000.0, 0), run("one_device", 1, 2, 19000.0, 1),
                      run("mirrored", 1, 1, 21000.0, 2), run("mirrored", 2, 2, 33000.0, 3),
                      run("central", 2, 2, 30123.4, 4)])
    add_scaling(rows)
    text = table(rows)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 120, text
    assert lines[0].split()[:3] == ["strategy", "replicas", "global"]
    # the two one_device rows differ in cpu_replicas: the set-up column says so
    od = [ln for ln in lines if ln.startswith("one_device")]
    assert len(od) == 2 and "cpu_replicas=1" in od[0] and "cpu_replicas=2" in od[1], text
    mir = next(ln for ln in lines if ln.startswith("mirrored") and " 128 " in ln)
    # 2 columns over 120: the verdict's words give way, never a number
    assert "33,000 [32,010, 33,990]" in mir and "0.914" in mir and "one run a si…" in mir, mir
    assert "1.74x [" in mir  # 33,000 / 19,000: the same cpu_replicas=2 set-up is the baseline


def test_the_installed_mlflow_ui_reads_the_shared_view_distexp_writes():
    """The shared view (distexp.tracking.view) is in the format of the installed MLflow's UI
    bundle, read from the bundle itself (so a new MLflow is checked as it is installed; 3.17.2 and
    3.18.0 gave the same): the URL parameter and the tag prefix it reads, the envelope it checks,
    and every key of the state among those the bundle picks (search facets or UI state)."""
    import json
    import re
    from pathlib import Path

    import mlflow

    from distexp.tracking import tags, view

    js = "".join(p.read_text(errors="replace") for p in
                 (Path(mlflow.__file__).parent / "server/js/build/static/js").glob("*.js"))
    assert '"viewStateShareKey"' in js and f'"{tags.SHARED_VIEW}"' in js
    assert "workflowType" in js and '"machine_learning"' in js.replace("'", '"')
    assert re.search(r'"string"!==typeof \w+\.name\|\|"number"!==typeof \w+\.createdAt\|\|'
                     r'"string"!==typeof \w+\.state', js), "the envelope check moved"
    picked = set()
    for keys in re.findall(r'\[("searchFilter"[^\]]*|"selectedColumns"[^\]]*)\]', js):
        picked |= set(json.loads(f"[{keys}]"))
    state = view.view_state("s1", "p1", ["mirrored x2 batch 128"])
    assert set(state) <= picked, set(state) - picked
    # the group-by the view writes: its modes and aggregate, the ids of a group (mode.key.value)
    # and of the runs outside every group (mode.key), and which of them start open
    assert re.search(r'\w+\.Tag="tag",\w+\.Param="param"', js)
    assert re.search(r'\w+\.Average="average"', js)
    assert re.search(r'\(\{groupByData:(\w+),mode:(\w+),value:(\w+)\}\)=>`\$\{\2\}\.\$\{\1\}'
                     r'\.\$\{\3\|\|null\}`', js), "a group's id moved"
    assert re.search(r'groupByKeys\.map\(\(\{mode:(\w+),groupByData:(\w+)\}\)=>\[\1,\2\]\.join'
                     r'\("\."\)\)\.join\(","\)', js), "the ungrouped runs' id moved"
    group, (key, value) = state["groupBy"]["groupByKeys"][0], list(state["groupsExpanded"].items())[1]
    assert key == f"{group['mode']}.{group['groupByData']}.mirrored x2 batch 128" and not value
    # the column state: ids as the bundle names them, applied in order with their widths
    assert re.search(r'\.ATTRIBUTES,"Run Name"\)', js) and view.NAME_COLUMN == "attributes.`Run Name`"
    assert re.search(r'colId:\w+,width:\w+\[\w+\]', js) and "applyOrder:!0" in js
    # the date column: its id (its field) and MLflow's 150 px, which the view narrows
    assert re.search(r'headerName:\w+\.\w+\.DATE,headerTooltip:\w+\.\w+\.DATE,pinned:[^,]+,'
                     r'sortable:!0,field:"runDateAndNestInfo"', js) and view.DATE_COLUMN == "runDateAndNestInfo"


def test_the_latest_sweep_is_the_latest_with_job_runs(tmp_path):
    """A sweep stopped before its first job (a parent run with no children) is not "the latest
    sweep" that distexp.report and distexp.ui open: the one before it, with runs, is."""
    import time

    from distexp import tracking
    from distexp.tracking import lookup

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    real = tracking.JobRun(uri, "distexp", "sweep-a", {
        "distexp.sweep_id": "a", "distexp.run_kind": "sweep"}, {"overrides": "x"})
    client = real.client
    client.create_run(real.experiment_id, tags={"distexp.sweep_id": "a",
                                                "distexp.run_kind": "job"})
    time.sleep(0.01)
    empty = tracking.JobRun(uri, "distexp", "sweep-b", {
        "distexp.sweep_id": "b", "distexp.run_kind": "sweep"}, {"overrides": "y"})
    ids = [real.experiment_id]
    assert lookup.latest_sweep(client, ids).info.run_id == real.run_id
    assert lookup.latest_sweep(client, ids, "b").info.run_id == empty.run_id
