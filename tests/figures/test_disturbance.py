"""A starved run's verdict (distexp.figures.disturbance): the floors, the machine's counters."""
from __future__ import annotations

import pytest

from distexp.figures import disturbance
from distexp.figures.disturbance import Sample

pytestmark = pytest.mark.unit


def test_cpu_per_wall_below_the_floor_is_disturbed_only_where_judged():
    assert disturbance.CPU_PER_WALL_FLOOR == 0.8 and disturbance.STEAL_FLOOR == 0.10
    assert disturbance.verdict(0.40, True, 0.0, 6.12, cpus=2) == \
        "CPU/wall 0.40 < 0.8, load 6.1 on 2 CPUs"
    assert disturbance.verdict(1.25, True, 0.0, 6.1, cpus=2) is None
    assert disturbance.verdict(0.80, True, None, None) is None          # at the floor: not below
    assert disturbance.verdict(0.7996, True, None, None) == "CPU/wall 0.79 < 0.8"  # not "0.80 <"
    assert disturbance.verdict(0.40, False, 0.0, 1.0, cpus=2) is None   # a GPU's host, ps, workers
    assert disturbance.verdict(None, True, None, None) is None


def test_steal_above_its_floor_is_disturbed_for_every_run():
    assert disturbance.verdict(1.2, False, 0.25, None) == "steal 25 % > 10 %"
    assert disturbance.verdict(0.5, True, 0.25, 2.0, cpus=4) == \
        "CPU/wall 0.50 < 0.8, steal 25 % > 10 %, load 2.0 on 4 CPUs"
    assert disturbance.verdict(1.2, True, 0.10, None) is None


def test_steal_share_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 10 0 5 30 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    first = disturbance.sample(str(stat))
    assert first == Sample(total=1000, steal=30)
    stat.write_text("cpu  150 5 70 1000 10 0 5 60 0 0\n")
    assert disturbance.steal_share(first, disturbance.sample(str(stat))) == pytest.approx(30 / 300)
    assert disturbance.steal_share(None, first) is None
    assert disturbance.steal_share(first, first) is None                # no tick between them
    assert disturbance.sample(str(tmp_path / "none")) is None           # not Linux: unknown
