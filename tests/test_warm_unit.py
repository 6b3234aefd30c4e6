"""Which command lines warm the trainer up (distexp.job.warm_client.trains). The server and its children:
tests/test_warm.py; training warm and fresh: tests/test_warm_slow.py. Tier: unit."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("argv,trains", [
    ([], True), (["-m", "seed=0,1"], True), (["strategy=ps", "warm_start=true"], True),
    (["--help"], False), (["--cfg", "job"], False), (["-c", "job"], False), (["--info"], False),
    (["--hydra-help"], False), (["warm_start=false"], False), (["+warm_start=False"], False),
    (["-m", "warm_start=true,false"], True)])
def test_only_a_command_that_trains_warms_up(argv, trains):
    from distexp.job import warm_client

    assert warm_client.trains(argv) is trains
