"""A job whose steps are all warm-up steps (model=resnet50 dataset=synthetic steps_per_epoch=5
epochs=1: 5 steps, warmup_steps=5) times nothing: the trainer says so before training, with the
steps_per_epoch that measures examples/s with its interval (2 windows of WINDOW timed steps),
within 120 columns (distexp.figures.meter.all_warmup_line)."""
from __future__ import annotations

import pytest

from distexp.figures.meter import WINDOW, all_warmup_line


def test_five_steps_of_warm_up_are_said_with_the_steps_to_ask_for():
    assert WINDOW == 10
    line = all_warmup_line(5, 5, 1)
    assert line == ("Note: all 5 steps are warm-up (warmup_steps=5): no examples/s; for one with "
                    "its interval: steps_per_epoch=25")
    assert len(line) <= 120


def test_over_several_epochs_the_steps_are_shared_out():
    line = all_warmup_line(4, 5, 2)  # 2 epochs of 2 steps
    assert line.endswith("(warmup_steps=5): no examples/s; for one with its interval: "
                         "steps_per_epoch=13 (epochs=2)")  # 26 steps >= 5 + 20


@pytest.mark.parametrize("steps, warmup", [(6, 5), (100, 5), (1, 0), (0, 5)])
def test_a_job_with_a_timed_step_or_no_step_gets_no_line(steps, warmup):
    assert all_warmup_line(steps, warmup, 1) is None
