"""Which processes a job needs, where they run and how they find each other (no TensorFlow here).

- ``kinds``: one record per cluster kind (``local``, ``tf_config``, ``slurm``, ``ray``: Lightning's
  ClusterEnvironment is the model), the registry, and the job's plan; a record plans the job's
  processes, builds the trainer's cluster resolver and answers what the job, the checks and the
  sweeps ask (nothing compares the name)
- ``local``, ``tf_config``, ``slurm``, ``ray``: the built-in kinds (registered here, in the contract's
  order); ``ray_plan`` (pure) and ``ray_run`` the Ray kind's plan and its side that talks to Ray
  (`RayPlan.acquire`: connect, place), ``ray_tasks`` a task's actor and its trainer,
  ``ray_sweep`` hydra/launcher=ray, ``ray_compat`` every private Ray name
- ``processes``: `Plan`, the job's processes before they start (pure: ``kinds.plan`` makes it from
  a strategy's record and the cluster kind; `acquire`/`release` take and give back what the job
  holds outside them), and `TrainerProcess`, a started trainer wherever it runs
- ``slurm_env``: Slurm's step variables read as SlurmClusterResolver reads them (a leaf)
- ``liveness``: watches that end or fail a ps task whose peer is gone
"""
from distexp.cluster import local, tf_config, slurm, ray  # noqa: F401  # isort: skip  (the built-ins register, in order)
