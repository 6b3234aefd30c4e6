"""Image (or vector) classification with sparse integer labels and logits: distexp's first task.

Loss: softmax cross-entropy per example, summed; every example weighs 1, so the global weight is
the global batch (no all-reduce). Metric: accuracy = correct / examples. Figures keep the names
they always had: train/loss, train/accuracy, eval/loss, eval/accuracy.

Before the first step (distexp.tasks.preflight): the labels are class ids in range, one per
example, and the model takes the data's input and gives one score per class. A model whose last
layer is a softmax (most published Keras examples) is trained on its probabilities
(`from_logits=False`), said in one line, never silently as if they were logits.
"""
from __future__ import annotations

from distexp.tasks import preflight
from distexp.tasks.base import Task


class Classification(Task):  # its record: distexp.options.tasks
    name = "classification"
    train_metrics = ("accuracy",)
    eval_metrics = ("accuracy",)
    objective = "eval/accuracy"
    target_metric = "eval/accuracy"
    unit_weight = True
    fit_ok = True
    from_logits = True  # False: the model outputs probabilities (its last layer is a softmax)

    def check_data(self, cfg, data):
        return preflight.check_labels(cfg, data)

    def check_model(self, cfg, model, data):
        if preflight.check_model(cfg, model, data) == "probabilities":
            self.from_logits = False
            return preflight.probabilities_note(cfg)
        return None

    def loss(self, labels, outputs):
        import keras
        import tensorflow as tf

        labels, outputs = tf.cast(labels, tf.int32), tf.cast(outputs, tf.float32)
        if self.from_logits:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=outputs)
        else:  # Keras' own: clips the probabilities away from 0 and 1, then -log(p[label])
            per_example = keras.losses.sparse_categorical_crossentropy(labels, outputs)
        return tf.reduce_sum(per_example), tf.cast(tf.shape(per_example)[0], tf.float32)

    def metrics(self, labels, outputs):
        import tensorflow as tf

        pred = tf.argmax(outputs, axis=-1, output_type=tf.int32)
        correct = tf.reduce_sum(tf.cast(tf.equal(pred, tf.cast(labels, tf.int32)), tf.float32))
        return {"accuracy": (correct, tf.cast(tf.shape(pred)[0], tf.float32))}
