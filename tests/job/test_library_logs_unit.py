"""Libraries' log records stay off the console (distexp.library_logs): the console handler's filter
drops MLflow's, SQLAlchemy's, TensorFlow's and absl's records and keeps distexp's and Hydra's; a
training process writes every record, each line of it, behind the prefix its job keeps off the
console."""
from __future__ import annotations

import io
import logging

import pytest

from distexp import library_logs
from distexp.job import launch


@pytest.mark.parametrize("name,shown", [("mlflow.store.db.utils", False), ("sqlalchemy.engine", False),
                                        ("alembic.runtime.migration", False), ("absl", False),
                                        ("tensorflow", False), ("py.warnings", False),
                                        ("hydra.core.utils", True), ("distexp", True),
                                        ("__main__", True), ("mlflowish", True)])
def test_the_console_shows_no_library_record(name, shown):
    rec = logging.LogRecord(name, logging.ERROR, __file__, 1, "SQLAlchemy database error", None, None)
    assert library_logs.ConsoleFilter().filter(rec) is shown


def test_a_trainers_records_go_to_its_log_only(monkeypatch):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    try:
        library_logs.to_log_only()
        try:
            raise RuntimeError("database is locked")
        except RuntimeError:
            logging.getLogger("mlflow.store.db.utils").exception("SQLAlchemy database error")
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    lines = err.getvalue().splitlines()
    assert len(lines) > 3 and any("Traceback" in ln for ln in lines)
    assert [ln for ln in lines if launch.console_line(ln + "\n", set()) is not None] == []


def test_a_command_in_process_leaves_the_callers_stderr_open(tmp_path):
    """absl closes its handler's stream when Hydra's logging configuration shuts handlers down,
    unless it is sys.stderr itself: a caller whose stderr absl's handler took (a notebook, pytest's
    capture) kept a closed stream after a command run in its process (CI: every later test of the
    worker failed, 'I/O operation on closed file')."""
    import absl.logging

    from helpers import run_in_process

    handler = absl.logging.get_absl_handler().python_handler
    callers = io.StringIO()
    saved = handler.stream
    handler.setStream(callers)
    try:
        pairs = tmp_path / "pairs.txt"
        pairs.write_text("Hi.\tHallo.\nno tab\n", encoding="utf-8")
        r = run_in_process(["model=gru_seq2seq", "dataset=text_pairs", f"dataset.path={pairs}"],
                           tmp_path)
    finally:
        handler.setStream(saved)
    assert r.returncode == 2 and "dataset.path: received" in r.stderr, r  # Hydra's logging ran
    assert not callers.closed
