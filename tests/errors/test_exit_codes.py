"""The one mapping from how a run ended to the command's exit code (distexp.errors.exit_code_of),
which a job's outcome (distexp.job.lifecycle.exit_code) and a sweep's (distexp.sweeps.records.outcome)
both go through. No TensorFlow."""
from __future__ import annotations

import pytest

from distexp import errors
from distexp.job import lifecycle
from distexp.sweeps import records


def test_each_status_has_its_code():
    assert errors.exit_code_of("FINISHED") == 0
    assert errors.exit_code_of("FINISHED", tracking_lost=True) == 3
    assert errors.exit_code_of("FAILED") == 1
    assert errors.exit_code_of("FAILED", user_error=True) == 2
    assert errors.exit_code_of("KILLED") == 130
    assert errors.exit_code_of("KILLED", user_error=True, tracking_lost=True) == 130


@pytest.mark.parametrize("out, code", [
    (lifecycle.Outcome(status="FINISHED"), 0),
    (lifecycle.Outcome(status="FINISHED", lost={"reason": "gone"}), 3),
    (lifecycle.Outcome(status="FAILED"), 1),
    (lifecycle.Outcome(status="FAILED", user_error=True), 2),
    (lifecycle.Outcome(status="KILLED"), 130),
    (lifecycle.Outcome(status="FINISHED", stopped=True), 130),  # the stop came once it was written
])
def test_a_jobs_outcome_goes_through_the_mapping(out, code):
    assert lifecycle.exit_code(out) == code


def test_a_sweeps_outcome_goes_through_the_same_mapping():
    done, failed = {"status": "COMPLETED"}, {"status": "FAILED"}
    assert records.outcome([done, done]) == ("FINISHED", 0)
    assert records.outcome([done, failed]) == ("FAILED", 1)
    assert records.outcome([done], error=RuntimeError("x")) == ("FAILED", 1)
    assert records.outcome([done, failed], interrupted=True) == ("KILLED", 130)
