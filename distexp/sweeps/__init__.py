"""Sweeps (the Hydra multirun process; no TensorFlow here). The sweep runs the jobs (distexp.job),
which ask it what they need only through ``seat`` (tests/project/test_layout.py).

- ``callback``: the Hydra callback: the sweep's start, each job's record
- ``sweep``: the sweep's set-ups (composed and checked once) and its one round loop (the
  DistexpSweeper's logic; the plugin is Hydra's glue)
- ``planning``: repeats, resume, which jobs run
- ``auto``: `repeats=auto`, rounds until every comparison is settled (and repeats=N's decision)
- ``seat``: a job's one door into its sweep (GPU lease, tags, swept values, the sweep's files)
- ``gpu_pool``: disjoint GPUs for the jobs of a sweep that run at the same time
- ``parent``: the sweep's parent run in MLflow: opened, reopened (resume), its children's tags
- ``records``: the sweep's files (sweep.json, sweep_jobs/<num>.json)
- ``ending``: the sweep's end (parent run, outcome, summary, exit code) and this process's sweeps
- ``interrupted``: a stopped sweep's one line, and the interrupted sweep of the same overrides
- ``setups``: a set-up's one identity (index and key), handed to each job for its run's tags
- ``launchers``: what a sweep's launcher declares (jobs placed elsewhere, an end through the
  interpreter's teardown)
- ``publish``: the finished sweep made readable in the MLflow UI (the report's verdict and table)
- ``slurm_launcher``: the glue of the Slurm (submitit) launcher
"""
