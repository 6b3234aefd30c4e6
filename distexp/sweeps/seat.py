"""A job's seat in its sweep: everything the job process (distexp.job) asks of the sweep around it,
and its one door into distexp.sweeps (tests/project/test_layout.py refuses any other). The processes nest
sweep > job > trainer; the outer knows the inner, the inner asks the outer only here, so a change to
a sweep's files or parent run touches this seam, not the job.

- `gpu_lease(cfg, found)`: a context; in a sweep whose jobs run side by side, this job's disjoint
  GPUs (CUDA_VISIBLE_DEVICES) for as long as it runs, as many as its checked facts `found`
  (distexp.config.resolved.JobFacts) need; yields their ids or None (distexp.sweeps.gpu_pool)
- `tags(sweep_dir, uri, experiment, num)`: the child run's tags that tie it to the sweep's parent
  run (distexp.sweeps.parent)
- `swept_values(sweep_dir)`: what this job's overrides set among the sweep's swept keys, for the
  run's name (distexp.sweeps.records)
- `SWEEP_FILE`, `JOBS_DIR`: where the sweep's plan and its jobs' records are, for the job's
  position ("job k of N", distexp.job.console)
- `while_waiting()`: a context around the first job's wait for the warm trainer, in which the open
  sweep imports what its end needs (distexp.sweeps.ending)
"""
from __future__ import annotations

from distexp.sweeps import ending, gpu_pool
from distexp.sweeps.parent import child_tags as tags
from distexp.sweeps.records import JOBS_DIR, SWEEP_FILE, swept_values

__all__ = ["JOBS_DIR", "SWEEP_FILE", "gpu_lease", "swept_values", "tags", "while_waiting"]


def gpu_lease(cfg, found):
    return gpu_pool.for_job(cfg, found)


def while_waiting():
    return ending.current().using_the_wait()
