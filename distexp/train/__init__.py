"""The training processes: the only side of distexp that imports TensorFlow.

- ``trainer``: the entry point (``python -m distexp.train.trainer``): devices, strategy, model
  and optimizer inside ``strategy.scope()``, the loop, the result
- ``devices``, ``step`` (the one replica step and its dispatchers), ``loops/`` (custom, fit,
  evaluate), ``autotune`` (steps_per_execution), ``checkpoints``, ``progress`` (console, MLflow
  figures, steps.csv)
- ``probe_phase``: where a step's time goes, measured after training (``split_probes``,
  ``input_probe``, ``profile``)
"""
