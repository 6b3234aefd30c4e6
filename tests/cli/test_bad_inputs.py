"""The bad-input matrix: wrong inputs as users type them.

Each must give exactly one line on stderr that names the key, repeats what was received and says
what is valid (or expected), a non-zero exit (2), no traceback, and no MLflow run left RUNNING.

The table lives in tests/helpers/bad_inputs.py; two tiers read it:
- unit (this file): every case that fails before a process starts runs in this process through
  the CLI's own entry point (distexp.__main__.cli: Hydra composes, the checks run, the one line
  is printed), with any process start refused (helpers.run_in_process): no store may even be
  created.
- integration (tests/cli/test_bad_inputs_cli.py): a handful of cases through a real `python -m
  distexp` subprocess, one per way a line is made (Hydra's compose error, OmegaConf's type
  error, a check, the tracking probe, an unwritable output dir, a driver missing from the Python
  path), and the cases marked TRAINER, which fail inside the training process (a TensorFlow
  start each): their run must end FAILED.
"""
from __future__ import annotations

import pytest

from helpers import run_in_process
from helpers.bad_inputs import CASES, TRAINER
from helpers.bad_inputs import assert_one_line as _assert_one_line
from helpers.bad_inputs import case as _case

IN_PROCESS = [pytest.param(a, e, id=i) for i, a, e in CASES
              if TRAINER not in a and not any(x.startswith("env:PYTHONPATH") for x in a)]


@pytest.mark.parametrize("args,expected", IN_PROCESS)
def test_bad_input(tmp_path, args, expected):
    """compose -> checks -> the one line, in this process; starting a process fails the test."""
    args, env, expected = _case(tmp_path, args, expected)
    r = run_in_process(args, tmp_path, env=env)
    _assert_one_line(r, expected)
    # rejected before the run is created: not even the default store exists
    assert not (tmp_path / "outputs" / "mlflow.db").exists()


def test_outputs_dir_that_is_a_file(tmp_path):
    """Run from a directory whose outputs/ is a file: the default run dir cannot be made."""
    (tmp_path / "outputs").write_text("not a directory\n")
    r = run_in_process(["epochs=1"], tmp_path)
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("distexp: error: outputs: received '"), r
    assert "(Not a directory); valid: a writable directory" in lines[0]
    assert "Traceback" not in r.out


@pytest.mark.parametrize("what", ["file", "directory"])
def test_report_on_a_store_that_is_not_a_database(tmp_path, what):
    """`python -m distexp.report` on outputs/mlflow.db that is a text file (MLflow: "file is not a
    database", a traceback) or a directory: one line naming the store's path, exit 2, the file
    untouched and nothing written beside it (MLflow would leave a lock file)."""
    store = tmp_path / "outputs" / "mlflow.db"
    store.parent.mkdir()
    if what == "file":
        store.write_text("notes, not a database\n")
    else:
        store.mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    r = run_in_process(["--no-log"], tmp_path, module="report")
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    uri = f"sqlite:///{store}"
    why = ("is not a database (file is not a database: no SQLite header)" if what == "file"
           else "is a directory, not a database file")
    assert lines == [f"distexp.report: error: --tracking-uri: received {uri!r}; {store} {why}; "
                     "valid: the MLflow store a sweep wrote (default outputs/mlflow.db where it "
                     "ran), or a tracking server's URL"], r
    assert "Traceback" not in r.out
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    if what == "file":
        assert store.read_text() == "notes, not a database\n"


def test_job_on_a_store_that_is_not_a_database(tmp_path):
    """The same store given to a job: one line before any process starts (the probe reads the
    file's header), the file untouched."""
    store = tmp_path / "notes.db"
    store.write_text("notes, not a database\n")
    r = run_in_process([f"tracking.uri=sqlite:///{store}", "epochs=1"], tmp_path)
    assert r.returncode == 2, r
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == [f"distexp: error: tracking.uri: received 'sqlite:///{store}'; {store} is not a "
                     "database (file is not a database: no SQLite header); valid: an MLflow SQLite "
                     "store (a new path is created), a tracking server, or tracking.enabled=false"], r
    assert store.read_text() == "notes, not a database\n"
    assert [p.name for p in tmp_path.glob("notes.db*")] == ["notes.db"]  # no lock, no journal


def test_a_refused_run_leaves_no_directory(tmp_path):
    """A check refuses the run after Hydra made its directory (and .hydra/): nothing is left; a
    directory that holds something else is kept."""
    r = run_in_process(["gpus=2", "warm_start=false"], tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("distexp: error: gpus: received 2"), r
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "outputs" / "runs" / "mine").mkdir(parents=True)
    r = run_in_process(["gpus=2", "warm_start=false"], tmp_path)
    assert r.returncode == 2, r
    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("*"))] == [
        "outputs", "outputs/runs", "outputs/runs/mine"]
