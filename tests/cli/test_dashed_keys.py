"""A key typed the argparse way (`--epochs 3`, `--epochs=3`) is refused in one line that names the
`key=value` to type (distexp.extras.dashed_key), before Hydra's usage text and before a trainer
starts; Hydra's own flags pass through."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv, expected", [
    (["--epochs", "3"], "--epochs: received '--epochs 3'; keys are set as key=value (Hydra's "
                        "override syntax): epochs=3"),
    (["seed=1", "--epochs=3"], "--epochs: received '--epochs=3'; keys are set as key=value "
                               "(Hydra's override syntax): epochs=3"),
    (["-m", "--steps-per-epoch", "5"], "--steps-per-epoch: received '--steps-per-epoch 5'; keys "
                                       "are set as key=value (Hydra's override syntax): "
                                       "steps_per_epoch=5"),
    (["--epochs", "seed=1"], "--epochs: received '--epochs'; keys are set as key=value (Hydra's "
                             "override syntax): epochs=<value>"),
])
def test_a_dashed_key_gets_its_key_value(argv, expected):
    from distexp.extras import dashed_key

    assert dashed_key(argv) == expected


@pytest.mark.parametrize("argv", [
    ["--cfg", "job", "epochs=3"], ["--help"], ["-m", "strategy=a,b"], ["--info", "config"],
    ["--config-dir=/x", "epochs=3"], ["--multirun", "seed=1,2"], ["epochs=3"], []])
def test_hydra_flags_and_overrides_pass(argv):
    from distexp.extras import dashed_key

    assert dashed_key(argv) is None
