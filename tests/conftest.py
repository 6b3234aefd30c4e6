"""Fixtures (the helpers they use live in tests/helpers/) and the test tiers. No TensorFlow here."""
from __future__ import annotations

import os
import sys

import pytest

from helpers import CONF, PROBES, USER_CODE, run_cli
from helpers import skips as _skips
from helpers.faults import mounts  # noqa: F401  (a fixture: tmpfs mounts for the store-fault tests)

pytest_plugins = ["helpers.servers"]  # PostgreSQL + MLflow server fixtures (tests/helpers/servers.py)
# a user's factories (`model.factory=factories:...`) and the probes import by their top-level
# name here too, as in a child (helpers.child_env)
sys.path[:0] = [str(p) for p in (USER_CODE, PROBES) if str(p) not in sys.path]


@pytest.fixture
def cli(tmp_path):
    """run(args...) -> Result, in tmp_path, MLflow store in tmp_path/outputs/mlflow.db."""
    def run(*args, **kw):
        return run_cli(list(args), tmp_path, **kw)
    run.cwd = tmp_path
    run.uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    return run


@pytest.fixture
def clock(monkeypatch):
    """A fake clock (helpers.Clock) behind time.perf_counter, and time.time = 1000 s + it: the
    throughput arithmetic of distexp.figures.meter and the progress lines, moved by hand."""
    import time

    from helpers import Clock

    c = Clock()
    monkeypatch.setattr(time, "perf_counter", c)
    monkeypatch.setattr(time, "time", lambda: 1000.0 + c.t)
    return c


@pytest.fixture
def compose():
    from hydra import compose as hcompose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from distexp.config import schema

    schema.register()

    def _compose(*overrides):
        with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
            return hcompose(config_name="config", overrides=list(overrides))
    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture
def gpus(monkeypatch, tmp_path):
    """`gpus(n, pinned=None)`: this machine shows `n` GPUs (a faked NVIDIA driver's list), and
    CUDA_VISIBLE_DEVICES is `pinned` (None: unset): what distexp decides about GPUs before
    TensorFlow (helpers.gpus.faked_gpus)."""
    from helpers import faked_gpus

    return faked_gpus(monkeypatch, tmp_path)


# --- tiers (docs/testing.md) -------------------------------------------------------------------
# unit         the default: in this process, no subprocess, no TensorFlow, nothing trained
# integration  starts processes or TensorFlow but trains nothing (or a probe's few steps)
# slow         end to end: real training through the CLI
# A test marked neither integration nor slow is unit; the guard below holds it to that. One tier
# per file: a file says its tier once, at its top (`pytestmark`), and nothing for unit.
TIERS = ("unit", "integration", "slow")


def pytest_configure(config):
    import platform

    platform.platform()  # cached for the session: importing MLflow asks it, which runs `uname -p`
    _loadgroup_must_group(config)
    _ctrl_c_reaches_children()


def _ctrl_c_reaches_children():
    """A shell starts a background job (`cmd &` without job control: CI runners, nohup-like
    wrappers) with SIGINT ignored, and every process it starts inherits that: the tests' Ctrl-C
    then reached a job and a sweep that ignored it (CI failed both SIGINT tests; SIGTERM passed).
    The tests stand for a user's terminal, where a foreground job gets Ctrl-C: pytest and its
    workers take Python's own handler back, which their children get as the default."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _loadgroup_must_group(config):
    """pytest-xdist's loadgroup keeps an `xdist_group` on one worker by appending `@group` to each
    test's node id; pytest 9.2 no longer reads the field xdist 3.8 writes (pytest-xdist#1386), so
    the group is spread over the workers without a word: a module fixture runs on each worker and
    the Slurm tests switch the one cluster under each other. Refused here, in one line."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return
    import xdist
    from packaging.version import Version

    if Version(pytest.__version__) >= Version("9.2.dev0") and Version(xdist.__version__) <= Version("3.8.0"):
        raise pytest.UsageError(
            f"--dist loadgroup: pytest {pytest.__version__} with pytest-xdist {xdist.__version__} "
            "ignores xdist_group (pytest-xdist#1386); install the test extra's pytest<9.2: "
            "pip install -e '.[test]'")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        tiers = [t for t in TIERS if item.get_closest_marker(t)]
        if len(tiers) > 1:
            raise pytest.UsageError(f"{item.nodeid}: in two tiers ({', '.join(tiers)}); pick one")
        if not tiers:
            item.add_marker(pytest.mark.unit)
    one_tier_per_file(items)
    # fail fast in a whole-suite run: the unit tier first, then integration, then slow; within a
    # tier the longest files first, so that two xdist workers do not end on one long test
    rank = {t: i for i, t in enumerate(TIERS)}
    first = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: (rank[next(t for t in TIERS if it.get_closest_marker(t))],
                               first.get(it.path.name, len(first))))


