"""A set-up's one identity (distexp.sweeps.setups): the real sweeper hands each job its set-up,
the job's run carries it as tags, and a continued sweep (`sweep.resume` with more rounds) is one
row per set-up with every run, in the report and in the UI's view. No TensorFlow: a launcher
writes what a job would (its MLflow run, record and result.json)."""
from __future__ import annotations

import csv
import json
import math
import random
from pathlib import Path

import pytest

from distexp.tracking import tags as tag
from helpers import sweeper as _sweeper
from helpers.store import new_store


class StoreLauncher:
    """Writes what a job of the sweep would: its run in MLflow (the params it logs, the tags
    distexp.sweeps.parent.child_tags gives it, examples/s), sweep_jobs/<num>.json, result.json."""

    def __init__(self, sweeper, uri: str, seed: int):
        self.sweeper, self.uri, self.rng = sweeper, uri, random.Random(seed)
        self.launched, self.composed = [], {}

    def _params(self, overrides):
        from omegaconf import OmegaConf, open_dict

        from distexp.config.schema import flatten
        from distexp.sweeps import planning

        own = tuple(o for o in overrides if not o.startswith("repeat="))
        if own not in self.composed:  # one compose a set-up: the repeat is the only difference
            loader = self.sweeper.hydra_context.config_loader
            cfg = type(loader).load_sweep_config(loader, self.sweeper.config, list(own))
            found = planning.setup(cfg)
            with open_dict(cfg):
                del cfg["hydra"]
            self.composed[own] = (flatten(OmegaConf.create(OmegaConf.to_container(cfg))), found)
        params, found = self.composed[own]
        repeat = next((o.split("=", 1)[1] for o in overrides if o.startswith("repeat=")), "0")
        return {**params, "repeat": repeat, "num_workers": "1",
                "global_batch_size": str(found.global_batch), "num_replicas": str(found.replicas)}

    def launch(self, job_overrides, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        from distexp.sweeps.parent import child_tags

        client = MlflowClient(tracking_uri=self.uri)
        exp = client.get_experiment_by_name("distexp").experiment_id
        sweep_dir = Path(self.sweeper.config.hydra.sweep.dir)
        out = []
        for i, overrides in enumerate(job_overrides):
            num = initial_job_idx + i
            self.launched.append((num, list(overrides)))
            params = self._params(overrides)
            rate = 1000.0 * (1.3 if "strategy=mirrored" in overrides else 1.0) * \
                math.exp(self.rng.gauss(0, 0.4))  # noisy: nothing settles in a few rounds
            run = client.create_run(exp, run_name=f"job-{num}", tags={
                **child_tags(str(sweep_dir), self.uri, "distexp", num),
                tag.OVERRIDES: " ".join(overrides)})
            items = [Param(k, v) for k, v in params.items()]
            for k in range(0, len(items), 100):
                client.log_batch(run.info.run_id, params=items[k:k + 100])
            client.log_batch(run.info.run_id, metrics=[Metric("perf/examples_per_sec", rate, 0, 0)])
            client.set_terminated(run.info.run_id, "FINISHED")
            job_dir = sweep_dir / str(num)
            job_dir.mkdir(parents=True, exist_ok=True)
            (job_dir / "result.json").write_text(json.dumps({"perf/examples_per_sec": rate}))
            (sweep_dir / "sweep_jobs").mkdir(exist_ok=True)
            (sweep_dir / "sweep_jobs" / f"{num}.json").write_text(json.dumps(
                {"num": num, "overrides": list(overrides), "status": "COMPLETED", "value": 0.9,
                 "error": None, "job_dir": str(job_dir)}))
            ret = JobReturn(overrides=list(overrides), _return_value=0.9)
            ret.status = JobStatus.COMPLETED
            out.append(ret)
        return out


def _store_sweep(sweep_dir: Path, uri: str, parent_id: str, seed: int, *args):
    """The real sweeper over `args`, in `sweep_dir`, its jobs' runs children of `parent_id`
    (sweep.json as distexp.sweeps.callback writes it); the (num, overrides) it launched."""
    from hydra.core.global_hydra import GlobalHydra

    sweep_dir.mkdir(parents=True)
    (sweep_dir / "sweep.json").write_text(json.dumps({
        "sweep_id": "s1", "parent_run_id": parent_id, "tracking_uri": uri,
        "experiment": "distexp"}))
    try:
        sweeper = _sweeper(sweep_dir, f"tracking.uri={uri}", *(a for a in args if "," not in a))
        sweeper.launcher = StoreLauncher(sweeper, uri, seed)
        sweeper.validate_batch_is_legal = lambda batch: None  # Hydra composing each job again
        sweeper.sweep([f"tracking.uri={uri}", *args])
        return sweeper.launcher.launched
    finally:
        GlobalHydra.instance().clear()


def test_a_continued_sweep_is_one_row_per_set_up_with_all_its_runs(tmp_path):
    """repeats=auto for 2 rounds, then `sweep.resume=<id> sweep.max_repeats=4` (the continuation
    the sweep suggests: its jobs' overrides differ by that key): each job's run is tagged with its
    set-up's index and key (the decision's), and the report has one row per set-up over every run
    of both sweeps; the UI's view lists every set-up on its first page."""
    from mlflow.tracking import MlflowClient

    from distexp import tracking
    from distexp.figures import outcomes
    from distexp.sweeps.publish import summarise
    from distexp.tracking import view

    client, uri = new_store(tmp_path)
    exp = client.create_experiment("distexp", artifact_location=(tmp_path / "art").as_uri())
    pid = client.create_run(exp, run_name="sweep-s1", tags={
        tag.SWEEP_ID: "s1", tag.RUN_KIND: "sweep", tag.SWEEP_DIR: str(tmp_path / "first")}).info.run_id
    command = ["strategy=one_device,mirrored", "cpu_replicas=2", "sweep.controls=true",
               "repeats=auto"]
    first = _store_sweep(tmp_path / "first", uri, pid, 0, *command, "sweep.max_repeats=2")
    client.set_tag(pid, tag.OUTCOMES, (tmp_path / "first" / "auto.json").read_text())
    more = _store_sweep(tmp_path / "more", uri, pid, 1, *command, "sweep.resume=s1",
                  "sweep.max_repeats=4")
    assert len(first) == 6 and len(more) == 6  # 3 set-ups x 2 rounds, then rounds 3 and 4
    decision = outcomes.from_json((tmp_path / "more" / "auto.json").read_text())
    client.set_tag(pid, tag.OUTCOMES, decision.to_json())
    assert decision.setups == ["one_device x1 batch 64", "mirrored x2",
                               "one_device x1 batch 128 (control)"]
    assert len(set(decision.setup_keys)) == 3 and decision.rounds == 4
    assert outcomes.from_json((tmp_path / "first" / "auto.json").read_text()).setup_keys == \
        decision.setup_keys  # the continuation keeps each set-up's key
    runs = MlflowClient(tracking_uri=uri).search_runs([exp], f"tags.`{tag.RUN_KIND}` = 'job'")
    assert len(runs) == 12
    for r in runs:  # the tags the sweeper handed to that job, by its number
        i = int(r.data.tags[tag.SETUP_INDEX])
        assert r.data.tags[tag.SETUP_KEY] == decision.setup_keys[i]
        assert r.data.params["strategy.name"] == ("mirrored" if i == 1 else "one_device")
        assert r.data.params["global_batch_size"] == ("64" if i == 0 else "128")
    summarise(tracking.JobRun.reopen(uri, pid), "s1", uri, "distexp")  # the sweep's end
    with open(tmp_path / "first" / "report" / "report.csv") as f:  # the report it published
        rows = list(csv.DictReader(f))
    assert sorted((r["strategy"], r["global_batch"], r["runs"]) for r in rows) == [
        ("mirrored", "128", "4"), ("one_device", "128", "4"), ("one_device", "64", "4")]
    assert sorted(i for r in rows for i in r["run_ids"].split()) == sorted(r.info.run_id for r in runs)
    mirrored = next(r for r in rows if r["strategy"] == "mirrored")  # its records, on its row
    assert float(mirrored["speedup"]) == pytest.approx(decision.of(1, outcomes.BASELINE).ratio)
    assert float(mirrored["speedup_strong"]) == pytest.approx(decision.of(1, outcomes.EQUAL_WORK).ratio)
    md = (tmp_path / "first" / "report" / "report.md").read_text()
    note = client.get_run(pid).data.tags[tag.NOTE]  # the parent run's description: its table
    for text in (md, note):
        assert sum(ln.startswith("| one_device | 1 | 1 | 64 | 4 |") for ln in text.splitlines()) == 1, text
    state = view.view_state("s1", pid)  # MLflow's UI loads a page of runs (100) in this order
    page = client.search_runs([exp], state["searchFilter"], max_results=3,
                              order_by=[f"{state['orderByKey']} ASC"])
    assert {r.data.tags[tag.SETUP_KEY] for r in page} == set(decision.setup_keys)
    work, control = decision.of(1, outcomes.EQUAL_WORK), decision.of(2, outcomes.BASELINE)
    assert {r.data.tags[tag.SETUP] for r in page} == {
        "one_device x1 batch 64: baseline", f"mirrored x2: {outcomes.cell(work, 0.05)} vs control",
        f"one_device x1 batch 128 (control): {outcomes.cell(control, 0.05)}"}


def test_repeats_n_jobs_get_their_set_up_whatever_their_number(tmp_path):
    """repeats=N resumed with a set-up added: the new jobs take the next free numbers (not round x
    set-ups + set-up) and a re-run keeps its old one with `resume=true` after its overrides; each
    still gets its own set-up (setups.positions), and its run the tags for it."""
    from distexp.sweeps import setups

    jobs = [["strategy=one_device"], ["strategy=mirrored"], ["strategy=central"]]
    launch = [(1, ["strategy=mirrored", "repeat=0", "resume=true", "checkpoint.dir='c'"]),
              (4, ["strategy=central", "repeat=0"]), (5, ["strategy=central", "repeat=1"]),
              (6, ["strategy=one_device", "repeat=2"]), (7, ["strategy=mirrored", "repeat=2"])]
    of_num = setups.positions(jobs, 3, launch)
    assert of_num == {1: 1, 4: 2, 5: 2, 6: 0, 7: 1}
    assert [n % len(jobs) for n in of_num] != list(of_num.values())  # a modulo would be wrong
    setups.hand_out(tmp_path, ["k0", "k1", "k2"], of_num)
    setups.hand_out(tmp_path, ["k0", "k1", "k2"], {9: 0})  # a later round's: merged
    info = json.loads((tmp_path / "sweep.json").read_text())
    assert setups.child_tags(info, 4) == {tag.SETUP_INDEX: "2", tag.SETUP_KEY: "k2"}
    assert setups.child_tags(info, 9) == {tag.SETUP_INDEX: "0", tag.SETUP_KEY: "k0"}
    assert setups.child_tags(info, 2) == {}  # a job the sweeper did not list: no guess


def test_each_set_ups_runs_are_ranked_for_the_view():
    """distexp.sweeps.publish.ranks: a set-up's measured runs first (by job number: the first
    carries the set-up's figures), then its failed ones; zero-padded, as MLflow sorts tags as
    text (the view's order: round by round, every set-up in each)."""
    from distexp.report.scaling import Row, aggregate
    from distexp.sweeps.publish import ranks

    def run(num, key, status="FINISHED"):
        return Row(run_id=f"id{num}", run_name="", status=status, strategy="mirrored",
                   model="cnn", dataset="digits", loop="custom", workers=1, replicas=2,
                   global_batch=128, rate=1000.0 + num, ci95=None, eval_accuracy=0.9,
                   time_to_first_step=1.0, job_num=num, rates=[1000.0 + num],
                   run_ids=[f"id{num}"], overrides="strategy=mirrored", setup_key=key)

    rows = aggregate([run(12, "a"), run(0, "a", "FAILED"), run(3, "a"), run(1, "b"), run(4, "b")])
    assert ranks(rows) == {"id3": "000000", "id12": "000001", "id0": "000002",
                           "id1": "000000", "id4": "000001"}
