"""`python -m distexp.parity` before any run: bad input is one line, the strategies to compare
are read from the overrides. The runs: tests/test_parity.py. Tier: unit."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("args, line", [
    (["strategy=one_device"], "strategy: received 'one_device'; parity compares a strategy with "
                              "one_device: choose another strategy"),
    (["strategy=mirrored,central,mirrored"], "strategy: received mirrored,central,mirrored; each "
                                             "strategy once"),
    (["strategy=central,one_device"], "strategy: received 'one_device'; parity compares"),
    (["strategy=ps", "workers=2"], "workers: received 2 with strategy=ps; its steps update "
                                   "asynchronously"),
    (["--steps", "0", "strategy=mirrored"], "--steps: received 0; expected >= 1"),
])
def test_parity_refuses_bad_input_in_one_line_before_any_run(capsys, tmp_path, args, line):
    from distexp import parity

    assert parity.main(["--out", str(tmp_path / "p"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"distexp.parity: error: {line}"), err
    assert not (tmp_path / "p").exists()  # nothing ran


def test_parity_strategies_list():
    from distexp.parity import strategies

    assert strategies(["cpu_replicas=2", "strategy=mirrored, central"]) == ["mirrored", "central"]
    assert strategies(["strategy=ps"]) == ["ps"] and strategies(["workers=2"]) == []
