"""Sequence to sequence with teacher forcing (the GRU encoder-decoder of TF's NMT tutorial).

Batches are `((source, target_in), target_out)`: int32 token ids, 0 = padding; `target_in`
starts with <start>, `target_out` is the same sentence shifted by one and ends with <end>.

- Loss: cross-entropy per real target token (padding masked out), summed; the weight is the
  number of real tokens, all-reduced over replicas, so `train/loss` and `eval/loss` are exact
  per-token means over the global batch however the padding falls between replicas.
- `token_accuracy`: argmax of the teacher-forced logits equals the reference, over real tokens.
- `sequence_accuracy` (evaluation only): greedy decoding from <start> (the model's own
  predictions fed back, no teacher forcing) reproduces the whole reference, <end> included.
- Units: real target tokens (`perf/tokens_per_sec` beside examples/s).
"""
from __future__ import annotations

from distexp.tasks.base import Task


class Seq2Seq(Task):  # its record: distexp.options.tasks
    name = "seq2seq"
    train_metrics = ("token_accuracy",)
    eval_metrics = ("token_accuracy", "sequence_accuracy")
    objective = "eval/token_accuracy"
    target_metric = "eval/token_accuracy"
    unit_weight = False
    units = "tokens"
    fit_ok = False
    fit_refusal = ("Keras 3 loss objects take each replica's mean over its own real tokens and "
                   "average those means, which is not the per-token mean when replicas hold "
                   "different numbers of padding tokens (docs/facts.md#masked-loss)")

    def build_model(self, cfg, data):
        from distexp.models.gru_seq2seq import build_gru_seq2seq

        info = data.info
        return build_gru_seq2seq(info["src_vocab_size"], info["tgt_vocab_size"],
                                 embedding_dim=int(cfg.model.embedding_dim),
                                 units=int(cfg.model.units),
                                 max_target_len=int(info["max_tgt_len"]))

    @staticmethod
    def _mask(labels):
        import tensorflow as tf

        return tf.cast(tf.not_equal(labels, 0), tf.float32)

    def loss(self, labels, outputs):
        import tensorflow as tf

        labels = tf.cast(labels, tf.int32)
        per_token = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=tf.cast(outputs, tf.float32))
        mask = self._mask(labels)
        return tf.reduce_sum(per_token * mask), tf.reduce_sum(mask)

    def metrics(self, labels, outputs):
        import tensorflow as tf

        labels = tf.cast(labels, tf.int32)
        mask = self._mask(labels)
        hit = tf.cast(tf.equal(tf.argmax(outputs, -1, output_type=tf.int32), labels), tf.float32)
        return {"token_accuracy": (tf.reduce_sum(hit * mask), tf.reduce_sum(mask))}

    def units_in(self, labels):
        import tensorflow as tf

        return tf.reduce_sum(self._mask(tf.cast(labels, tf.int32)))

    def extra_eval(self, model, x, y):
        import tensorflow as tf

        from distexp.models.gru_seq2seq import greedy_decode

        y = tf.cast(y, tf.int32)
        decoded = greedy_decode(model, x[0], int(y.shape[1]))
        same = tf.reduce_all(tf.equal(tf.cast(decoded, tf.int32), y), axis=1)
        return {"sequence_accuracy": (tf.reduce_sum(tf.cast(same, tf.float32)),
                                      tf.cast(tf.shape(y)[0], tf.float32))}
