"""Installed as users install it: a wheel, a fresh venv, `python -m distexp` from an unrelated
directory. The venv reuses this interpreter's already-installed dependencies (a .pth file, like
--system-site-packages) to stay affordable; the wheel's declared dependencies are checked to
resolve against them (`pip install --dry-run`), and its code, configs and entry point come from the
wheel, not from the source tree."""
from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, mlflow_runs

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("install"), pytest.mark.extended]  # one `venv` per worker


def _run(cmd, cwd, **kw):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR")}
    env.update(kw.pop("env", {}))
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=kw.pop("timeout", 600), **kw)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    # the wheel, built the way pip builds it (isolated build env from pyproject's build-system)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", base / "dist", ROOT], base)
    (wheel,) = (base / "dist").glob("distexp-*.whl")
    _run([sys.executable, "-m", "venv", base / "venv"], base)
    py = base / "venv" / "bin" / "python"
    # Reuse this interpreter's packages (it may itself be a venv, as in .ci/run, where
    # --system-site-packages would reach the base Python instead): a .pth adds its site dirs
    # after the venv's own, so the wheel's copy of distexp comes first.
    venv_site = _run([py, "-c", "import site; print(site.getsitepackages()[0])"], base).stdout.strip()
    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    (Path(venv_site) / "_reuse_parent.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs))
    # --ignore-installed: the source tree may be installed editable in the system site-packages
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", wheel], base)
    return base, py, wheel


def test_wheel_declares_resolvable_dependencies(venv):
    base, py, wheel = venv
    r = _run([py, "-m", "pip", "install", "--dry-run", "--no-index", wheel], base)
    # every declared dependency resolves (--no-index: to what is installed) and nothing else
    # would be installed
    would = [ln for ln in r.stdout.splitlines() if ln.startswith("Would install")]
    assert all(ln.split()[2:] == ["distexp-0.1.0"] for ln in would), would
    assert "Requirement already satisfied: tensorflow" in r.stdout and "mlflow" in r.stdout
    check = subprocess.run([py, "-m", "pip", "check"], cwd=base, capture_output=True, text=True)
    assert "distexp" not in check.stdout, check.stdout


def test_wheel_runs_from_an_unrelated_directory(venv, tmp_path):
    base, py, _ = venv
    where = _run([py, "-c", "import distexp, pathlib; print(pathlib.Path(distexp.__file__).parent)"],
                 tmp_path).stdout.strip()
    assert where.startswith(str(base / "venv")), where  # the wheel's copy, not the source tree
    assert (Path(where) / "conf" / "config.yaml").exists()
    r = _run([py, "-m", "distexp", "strategy=one_device", "model=mlp", "epochs=1",
              "steps_per_epoch=3", "warmup_steps=0"], tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert "final: eval_loss" in r.stdout, r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"], "nothing else in the cwd"
    assert (tmp_path / "outputs" / "mlflow.db").exists()
    (job,) = (tmp_path / "outputs" / "runs").glob("*/*")
    assert (job / "config.yaml").exists() and (job / "chief.log").exists()
    _, runs = mlflow_runs(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    assert [r.info.status for r in runs] == ["FINISHED"]
    # the console script too
    h = _run([base / "venv" / "bin" / "distexp", "--help"], tmp_path)
    assert "strategy: central, mirrored, multiworker, one_device, ps" in h.stdout
