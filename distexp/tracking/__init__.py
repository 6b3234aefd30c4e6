"""MLflow, from both sides of a job, without TensorFlow.

The job process (distexp.job.lifecycle) owns the run's life: it creates the run, logs the resolved config
and artifacts, and always ends the run FINISHED, FAILED or KILLED, whatever the training processes
did (even a SIGKILLed trainer cannot leave it RUNNING). Only the chief training process adds to
that run, through a file the job process forwards; other workers get no sink, so they cannot log.

Separation of concerns:
- tracking.store    the store and its URI: the start-up probe, the client (a new SQLite store
                    opened under a file lock), bounded HTTP retries
- tracking.redaction credentials in a URI never printed, logged or stored (text, files, streams,
                    log records)
- tracking.run      JobRun: the run of one job in the job process (params, artifacts, status)
- tracking.forward  Forwarder: creates the run while the trainer starts, the gate file, forwarding
                    the chief's records, MLflow's system metrics
- tracking.sink     RunLogger: the chief trainer's records as JSON lines (no MLflow imported there)
- tracking.owner    the process that owns a run (tag + heartbeat), and ending the runs whose
                    owner was killed (``end_dead_runs``): no run stays RUNNING forever
- tracking.view     the MLflow UI's view of a sweep (shared table view, URL, the command
                    a job or sweep prints); tracking.lookup finds the latest sweep, tracking.tags
                    names the tags
- tracking.faults   a store's failure in words: read-only, locked, full, corrupt, newer schema
- tracking.offline  the offline file of a job whose server died, and
                    ``python -m distexp.tracking import <job_dir>`` that replays it

A tracking server that is down at start stops the job with one line before any training process
starts (``probe``); one that dies during the job sends what is left to the offline file; training
is never stopped or slowed by a dead server beyond one bounded retry.
"""
from distexp.tracking.display import workload
from distexp.tracking.faults import said as store_fault
from distexp.tracking.forward import Forwarder
from distexp.tracking.offline import OFFLINE_FILE, Offline, import_command, import_dir, offline_summary
from distexp.tracking.owner import end_dead_runs, owner_tags
from distexp.tracking.redaction import redact, redact_text
from distexp.tracking.run import JobRun, run_name
from distexp.tracking.sink import RunLogger
from distexp.tracking.store import client, http_env, probe, reason

__all__ = ["Forwarder", "JobRun", "Offline", "RunLogger", "OFFLINE_FILE",
           "client", "store_fault", "http_env", "import_command", "import_dir",
           "offline_summary", "end_dead_runs", "owner_tags", "probe", "reason", "redact",
           "redact_text", "run_name", "workload"]
