"""Tasks and the one training step: seq2seq trains under every strategy with exact
figures, a user's own task trains and logs its own metrics, ps shares the step (loss scaling
included), a diverging run ends FAILED. Parity (seq2seq per-token exactness, the known loss
mistakes): tests/parity/test_parity.py. Before TensorFlow: tests/tasks/test_tasks_unit.py."""
from __future__ import annotations

import csv
import json
import re

import pytest

from helpers import mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.extended]


def test_synthetic_pairs_learn_with_the_defaults(cli):
    """`python -m distexp model=gru_seq2seq dataset=synthetic_pairs`, defaults otherwise."""
    # the probe phase included: seq2seq's split is measured
    r = cli("model=gru_seq2seq", "dataset=synthetic_pairs", timeout=900)
    assert r.returncode == 0, r
    client, runs = mlflow_runs(cli.uri)
    run = runs[0]
    m, p = run.data.metrics, run.data.params
    assert run.info.status == "FINISHED" and run.info.run_name == "mirrored-gru_seq2seq-synthetic_pairs-r1"
    assert m["perf/step_compute_ms"] > 0 and re.search(r"^step \S+ ms = input ", r.stdout, re.M)
    assert m["eval/token_accuracy"] >= 0.9, m
    assert 0 <= m["eval/sequence_accuracy"] <= m["eval/token_accuracy"] + 1e-9
    assert m["eval/loss"] > 0 and "eval/accuracy" not in m and "train/accuracy" not in m
    # tokens = real target tokens: 1 to 5 digits + <end> per example
    ratio = m["perf/tokens_per_sec"] / m["perf/examples_per_sec"]
    assert 2.0 < ratio <= 6.0, ratio
    assert p["task"] == "seq2seq" and p["data.target_tokens"] == "char"
    assert p["data.tgt_vocab_size"] == str(4 + 10)  # reserved + the ten digits
    assert len(client.get_metric_history(run.info.run_id, "eval/token_accuracy")) == 5


CORPUS = [("I see a cat.", "我看见一只猫。"), ("I see a dog.", "我看见一只狗。"),
          ("You see a cat.", "你看见一只猫。"), ("You see a dog.", "你看见一只狗。"),
          ("He has a cat.", "他有一只猫。"), ("He has a dog.", "他有一只狗。"),
          ("I have a cat.", "我有一只猫。"), ("You have a dog.", "你有一只狗。")]


def test_text_pairs_word_source_chinese_char_target(cli):
    path = cli.cwd / "cmn.txt"
    path.write_text("".join(f"{en}\t{zh}\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
                            for _ in range(12) for en, zh in CORPUS), encoding="utf-8")
    r = cli("model=gru_seq2seq", "dataset=text_pairs", f"dataset.path={path}",
            "strategy=mirrored", "cpu_replicas=2", "epochs=10", "batch_size_per_replica=8",
            "learning_rate=0.01",
            timeout=900)
    assert r.returncode == 0, r
    _, runs = mlflow_runs(cli.uri)
    p, m = runs[0].data.params, runs[0].data.metrics
    assert (p["data.source_tokens"], p["data.target_tokens"]) == ("word", "char")
    english = {w for en, _ in CORPUS for w in en.lower().replace(".", " .").split()}
    chinese = {c for _, zh in CORPUS for c in zh}
    assert p["data.src_vocab_size"] == str(4 + len(english))   # i see a cat . you dog he has have
    assert p["data.tgt_vocab_size"] == str(4 + len(chinese))
    assert int(p["data.max_tgt_len"]) == max(len(zh) for _, zh in CORPUS) + 1
    losses = [float(x["loss"]) for x in csv.DictReader(open(next(cli.cwd.glob("outputs/runs/*/*/steps.csv"))))]
    assert losses[-1] < 0.5 * losses[0], losses
    assert m["eval/token_accuracy"] > 0.5


def test_user_regression_task_logs_its_own_metrics(cli):
    r = cli("strategy=mirrored", "cpu_replicas=2", "model=mlp", "dataset=custom",
            "dataset.factory=factories:regression_data", "task.factory=factories:mse_task",
            "epochs=4", timeout=600)
    assert r.returncode == 0, r
    _, runs = mlflow_runs(cli.uri)
    m, p = runs[0].data.metrics, runs[0].data.params
    assert {"train/loss", "train/mae", "eval/loss", "eval/mae"} <= set(m)
    assert "eval/accuracy" not in m and p["task"] == "regression"
    assert m["eval/loss"] < 1.0 and 0 < m["eval/mae"] < 1.0  # the targets' variance is ~8
    result = json.loads(next(cli.cwd.glob("outputs/runs/*/*/result.json")).read_text())
    assert result["objective"] == p["objective_resolved"] == "eval/mae"  # known in the trainer


def test_ps_trains_with_several_steps_per_call_and_mixed_precision(cli):
    """ps updates are asynchronous, so the figures vary from run to run: what is exact (every
    step's loss recorded once) is asserted exactly; learning is asserted with margins shown to
    hold. This job run 10 times (2026-11-23, load 9-17): eval accuracy 0.875-0.925 (CI once saw
    0.828, which failed the old >= 0.85), last epoch's summed loss / first epoch's 0.205-0.245.
    Broken loss scaling makes every update 2**-15 too small (test_ps_mixed_float16_scales_the_loss),
    which would leave the model near where it started (10 classes: accuracy near 0.1, loss ratio
    near 1). The bounds, 0.5 and 0.5, sit far from both."""
    r = cli("strategy=ps", "workers=2", "epochs=3", "steps_per_execution=3",
            "precision=mixed_float16", "tracking.enabled=false", "hydra.run.dir=job", timeout=600)
    assert r.returncode == 0, r
    rows = list(csv.DictReader(open(cli.cwd / "job" / "steps.csv")))
    assert [int(x["step"]) for x in rows] == list(range(1, 3 * 22 + 1))  # every step's loss
    losses = [float(x["loss"]) for x in rows]
    assert sum(losses[-22:]) < 0.5 * sum(losses[:22]), losses
    result = json.loads((cli.cwd / "job" / "result.json").read_text())
    assert result["eval/accuracy"] >= 0.5, result


def test_a_diverging_run_ends_failed_and_tagged(cli):
    r = cli("strategy=one_device", "model.optimizer=sgd", "learning_rate=1e30", "epochs=2",
            timeout=300)
    assert r.returncode == 1, r
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("distexp: error:")]
    assert len(lines) == 1 and "training diverged: train/loss is nan at epoch 1 step " in lines[0]
    client, runs = mlflow_runs(cli.uri)
    run = runs[0]
    assert run.info.status == "FAILED" and run.data.tags["distexp.diverged"] == "true"
    assert "perf/examples_per_sec" not in run.data.metrics
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "steps.csv" in arts and "logs" in arts
    # the user who wants the old behaviour: trains on, FINISHED, still tagged
    r = cli("strategy=one_device", "model.optimizer=sgd", "learning_rate=1e30", "epochs=1",
            "terminate_on_nan=false", timeout=300)
    assert r.returncode == 0, r
    assert "distexp: warning: training diverged" in r.stdout
    _, runs = mlflow_runs(cli.uri)
    latest = max(runs, key=lambda x: x.info.start_time)
    assert latest.info.status == "FINISHED" and latest.data.tags["distexp.diverged"] == "true"
