"""Image (or vector) classification with sparse integer labels and logits: distexp's first task.

Loss: softmax cross-entropy per example, summed; every example weighs 1, so the global weight is
the global batch (no all-reduce). Metric: accuracy = correct / examples. Figures keep the names
they always had: train/loss, train/accuracy, eval/loss, eval/accuracy.
"""
from __future__ import annotations

from distexp.tasks.base import Task


class Classification(Task):
    name = "classification"
    train_metrics = ("accuracy",)
    eval_metrics = ("accuracy",)
    objective = "eval/accuracy"
    target_metric = "eval/accuracy"
    unit_weight = True
    fit_ok = True

    def loss(self, labels, outputs):
        import tensorflow as tf

        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.int32), logits=tf.cast(outputs, tf.float32))
        return tf.reduce_sum(per_example), tf.cast(tf.shape(per_example)[0], tf.float32)

    def metrics(self, labels, outputs):
        import tensorflow as tf

        pred = tf.argmax(outputs, axis=-1, output_type=tf.int32)
        correct = tf.reduce_sum(tf.cast(tf.equal(pred, tf.cast(labels, tf.int32)), tf.float32))
        return {"accuracy": (correct, tf.cast(tf.shape(pred)[0], tf.float32))}
