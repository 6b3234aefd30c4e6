"""Libraries' log records (MLflow, SQLAlchemy, Alembic, TensorFlow, absl, Keras...) go to the job's
log, never to the console, in every process of a job (a leaf: it imports nothing of distexp).

The console carries distexp's own lines: a store that cannot be written is one `distexp: error:`
line naming the cause, not MLflow's `ERROR mlflow.store.db.utils` and SQLAlchemy's tracebacks
before it. What the libraries say stays where a bug report needs it:
- the job process (and a sweep's): MLflow leaves Python's logging alone (`quiet_env`, set before
  its import) and its records reach Hydra's handlers, where `ConsoleFilter` keeps the foreign ones
  off the console handler and the file handler writes them to `<job dir>/distexp.log`;
- a training process: `to_log_only` sends every record to stderr behind the prefix its job
  process keeps off the console (distexp.job.launch.LOG_ONLY), i.e. into its own log file.

A sweep reads in one screen (distexp.job.console): a job's own lines logged to LOG_ONLY_LOGGER
and the launchers' "Launching 2 jobs locally" / "#0 : strategy=..." records stay off the console
too; the job's lines are in its distexp.log, the launchers' in `<sweep dir>/sweep.log`
(`LauncherLog`, conf/hydra/hydra_logging/redacted.yaml).
"""
from __future__ import annotations

import logging
import os
import sys

from distexp.console_lines import DETAIL

FOREIGN = ("mlflow", "sqlalchemy", "alembic", "absl", "tensorflow", "keras", "tf_keras", "h5py",
           "urllib3", "requests", "matplotlib", "PIL", "git", "opentelemetry", "numexpr",
           "tensorflow_datasets", "py.warnings")
LOG_ONLY_PREFIX = DETAIL  # distexp.job.launch.LOG_ONLY
LOG_ONLY_LOGGER = "distexp.job.log_only"   # a job's own lines that go to its log file only


def quiet_env() -> None:
    """Before MLflow's import, in this process and the ones it starts: MLflow adds no stream
    handler of its own (it printed to stderr, past every handler distexp configures); TensorFlow's
    C++ log from warnings up (its INFO banner is noise; its errors stay)."""
    os.environ["MLFLOW_CONFIGURE_LOGGING"] = "false"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def foreign(name: str) -> bool:
    return name == "py.warnings" or name.split(".", 1)[0] in FOREIGN


def launcher(record: logging.LogRecord) -> bool:
    """A Hydra launcher's account of what it launches (basic, joblib, ray, distexp's slurm):
    its INFO records; its warnings and errors are not this."""
    return "launcher" in record.name and record.levelno < logging.WARNING


class ConsoleFilter(logging.Filter):
    """On a console handler (conf/hydra/*_logging/redacted.yaml): only distexp's and Hydra's
    records; a library's go to the file handler alone, and so do the log-only ones and the
    launchers' (LauncherLog)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (foreign(record.name) or record.name == LOG_ONLY_LOGGER or launcher(record))


class LauncherLog(logging.FileHandler):
    """The launchers' records (`launcher`) in a file, `<sweep dir>/sweep.log`: opened (and its
    folder made) at the first one, so that nothing is written where nothing is launched."""

    def __init__(self, filename: str, **kwargs) -> None:
        super().__init__(filename, delay=True, **kwargs)
        self.addFilter(launcher)

    def _open(self):
        os.makedirs(os.path.dirname(self.baseFilename), exist_ok=True)
        return super()._open()


class _LogOnly(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return "\n".join(LOG_ONLY_PREFIX + line for line in text.splitlines())


def to_log_only() -> None:
    """In a training process: every log record (every line of it, a traceback's too) to stderr
    behind LOG_ONLY_PREFIX; libraries' own handlers (TensorFlow's, absl's) removed, so that their
    records take that way."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LogOnly("%(name)s %(levelname)s: %(message)s"))
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    for name in ("mlflow", "tensorflow", "absl", "keras"):
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            lg.removeHandler(h)
        lg.propagate = True


def absl_follows_stderr() -> None:
    """Where absl's logging was imported before the command (a caller's own TensorFlow, a
    notebook), its handler writes to the stream sys.stderr was then; absl closes that stream when
    the handler is shut down unless it is sys.stderr itself (absl.logging.PythonHandler.close), and
    Hydra's logging configuration shuts every handler down. Once the command has wrapped
    sys.stderr (distexp.__main__), the caller's stream was closed under it (seen: pytest's
    capture): the handler writes to the current sys.stderr instead."""
    absl = sys.modules.get("absl.logging")
    handler = getattr(absl, "get_absl_handler", lambda: None)()
    python_handler = getattr(handler, "python_handler", None)
    if isinstance(python_handler, logging.StreamHandler):
        python_handler.setStream(sys.stderr)
