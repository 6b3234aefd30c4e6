"""CI sees its skips (tests/conftest.py, tests/helpers/skips.py, `.ci/run`): the reasons counted, and
a skip whose reason `.ci/run` does not allow fails the session."""
from __future__ import annotations

import re
from types import SimpleNamespace

import conftest
import pytest

from helpers import ROOT, skips

GATE = re.search(r'export DISTEXP_SKIPS_ALLOWED="([^"]*)"', (ROOT / ".ci" / "run").read_text())
# the reasons the gate's tests give when the machine lacks what .ci/run provides (tests/helpers/)
MACHINE = [("tests/cluster/test_slurm.py::test_a[multiworker]", "a Slurm cluster needs root to "
            "install and start its daemons (scripts/slurm-cluster.sh)"),
           ("tests/tracking/test_store_faults.py::test_a_read_only_store",
            "cannot mount a tmpfs here (mount: permission denied)"),
           ("tests/tracking/test_server.py::test_b", "PostgreSQL binaries not found (apt-get "
            "install postgresql; .ci/run does)"),
           ("tests/cluster/test_multiprocess.py::test_tf_config_cluster_started_by_hand",
            "network namespaces need root and iproute2 (ip netns add)")]
ACCELERATORS = [("tests/cluster/test_gpu.py::test_one_gpu_trains",
                 "no GPU visible (CUDA_VISIBLE_DEVICES / driver)"),
                ("tests/cluster/test_gpu.py::test_mirrored_two_gpus[nccl]", "needs 2 GPUs"),
                ("tests/strategies/test_tpu_slow.py::test_tpu", "needs a TPU (TPU_NAME, or a TPU VM)")]


def test_ci_allows_skips_for_accelerators_only(monkeypatch):
    monkeypatch.delenv(skips.ALLOWED, raising=False)  # as on a developer's machine (CI sets it)
    assert GATE, ".ci/run sets no DISTEXP_SKIPS_ALLOWED"
    assert skips.refused(ACCELERATORS, GATE.group(1)) == []
    assert skips.refused(MACHINE, GATE.group(1)) == MACHINE
    assert skips.refused(MACHINE + ACCELERATORS, None) == []  # unset: a developer's run
    assert skips.by_reason(ACCELERATORS + ACCELERATORS[:1]) == [
        (2, ACCELERATORS[0][1]), (1, ACCELERATORS[1][1]), (1, ACCELERATORS[2][1])]
    assert skips.reason(("t.py", 3, "Skipped: needs 2 GPUs")) == "needs 2 GPUs"


def test_a_skip_ci_does_not_allow_fails_the_session_and_is_named(monkeypatch):
    """The hooks themselves, fed a skip report: the session's exit status turns to failed and
    the summary counts the reason and names the test."""
    monkeypatch.setenv(skips.ALLOWED, GATE.group(1))
    monkeypatch.setattr(conftest, "SKIPPED", [])
    for test, why in [*MACHINE[:1], *ACCELERATORS[:1]]:
        conftest.pytest_runtest_logreport(SimpleNamespace(skipped=True, nodeid=test,
                                                          longrepr=("x.py", 1, f"Skipped: {why}")))
    lines = []
    reporter = SimpleNamespace(section=lambda title, **kw: lines.append(f"== {title}"),
                               line=lambda text, **kw: lines.append(text))
    config = SimpleNamespace()
    conftest.pytest_terminal_summary(reporter, 0, config)
    assert lines[:3] == ["== skips by reason", f"    1  {MACHINE[0][1]}", f"    1  {ACCELERATORS[0][1]}"]
    assert lines[3].startswith("== skips this machine must not have")
    assert lines[4:] == [f"{MACHINE[0][0]}: {MACHINE[0][1]}"]
    session = SimpleNamespace(config=config, exitstatus=pytest.ExitCode.OK)
    conftest.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
    monkeypatch.setattr(conftest, "SKIPPED", conftest.SKIPPED[1:])  # the GPU's skip alone: fine
    session.exitstatus = pytest.ExitCode.OK
    conftest.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.OK
