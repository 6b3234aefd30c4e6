"""Sweep keys that only distexp's sweeper runs (sweep.controls, repeats), asked of another
sweeper (Optuna's): one line, exit 2, through the CLI. Tier: integration (a process, no
training)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_controls_with_another_sweeper_is_one_line(cli):
    r = cli("-m", "hparams_search=optuna", "sweep.controls=true", timeout=120)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines()[-1] == (
        "distexp: error: sweep.controls: received true with the OptunaSweeper; control jobs are "
        "added by distexp's sweeper (hydra/sweeper=distexp, the default): drop sweep.controls")


def test_repeats_with_another_sweeper_is_one_line(cli):
    r = cli("-m", "hparams_search=optuna", "repeats=3", timeout=120)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines()[-1] == (
        "distexp: error: repeats: received 3 with the OptunaSweeper; repeats are run by distexp's "
        "sweeper (hydra/sweeper=distexp, the default): drop repeats")


@pytest.mark.parametrize("sweeper,name", [(["hparams_search=optuna"], "OptunaSweeper"),
                                          (["hydra/sweeper=basic"], "BasicSweeper")])
def test_repeats_auto_with_another_sweeper_is_one_line(cli, sweeper, name):
    r = cli("-m", *sweeper, "repeats=auto", timeout=120)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines()[-1] == (
        f"distexp: error: repeats: received auto with the {name}; rounds until every comparison "
        "is settled are distexp's sweeper's (hydra/sweeper=distexp, the default; not with "
        "hparams_search): drop repeats=auto")


def test_optuna_without_its_extra_starts_no_trainer(tmp_path):
    """`python -m distexp` with the Optuna sweeper's package missing (simulated as Python's import
    system sees one): the one line naming the extra, exit 2, before the warm trainer (TensorFlow)
    would start and before Hydra writes anything."""
    import subprocess
    import sys

    from helpers import child_env

    code = ("import runpy, sys; sys.modules['hydra_plugins.hydra_optuna_sweeper'] = None; "
            "sys.argv = ['distexp', '-m', 'hparams_search=optuna']; "
            "runpy.run_module('distexp', run_name='__main__', alter_sys=True)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "distexp: error: hparams_search: received 'optuna', whose package is not installed; "
        "valid: install the extra first: pip install -e \".[optuna]\" (from a clone) or "
        "pip install \"distexp[optuna]\""]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad,line", [
    ("sweep.alpha=2", "sweep.alpha: received 2"),
    ("model.name=nonsense", None),  # refused by the job's checks (every job fails them)
])
def test_a_refused_sweep_leaves_no_folder_and_no_parent_run(cli, bad, line):
    """Every job's checks run before the sweep is opened: a refused sweep is one line, exit 2,
    and leaves no sweep folder and no parent run (so "the latest sweep" of distexp.report and
    distexp.ui stays the user's last real one)."""
    r = cli("-m", "seed=0,1", "repeats=auto", bad, "hydra.sweep.dir=sweep", timeout=300)
    assert r.returncode == 2, r
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("distexp: error: ") and "Traceback" not in r.stderr, r.stderr
    if line:
        assert line in last, last
    assert not (cli.cwd / "sweep").exists()
    db = cli.cwd / "outputs" / "mlflow.db"
    if db.exists():
        from helpers import mlflow_runs

        _, runs = mlflow_runs(cli.uri)
        assert not [x for x in runs if x.data.tags.get("distexp.run_kind") == "sweep"]


def test_a_bad_value_in_one_job_refuses_the_sweep_before_the_first_job(cli):
    """`-m epochs=1,0`: job 2's value is refused before job 1 trains (every job is checked, not
    only until one passes): its one line, exit 2, and nothing left: no sweep folder, no store,
    no parent run (the store's folder is made once every job has passed)."""
    r = cli("-m", "epochs=1,0", timeout=300, store=False)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines() == ["distexp: error: epochs: received 0; expected >= 1"]
    assert "job 1 of 2" not in r.stdout and "Sweep " not in r.stdout, r.stdout
    assert list(cli.cwd.iterdir()) == []
