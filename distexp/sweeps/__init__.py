"""Sweeps (the Hydra multirun process; no TensorFlow here).

- ``callback``: the Hydra callback: the sweep's start, each job's record
- ``ending``: the sweep's end (parent run, outcome, summary, exit code) and this process's sweeps
- ``auto``: repeats=auto's rounds and comparisons (and repeats=N's decision)
- ``parent``: the sweep's parent run in MLflow: opened, reopened (resume), its children's tags
- ``planning``: repeats, resume, which jobs run (the DistexpSweeper's logic)
- ``records``: the sweep's files (sweep.json, sweep_jobs/<num>.json) and tag names
- ``slurm``: the glue of the Slurm (submitit) launcher
"""