# A file whose tests are in several tiers, while other engineers add tests to it: split
# it once they have landed. Nothing else may mix.
MIXED_FOR_NOW = {"test_breakdown.py"}


def one_tier_per_file(items) -> None:
    """Every test of a file is of one tier (docs/testing.md, "One tier per file"), so that a file's cost reads
    from its top: `pytestmark = pytest.mark.integration` or `slow`, nothing for unit."""
    by_file: dict = {}
    for it in items:
        tier = next(t for t in TIERS if it.get_closest_marker(t))
        by_file.setdefault(it.path.name, {}).setdefault(tier, it.name)
    for name, tiers in sorted(by_file.items()):
        if len(tiers) > 1 and name not in MIXED_FOR_NOW:
            seen = ", ".join(f"{t} ({test})" for t, test in tiers.items())
            raise pytest.UsageError(f"{name}: tests in {len(tiers)} tiers: {seen}; one tier per "
                                    "file: move the test to a file of its tier, named for it "
                                    "(e.g. test_x_slow.py with pytestmark = pytest.mark.slow)")


# each tier's longest files (the slow tier's, CI 2026-11-24: the Slurm tests, a fixture shared by the file, a
# 4-job parity command, the browser's sweep, ...), started first. xdist's loadgroup then puts the
# groups with the most tests first (the Slurm group, ~7 min, mostly waiting on its cluster).
LONGEST_FIRST = ("test_slurm.py", "test_slurm_nodes.py", "test_load.py", "test_parity.py", "test_ui_slow.py",
                 "test_multiprocess.py",
                 "test_sweep_repeats_resume.py", "test_sweeps.py", "test_training.py",
                 "test_tasks.py",
                 # the integration tier's (CI, 2026-11-26: sync probes, a fixture's training
                 # processes, a locked store, the parity tool's import, the ps loss-scaling probe)
                 "test_split_probes.py", "test_training_errors.py", "test_store_faults.py",
                 "test_parity_integration.py", "test_tasks_integration.py")


@pytest.fixture(autouse=True)
def _unit_tier_guard(request):
    """A unit test starts no process and does not import TensorFlow (either would make the
    tier slow; mark the test integration or slow instead)."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    import sys

    from helpers import no_process

    had_tf = "tensorflow" in sys.modules
    with no_process():
        yield
    if not had_tf and "tensorflow" in sys.modules:
        pytest.fail("a unit test imported TensorFlow: mark it integration", pytrace=False)


# --- skips (docs/testing.md): counted by reason; where `.ci/run` lists the reasons its machine may
# skip for (helpers.skips.ALLOWED), any other skip fails the session
SKIPPED = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        SKIPPED.append((report.nodeid, _skips.reason(report.longrepr)))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not SKIPPED:
        return
    terminalreporter.section("skips by reason")
    for n, why in _skips.by_reason(SKIPPED):
        terminalreporter.line(f"{n:5d}  {why}")
    refused = _skips.refused(SKIPPED)
    if refused:
        terminalreporter.section(f"skips this machine must not have ({_skips.ALLOWED} allows only: "
                                 f"{os.environ[_skips.ALLOWED]})", red=True)
        for test, why in refused:
            terminalreporter.line(f"{test}: {why}", red=True)


def pytest_sessionfinish(session, exitstatus):
    if not hasattr(session.config, "workerinput") and _skips.refused(SKIPPED) \
            and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
