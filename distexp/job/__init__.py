"""One job's life in the job process (no TensorFlow here).

- ``lifecycle``: prepare -> execute -> conclude (checks, the MLflow run, the exit code)
- ``launch``: starting, watching and stopping the training processes
- ``console``: what the console shows while the job trains (a live bar, plain lines, a sweep's
  "job k of N"); ``summary``: the job's closing lines, from its logged figures
"""
