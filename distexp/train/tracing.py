"""`traced`: how distexp's training-side functions become TensorFlow graphs (the step, its
forward and backward pass, the probes, the evaluation step: distexp.train.step)."""
from __future__ import annotations


class traced:
    """`tf.function(fn, autograph=False, **options)`: traced as plain TF, as Keras 3 traces its own
    train and test steps (`tf.autograph.experimental.do_not_convert`). Autograph's conversion of
    the Python code a step calls (distexp's step, the task's loss and metrics) was most of a job's
    tracing: the one-step function 0.35 -> 0.15 s, the evaluation step 0.33 -> 0.08 s (a sweep
    job of the default model, quiet 2-core machine). distexp's own steps, tasks and models
    branch and loop with TF ops only.

    A user's task or model code that needs autograph (`if loss > 0:`, `for i in range(n)` or
    `len(t)` on a tensor) fails to trace as plain TF (OperatorNotAllowedInGraphError, TypeError
    ...): the function is traced again with autograph, once. If that fails too, the first error is
    raised as it was. Errors of a step that ran (TensorFlow's OpError: a bad label, a NaN check)
    are raised at once: the step is never run twice."""

    def __init__(self, fn, **options):
        import tensorflow as tf

        self._fn, self._options = fn, options
        self._function = tf.function(fn, autograph=False, **options)
        self.autograph = False

    def __call__(self, *args, **kwargs):
        return self.via(lambda function: function(*args, **kwargs))

    def via(self, call):
        """`call(the tf.function)`, e.g. a ClusterCoordinator scheduling it (it takes only a
        tf.function and traces it there); a trace that needs autograph: again with it."""
        import tensorflow as tf

        try:
            return call(self._function)
        except Exception as ex:  # raised again below unless autograph helps
            if self.autograph or isinstance(ex, tf.errors.OpError):
                raise
            plain = ex
        self.autograph = True
        self._function = tf.function(self._fn, autograph=True, **self._options)
        try:
            return call(self._function)
        except Exception:  # noqa: BLE001  (not an autograph matter: the user's own error)
            raise plain from None

    def __getattr__(self, name):  # python_function, experimental_get_tracing_count, ...
        return getattr(self._function, name)
