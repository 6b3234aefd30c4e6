"""Every tag name distexp sets on an MLflow run or experiment, or reads back (a leaf: the job, the
trainer, the sweeps, the report and the UI all name them from here).

MLflow's own tags that distexp writes are at the end.
"""
# -- a run's place in a sweep (the sweep's parent run and each job's run) --------------------------
RUN_KIND = "distexp.run_kind"              # "sweep" (the parent) or "job"
SWEEP_ID = "distexp.sweep_id"
SWEEP_DIR = "distexp.sweep_dir"
OUTCOMES = "distexp.outcomes"           # a sweep's decision: JSON records (distexp.figures.outcomes)
JOB_NUM = "distexp.job_num"                # Hydra's job number in the sweep
REPEAT = "distexp.repeat"
SETUP_INDEX = "distexp.setup_index"        # a job's set-up: its place in the sweep's list (the decision's)
SETUP_KEY = "distexp.setup_key"            # ... and its identity: a short hash of planning.Setup.key
SETUP_RANK = "distexp.setup_rank"          # the run's place among its set-up's runs (the view's order)
JOB_COUNT = "distexp.job_count"            # the parent: jobs that ran
BEST_JOB = "distexp.best_job"
BEST_OVERRIDES = "distexp.best_overrides"
ERROR = "distexp.error"                    # why a job or a sweep failed: the one line
RESUMED_IN = "distexp.resumed_in"          # sweep.resume=<id>: the sweep dir that resumed it

# -- one job's run ---------------------------------------------------------------------------------
JOB_DIR = "distexp.job_dir"
OVERRIDES = "distexp.overrides"
HOST = "distexp.host"
TASK_HOSTS = "distexp.task_hosts"          # an external cluster: task=host, ...
CLUSTER_ID = "distexp.cluster_id"          # Slurm: slurm:<job>.<step> (other nodes find the run)
RESUME = "distexp.resume"                  # "requested": resume=true
RESUME_FALLBACK = "distexp.resume_fallback"  # the checkpoints skipped and the one restored
RESUMED_FROM = "distexp.resumed_from"
RESUMED_FROM_STEP = "distexp.resumed_from_step"
DIVERGED = "distexp.diverged"
DIVERGED_AT = "distexp.diverged_at"
PEAK_SOURCE = "distexp.peak_source"        # where perf/peak_flops comes from
NOT_MEASURED = "distexp.not_measured"      # timing figures this run could not measure (not logged)
DISTURBED = "distexp.disturbed"            # why the timed steps were starved (figures.disturbance;
#   a sweep run left out of its pairs: distexp.sweeps.auto)
JIT_COMPILE = "distexp.jit_compile"        # the job's XLA line: on/off and why (config.xla)

# -- what the runs table shows (distexp.tracking.display, distexp.sweeps.publish, tracking.view) --
EXAMPLES_PER_SEC = "examples/s"            # perf/examples_per_sec rounded, with its interval
ACCURACY = "accuracy"                      # the task's eval figure, 3 decimals
SPEED_UP = "speed-up"                      # the report's equal-work speed-up (same global batch)
SETUP = "set-up"                           # the job's set-up ("mirrored x2 batch 128"): the UI's group

# -- who owns a RUNNING run (distexp.tracking.owner) ---------------------------------------------
OWNER = "distexp.owner"
HEARTBEAT = "distexp.heartbeat"
ENDED_BY = "distexp.ended_by"

# -- MLflow's own ---------------------------------------------------------------------------------
NOTE = "mlflow.note.content"               # a run's or experiment's description
PARENT_RUN = "mlflow.parentRunId"
EXPERIMENT_KIND = "mlflow.experimentKind"
SHARED_VIEW = "mlflow.sharedViewState."    # + a key: a shared runs-table view (tracking.view)
