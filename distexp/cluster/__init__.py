"""Which processes a job needs and how they find each other (no TensorFlow here).

- ``plan``: the job's processes (local clusters, TF_CONFIG, Slurm tasks) and what each is told
- ``slurm_env``: Slurm's step variables read as SlurmClusterResolver reads them (a leaf)
- ``liveness``: watches that end or fail a ps task whose peer is gone
"""
