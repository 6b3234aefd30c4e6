"""The trainer-to-console protocol of the live progress bar, a leaf both sides import: the chief
trainer prints records (distexp.train.live), the job process draws them (distexp.job.console,
distexp.job.launch). Neither process imports the other's package for it.

- ENV: the environment variable in which the job passes the trainer the resolved `progress`
  form (bar, lines or quiet)
- PREFIX: a trainer's stdout line that starts with it is a record, PREFIX + JSON (epoch, epochs,
  step, steps, rate, loss), for the bar and never the log
- MIN_INTERVAL_S: the least time between two records (and the bar's redraws): at most 10 a second
- duration: a time to come as both sides write it (the sweep's ETA, the job's expected duration)
"""
from distexp import env

ENV = env.PROGRESS
PREFIX = "distexp: progress: "
MIN_INTERVAL_S = 0.1


def duration(seconds: float) -> str:
    """~40 s, ~3 min, ~1.5 h."""
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"
