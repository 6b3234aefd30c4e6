"""One job's life in the job process (no TensorFlow here).

- ``lifecycle``: prepare -> execute -> conclude (checks, the MLflow run, the exit code)
- ``launch``: starting, watching and stopping the training processes
"""
