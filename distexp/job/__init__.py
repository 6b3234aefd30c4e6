"""One job's life in the job process (no TensorFlow here). The job is started by Hydra (a sweep's
job too) and starts the training processes (distexp.train) as children; it asks the sweep around
it only through distexp.sweeps.seat, and the trainers speak to its console through
distexp.progress_feed (tests/project/test_layout.py).

- ``lifecycle``: prepare -> execute -> conclude (checks, the plan acquired and released, the MLflow
  run, the job's `Outcome`, which distexp.__main__ turns into the exit code); ``run_setup``: the
  job's MLflow run (its name, tags, params)
- ``launch``: starting, watching and stopping the training processes
- ``warm_client``: the warm trainer (distexp.train.warm_server) the training processes fork from
- ``startup``: when the job process began, and its garbage collector during the start-up
- ``console``: what the console shows while the job trains (a live bar, plain lines, a sweep's
  "job k of N"); ``summary``: the job's closing lines, from its logged figures
- ``resume``: what an interrupted job says about continuing it
"""
