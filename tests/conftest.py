"""Shared test helpers: run the CLI as a user would (a subprocess in a temporary directory),
compose configs without TensorFlow, read MLflow stores. No test imports TensorFlow here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["servers"]  # PostgreSQL + MLflow server fixtures (tests/servers.py)

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "distexp" / "conf"

# Small, fast jobs: digits, few epochs, little output.
FAST = ["epochs=2", "warmup_steps=2"]


class Result:
    def __init__(self, proc: subprocess.CompletedProcess, cwd: Path):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.cwd = cwd

    @property
    def out(self) -> str:
        return self.stdout + self.stderr

    def __repr__(self) -> str:
        return f"<exit {self.returncode}>\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def run_cli(args, cwd: Path, module: str = "distexp", timeout: float = 600, env=None) -> Result:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), e.get("PYTHONPATH", "")])
    e.pop("HYDRA_FULL_ERROR", None)
    if env:
        e.update(env)
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)
    return Result(proc, cwd)


def db_uri(path: Path) -> str:
    return f"sqlite:///{path / 'mlflow.db'}"


def mlflow_runs(uri: str, experiment: str = "distexp"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], max_results=1000)


@pytest.fixture
def cli(tmp_path):
    """run(args...) -> Result, in tmp_path, MLflow store in tmp_path/outputs/mlflow.db."""
    def run(*args, **kw):
        return run_cli(list(args), tmp_path, **kw)
    run.cwd = tmp_path
    run.uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    return run


@pytest.fixture
def compose():
    from hydra import compose as hcompose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from distexp.config import schema

    schema.register()

    def _compose(*overrides):
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
            return hcompose(config_name="config", overrides=list(overrides))
    yield _compose
    GlobalHydra.instance().clear()
