"""A hand-written MirroredStrategy run against one device, in a fresh TensorFlow process (no
distexp). Tier: integration."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from helpers import ROOT

pytestmark = pytest.mark.integration


MIRRORED = textwrap.dedent("""
    import numpy as np, tensorflow as tf, keras
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from distexp.models.gru_seq2seq import build_gru_seq2seq
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
