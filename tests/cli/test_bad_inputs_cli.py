"""The bad-input matrix through a real `python -m distexp` (tests/helpers/bad_inputs.py): one case
per way the line is made, plus every case that fails inside the training process (its run must
end FAILED) or needs a process of its own. The rest: tests/cli/test_bad_inputs.py, in this process.
Tier: integration (processes, TensorFlow for the trainer's cases, nothing trained)."""
from __future__ import annotations

import pytest

from helpers import mlflow_runs, processes_mentioning
from helpers.bad_inputs import CASES, CLI, TRAINER
from helpers.bad_inputs import assert_one_line as _assert_one_line
from helpers.bad_inputs import case as _case

pytestmark = pytest.mark.integration

THROUGH_CLI = [pytest.param(a, e, id=i) for i, a, e in CASES if i in CLI or TRAINER in a]


@pytest.mark.parametrize("args,expected", THROUGH_CLI)
def test_bad_input_through_the_cli(cli, args, expected):
    trainer = TRAINER in args
    args, env, expected = _case(cli.cwd, args, expected)
    r = cli(*args, env=env, timeout=120, store=False)  # is a store created? see below
    _assert_one_line(r, expected)
    if trainer:  # the run exists and must end FAILED
        _, runs = mlflow_runs(cli.uri)
        assert [run.info.status for run in runs] == ["FAILED"]
    else:  # rejected before the run is created: not even the store exists
        assert not (cli.cwd / "outputs" / "mlflow.db").exists()
        assert "Strategy:" not in r.stdout, "no training process may start"
    assert processes_mentioning(str(cli.cwd)) == [], "a process was left behind"
