"""`lifecycle.conclude` prints a job's end and hands the outcome back: it never exits nor raises,
an interrupted job (130) and a sweep's failed job included; distexp.__main__ ends the command.
No TensorFlow, no process."""
from __future__ import annotations

import types
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from distexp import errors
from distexp.job import lifecycle


def _concluding_job(multirun: bool) -> lifecycle.Job:
    return lifecycle.Job(cfg=OmegaConf.create({"tracking": {"uri": "sqlite:///x.db"}}),
                         job_dir=Path("/tmp/job"), plan=types.SimpleNamespace(logs_to_mlflow=False),
                         env={}, config_path=Path("c"), overrides_path=Path("o"), forwarder=None,
                         multirun=multirun, t_start=0.0)


def test_an_interrupted_sweep_job_is_returned_not_exited(capsys):
    out = lifecycle.Outcome(status="KILLED", error=lifecycle.INTERRUPTED)
    assert lifecycle.conclude(_concluding_job(multirun=True), out) is out
    assert lifecycle.exit_code(out) == errors.INTERRUPTED
    assert out.said is None and capsys.readouterr().err == ""  # the sweep says its own line


@pytest.mark.parametrize("user_error, code", [(False, errors.FAILED), (True, errors.BAD_INPUT)])
def test_a_failed_sweep_job_is_returned_with_its_line(capsys, user_error, code):
    out = lifecycle.Outcome(status="FAILED", error="chief exited with code 1", user_error=user_error,
                            logs=[Path("/tmp/job/chief.log")])
    assert lifecycle.conclude(_concluding_job(multirun=True), out) is out  # no JobError: __main__ raises it
    said = "chief exited with code 1" + ("" if user_error else " (logs: /tmp/job/chief.log)")
    assert out.said == said
    assert capsys.readouterr().err == f"distexp: error: {said}\n"
    assert lifecycle.exit_code(out) == code
