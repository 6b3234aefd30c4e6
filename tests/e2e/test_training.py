"""End to end through the CLI, as a user runs it: accuracy, MLflow, sweeps (parity across
strategies: tests/parity/test_parity.py)."""
from __future__ import annotations

import json

import pytest

from helpers import finished_sweep, mlflow_runs, run_cli

pytestmark = pytest.mark.slow

CASES = [
    ("one_device", "custom", 1),
    ("one_device", "fit", 1),
    ("mirrored", "custom", 2),
    ("mirrored", "fit", 2),
    ("central", "custom", 2),
]
# 10 epochs: digits reach 0.94-0.97 eval accuracy (seen 0.9417 at epoch 5, 0.95-0.9667 at 10 on
# these four jobs); the step-time split's probe phase (~1 s a job) answers nothing asserted here
LEARN = ["epochs=10", "measure_step_split=false"]


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    """{(strategy, loop): job dir} for every case of CASES, each trained once: one sweep for
    one_device and mirrored x custom and fit (cpu_replicas=2, which one_device ignores: the
    sweep's own merge counts it as the 1-replica set-up), central with the custom loop alone
    (central refuses loop=fit). Two processes, TensorFlow imported twice instead of five times."""
    cwd = tmp_path_factory.mktemp("learn")
    jobs, _ = finished_sweep(cwd, "sweep", "strategy=one_device,mirrored", "loop=custom,fit",
                             "cpu_replicas=2", *LEARN)
    central = run_cli(["strategy=central", "loop=custom", "cpu_replicas=2", *LEARN,
                       "tracking.enabled=false", f"hydra.run.dir={cwd / 'central'}"], cwd)
    assert central.returncode == 0, central
    jobs[("central", "custom")] = cwd / "central"
    return jobs


@pytest.mark.xdist_group("training-learned")  # CI's xdist: one worker runs `learned` once
@pytest.mark.parametrize("strategy,loop,replicas", CASES)
def test_strategy_and_loop_learn_digits(learned, strategy, loop, replicas):
    job = learned[(strategy, loop)]
    result = json.loads((job / "result.json").read_text())
    log = (job / "chief.log").read_text()  # the trainer's lines, as the console shows them
    assert result["eval/accuracy"] >= 0.90, log[-3000:]
    assert f"Strategy: {strategy} (" in log and f"Number of devices: {replicas}  (" in log
    assert f"Global batch: {64 * replicas}  (per replica: 64)" in log
    assert f"loop: {loop}" in log
    assert result["perf/examples_per_sec"] > 0


CONTRACT_METRICS = {
    "train/loss", "train/accuracy", "eval/loss", "eval/accuracy", "perf/examples_per_sec",
    "perf/examples_per_sec_per_replica", "perf/step_time_ms_p50", "perf/step_time_ms_p90",
    "perf/epoch_time_s", "perf/time_to_first_step_s",
}


def test_cli_run_lands_in_mlflow_as_the_contract_says(cli):
    r = cli("cpu_replicas=2", "epochs=3")
    assert r.returncode == 0, r
    client, runs = mlflow_runs(cli.uri)
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "mirrored-cnn-digits-r2"
    p = run.data.params
    assert p["num_replicas"] == "2" and p["global_batch_size"] == "128" and p["num_workers"] == "1"
    assert p["strategy.name"] == "mirrored" and p["model.name"] == "cnn" and p["gpus"] == "null"
    assert p["devices"] == "/cpu:0,/cpu:1"
    assert p["tf_version"].startswith("2.") and p["keras_version"].startswith("3.")
    m = run.data.metrics
    assert CONTRACT_METRICS <= set(m), CONTRACT_METRICS - set(m)
    assert m["perf/examples_per_sec"] > 0
    assert m["perf/examples_per_sec_per_replica"] == pytest.approx(m["perf/examples_per_sec"] / 2)
    assert 0 < m["perf/step_time_ms_p50"] <= m["perf/step_time_ms_p90"]
    assert 0 < m["perf/time_to_first_step_s"] < 600
    assert 0 <= m["eval/accuracy"] <= 1 and m["eval/loss"] > 0
    # per epoch: exactly one point per epoch in every series (no doubled last point)
    hist = client.get_metric_history(run.info.run_id, "train/loss")
    assert [h.step for h in hist] == [1, 2, 3]
    for key in ("eval/accuracy", "eval/loss", "perf/epoch_time_s"):
        assert sorted(h.step for h in client.get_metric_history(run.info.run_id, key)) == [
            1, 2, 3], key
    epochs = client.get_metric_history(run.info.run_id, "perf/epoch_time_s")
    assert all(h.value > 0 for h in epochs)
    # the run's examples/s is one point under its own key; each epoch's is under perf/epoch_*
    rates = client.get_metric_history(run.info.run_id, "perf/examples_per_sec")
    assert [(h.step, h.value) for h in rates] == [(3, m["perf/examples_per_sec"])]
    per_epoch = client.get_metric_history(run.info.run_id, "perf/epoch_examples_per_sec")
    assert 1 <= len(per_epoch) <= 3 and len({h.step for h in per_epoch}) == len(per_epoch)
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "overrides.yaml", "logs", "steps.csv"} <= arts
    logs = {a.path for a in client.list_artifacts(run.info.run_id, "logs")}
    assert "logs/chief.log" in logs
    # everything under outputs/: nothing else written to the working directory
    assert sorted(p.name for p in cli.cwd.iterdir()) == ["outputs"]


@pytest.mark.extended
def test_sweep_over_strategies_and_replicas(cli):
    r = cli("-m", "strategy=one_device,mirrored", "cpu_replicas=1,2", "epochs=1",
            "measure_step_split=false", timeout=900)  # the probe phase: nothing asserted here
    assert r.returncode == 0, r
    _, runs = mlflow_runs(cli.uri)
    parents = [x for x in runs if x.data.tags.get("distexp.run_kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"  # the sweep (distexp.sweeps)
    runs = [x for x in runs if x not in parents]
    got = sorted((x.data.params["strategy.name"], x.data.params["cpu_replicas"],
                  x.data.params["num_replicas"], x.info.status) for x in runs)
    # one_device with cpu_replicas=2 is the 1-replica job again: merged, run once, said once
    assert got == [("mirrored", "1", "1", "FINISHED"), ("mirrored", "2", "2", "FINISHED"),
                   ("one_device", "1", "1", "FINISHED")]
    assert r.stdout.count("sweep: 1 job(s) merged into an earlier job of the same set-up") == 1
    assert "[strategy=one_device cpu_replicas=2] -> [strategy=one_device cpu_replicas=1]" in r.stdout
    from distexp.report import cli as report

    sweep_id = parents[0].data.tags["distexp.sweep_id"]
    rows, _, _ = report.build(cli.uri, sweep_id=sweep_id, out=cli.cwd / "report", log=False)
    assert sorted((row.strategy, row.replicas) for row in rows) == [
        ("mirrored", 1), ("mirrored", 2), ("one_device", 1)]  # one baseline row
