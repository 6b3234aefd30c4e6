"""The task: what is specific to a problem (TF Model Garden's `base_task` is the model).

A task owns the loss, the metrics and their MLflow names, the figure a sweep optimises and the
one `target_accuracy` aims at. The training step (distexp.train.step), the outer loop
(distexp.train.loops.custom) and the evaluation (distexp.train.loops.evaluate) know no loss: they call the
task. Importing this module does not import TensorFlow (the job process checks names with it).

The loss contract - why it is exact under every strategy:
- `loss(labels, outputs)` returns `(sum, weight)` for the replica's part of the global batch:
  the sum of per-unit losses (per example, or per real token) and how many units it summed.
  distexp divides the sum by the weight of the *global* batch (all-reduced over replicas, or
  the global batch size when every example weighs 1) and sums the gradients over replicas, so
  the step's loss is the exact mean over the global batch whatever the split, never a mean of
  replica means (which is wrong when replicas hold different numbers of real tokens).
- A task may instead return one scalar: it is then taken as this replica's contribution as is
  (gradients and reported losses are summed over replicas; eval/loss is the mean over evaluation
  batches of those sums, the last short batch weighing as a full one). That is the user's
  responsibility; `python -m distexp.parity` checks it against one device.

Metrics are `(sum, count)` pairs per name: summed over replicas and steps, then divided, so
they are exact too. `metrics` runs in the training step; `eval_metrics` in the evaluation
(which may decode, e.g. greedy decoding for sequence accuracy).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple


class Task:
    name: str = "task"
    # Metric names (without the train/ or eval/ prefix) logged from the training step and
    # from the evaluation; the loss is always logged as train/loss and eval/loss.
    train_metrics: Sequence[str] = ()
    eval_metrics: Sequence[str] = ()
    # The figure a job returns to a sweeper by default, whether larger is better, and the
    # eval figure `target_accuracy` is compared with (None: target_accuracy is refused).
    objective: str = "eval/loss"
    target_metric: Optional[str] = None
    # True when every example weighs 1 in the loss (the global weight is the global batch, no
    # all-reduce needed); False when the weight is counted (tokens) and all-reduced.
    unit_weight: bool = True
    # What perf/<units>_per_sec counts beside examples (None: examples only).
    units: Optional[str] = None
    # Whether Keras `fit` can log exact figures for this task (loop=fit refused otherwise).
    fit_ok: bool = False
    fit_refusal: str = ("Keras fit would compute this task's loss with Keras loss objects, "
                        "which average over each replica and then over replicas")

    # -- built by the trainer -----------------------------------------------------------------
    def build_model(self, cfg, data):
        """The keras.Model (called inside strategy.scope()). Default: distexp.models by name."""
        from distexp import models

        return models.build(cfg, data.input_shape, data.num_classes)

    # -- before the first step (the trainer calls these; cheap: array ops, specs) -----------------
    def check_data(self, cfg, data):
        """Raise UserError (one line) when `data` cannot train this task; return it (a task may
        add checks to a tf.data pipeline)."""
        return data

    def check_model(self, cfg, model, data) -> Optional[str]:
        """Raise UserError when `model` does not fit `data`; return a line to print (how the model
        is trained, e.g. on probabilities) or None. Called inside strategy.scope()."""
        return None

    # -- inside the replica step (TensorFlow) ---------------------------------------------------
    def loss(self, labels, outputs) -> Any:
        """(sum, weight) of this replica's per-unit losses, or one scalar (see the module doc)."""
        raise NotImplementedError

    def metrics(self, labels, outputs) -> Dict[str, Tuple[Any, Any]]:
        """{name: (sum, count)} over this replica's batch, for train_metrics."""
        return {}

    def units_in(self, labels) -> Any:
        """How many units (e.g. real target tokens) this replica's batch holds; None: examples."""
        return None

    def eval_outputs(self, model, x):
        """Outputs for evaluation (default: the model in inference mode)."""
        return model(x, training=False)

    def eval_sums(self, model, x, y) -> Dict[str, Tuple[Any, Any]]:
        """{"loss": (sum, weight), name: (sum, count) ...} over one evaluation batch."""
        outputs = self.eval_outputs(model, x)
        out = self.loss(y, outputs)
        if not isinstance(out, (tuple, list)):  # a task that reduced its loss itself: as in
            import tensorflow as tf  # training, the replicas' values are summed per
            #                                    batch; eval/loss is their mean over batches
            replicas = tf.distribute.get_replica_context().num_replicas_in_sync
            empty = tf.equal(tf.shape(tf.nest.flatten(y)[0])[0], 0)
            out = (tf.where(empty, 0.0, tf.cast(out, tf.float32)), 1.0 / replicas)
        return {"loss": tuple(out), **self.metrics(y, outputs), **self.extra_eval(model, x, y)}

    def extra_eval(self, model, x, y) -> Dict[str, Tuple[Any, Any]]:
        """Eval-only metrics beyond `metrics` (e.g. sequence accuracy by greedy decoding)."""
        return {}

    # -- names ----------------------------------------------------------------------------------
    def figures(self) -> Tuple[str, ...]:
        """Every final figure name this task logs (what `objective` may name)."""
        return (tuple(f"eval/{m}" for m in self.eval_metrics) + ("eval/loss", "train/loss")
                + tuple(f"train/{m}" for m in self.train_metrics))

    def describe(self) -> str:
        return self.name

