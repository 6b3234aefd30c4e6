"""Every user-facing error type, the exit codes, and user errors as one line (a leaf: it imports
only distexp.env and distexp.console_lines, leaves too).

- ``one_line``: Hydra / OmegaConf / distexp errors in the job process, as that line
- ``report_user_error`` / ``read_user_error``: a training process that stops on a user error
  leaves its line in ``<job_dir>/<task>.user-error.txt``; the job process reads the chief's from
  there (exit 2) rather than from the end of its log.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from distexp import env
from distexp.console_lines import DETAIL


class UserError(Exception):
    """A problem with what the user asked for: reported as one line, exit code 2, no traceback."""

class UserFailure(Exception):
    """The job failed for a reason the user must see in one line (exit 1, not 2): the training
    loss diverged, a ps worker was lost."""


# The exit codes, in one table: every command (a job, a sweep, a trainer) exits with one of these.
OK = 0
FAILED = 1              # a job (or a job of the sweep) failed
BAD_INPUT = 2           # a user error: one line
TRACKING_LOST = 3       # trained, but MLflow stopped answering (the job's offline file keeps it)
INTERRUPTED = 130       # Ctrl-C or SIGTERM
# A trainer exits with this code when it cannot listen on its port (EX_TEMPFAIL): the job process
# then picks other ports and starts the cluster again (local clusters only).
PORT_IN_USE_EXIT = 75


def exit_code_of(status: str, *, user_error: bool = False, tracking_lost: bool = False) -> int:
    """The one mapping from how a run ended (its MLflow status: FINISHED, FAILED or KILLED) to
    the command's exit code, for a job (distexp.job.lifecycle.exit_code) and a sweep's parent run
    (distexp.sweeps.records.outcome)."""
    if status == "KILLED":
        return INTERRUPTED
    if user_error:
        return BAD_INPUT
    if status == "FAILED":
        return FAILED
    return TRACKING_LOST if tracking_lost else OK


def exit_now(code: int) -> None:
    """End this process at once with `code`, on a path where everything it must write is written
    (distexp logs to MLflow synchronously: the run is closed by then): logging's handlers
    (Hydra's job log) and stdio are flushed first. Skips the interpreter's teardown (TensorFlow's
    and MLflow's atexit work and module clean-up), which took seconds after the job was over.
    (Not mlflow.flush_async_logging: with no tracking URI set it opens ./mlflow.db.)"""
    import logging
    import sys

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def one_line(ex: BaseException) -> str | None:
    """The one-line message for a user error, or None when `ex` is not one (a bug: keep the traceback)."""
    from hydra.errors import HydraException, MissingConfigException, OverrideParseException
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(ex, UserError):
        return str(ex)
    if isinstance(ex, MissingConfigException) and ex.missing_cfg_file and "/" in ex.missing_cfg_file:
        group, _, option = ex.missing_cfg_file.rpartition("/")
        options = sorted(o for o in (ex.options or []) if not o.startswith("base_"))
        return (f"{group}: received {option!r}{did_you_mean(option, options)}; valid: "
                f"{', '.join(options) or '(none)'}")
    if isinstance(ex, OverrideParseException):
        key, eq, value = str(ex.override).partition("=")
        if eq:
            return (f"{key.lstrip('+~')}: received {value!r}, which Hydra cannot parse "
                    f"({first_line(ex.message, None)}); valid: a value, a list [a,b] or a quoted 'string'")
        return f"could not parse override {ex.override!r}: {first_line(ex.message, None)}"
    cause = ex if isinstance(ex, OmegaConfBaseException) else ex.__cause__
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None)
        msg = first_line(str(cause), None)
        m = re.match(r"Value '(.*?)'(?: of type '(\w+)')? could not be converted to (\w+)", msg)
        if m:
            return f"{key}: received {m.group(1)!r}; expected {m.group(3).lower()}"
        m = re.match(r"Value '(.*?)' is not a valid (\w+)", msg)
        if m:
            return f"{key}: received {m.group(1)!r}; expected {m.group(2)} (true or false)"
        m = re.match(r"Cannot assign (\w+) to Dict", msg)
        if m:
            value = getattr(cause, "value", None)
            shown = repr(value) if value is not None else f"a {m.group(1)}"
            return f"{key}: received {shown}; expected a mapping, e.g. {key}={{a: 1}}"
        m = re.match(r"Invalid value assigned: (\w+) is not a ListConfig", msg)
        if m:
            value = getattr(cause, "value", None)
            return f"{key}: received {value!r}; expected a list, e.g. [32,32,3]"
        if re.match(r"field '.*' is not Optional", msg) or "Non optional field cannot be assigned None" in msg:
            return f"{key}: received null; expected a value (this key is not optional)"
        m = re.match(r"Key '(.+)' not in '(\w+)'", msg)
        if m:
            given = re.search(r"use \+[^=\s]+=(.*)$", str(ex))  # Hydra: "To append ... use +k=v"
            return unknown_key(key, given.group(1) if given else None,
                               getattr(cause, "parent_node", None))
        if "Could not override" in str(ex):
            return f"{key or ''}: {msg}".lstrip(": ")
        return f"{key}: {msg}" if key else msg
    if isinstance(ex, HydraException):
        return first_line(str(ex), None)
    if isinstance(ex, ValueError) and str(ex).startswith("Config group override must be a string"):
        return _null_group()  # e.g. experiment=null: Hydra's own ValueError does not say which
    if isinstance(ex, ValueError) and str(ex).startswith("Only one of --run, --multirun"):
        return ("command line: received two of -m/--multirun, --cfg, --info (Hydra runs one); "
                "valid: one of them, e.g. --cfg job without -m")  # Hydra's usage error
    if isinstance(ex, OSError) and ex.filename:  # e.g. Hydra creating an unwritable output dir
        return (f"outputs: received {ex.filename!r}, which cannot be written ({ex.strerror}); valid: "
                "a writable directory: run from one, or set hydra.run.dir= (hydra.sweep.dir= with -m)")
    return None


def _null_group() -> Optional[str]:
    """`group=null` on the command line, for a config group: its name and its options."""
    import sys

    conf = Path(__file__).parent / "conf"
    for arg in sys.argv[1:]:
        group, _, value = arg.partition("=")
        if value == "null" and (conf / group).is_dir():
            valid = ", ".join(sorted(p.stem for p in (conf / group).glob("*.yaml")))
            return (f"{group}: received null; valid: {valid}, or leave {group}= out for the "
                    "default (Hydra cannot set a group to null from the command line)")
    return None


# Lines of an exception's message that wrap the message rather than say it: Keras' "Exception
# encountered when calling ..." and its arguments, TensorFlow's "Graph execution error:" with the
# Python stack of the failed node and the node's name.
_WRAPPING = ("Graph execution error", "Detected at node", "File ", "Exception encountered when",
             "Arguments received by", "\u2022", "[[", "Traceback (most recent call last)")


def first_line(ex, limit: Optional[int] = 300) -> str:
    """The first line of `ex`'s message (an exception, or its text) that says what went wrong (not
    a wrapper's line), cut to `limit` characters ("..." at the end; None: uncut). The one helper
    for an exception as one line: the console's, a sweep's records and its parent's tags."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(ex))
    inner = list(re.finditer(r"^\s*\w+(?:Error|Exception): (.*)$", text, re.M))
    if "in user code:" in text and inner:  # tf.function's stack: the exception is at its end
        text = text[inner[-1].start(1):]
    # a tf.data function's error: the op and the iterator's path come first
    text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"^Error in user-defined function passed to \S+ transformation with "
                  r"iterator: \S+: ", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if not ln.startswith(_WRAPPING)]
    empty = type(ex).__name__ if isinstance(ex, BaseException) else text
    line = (said or lines or [empty])[0]
    return line if limit is None or len(line) <= limit else line[:limit - 3] + "..."


def log_traceback(ex: BaseException) -> None:
    """Print `ex`'s traceback for the process's log only (distexp.job.launch.LOG_ONLY keeps lines
    with this prefix off the console)."""
    import sys
    import traceback

    for chunk in traceback.format_exception(ex):
        for line in chunk.rstrip("\n").splitlines():
            print(f"{DETAIL}{line}", file=sys.stderr)
    sys.stderr.flush()


def user_error_path(job_dir: Path, task: str) -> Path:
    return Path(job_dir) / f"{task}.user-error.txt"


def report_user_error(job_dir: Path, message: str) -> None:
    """In a training process: leave the one line (without "distexp: error: ") for the job."""
    try:
        user_error_path(job_dir, os.environ.get(env.TASK, "chief")).write_text(message + "\n")
    except OSError:
        pass  # the job then reports the process's exit code and its log


def traceback_note(log: Path) -> str:
    """" (traceback: <log>)" when a training process's log holds the traceback of the exception
    its user error was translated from (log_traceback), else ""."""
    try:
        with open(log, "rb") as f:
            found = (DETAIL + "Traceback (most recent call last)").encode() in f.read()
    except OSError:
        return ""
    return f" (traceback: {log})" if found else ""


def read_user_error(job_dir: Path, task: str) -> Optional[str]:
    """In the job process: the line a training process left, or None."""
    try:
        return user_error_path(job_dir, task).read_text().strip() or None
    except OSError:
        return None


def unknown_key(key: str, received, node) -> str:
    """The line for a key the schema does not have. In a group's option (a node with a `name`:
    model=cnn, dataset=digits), what was received and the keys that option has."""
    try:
        name = node.get("name") if hasattr(node, "keys") and "." in str(key) else None
    except Exception:  # noqa: BLE001  (a name not set yet: the general line)
        name = None
    leaf = str(key).rsplit(".", 1)[-1]
    try:
        keys = [str(k) for k in node.keys()] if hasattr(node, "keys") else []
    except Exception:  # noqa: BLE001
        keys = []
    nearest = did_you_mean(leaf, keys, prefix=str(key)[: -len(leaf)])
    if not name:
        return f"{key}: unknown key (not in the schema){nearest}; see --cfg job for every key"
    group = str(key).rsplit(".", 1)[0]
    said = "" if received is None else f" (received {received})"
    return f"{key}: unknown key for {group}={name}{said}{nearest}; valid: {', '.join(keys)}"


def did_you_mean(word: str, valid, prefix: str = "") -> str:
    """" (did you mean <the nearest valid one>?)" (difflib's closest match), or "" when none
    is near. `prefix`: put before it (a nested key's path, "model.")."""
    import difflib

    found = difflib.get_close_matches(str(word), [str(v) for v in valid], n=1, cutoff=0.6)
    return f" (did you mean {prefix}{found[0]}?)" if found else ""
