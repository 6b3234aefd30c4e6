"""`python -m distexp --epochs 3`, as a user types it: one line naming `epochs=3`, exit 2, not Hydra's
usage text; nothing written (distexp.extras.dashed_key, asked before Hydra and the warm trainer)."""
from __future__ import annotations

import pytest

from helpers import run_cli

pytestmark = pytest.mark.integration

HINT = ("distexp: error: --epochs: received '--epochs 3'; keys are set as key=value "
        "(Hydra's override syntax): epochs=3")


def test_the_cli_answers_epochs_3_with_one_line(tmp_path):
    r = run_cli(["--epochs", "3"], tmp_path, timeout=120, store=False)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines() == [HINT], r  # not Hydra's usage text
    assert r.stdout == "", r
    assert not (tmp_path / "outputs").exists()  # refused before Hydra made a directory
