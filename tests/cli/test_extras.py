"""A feature whose pip extra is not installed (hparams_search=optuna without distexp[optuna]) is
refused in one line that names the extra, before Hydra composes: nothing is written. The missing
package is simulated as Python's import system sees one (sys.modules[name] = None). Tier: unit."""
from __future__ import annotations

import sys

import pytest

from helpers import run_in_process

pytestmark = pytest.mark.unit

SWEEPER = "hydra_plugins.hydra_optuna_sweeper"
LINE = ("distexp: error: hparams_search: received 'optuna', whose package is not installed; "
        "valid: install the extra first: pip install -e \".[optuna]\" (from a clone) or "
        "pip install \"distexp[optuna]\"")


@pytest.mark.parametrize("arg", ["hparams_search=optuna", "hydra/sweeper=optuna"])
def test_optuna_without_its_extra_is_one_line(tmp_path, monkeypatch, arg):
    monkeypatch.setitem(sys.modules, SWEEPER, None)
    r = run_in_process(["-m", arg], tmp_path)
    assert r.returncode == 2, r
    key = arg.partition("=")[0]
    assert r.stderr.strip().splitlines() == [LINE.replace("hparams_search:", f"{key}:")], r
    assert not (tmp_path / "outputs").exists()  # refused before Hydra made a directory


def test_optuna_with_its_extra_is_not_refused():
    from distexp import extras

    pytest.importorskip(SWEEPER)
    assert extras.missing(["-m", "hparams_search=optuna"]) is None
    assert extras.missing(["hparams_search=optune", "seed=1"]) is None  # Hydra's line says that
