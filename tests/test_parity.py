"""One parity suite: N replicas reproduce one device.

Kept here, the strongest checks, each a different claim:
- the job itself: 2 mirrored (custom and fit loops) and 2 central replicas give the one-device
  per-step losses within 1e-5 over 44 steps at the same global batch (steps.csv of CLI jobs);
- `python -m distexp.parity` on seq2seq pairs whose lengths vary, so replicas hold different
  numbers of real tokens: mirrored, central and multiworker are exact (loss within 1e-5, first
  gradient norm ratio 1); the tool fails a mean of replica means and names the seed loop's N x
  mistake;
- the seq2seq model inside MirroredStrategy.run (forward, gradients, greedy decoding) gives one
  device's logits.
multiworker with the CNN reproduces one device in tests/test_multiprocess.py: that run is also the
uninterrupted reference of the resume test and the port-clash retry there, so it stays with them.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from distexp.parity import losses as _losses
from helpers import ROOT, finished_job as _job


@pytest.mark.parametrize("args, line", [
    (["strategy=one_device"], "strategy: received 'one_device'; parity compares a strategy with "
                              "one_device: choose another strategy"),
    (["strategy=mirrored,central,mirrored"], "strategy: received mirrored,central,mirrored; each "
                                             "strategy once"),
    (["strategy=central,one_device"], "strategy: received 'one_device'; parity compares"),
    (["strategy=ps", "workers=2"], "workers: received 2 with strategy=ps; its steps update "
                                   "asynchronously"),
    (["--steps", "0", "strategy=mirrored"], "--steps: received 0; expected >= 1"),
])
def test_parity_refuses_bad_input_in_one_line_before_any_run(capsys, tmp_path, args, line):
    from distexp import parity

    assert parity.main(["--out", str(tmp_path / "p"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"distexp.parity: error: {line}"), err
    assert not (tmp_path / "p").exists()  # nothing ran


def test_parity_strategies_list():
    from distexp.parity import strategies

    assert strategies(["cpu_replicas=2", "strategy=mirrored, central"]) == ["mirrored", "central"]
    assert strategies(["strategy=ps"]) == ["ps"] and strategies(["workers=2"]) == []


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["custom", "fit"])
def test_two_replicas_reproduce_one_device(cli, loop):
    """Same seed, same data order, same global batch: 2 replicas must give the 1-device losses."""
    # one step per call on both sides: fit reports a loss per execution only, and auto picks
    # k = 11 for one device but 1 for two replicas under fit (distexp.train.loops.fit)
    common = ["global_batch_size=64", "epochs=2", f"loop={loop}", "steps_per_execution=1",
              "measure_step_split=false"]
    one, _ = _job(cli, "one", "strategy=one_device", *common)
    two, _ = _job(cli, "two", "strategy=mirrored", "cpu_replicas=2", *common)
    a, b = _losses(one), _losses(two)
    assert len(a) == len(b) == 2 * (1437 // 64)
    diff = max(abs(x - y) for x, y in zip(a, b))
    assert diff < 1e-5, f"max per-step loss difference {diff}"
    assert a[-1] < a[0] * 0.7, "training must actually reduce the loss"
    if loop == "custom":
        c, _ = _job(cli, "central", "strategy=central", "cpu_replicas=2", *common)
        assert max(abs(x - y) for x, y in zip(a, _losses(c))) < 1e-5


def varied_pairs(path):
    """A pair file whose target lengths vary from 1 to 12 tokens, so the two replicas of a global
    batch hold clearly different numbers of real tokens (synthetic_pairs' numbers are mostly
    five digits: too even to tell a mean of replica means from the per-token mean)."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = "alpha beta gamma delta eps zeta eta theta iota kappa".split()
    with open(path, "w") as f:
        for _ in range(1200):
            src = [words[int(j)] for j in rng.integers(0, 10, int(rng.integers(1, 13)))]
            tgt = "".join(str(words.index(w)) for w in src)[: int(rng.integers(1, 13))]
            f.write(" ".join(src) + "\t" + tgt + "\tattribution\n")
    return ["model=gru_seq2seq", "dataset=text_pairs", f"dataset.path={path}"]


def _parity(cli, *args):
    """(the process, {strategy: {"diff": max loss difference, "ratio": gradient norm ratio}})."""
    r = cli("--steps", "8", *args, module="distexp.parity", timeout=900)
    figures, name = {}, None
    for ln in r.stdout.splitlines():
        if ln.startswith("parity: ") and " vs one_device, global batch" in ln:
            name = ln.split()[1]
            figures[name] = {}
        if "max per-step loss difference:" in ln:
            figures[name]["diff"] = float(ln.split(":")[1].split()[0])
        if "gradient norm ratio" in ln:
            figures[name]["ratio"] = float(ln.rsplit(":", 1)[1])
    return r, figures


