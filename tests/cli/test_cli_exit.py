"""How `python -m distexp` ends (distexp.__main__._main): a job or a sweep that ran (its runs
closed, its lines printed) ends the process at once (errors.exit_now: no interpreter teardown of
MLflow's, Hydra's and matplotlib's state, ~1 s after a sweep's last line); a command that ran
nothing (--cfg, --help, --info) returns through sys.exit, so an in-process caller gets its
SystemExit. In this process, with Hydra's main replaced."""
from __future__ import annotations

import pytest


@pytest.fixture
def ending(monkeypatch):
    """(replace Hydra's main with fn, the exit_now calls seen), each call a command of its own
    (its own distexp.sweeps.ending.Sweeps, as cli() makes one)."""
    import distexp.__main__ as cli
    from distexp import errors
    from distexp.sweeps import ending

    seen = []

    def exit_now(code):
        seen.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(errors, "exit_now", exit_now)

    def run(fn):
        monkeypatch.setattr(cli, "task", lambda jobs: fn)
        ran = cli.Ran(ending.Sweeps())
        with pytest.raises(SystemExit) as ex, ending.command(ran.sweeps):
            cli._main(False, ran)
        return ex.value.code, seen
    return run


def test_a_sweep_ended_by_hydra_exits_at_once(ending, tmp_path):
    """Hydra's on_multirun_end ends the sweep inside main(); the command still exits at once."""
    from distexp.sweeps import callback
    from distexp.sweeps import ending as sweeps

    def sweep():
        sweeps.current().opened(sweeps.OpenSweep(tmp_path, "20261125-000000-abcdef"))
        callback.SweepCallback().on_multirun_end(config=None)

    code, seen = ending(sweep)
    assert seen == [0] and code == 0  # at once, and with the sweep's status: every job ran


def test_a_command_that_ran_nothing_returns_through_sys_exit(ending, tmp_path):
    """--cfg job: Hydra printed and returned. Also after a sweep this process ran earlier (an
    in-process caller): exiting at once would end the caller too; the earlier command's sweeps
    are not the next one's."""
    from distexp.sweeps import callback
    from distexp.sweeps import ending as sweeps

    code, seen = ending(lambda: None)
    assert seen == [] and code == 0

    def sweep():
        sweeps.current().opened(sweeps.OpenSweep(tmp_path, "20261125-000000-abcdef"))
        callback.SweepCallback().on_multirun_end(config=None)

    assert ending(sweep) == (0, [0])
    code, seen = ending(lambda: None)
    assert seen == [0] and code == 0  # no exit_now for the command that ran nothing
