"""The job's configuration, without TensorFlow.

- ``schema``: the structured configs Hydra checks at composition (``register()`` stores them)
- ``checks``: what types cannot express (one line per bad input, before any training process)
- ``resolved``: the facts derived from a config (the strategy's record, replicas, global batch,
  workers), computed in the job process
"""
