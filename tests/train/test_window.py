"""The measurement window's plan (distexp.train.window): how many steps a short run is measured on
after training (tests/train/test_window_slow.py: what was trained stays bit-identical)."""
from __future__ import annotations

import pytest

from distexp.train.window import MARGIN, plan

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("timed,seconds,step,expected", [
    (105, 0.21, 0.002, 1050 - 105),  # 2 ms steps: the seconds rule (2 s x MARGIN), 945 more steps
    (105, 0.8, 0.0025, 520),         # a slow start (7.6 ms steps), 2.5 ms now: planned at 2.5 ms
    (900, 2.5, 0.003, 0),            # both reached: no window
    (150, 2.5, 0.016, 50),           # the seconds reached, not the steps: 50 more (0.8 s)
    (20, 1.0, 0.05, 40),             # 50 ms steps: seconds rule 1.1 s = 22 steps; steps rule 180,
                                     # capped at 2 s of window = 40 steps
    (0, 0.0, 0.0, 0),                # nothing timed (resumed at the last step): nothing to extend
])
def test_plan_reaches_the_minimum_without_a_window_past_min_seconds(timed, seconds, step,
                                                                     expected):
    assert MARGIN == 1.05
    assert plan(timed, seconds, step, min_steps=200, min_seconds=2.0, k=1) == expected


def test_plan_runs_whole_calls_and_zero_minimum_turns_it_off():
    assert plan(105, 0.21, 0.002, 200, 2.0, k=4) == 948      # 945 rounded up to calls of 4
    assert plan(105, 0.21, 0.002, 0, 0.0, k=1) == 0
