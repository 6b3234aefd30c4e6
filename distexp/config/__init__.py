"""The job's configuration, without TensorFlow.

- ``schema``: the structured configs Hydra checks at composition (``register()`` stores them)
- ``checks``: what types cannot express (one line per bad input, before any training process)
- ``resolved``: the facts derived from a config (the strategy's record, replicas, global batch,
  workers), computed in the job process
- ``limits``: what this machine cannot hold or places it cannot write (checked by ``checks``)
- ``help``: ``--help``, each key with its default and description
- ``mode``: whether this process runs a job of a multirun (the one place that asks Hydra)
- ``trained_with``: what a checkpoint was trained with, and whether ``resume=true`` may continue it
"""
