"""What must not import TensorFlow (its import costs 5-20 s here): the CLI's --help and --cfg,
the job process's checks, the report and the sweeps. Each check runs in a fresh interpreter: this
one may have imported TensorFlow for another test. Tier: integration (processes, no training)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.integration


def test_help_and_cfg_do_not_import_tensorflow(cli):
    code = ("import sys, runpy; sys.argv=['distexp','--cfg','job']; "
            "import distexp.__main__ as m\n"
            "try:\n    m.cli()\nexcept SystemExit:\n    pass\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
            "assert 'mlflow' not in sys.modules, 'mlflow imported'\nprint('CLEAN')")
    r = subprocess.run([sys.executable, "-c", code], cwd=cli.cwd, capture_output=True, text=True)
    assert "CLEAN" in r.stdout, r.stderr
    assert "strategy:" in r.stdout
    r = cli("--help", timeout=60)
    assert r.returncode == 0 and "strategy: central, mirrored, multiworker, one_device, ps" in r.stdout


def test_report_and_sweeps_do_not_import_tensorflow():
    """In a fresh interpreter (the test process itself may have imported TensorFlow earlier)."""
    code = ("import sys\nimport distexp.report, distexp.report.scaling, distexp.report.plots, distexp.sweeps.planning, "
            "distexp.sweeps, distexp.figures.stats, distexp.parity, distexp.config.checks, distexp.strategies, "
            "distexp.tasks\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\nprint('CLEAN')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "CLEAN" in r.stdout, r.stderr


def test_no_tensorflow_import():
    """The job process uses this module for checks: it must not start TensorFlow (a fresh process,
    since other tests in the same session may have imported it)."""
    code = "import sys, distexp.data.text_pairs; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "False"
