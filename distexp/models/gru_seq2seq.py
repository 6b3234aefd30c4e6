"""A GRU encoder-decoder with Bahdanau (additive) attention (Keras 3), the TF "NMT with attention"
tutorial's model, for teacher-forced training and greedy decoding under any tf.distribute strategy.

Shapes: ``src`` [B, S] and ``tgt_in`` [B, T] are int32 ids, 0 = padding (``distexp.data.text_pairs.Vocab``:
``<start>`` = 2, ``<end>`` = 3). Padding is read from the ids (``id != 0``), never from lengths,
so any batch, split any way across replicas, gives the same per-example logits.

- Encoder: ``Embedding(mask_zero=True)`` -> ``GRU(return_sequences, return_state)``.
- Decoder: ``Embedding(mask_zero=True)`` -> ``GRU`` started from the encoder's final state ->
  additive attention over the encoder outputs (queries: the decoder outputs; score
  ``v . tanh(W1 q + W2 k)``: ``W1``/``W2`` are ``Dense(units, use_bias=False)``, ``v`` is
  ``keras.layers.AdditiveAttention(use_scale=True)``'s scale; padded source positions get weight
  exactly 0) -> concat(decoder output, context) -> ``Dense(units, tanh)`` -> ``Dense(tgt_vocab)``
  logits, float32 even under a mixed-precision policy.
- ``model((src, tgt_in))`` -> logits [B, T, V] (teacher forcing: ``tgt_in`` = ``<start>`` +
  target). ``greedy_decode(model, src, max_len)`` -> ids [B, max_len]: the predicted tokens, the
  decoder run one step at a time from ``<start>``, each step fed the previous argmax; everything
  after the first ``<end>`` is 0. Both are free of Python control flow on tensor values, so they
  run eagerly, in a ``tf.function`` and inside ``strategy.run``.
"""
from __future__ import annotations

import keras
from keras import layers, ops

PAD, START, END = 0, 2, 3


class GruSeq2Seq(keras.Model):
    """The encoder-decoder; build it with ``build_gru_seq2seq`` (which creates its weights)."""

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, *, embedding_dim: int = 256,
                 units: int = 1024, max_target_len: int = 32, **kwargs):
        super().__init__(**kwargs)
        self.src_vocab_size, self.tgt_vocab_size = int(src_vocab_size), int(tgt_vocab_size)
        self.embedding_dim, self.units = int(embedding_dim), int(units)
        self.max_target_len = int(max_target_len)
        self.src_embedding = layers.Embedding(src_vocab_size, embedding_dim, mask_zero=True,
                                              name="src_embedding")
        self.encoder_gru = layers.GRU(units, return_sequences=True, return_state=True,
                                      recurrent_initializer="glorot_uniform", name="encoder_gru")
        self.tgt_embedding = layers.Embedding(tgt_vocab_size, embedding_dim, mask_zero=True,
                                              name="tgt_embedding")
        self.decoder_gru = layers.GRU(units, return_sequences=True, return_state=True,
                                      recurrent_initializer="glorot_uniform", name="decoder_gru")
        self.w1 = layers.Dense(units, use_bias=False, name="attention_w1")  # on the queries
        self.w2 = layers.Dense(units, use_bias=False, name="attention_w2")  # on the keys
        self.attention = layers.AdditiveAttention(use_scale=True, name="attention")
        self.combine = layers.Dense(units, activation="tanh", name="attention_combine")
        self.to_logits = layers.Dense(tgt_vocab_size, dtype="float32", name="logits")

    def encode(self, src, training=None):
        """(encoder outputs [B, S, units], final state [B, units], keys W2(outputs), source mask [B, S])."""
        src_mask = ops.not_equal(src, PAD)
        outputs, state = self.encoder_gru(self.src_embedding(src), mask=src_mask, training=training)
        return outputs, state, self.w2(outputs), src_mask

    def decode(self, tgt_in, state, enc_outputs, keys, src_mask, tgt_mask=None, training=None):
        """Logits [B, T, V] and the decoder's last state for ``tgt_in`` [B, T] from ``state``."""
        dec_outputs, state = self.decoder_gru(self.tgt_embedding(tgt_in), initial_state=state,
                                              mask=tgt_mask, training=training)
        queries = self.w1(dec_outputs)
        masks = [tgt_mask if tgt_mask is not None else ops.ones_like(tgt_in, dtype="bool"), src_mask]
        context = self.attention([queries, enc_outputs, keys], mask=masks, training=training)
        hidden = self.combine(ops.concatenate([dec_outputs, context], axis=-1))
        return self.to_logits(hidden), state

    def call(self, inputs, training=None):
        """Teacher forcing: ``inputs`` = (src [B, S], tgt_in [B, T]) -> logits [B, T, V] float32."""
        src, tgt_in = inputs
        enc_outputs, state, keys, src_mask = self.encode(src, training=training)
        logits, _ = self.decode(tgt_in, state, enc_outputs, keys, src_mask,
                                tgt_mask=ops.not_equal(tgt_in, PAD), training=training)
        return logits

    def greedy_decode(self, src, max_len: int | None = None):
        """Predicted ids [B, max_len] int32 (``max_len`` static; default ``max_target_len``)."""
        max_len = int(max_len or self.max_target_len)
        enc_outputs, state, keys, src_mask = self.encode(src, training=False)
        token = ops.full((ops.shape(src)[0], 1), START, dtype="int32")
        steps = []
        for _ in range(max_len):  # static length: unrolled in a graph, no tensor-valued branching
            logits, state = self.decode(token, state, enc_outputs, keys, src_mask, training=False)
            token = ops.cast(ops.argmax(logits, axis=-1), "int32")  # [B, 1]
            steps.append(token)
        ids = ops.concatenate(steps, axis=1)
        is_end = ops.cast(ops.equal(ids, END), "int32")
        after_end = ops.greater(ops.cumsum(is_end, axis=1) - is_end, 0)
        return ops.where(after_end, ops.zeros_like(ids), ids)

    def get_config(self):
        config = super().get_config()
        config.update(src_vocab_size=self.src_vocab_size, tgt_vocab_size=self.tgt_vocab_size,
                      embedding_dim=self.embedding_dim, units=self.units,
                      max_target_len=self.max_target_len)
        return config


def build_gru_seq2seq(src_vocab_size: int, tgt_vocab_size: int, *, embedding_dim: int = 256,
                      units: int = 1024, max_target_len: int) -> GruSeq2Seq:
    """The model with its weights created (call it inside ``strategy.scope()``): it is run once on
    a dummy batch, so ``count_params()`` and ``summary()`` work at once."""
    model = GruSeq2Seq(src_vocab_size, tgt_vocab_size, embedding_dim=embedding_dim, units=units,
                       max_target_len=max_target_len, name="gru_seq2seq")
    src = ops.ones((1, 2), dtype="int32")
    tgt = ops.ones((1, max(1, int(max_target_len))), dtype="int32")
    model((src, tgt), training=False)
    return model


def greedy_decode(model: GruSeq2Seq, src, max_len: int):
    """``model.greedy_decode(src, max_len)``: ids [B, max_len] int32, 0 after the first ``<end>``."""
    return model.greedy_decode(src, max_len)