@pytest.mark.slow
def test_seq2seq_parity_per_token_loss_is_exact(cli):
    """2 replicas (mirrored, central, multiworker) reproduce one device's per-step seq2seq
    losses within 1e-5: the per-token mean is exact though the replicas hold different numbers
    of real tokens (the next test shows they do: a mean of replica means on the same batches
    fails). One command, one baseline run: all three need the same global batch."""
    r, f = _parity(cli, "strategy=mirrored,central,multiworker", "cpu_replicas=2", "workers=2",
                   *varied_pairs(cli.cwd / "varied.txt"))
    assert r.returncode == 0, r
    assert sorted(f) == ["central", "mirrored", "multiworker"], r.stdout
    for name, g in f.items():
        assert g["diff"] < 1e-5 and g["ratio"] == pytest.approx(1.0, abs=1e-5), (name, r.stdout)
    assert r.stdout.count("parity: one_device: ") == 1, r.stdout
    assert "parity: mirrored OK, central OK, multiworker OK" in r.stdout, r.stdout


@pytest.mark.slow
def test_parity_fails_a_mean_of_replica_means(cli):
    r, f = _parity(cli, "strategy=mirrored", "cpu_replicas=2", *varied_pairs(cli.cwd / "v.txt"),
                   "task.factory=factories:seq2seq_replica_mean_task")
    assert r.returncode == 1, r
    assert f["mirrored"]["diff"] > 1e-4, r.stdout  # the replicas' token counts differ here
    assert "parity: FAILED: a mean of replica means" in r.stdout, r.stdout


@pytest.mark.slow
def test_parity_names_the_seed_loops_mistake(cli):
    """Per-replica reduce_mean, then summed over replicas: the loss and gradient are N x. (The
    same command without the mistake passes: test_two_replicas_reproduce_one_device[custom] runs
    that job pair over 44 steps, and the seq2seq tests above pass through this command.)"""
    r, f = _parity(cli, "strategy=mirrored", "cpu_replicas=2",
                   "task.factory=factories:seed_mistake_task")
    assert r.returncode == 1, r
    assert f["mirrored"]["ratio"] == pytest.approx(2.0, rel=1e-3), r.stdout
    assert "parity: FAILED: the loss is scaled by N=2" in r.stdout, r.stdout


MIRRORED = textwrap.dedent("""
    import numpy as np, tensorflow as tf, keras
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from distexp.models.seq2seq import build_gru_seq2seq
    rng = np.random.default_rng(0)
    src = rng.integers(4, 20, size=(8, 6)).astype(np.int32); tgt = rng.integers(4, 15, size=(8, 5)).astype(np.int32)
    tgt[:, 0] = 2
    for i in range(8):
        src[i, 1 + i % 6:] = 0; tgt[i, 1 + i % 5:] = 0
    keras.utils.set_random_seed(0)
    one = build_gru_seq2seq(20, 15, embedding_dim=8, units=16, max_target_len=5)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        m = build_gru_seq2seq(20, 15, embedding_dim=8, units=16, max_target_len=5)
    m.set_weights(one.get_weights())
    ds = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices((src, tgt)).batch(8))
    @tf.function
    def run(batch):
        def replica(s, t):
            with tf.GradientTape() as tape:
                logits = m((s, t), training=True)
                loss = tf.reduce_sum(logits)
            grads = tape.gradient(loss, m.trainable_variables)
            return logits, m.greedy_decode(s, 5), tf.add_n([tf.reduce_sum(g) for g in grads])
        return strategy.run(replica, args=batch)
    logits, ids, _ = run(next(iter(ds)))
    logits = tf.concat(strategy.experimental_local_results(logits), 0).numpy()
    ids = tf.concat(strategy.experimental_local_results(ids), 0).numpy()
    print("DIFF", np.abs(logits - one((src, tgt)).numpy()).max(), (ids == one.greedy_decode(src, 5).numpy()).all())
""")


@pytest.mark.integration
def test_mirrored_strategy_run_matches_one_device():
    """Built in MirroredStrategy.scope() over 2 logical CPUs, called in strategy.run in a
    tf.function (forward, gradients, greedy decoding): the same logits as one device. A fresh
    process: logical devices cannot change once TensorFlow has started."""
    out = subprocess.run([sys.executable, "-c", MIRRORED], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    line = [x for x in out.stdout.splitlines() if x.startswith("DIFF")]
    assert line, out.stderr[-3000:]
    _, diff, same_ids = line[0].split()
    assert float(diff) < 1e-5 and same_ids == "True"
