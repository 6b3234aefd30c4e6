"""What a sweep's launcher declares (distexp.sweeps.launchers): its jobs placed on other machines,
the command's end through the interpreter's teardown. No TensorFlow, no Ray needed."""
from __future__ import annotations

import sys
import types

import pytest

from distexp.sweeps import launchers

JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
BASIC = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
SUBMITIT = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"


@pytest.fixture
def declared(monkeypatch):
    """A launcher module with one class that declares both, one that declares neither, one that
    says no."""
    mod = types.ModuleType("fake_launchers")

    class Both:
        places_jobs_elsewhere = True
        exits_through_teardown = True

    class Neither:
        pass

    class No(Both):
        exits_through_teardown = False

    mod.Both, mod.Neither, mod.No = Both, Neither, No
    monkeypatch.setitem(sys.modules, "fake_launchers", mod)
    return "fake_launchers."


def test_a_launcher_says_what_it_does(declared):
    assert launchers.exits_through_teardown(declared + "Both") is True
    assert launchers.places_jobs_elsewhere(declared + "Both") is True
    assert launchers.exits_through_teardown(declared + "Neither") is False
    assert launchers.places_jobs_elsewhere(declared + "Neither") is False
    assert launchers.exits_through_teardown(declared + "No") is False  # its own word, not its base's


def test_hydras_launchers_that_do_not_say_are_known_by_name():
    assert launchers.exits_through_teardown(JOBLIB) is True   # its workers and shared memory
    assert launchers.places_jobs_elsewhere(JOBLIB) is False
    assert launchers.exits_through_teardown(BASIC) is False   # exits at once (errors.exit_now)
    assert launchers.places_jobs_elsewhere(SUBMITIT) is True
    assert launchers.exits_through_teardown(SUBMITIT) is False
    assert launchers.exits_through_teardown("") is False
    assert launchers.exits_through_teardown("no.such.Launcher") is False
