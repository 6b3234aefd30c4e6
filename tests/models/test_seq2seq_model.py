"""distexp.models.gru_seq2seq: the GRU encoder-decoder's shapes, padding masks, greedy decoding and its
independence from how a batch is split (small sizes; the whole file runs in well under a minute).
The same model inside MirroredStrategy.run: tests/parity/test_parity.py."""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = [pytest.mark.integration,  # TensorFlow in this process
              pytest.mark.xdist_group("seq2seq-model")]  # one import, one `model` per worker

SRC_V, TGT_V, T = 23, 17, 7


def setup_module():
    """TensorFlow is imported when these tests run, not when the suite is collected (the unit
    tier collects this file too)."""
    global tf, keras, END, GruSeq2Seq, build_gru_seq2seq, greedy_decode
    tf = pytest.importorskip("tensorflow")
    import keras

    from distexp.models.gru_seq2seq import END, GruSeq2Seq, build_gru_seq2seq, greedy_decode


def _model(seed=0, **kw):
    keras.utils.set_random_seed(seed)
    return build_gru_seq2seq(SRC_V, TGT_V, embedding_dim=8, units=16, max_target_len=T, **kw)


def _batch(b=8, s=9, seed=0):
    """Random ids with a different number of padding positions per row (0 = pad)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(4, SRC_V, size=(b, s)).astype(np.int32)
    tgt = rng.integers(4, TGT_V, size=(b, T)).astype(np.int32)
    tgt[:, 0] = 2
    for i in range(b):
        src[i, 1 + i % s:] = 0
        tgt[i, 1 + (3 * i) % T:] = 0
    return src, tgt


@pytest.fixture(scope="module")
def model():
    return _model()


def test_shapes_dtype_and_params(model):
    src, tgt = _batch()
    logits = model((src, tgt), training=False)
    assert isinstance(model, GruSeq2Seq)
    assert tuple(logits.shape) == (8, T, TGT_V) and logits.dtype == tf.float32
    # embeddings 23*8 + 17*8; two GRUs 3*(16*(8+16) + 2*16); W1, W2 16*16; scale 16;
    # combine (32*16 + 16); logits (16*17 + 17)
    expected = 23 * 8 + 17 * 8 + 2 * 3 * (16 * 24 + 32) + 2 * 256 + 16 + 32 * 16 + 16 + 16 * 17 + 17
    assert model.count_params() == expected


def test_source_padding_is_ignored(model):
    src, tgt = _batch()
    base = model((src, tgt)).numpy()
    longer = np.pad(src, ((0, 0), (0, 5)))  # 5 more padding columns
    assert np.abs(model((longer, tgt)).numpy() - base).max() < 1e-6
    # the padding id's embedding row never reaches the logits (masked in the GRU and the attention)
    emb = model.src_embedding.embeddings
    saved = emb.numpy()
    try:
        emb.assign(np.concatenate([np.full((1, saved.shape[1]), 50.0, np.float32), saved[1:]]))
        assert np.abs(model((src, tgt)).numpy() - base).max() < 1e-6
    finally:
        emb.assign(saved)
    # a real source token does change them (the check above is not vacuous)
    changed = src.copy()
    changed[:, 0] = np.where(changed[:, 0] == 4, 5, 4)
    assert np.abs(model((changed, tgt)).numpy() - base).max() > 1e-4


def test_target_padding_does_not_change_real_positions(model):
    src, tgt = _batch()
    base = model((src, tgt)).numpy()
    longer = model((src, np.pad(tgt, ((0, 0), (0, 4))))).numpy()[:, :T]
    real = tgt != 0
    assert np.abs(longer - base)[real].max() < 1e-6


def test_same_logits_for_a_batch_and_its_halves(model):
    src, tgt = _batch(b=10, seed=1)
    whole = model((src, tgt)).numpy()
    halves = np.concatenate([model((src[:5], tgt[:5])).numpy(), model((src[5:], tgt[5:])).numpy()])
    assert np.abs(whole - halves).max() < 1e-5
    ids = greedy_decode(model, src, T).numpy()
    np.testing.assert_array_equal(ids, np.concatenate([greedy_decode(model, src[:3], T).numpy(),
                                                       greedy_decode(model, src[3:], T).numpy()]))


def test_greedy_decode_matches_teacher_forcing():
    """Step-by-step decoding and the whole-sequence call are the same network: fed the greedy
    tokens as tgt_in, the teacher-forced argmax reproduces them."""
    m = _model(seed=1)
    bias = m.to_logits.bias
    bias.assign(bias.numpy() + np.array([-100.0] * 4 + [0.0] * (TGT_V - 4), np.float32))  # no reserved ids
    src, _ = _batch(seed=2)
    ids = tf.function(lambda s: m.greedy_decode(s, T))(src).numpy()
    assert ids.shape == (8, T) and ids.dtype == np.int32 and (ids >= 4).all()
    tgt_in = np.concatenate([np.full((8, 1), 2, np.int32), ids[:, :-1]], axis=1)
    np.testing.assert_array_equal(np.argmax(m((src, tgt_in)).numpy(), -1), ids)


def test_greedy_decode_pads_after_end():
    m = _model(seed=2)
    src, _ = _batch(b=4)
    # logits = bias: <end> at every step, so only the first may stay
    m.to_logits.kernel.assign(np.zeros(m.to_logits.kernel.shape, np.float32))
    m.to_logits.bias.assign(np.eye(TGT_V, dtype=np.float32)[END])
    np.testing.assert_array_equal(greedy_decode(m, src, 5).numpy(), [[END, 0, 0, 0, 0]] * 4)
    # a random model with <end> made likely: rows end at different steps, then only padding
    r = _model(seed=3)
    src = _batch(b=8, seed=4)[0]
    decode = tf.function(lambda s: greedy_decode(r, s, 12))  # traced once: the bias is a variable
    found = 0
    for boost in np.linspace(0.0, 3.0, 13):
        r.to_logits.bias.assign(np.eye(TGT_V, dtype=np.float32)[END] * boost)
        ids = decode(src).numpy()
        for row in ids:
            ends = np.flatnonzero(row == END)
            if len(ends):
                assert (row[ends[0] + 1:] == 0).all()
                found += 0 < ends[0] < 11
    assert found >= 2  # the rule was exercised on rows that end mid-way


def test_mixed_precision_logits_are_float32():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        m = _model()
        src, tgt = _batch(b=2)
        assert m.encoder_gru.compute_dtype == "float16"
        assert m((src, tgt)).dtype == tf.float32
        assert greedy_decode(m, src, 3).dtype == tf.int32
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_evaluation_traces_once_and_counts_every_example(model):
    """distexp's evaluation (distexp.train.loops.evaluate) on 10 pairs in batches of 4, 4 and 2:
    the partial last batch does not trace the step again (the batches' spec, batch dimension
    None, is its signature: seq2seq's unrolled greedy decoding made a second trace cost seconds),
    and every example counts once: the figures of one batch of 10, in this process."""
    from distexp.tasks.seq2seq import Seq2Seq
    from distexp.train.loops.evaluate import make_evaluate

    src, tgt = _batch(b=10)
    out = np.concatenate([tgt[:, 1:], np.zeros((10, 1), np.int32)], axis=1)  # shifted by one
    ds = tf.data.Dataset.from_tensor_slices(((src, tgt), out))
    split = make_evaluate(Seq2Seq(), model, ds.batch(4), tf.distribute.OneDeviceStrategy("/cpu:0"))
    got = split()
    assert split.traces() == 1
    assert split() == got and split.traces() == 1  # a second evaluation: no new trace either
    whole = make_evaluate(Seq2Seq(), model, ds.batch(10))()
    assert sorted(got) == ["eval/loss", "eval/sequence_accuracy", "eval/token_accuracy"]
    for k, v in whole.items():
        assert got[k] == pytest.approx(v, rel=1e-5), k

